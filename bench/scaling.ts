import type { KubernetesWorkloads } from "../core/render/kubernetes/workloads";
import type { RenderedScaler } from "../core/render/kubernetes/scaledObjects";
import { KUBERNETES_DEFAULTS } from "../core/render/kubernetes/defaults";

/**
 * Figures read from rendered Kubernetes objects, not from the defaults that made them: how fast a
 * role's scaler adds a serving replica and how often it may take one away (issue 23), and whether a
 * stopping pod's grace period covers its drain (issue 21).
 */

export interface ScalerTiming {
  role: string;
  pollingSeconds: number;
  scaleUpWindowSeconds: number;
  loadSeconds: number;
  /** Worst case from a step in load to a new replica serving: a poll, the scale-up window, the load. */
  stepToServingMinutes: number;
  /** The fewest minutes between two scale-downs: one pod per policy period at most. */
  minutesBetweenScaleDowns: number;
  scaleDownWindowSeconds: number;
}

/** `loadSeconds`: a replica's start from the compiled cache, as the deploy model states it. */
export function scalerTimings(scalers: readonly RenderedScaler[], loadSeconds: number): ScalerTiming[] {
  return scalers.map(({ role, object }) => {
    const { scaleUp, scaleDown } = object.spec.advanced.horizontalPodAutoscalerConfig.behavior;
    // Without pollingInterval (minReplicas >= 1) the HPA's sync period paces the reads: 15 s, as the default says.
    const pollingSeconds = object.spec.pollingInterval ?? KUBERNETES_DEFAULTS.autoscaling.pollingIntervalSeconds;
    const scaleUpWindowSeconds = scaleUp?.stabilizationWindowSeconds ?? 0;
    // The HPA follows the policy that allows the most change (selectPolicy Max): the shortest spacing.
    const spacing = Math.min(...(scaleDown?.policies ?? []).filter((p) => p.type === "Pods").map((p) => p.periodSeconds / p.value));
    return {
      role,
      pollingSeconds,
      scaleUpWindowSeconds,
      loadSeconds,
      stepToServingMinutes: (pollingSeconds + scaleUpWindowSeconds + loadSeconds) / 60,
      minutesBetweenScaleDowns: spacing / 60,
      scaleDownWindowSeconds: scaleDown?.stabilizationWindowSeconds ?? 0,
    };
  });
}

export interface DrainCover {
  role: string;
  preStopSeconds: number;
  shutdownTimeoutSeconds: number;
  gracePeriodSeconds: number;
  /** Every rank drains (has --shutdown-timeout), and the grace period is longer than the preStop sleep and the longest drain together. */
  covered: boolean;
}

/** Per role, from the pod spec (the preStop's sleep, the grace period) and the launch script (`--shutdown-timeout`). */
export function drainCover(workloads: KubernetesWorkloads): DrainCover[] {
  return workloads.roles.map((role) => {
    const pod = role.deployment.spec!.template!.spec!;
    const vllm = pod.containers.find((c) => c.name === "vllm")!;
    const [sleep, seconds] = vllm.lifecycle?.preStop?.exec?.command ?? [];
    const preStopSeconds = sleep === "sleep" ? Number(seconds) : 0;
    const timeouts = [...role.launchScript.matchAll(/--shutdown-timeout[= ](\d+)/g)].map((m) => Number(m[1]));
    const shutdownTimeoutSeconds = Math.max(0, ...timeouts);
    const gracePeriodSeconds = pod.terminationGracePeriodSeconds ?? 30;
    const everyRankDrains = timeouts.length === role.ranks.length && timeouts.every((t) => t > 0);
    return {
      role: role.role,
      preStopSeconds,
      shutdownTimeoutSeconds,
      gracePeriodSeconds,
      covered: everyRankDrains && gracePeriodSeconds > preStopSeconds + shutdownTimeoutSeconds,
    };
  });
}
