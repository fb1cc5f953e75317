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

/** The role of a host's unit step (`<host>-<role>-<rank>`), or undefined for any other command (copies, grants, install, ...). */
export function unitStepRole(commandName: string, roles: readonly string[]): string | undefined {
  if (/-(copy|allow|revoke)-/.test(commandName)) return undefined;
  return new RegExp(`-(${roles.join("|")})-\\d+$`).exec(commandName)?.[1];
}

/**
 * Hosts: a replica is down while one of its unit steps restarts its unit. A unit step starts after
 * every unit step it depends on, directly or through the copies between them; the unit steps that
 * depend on the same number of earlier unit steps change at the same time.
 */
export function hostsRollout(
  registrations: readonly Registration[],
  roles: readonly string[],
  replicaOfHost: (hostComponent: string) => number,
  replicas: number,
): RolloutShape {
  const commands = new Map(registrations.filter((r) => r.type === "command:remote:Command").map((r) => [r.urn, r]));
  const isUnit = (urn: string) => unitStepRole(commands.get(urn)!.name, roles) !== undefined;
  const waveMemo = new Map<string, number>();
  // The number of unit steps on the longest chain that ends at `urn` (its own unit step included).
  const unitsBefore = (urn: string): number => {
    if (!waveMemo.has(urn)) {
      const upstream = Math.max(
        0,
        ...commands
          .get(urn)!
          .dependencies.filter((d) => commands.has(d))
          .map(unitsBefore),
      );
      waveMemo.set(urn, upstream + (isUnit(urn) ? 1 : 0));
    }
    return waveMemo.get(urn)!;
  };
  const downPerWave = new Map<number, Set<number>>();
  for (const urn of [...commands.keys()].filter(isUnit)) {
    const wave = unitsBefore(urn);
    if (!downPerWave.has(wave)) downPerWave.set(wave, new Set());
    downPerWave.get(wave)!.add(replicaOfHost(commands.get(urn)!.parent));
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
