import type { Deployment } from "../../plan/types";
import { modelLabel } from "../../plan/stack";
import { KUBERNETES_DEFAULTS } from "./defaults";
import type { HorizontalPodAutoscalerBehavior, Named } from "./objects";
import type { KubernetesWorkloads } from "./workloads";
import { deploymentReplicas, pickerQueue, podMatchers, runningRequests, thresholdText, triggerQuery, waitingRequests } from "../../monitoring/queries";

/** A prometheus trigger as KEDA v2.19.0 reads it (metadata is a map of strings). */
export interface PrometheusTrigger {
  type: "prometheus";
  name: string;
  metricType: "Value";
  metadata: { serverAddress: string; query: string; threshold: string; ignoreNullValues: "false" };
}

/** A `keda.sh/v1alpha1` ScaledObject: no typed input in @pulumi/kubernetes (a CustomResource); tests validate it against KEDA's CRD schema. */
export type ScaledObject = Named<{
  spec: {
    scaleTargetRef: { apiVersion: "apps/v1"; kind: "Deployment"; name: string };
    /** Only with scale to zero (minReplicaCount 0): above it KEDA 2.20 warns that neither does anything. */
    pollingInterval?: number;
    cooldownPeriod?: number;
    minReplicaCount: number;
    maxReplicaCount: number;
    fallback: { failureThreshold: number; replicas: number; behavior: "currentReplicasIfHigher" };
    advanced: { horizontalPodAutoscalerConfig: { behavior: HorizontalPodAutoscalerBehavior } };
    triggers: PrometheusTrigger[];
  };
}>;

/** One role's scaler, with the names its alerts select. */
export interface RenderedScaler {
  role: string;
  namespace: string;
  /** The Deployment it scales. */
  deployment: string;
  scaledObject: string;
  /** The HPA KEDA creates for it (`keda-hpa-<ScaledObject>`, KEDA's default name). */
  hpa: string;
  object: ScaledObject;
}

/** The HPA's limit on a policy's period and a stabilisation window (autoscaling/v2 validation). */
const HPA_MAX_PERIOD_SECONDS = 1800;
const HPA_MAX_WINDOW_SECONDS = 3600;

/**
 * One ScaledObject per served role, for its Deployment (KEDA owns the HPA; none is created here).
 * Two triggers, each a load per serving replica (`triggerQuery`): requests waiting, and requests
 * running against the compiled batch. With the router, the decode role's waiting requests are the
 * endpoint picker's flow-control queue, which holds requests for the pool when it is saturated;
 * prefill reads its own vLLM queue, so each role scales on its own signal.
 */
export function renderScalers(deployment: Deployment, workloads: KubernetesWorkloads): RenderedScaler[] {
  const scaling = deployment.autoscaling;
  if (!scaling) return [];
  const defaults = KUBERNETES_DEFAULTS.autoscaling;
  if (
    defaults.loadSeconds > HPA_MAX_PERIOD_SECONDS ||
    defaults.scaleDownPeriodSeconds > HPA_MAX_PERIOD_SECONDS ||
    defaults.scaleDownWindowSeconds > HPA_MAX_WINDOW_SECONDS
  ) {
    throw new Error(`scaler windows past the HPA's limits (periods ${HPA_MAX_PERIOD_SECONDS} s, windows ${HPA_MAX_WINDOW_SECONDS} s)`);
  }
  const namespace = workloads.namespace.metadata.name;
  const { plan } = deployment;
  return workloads.roles.flatMap((workload) => {
    const limits = workload.scaling;
    if (!limits) return [];
    const role = plan.roles.find((r) => r.role === workload.role)!;
    const name = workload.deployment.metadata.name;
    const pods = podMatchers(namespace, name);
    const queue = plan.router && role.role === "decode" ? pickerQueue(namespace, modelLabel(deployment)) : waitingRequests(pods);
    const zero = (wake: string | undefined) => (scaling.scaleToZero ? { zero: { replicas: deploymentReplicas(namespace, name), wake } } : {});
    const trigger = (triggerName: string, load: string, value: number, wake?: string): PrometheusTrigger => {
      // One text for both: the hold value the query yields is exactly the threshold.
      const threshold = thresholdText(value);
      return {
        type: "prometheus",
        name: triggerName,
        metricType: "Value",
        metadata: {
          serverAddress: scaling.prometheusAddress,
          query: triggerQuery({ pods, compileKey: role.compileKey, load, threshold, ...zero(wake) }),
          threshold,
          // The queries never come back empty; if one does, that is a failure (KEDA keeps the replicas), not a 0.
          ignoreNullValues: "false",
        },
      };
    };
    // The Deployment's name, at most 45 characters (its launch ConfigMap, `<name>-launch-<10 hex>`, is at
    // most 63): within KEDA 2.20's limit of 54, where its HPA, keda-hpa-<name>, stays within 63.
    const scaledObject = name;
    // Scale to zero and back is KEDA's own loop, paced by these two; above zero the HPA reads the
    // triggers on its own sync period, and KEDA 2.20 warns that they are set for nothing.
    const zeroLoop = limits.minReplicas === 0 ? { pollingInterval: defaults.pollingIntervalSeconds, cooldownPeriod: defaults.cooldownSeconds } : {};
    const object: ScaledObject = {
      apiVersion: "keda.sh/v1alpha1",
      kind: "ScaledObject",
      metadata: { name: scaledObject, namespace, labels: workload.deployment.metadata.labels ?? {} },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
        ...zeroLoop,
        minReplicaCount: limits.minReplicas,
        maxReplicaCount: limits.maxReplicas,
        // Prometheus unreachable: keep what runs (or the minimum, if more).
        fallback: { failureThreshold: defaults.fallbackFailureThreshold, replicas: limits.minReplicas, behavior: "currentReplicasIfHigher" },
        advanced: {
          horizontalPodAutoscalerConfig: {
            behavior: {
              // A new replica serves only after it loads: load must stay high that long, and at most doubles per load time.
              scaleUp: { stabilizationWindowSeconds: defaults.loadSeconds, policies: [{ type: "Percent", value: 100, periodSeconds: defaults.loadSeconds }] },
              scaleDown: {
                stabilizationWindowSeconds: defaults.scaleDownWindowSeconds,
                policies: [{ type: "Pods", value: 1, periodSeconds: defaults.scaleDownPeriodSeconds }],
              },
            },
          },
        },
        triggers: [
          // At zero only the picker's queue can wake a role: no vLLM runs to queue or report.
          trigger("waiting", queue, limits.target ?? defaults.waitingPerReplica, pickerQueue(namespace, modelLabel(deployment))),
          trigger("running", runningRequests(pods), defaults.batchShare * limits.compiledBatch),
        ],
      },
    };
    return [{ role: role.role, namespace, deployment: name, scaledObject, hpa: `keda-hpa-${scaledObject}`, object }];
  });
}
