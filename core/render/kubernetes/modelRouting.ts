// Several models behind one Gateway, the llm-d way at the pinned versions: one llm-d-router-gateway
// release per model (its InferencePool, endpoint picker and an HTTPRoute matching the model's base
// name), and the payload processor, which reads the request body's `model` and sets the header the
// routes match (test/fixtures/llm-d-router-v0.10.0/multi-model.json, test/fixtures/payload-processor/).
// A request that names no served model matches no model's route and reaches the stack's answers:
// `GET /v1/models` with every served name, else 404 JSON (core/render/modelAnswers.ts).
import { createHash } from "node:crypto";
import { ConfigError } from "../../errors";
import { DEFAULT_IMAGES } from "../../plan/frontDoor";
import type { StackPlan } from "../../plan/stack";
import type { Deployment, RouterIntent } from "../../plan/types";
import { answerBootstrap } from "../modelAnswers";
import { AGGREGATED_PICKER } from "../pickerConfig";
import { ROUTER_CHART, routerChartValues } from "./chartValues";
import type * as k8s from "./objects";

/**
 * The payload processor's chart: llm-d/llm-d-inference-payload-processor v0.1.0-rc.1 (commit
 * 99185f462c2d4f120df305de7ff5f54d217557dc), the newest release whose source could be read. Its
 * release workflow (hack/push-chart.sh) publishes the chart at the tag's version with the image of
 * the same tag. No readable release has the fix for a second end-of-stream chunk (PR #225, after
 * rc.1 on main): with it, a body of about 1 MB or more through an Envoy 1.35+ Gateway can get 400.
 */
export const PAYLOAD_PROCESSOR_CHART = { repository: "oci://ghcr.io/llm-d/charts", chart: "payload-processor", version: "v0.1.0-rc.1" } as const;

/** The header the payload processor's base-model-to-header sets and each model's HTTPRoute matches (httpRoute.baseModel). */
export const BASE_MODEL_HEADER = "X-Gateway-Base-Model-Name";

/** The label of the ConfigMaps the payload processor reads its base models and their aliases (adapters) from. */
export const IPP_MANAGED_LABEL = "inference.llm-d.ai/ipp-managed";

/** Where the answers' Envoy listens in its pod. */
export const ANSWERS_PORT = 8080;

/** Helm refuses release names over 53 characters. */
const MAX_RELEASE_NAME = 53;

export interface PayloadProcessorRelease {
  release: string;
  repository: string;
  chart: string;
  version: string;
  /** The Gateway's namespace: the chart's EnvoyFilter (istio) or GCPRoutingExtension (gke) targets the Gateway there. */
  namespace: string;
  values: Record<string, unknown>;
}

export interface KubernetesModelRouting {
  payloadProcessor: PayloadProcessorRelease;
  /** One per model, in the payload processor's namespace: its base name and aliases. */
  servedNames: k8s.Named<k8s.ConfigMap>[];
  /** The stack's answers: an Envoy that lists the served names and answers any other model 404, behind a catch-all route. */
  answers: { configMap: k8s.Named<k8s.ConfigMap>; deployment: k8s.Named<k8s.Deployment>; service: k8s.Named<k8s.Service>; httpRoute: k8s.KubeObject };
}

/**
 * The pool a model of a stack of several routes to: the recipe's router, or for a strategy without
 * one the chart's own default picker over the first role's ranks (as on hosts). Null for a stack of
 * one model without a router (its Services are its endpoints).
 */
export function poolIntent(deployment: Deployment): RouterIntent | null {
  const { plan, entry } = deployment;
  if (plan.router || entry.name === null) return plan.router;
  const first = plan.roles.find((r) => r.node === 0) ?? plan.roles[0]!;
  return {
    release: `router-${entry.name}`,
    chart: ROUTER_CHART.chart,
    version: ROUTER_CHART.version,
    values: {
      endpoint_picker: {
        image: DEFAULT_IMAGES.endpointPicker,
        ext_proc_port: 9002,
        plugins: AGGREGATED_PICKER.plugins,
        scheduling_profiles: AGGREGATED_PICKER.schedulingProfiles.map((p) => ({
          name: p.name,
          plugins: p.plugins.map(({ pluginRef, weight }) => (weight === undefined ? { ref: pluginRef } : { ref: pluginRef, weight })),
        })),
      },
      inference_pool: {
        failure_mode: "FailOpen",
        match_labels: { "app.kubernetes.io/component": first.role },
        target_ports: first.ranks.map((r) => r.ports[0]!),
      },
    },
  };
}

/** A model's router values in a stack of several: its pool selects its own pods, and its route matches its base name. */
export function modelRouterValues(deployment: Deployment, intent: RouterIntent, instance: string): Record<string, unknown> {
  const values = routerChartValues(intent, deployment.plan.strategy, deployment.settings) as {
    router: { modelServers: { matchLabels: Record<string, string> } };
    httpRoute: Record<string, unknown>;
  };
  values.router.modelServers.matchLabels = { ...values.router.modelServers.matchLabels, "app.kubernetes.io/instance": instance };
  values.httpRoute = { ...values.httpRoute, baseModel: deployment.entry.servedNames[0] };
  return values;
}

