import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { RecipeCatalog } from "../core/recipe/catalog";
import { renderDeployment, type RenderedKubernetes } from "../core/render/deployment";
import type { RenderedScaler } from "../core/render/kubernetes/scaledObjects";
import { KUBERNETES_DEFAULTS } from "../core/render/kubernetes/defaults";
import type { KubernetesWorkloads } from "../core/render/kubernetes/workloads";
import { DEFAULT_DURATIONS } from "./deployModel";
import type { BenchPart } from "./part";

/**
 * Figures read from rendered Kubernetes objects, not from the defaults that made them: how soon at
 * the earliest a role's scaler adds a serving replica and how often it may take one away (issue 23),
 * and whether a stopping pod's grace period covers its drain (issue 21). These figures follow from
 * configured numbers: the bench prints them, and the tests check them for consistency
 * (test/autoscaling.test.ts); none is a target.
 */

/** Kubernetes' default HPA sync period (kube-controller-manager --horizontal-pod-autoscaler-sync-period, 15 s). */
export const HPA_SYNC_SECONDS = 15;

export interface ScalerTiming {
  role: string;
  pollingSeconds: number;
  scaleUpWindowSeconds: number;
  loadSeconds: number;
  /**
   * A lower bound from a step in load to a new replica serving, not a worst case: the HPA adds a
   * replica only once every recommendation in its scale-up window wants it (the window, less one
   * sync period for where the step falls between syncs), then the replica loads (the deploy
   * model's assumed load time). What comes on top is in `notModelled`.
   */
  stepToServingLowerBoundMinutes: number;
  /** What the lower bound leaves out, each with its bound where the rendered objects give one. */
  notModelled: string[];
  /** The fewest minutes between two scale-downs: one pod per policy period at most. */
  minutesBetweenScaleDowns: number;
  scaleDownWindowSeconds: number;
}

/** The vLLM container's probe periods, per role: a new pod is ready up to one period after it serves. */
function probePeriods(workloads: KubernetesWorkloads, role: string): { startup: number; readiness: number } {
  const pod = workloads.roles.find((r) => r.role === role)!.deployment.spec!.template!.spec!;
  const vllm = pod.containers.find((c) => c.name === "vllm")!;
  return { startup: vllm.startupProbe?.periodSeconds ?? 10, readiness: vllm.readinessProbe?.periodSeconds ?? 10 };
}

/** `loadSeconds`: a replica's start from the compiled cache, as the deploy model assumes it. */
export function scalerTimings(scalers: readonly RenderedScaler[], workloads: KubernetesWorkloads, loadSeconds: number): ScalerTiming[] {
  return scalers.map(({ role, object }) => {
    const { scaleUp, scaleDown } = object.spec.advanced.horizontalPodAutoscalerConfig.behavior;
    // Without pollingInterval (minReplicas >= 1) the HPA's sync period paces the reads: 15 s, as the default says.
    const pollingSeconds = object.spec.pollingInterval ?? KUBERNETES_DEFAULTS.autoscaling.pollingIntervalSeconds;
    const scaleUpWindowSeconds = scaleUp?.stabilizationWindowSeconds ?? 0;
    // The HPA follows the policy that allows the most change (selectPolicy Max): the shortest spacing.
    const spacing = Math.min(...(scaleDown?.policies ?? []).filter((p) => p.type === "Pods").map((p) => p.periodSeconds / p.value));
    const probes = probePeriods(workloads, role);
    return {
      role,
      pollingSeconds,
      scaleUpWindowSeconds,
      loadSeconds,
      stepToServingLowerBoundMinutes: (Math.max(0, scaleUpWindowSeconds - HPA_SYNC_SECONDS) + loadSeconds) / 60,
      notModelled: [
        `the HPA's sync (up to ${HPA_SYNC_SECONDS} s)`,
        "Prometheus' scrape and KEDA's query (the scrape interval)",
        `KEDA's polling (${pollingSeconds} s, from zero replicas only)`,
        "scheduling and the image pull (unbounded here)",
        `the startup and readiness probes (up to ${probes.startup} s and ${probes.readiness} s)`,
        "a load longer than assumed",
      ],
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

/** The prod stack with autoscaling on, for both Kubernetes strategies: what the part reads. */
function renderedProd(): { strategy: string; kubernetes: RenderedKubernetes }[] {
  const catalog = RecipeCatalog.load();
  const { preset: _preset, ...prodWithoutPreset } = readStackFile("prod").raw;
  const stacks = {
    "prefill-decode-disaggregated": readStackFile("prod").raw,
    "aggregated-data-expert-parallel": { ...prodWithoutPreset, strategy: "aggregated-data-expert-parallel", target: "Throughput" },
  };
  return Object.entries(stacks).map(([strategy, raw]) => ({
    strategy,
    kubernetes: renderDeployment(planDeployment(parseStackSettings({ ...raw, autoscaling: { enabled: true, maxReplicas: 4 } }), catalog), {
      stack: "prod",
      instance: "rbln-serving",
      secrets: [],
    }).kubernetes!,
  }));
}

export const autoscalingPart: BenchPart = {
  name: "autoscaling",
  what: "Kubernetes autoscaling and the drain, read from the prod stack's rendered objects: a lower bound and consistency figures, no targets",
  async run() {
    const rendered = renderedProd();
    const scaling = rendered.flatMap(({ strategy, kubernetes }) =>
      scalerTimings(kubernetes.scalers, kubernetes.workloads, DEFAULT_DURATIONS.loadSeconds).map((t) => ({ strategy, ...t })),
    );
    const drains = rendered.flatMap(({ strategy, kubernetes }) => drainCover(kubernetes.workloads).map((d) => ({ strategy, ...d })));
    const lines = [
      `kubernetes autoscaling (prod stack, autoscaling.enabled, maxReplicas 4); load ${DEFAULT_DURATIONS.loadSeconds / 60} min is the deploy model's guess`,
      "strategy                         role     poll s  scale-up window s  load s  step to serving, lower bound min  min between scale-downs",
      ...scaling.map(
        (s) =>
          `${s.strategy.padEnd(31)}  ${s.role.padEnd(7)}  ${String(s.pollingSeconds).padStart(6)}  ${String(s.scaleUpWindowSeconds).padStart(17)}  ${String(s.loadSeconds).padStart(6)}  ${s.stepToServingLowerBoundMinutes.toFixed(2).padStart(32)}  ${s.minutesBetweenScaleDowns.toFixed(0).padStart(23)}`,
      ),
      `lower bound = the scale-up window less one HPA sync, plus a load; on top, not modelled: ${scaling[0]!.notModelled.join("; ")}`,
      "",
      "kubernetes drain (prod stack): the pod spec's grace period against preStop + --shutdown-timeout (consistency, checked in test/autoscaling.test.ts)",
      "strategy                         role     preStop s  shutdown-timeout s  grace s  covered",
      ...drains.map(
        (d) =>
          `${d.strategy.padEnd(31)}  ${d.role.padEnd(7)}  ${String(d.preStopSeconds).padStart(9)}  ${String(d.shutdownTimeoutSeconds).padStart(18)}  ${String(d.gracePeriodSeconds).padStart(7)}  ${d.covered ? "yes" : "NO"}`,
      ),
    ];
    return { report: { scaling, drains }, lines, targets: [] };
  },
};
