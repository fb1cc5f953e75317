import * as fs from "node:fs";
import * as path from "node:path";
import type { Deployment } from "../../plan/types";
import { modelLabel } from "../../plan/stack";
import type { ConfigMap, Named } from "./objects";
import type { KubernetesWorkloads } from "./workloads";

/** A Prometheus Operator object: no typed input in @pulumi/kubernetes (a CustomResource); tests validate it against the operator's schema. */
type OperatorObject = Named<{ spec: object }>;
import { alertRules, DEFAULT_THRESHOLDS, scalingAlertRules, type ScaledRole } from "../../monitoring/rules";
import { eppPodLabels } from "./chartValues";
import { KUBERNETES_DEFAULTS } from "./defaults";
import { COMPILE_KEY_LABEL } from "./role";
import { packageRoot } from "../../packageRoot";

export const DASHBOARD_FILE = path.join(packageRoot(), "dashboards", "rbln-serving.json");

/** The endpoint picker's metrics port and path (llm-d-router-gateway v0.10.0, routerlib `_deployment.yaml`). */
export const EPP_METRICS = { port: "metrics", path: "/metrics" } as const;

/** The slice of a Deployment object this module reads: its containers' named ports. */
interface PodOwner {
  spec: { template: { spec: { containers: { ports?: { name?: string; containerPort: number }[] }[] } } };
}

/** The Prometheus Operator, PrometheusRule and Grafana-sidecar objects of a Kubernetes stack with monitoring on. */
export interface MonitoringObjects {
  /** By id (`vllm`, `epp`): resource names come from the id. */
  podMonitors: { id: string; object: OperatorObject }[];
  prometheusRule: OperatorObject;
  /** Null where the stack's models share one (core/render/stack.ts): the dashboard selects a model by its `model` label. */
  dashboard: Named<ConfigMap> | null;
}

/** Chart values that let Prometheus scrape the endpoint picker without a bearer token (its default wants one). */
export function routerMonitoringValues(deployment: Deployment, values: Record<string, unknown>): Record<string, unknown> {
  if (!deployment.settings.monitoring.enabled) return values;
  const router = (values.router ?? {}) as Record<string, unknown>;
  return { ...values, router: { ...router, monitoring: { prometheus: { auth: { enabled: false } } } } };
}

/**
 * A PodMonitor endpoint per role and rank (named container port, `/metrics`), relabelled with
 * model, role, rank and strategy (with autoscaling, the pod's compile key too); one more for the
 * endpoint picker when the router runs. The PrometheusRule holds the alerts, and the scalers'
 * alerts for the roles in `scaled`.
 */
export function monitoringObjects(
  deployment: Deployment,
  workloads: KubernetesWorkloads,
  instance: string,
  scaled: readonly ScaledRole[] = [],
): MonitoringObjects | null {
  const { settings, plan } = deployment;
  if (!settings.monitoring.enabled) return null;
  const namespace = workloads.namespace.metadata.name;
  const labels = { "app.kubernetes.io/name": "rbln-serving", "app.kubernetes.io/instance": instance, "app.kubernetes.io/managed-by": "pulumi" };
  const staticLabel = (targetLabel: string, replacement: string) => ({ action: "replace", targetLabel, replacement });
  // The scalers tell the pods of a role's current compile key apart by it (core/monitoring/queries.ts).
  const compileKeyLabel = deployment.autoscaling
    ? [{ action: "replace", sourceLabels: [`__meta_kubernetes_pod_label_${COMPILE_KEY_LABEL.replace(/[^A-Za-z0-9_]/g, "_")}`], targetLabel: "compile_key" }]
    : [];
  const endpoints = workloads.roles.flatMap((role) => {
    const rolePlan = plan.roles.find((r) => r.role === role.role)!;
    const ports = (role.deployment as unknown as PodOwner).spec.template.spec.containers.flatMap((c) => c.ports ?? []);
    return rolePlan.ranks.map((rank) => {
      const port = ports.find((p) => p.containerPort === rank.ports[0] && p.name);
      if (!port) throw new Error(`role ${role.role} rank ${rank.rank}: no named container port ${rank.ports[0]}`);
      return {
        port: port.name,
        path: "/metrics",
        relabelings: [
          // Port names repeat across roles (each pod numbers its own ports): keep this role's pods only.
          { action: "keep", sourceLabels: ["__meta_kubernetes_pod_label_app_kubernetes_io_component"], regex: role.role },
          staticLabel("role", role.role),
          staticLabel("rank", String(rank.rank)),
          staticLabel("model", modelLabel(deployment)),
          staticLabel("strategy", plan.strategy),
          ...compileKeyLabel,
        ],
      };
    });
  });
  const podMonitor = (name: string, matchLabels: Record<string, string>, podMetricsEndpoints: object[]): OperatorObject => ({
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PodMonitor",
    metadata: { name, namespace, labels },
    spec: { selector: { matchLabels }, podMetricsEndpoints },
  });
  // A model of a stack of several alerts on its own series only: each model's rules are its own object.
  const rules = alertRules(DEFAULT_THRESHOLDS, deployment.entry.name === null ? undefined : modelLabel(deployment));
  const podMonitors = [{ id: "vllm", object: podMonitor(`${instance}-vllm`, { "app.kubernetes.io/instance": instance }, endpoints) }];
  if (workloads.router) {
    podMonitors.push({
      id: "epp",
      object: podMonitor(`${instance}-epp`, eppPodLabels(workloads.router.release), [
        { port: EPP_METRICS.port, path: EPP_METRICS.path, relabelings: [staticLabel("model", modelLabel(deployment)), staticLabel("strategy", plan.strategy)] },
      ]),
    });
  }
  return {
    podMonitors,
    prometheusRule: {
      apiVersion: "monitoring.coreos.com/v1",
      kind: "PrometheusRule",
      metadata: { name: `${instance}-alerts`, namespace, labels },
      spec: scaled.length === 0 ? rules : { groups: [...rules.groups, scalingAlertRules(scaled, scalingAlertTimings())] },
    },
    dashboard: {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: `${instance}-dashboard`, namespace: settings.monitoring.namespace, labels: { ...labels, grafana_dashboard: "1" } },
      data: { "rbln-serving.json": fs.readFileSync(DASHBOARD_FILE, "utf8") },
    },
  };
}

/** The scaler alerts' timings, from the scalers' own defaults. */
function scalingAlertTimings() {
  const { loadSeconds, fallbackFailureThreshold, pollingIntervalSeconds } = KUBERNETES_DEFAULTS.autoscaling;
  return { loadSeconds, fallbackAfterSeconds: (fallbackFailureThreshold + 1) * pollingIntervalSeconds };
}