/** The payload processor's release: one per stack, in the Gateway's namespace, named after the stack's namespace (unique in the cluster). */
function payloadProcessor(plan: StackPlan): PayloadProcessorRelease {
  const { kubernetes } = plan.settings;
  const release = `${kubernetes.namespace}-ipp`;
  if (release.length > MAX_RELEASE_NAME)
    throw new ConfigError(
      "kubernetes.namespace",
      `"${kubernetes.namespace}" names the payload processor's release "${release}", over Helm's ${MAX_RELEASE_NAME} characters; with models use a namespace of at most ${MAX_RELEASE_NAME - 4}`,
    );
  return {
    release,
    ...PAYLOAD_PROCESSOR_CHART,
    namespace: kubernetes.gateway!.namespace ?? kubernetes.namespace,
    values: { payloadProcessor: { name: release }, provider: { name: kubernetes.provider }, inferenceGateway: { name: kubernetes.gateway!.name } },
  };
}

/** A model's base name and aliases, where the payload processor reads them: an unknown name gets an empty header, and matches no model's route. */
function servedNamesConfigMap(plan: StackPlan, deployment: Deployment, namespace: string): k8s.Named<k8s.ConfigMap> {
  const [baseModel, ...aliases] = deployment.entry.servedNames;
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `${plan.settings.kubernetes.namespace}-${deployment.entry.name}-served-names`,
      namespace,
      labels: { [IPP_MANAGED_LABEL]: "true", "app.kubernetes.io/name": "rbln-serving", "app.kubernetes.io/managed-by": "pulumi" },
    },
    data: { baseModel: baseModel!, ...(aliases.length > 0 ? { adapters: aliases.map((a) => `- ${JSON.stringify(a)}\n`).join("") } : {}) },
  };
}

/** The stack's answers: an Envoy that answers `GET /v1/models` and every request of no model's route. */
function answers(plan: StackPlan, instance: string): KubernetesModelRouting["answers"] {
  const { kubernetes } = plan.settings;
  const bootstrap = answerBootstrap(
    "0.0.0.0",
    ANSWERS_PORT,
    plan.models.flatMap((m) => m.entry.servedNames),
  );
  const namespace = kubernetes.namespace;
  const name = `${instance}-answers`;
  const labels = { "app.kubernetes.io/name": "rbln-serving", "app.kubernetes.io/instance": instance, "app.kubernetes.io/component": "answers" };
  const gateway = {
    group: "gateway.networking.k8s.io",
    kind: "Gateway",
    name: kubernetes.gateway!.name,
    ...(kubernetes.gateway!.namespace ? { namespace: kubernetes.gateway!.namespace } : {}),
  };
  const backend = [{ name, port: ANSWERS_PORT }];
  return {
    configMap: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace, labels }, data: { "envoy.yaml": bootstrap } },
    deployment: {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name, namespace, labels },
      spec: {
        replicas: 2,
        selector: { matchLabels: labels },
        template: {
          // Envoy reads its bootstrap once: a new list of served names rolls the pods.
          metadata: { labels, annotations: { "rbln-serving.io/answers-config": createHash("sha256").update(bootstrap).digest("hex").slice(0, 16) } },
          spec: {
            automountServiceAccountToken: false,
            securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: "RuntimeDefault" } },
            containers: [
              {
                name: "envoy",
                image: DEFAULT_IMAGES.proxy,
                args: ["-c", "/etc/envoy/envoy.yaml", "--log-level", "warn"],
                ports: [{ name: "http", containerPort: ANSWERS_PORT }],
                readinessProbe: { httpGet: { path: "/v1/models", port: ANSWERS_PORT } },
                resources: { requests: { cpu: "50m", memory: "64Mi" }, limits: { memory: "256Mi" } },
                securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
                volumeMounts: [{ name: "config", mountPath: "/etc/envoy", readOnly: true }],
              },
            ],
            volumes: [{ name: "config", configMap: { name } }],
          },
        },
      },
    },
    service: {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, namespace, labels },
      spec: { selector: labels, ports: [{ name: "http", port: ANSWERS_PORT, targetPort: ANSWERS_PORT }] },
    },
    // No header match: each model's route (the same / prefix and its base-name header) is more specific, so only a request of no model reaches it.
    httpRoute: {
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "HTTPRoute",
      metadata: { name, namespace, labels },
      spec: {
        parentRefs: [gateway],
        rules: [
          { matches: [{ path: { type: "Exact", value: "/v1/models" }, method: "GET" }], backendRefs: backend },
          { matches: [{ path: { type: "PathPrefix", value: "/" } }], backendRefs: backend },
        ],
      },
    } as k8s.KubeObject,
  };
}

/** The routing of a Kubernetes stack of models, or null for a stack without models. */
export function kubernetesModelRouting(plan: StackPlan, instance: string): KubernetesModelRouting | null {
  if (plan.settings.models === undefined || plan.settings.platform !== "kubernetes") return null;
  const payload = payloadProcessor(plan);
  return { payloadProcessor: payload, servedNames: plan.models.map((m) => servedNamesConfigMap(plan, m, payload.namespace)), answers: answers(plan, instance) };
}
