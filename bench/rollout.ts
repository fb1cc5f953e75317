import type { Registration } from "../test/helpers/pulumiHarness";

/**
 * How a one-setting change reaches the replicas, read from what the program registered: on hosts
 * the dependency graph of the unit steps (a step starts after the steps it depends on), on
 * Kubernetes each Deployment's strategy. A change that touches every rank is assumed, the worst case.
 */
export interface RolloutShape {
  /** Update waves: steps that change one after another. */
  waves: number;
  /** The lowest share of replicas serving at any moment of the change. */
  lowestServingShare: number;
}

const HOST_STEP = /-(preflight|install|weights)$/;

/** Hosts: unit steps at the same depth of the unit-to-unit graph change at once; a replica is down while any of its units restarts. */
export function hostsRollout(registrations: readonly Registration[], replicaOfHost: (hostComponent: string) => number, replicas: number): RolloutShape {
  const units = registrations.filter((r) => r.type === "command:remote:Command" && !HOST_STEP.test(r.name));
  const unitUrns = new Set(units.map((u) => u.urn));
  const byUrn = new Map(units.map((u) => [u.urn, u]));
  const level = new Map<string, number>();
  const levelOf = (urn: string): number => {
    if (!level.has(urn)) level.set(urn, 1 + Math.max(-1, ...byUrn.get(urn)!.dependencies.filter((d) => unitUrns.has(d)).map(levelOf)));
    return level.get(urn)!;
  };
  const downPerWave = new Map<number, Set<number>>();
  for (const unit of units) {
    const wave = levelOf(unit.urn);
    if (!downPerWave.has(wave)) downPerWave.set(wave, new Set());
    downPerWave.get(wave)!.add(replicaOfHost(unit.parent));
  }
  const mostDown = Math.max(...[...downPerWave.values()].map((s) => s.size));
  return { waves: downPerWave.size, lowestServingShare: (replicas - mostDown) / replicas };
}

/** Kubernetes: per Deployment, Recreate takes every pod down; RollingUpdate with maxSurge 0 takes maxUnavailable pods at a time. */
export function kubernetesRollout(registrations: readonly Registration[]): RolloutShape {
  const roles = registrations
    .filter((r) => r.type === "kubernetes:apps/v1:Deployment")
    .map((r) => {
      const replicas: number = r.inputs.spec.replicas;
      const strategy = r.inputs.spec.strategy ?? { type: "RollingUpdate" };
      const down = strategy.type === "Recreate" ? replicas : resolveCount(strategy.rollingUpdate?.maxUnavailable ?? "25%", replicas, "down");
      const surge = strategy.type === "Recreate" ? 0 : resolveCount(strategy.rollingUpdate?.maxSurge ?? "25%", replicas, "up");
      if (surge > 0) throw new Error(`${r.name}: maxSurge ${surge} would need spare NPUs`);
      return { waves: Math.ceil(replicas / Math.max(1, down)), share: (replicas - down) / replicas };
    });
  return { waves: Math.max(...roles.map((r) => r.waves)), lowestServingShare: Math.min(...roles.map((r) => r.share)) };
}

/** Kubernetes' rounding of an int-or-percent: maxUnavailable rounds down, maxSurge up. */
function resolveCount(value: number | string, replicas: number, round: "up" | "down"): number {
  if (typeof value === "number") return value;
  const exact = (replicas * Number(value.replace("%", ""))) / 100;
  return round === "up" ? Math.ceil(exact) : Math.floor(exact);
}
