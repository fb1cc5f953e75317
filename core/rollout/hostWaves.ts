import type { Deployment, HostPlacement } from "../plan/deployment";
import { rolloutWaves } from "./waves";

/** The hosts of each rollout wave, in order: every node of a replica is in its replica's wave. */
export function hostWaves(deployment: Deployment): HostPlacement[][] {
  const { settings, placements } = deployment;
  return rolloutWaves(settings.replicas, settings.rollout.maxUnavailable).map((replicas) => placements.filter((p) => replicas.includes(p.replica)));
}
