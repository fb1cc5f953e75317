import type { StackSettings } from "../config/stackConfig";
import { ConfigError } from "../errors";
import type { AutoscalingPlan, LaunchPlan, RolePlan } from "./types";

/** A role's replicas: prefillReplicas and decodeReplicas scale the disaggregated roles on their own (xPyD). */
export function roleReplicas(settings: StackSettings, role: string): number {
  return (role === "prefill" ? settings.prefillReplicas : role === "decode" ? settings.decodeReplicas : undefined) ?? settings.replicas;
}

/** Requests a pod runs at once at most: each engine's max_num_seqs, which RBLN compiles (a rank runs one engine per data-parallel rank it holds). */
export function compiledBatch(role: RolePlan): number {
  return role.ranks.reduce((sum, rank) => {
    const value = (name: string) => rank.flags.find((f) => f.name === name)?.values[0];
    const seqs = Number(value("--max-num-seqs"));
    if (!Number.isInteger(seqs) || seqs < 1) {
      throw new ConfigError(
        "autoscaling.enabled",
        `true: role ${role.role} rank ${rank.rank} sets no --max-num-seqs, so the scaler cannot know its compiled batch`,
      );
    }
    const engines = value("--data-parallel-rank") !== undefined ? 1 : Number(value("--data-parallel-size-local") ?? value("--data-parallel-size") ?? 1);
    return sum + seqs * engines;
  }, 0);
}

/** The key that set a role's replicas, for messages. */
function replicasKey(settings: StackSettings, role: string): string {
  if (role === "prefill" && settings.prefillReplicas !== undefined) return "prefillReplicas";
  if (role === "decode" && settings.decodeReplicas !== undefined) return "decodeReplicas";
  return "replicas";
}

/**
 * Each role's replica limits under KEDA, or null with autoscaling off. Refuses what cannot scale:
 * hosts (the servers are fixed), no Prometheus scraping the ranks, limits that cross, zero without
 * `scaleToZero`, and `scaleToZero` where no request waits while no pod runs (without the router).
 */
export function resolveAutoscaling(settings: StackSettings, plan: Pick<LaunchPlan, "roles" | "router">): AutoscalingPlan | null {
  const scaling = settings.autoscaling;
  if (!scaling.enabled) return null;
  if (settings.platform === "hosts") {
    throw new ConfigError(
      "autoscaling.enabled",
      "true is refused with platform: hosts: the servers are fixed; set the replicas and hosts you have, or use platform: kubernetes",
    );
  }
  if (!settings.monitoring.enabled) {
    throw new ConfigError("autoscaling.enabled", "true needs monitoring.enabled: true: KEDA reads the series the PodMonitors have Prometheus scrape");
  }
  if (scaling.scaleToZero && !plan.router) {
    throw new ConfigError(
      "autoscaling.scaleToZero",
      "true needs a strategy behind the llm-d router: without it no request waits anywhere while a role has no pod, so nothing would wake it; use prefill-decode-disaggregated or minReplicas of 1 or more",
    );
  }
  const roles = plan.roles.map((rolePlan) => {
    const { role } = rolePlan;
    const own = scaling.roles[role] ?? {};
    const at = (key: "minReplicas" | "maxReplicas") => (own[key] !== undefined ? `autoscaling.roles.${role}.${key}` : `autoscaling.${key}`);
    const setMin = own.minReplicas ?? scaling.minReplicas;
    const minReplicas = setMin ?? roleReplicas(settings, role);
    const minFrom = setMin === undefined ? replicasKey(settings, role) : at("minReplicas");
    const maxReplicas = own.maxReplicas ?? scaling.maxReplicas;
    if (maxReplicas === undefined) {
      throw new ConfigError(
        `autoscaling.roles.${role}.maxReplicas`,
        `required with autoscaling.enabled: true (or autoscaling.maxReplicas for every role); at least minReplicas ${minReplicas}`,
      );
    }
    if (minReplicas === 0 && !scaling.scaleToZero) {
      throw new ConfigError(minFrom, `0 lets ${role} scale to zero, which needs autoscaling.scaleToZero: true; otherwise at least 1`);
    }
    if (maxReplicas < Math.max(minReplicas, 1)) {
      throw new ConfigError(
        at("maxReplicas"),
        `${maxReplicas} is below ${role}'s minReplicas ${minReplicas} (${minFrom}); give at least ${Math.max(minReplicas, 1)}`,
      );
    }
    return { role, minReplicas, maxReplicas, compiledBatch: compiledBatch(rolePlan), ...(own.target !== undefined ? { target: own.target } : {}) };
  });
  return {
    prometheusAddress: scaling.prometheusAddress ?? `http://prometheus-operated.${settings.monitoring.namespace}.svc:9090`,
    scaleToZero: scaling.scaleToZero,
    roles,
  };
}
