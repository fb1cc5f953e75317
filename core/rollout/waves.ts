import type { MaxUnavailable } from "../config/fields";

/**
 * Replicas that may be down at once: a percentage rounds up (Kubernetes rounds a Deployment's
 * percentage down, which at maxSurge 0 could reach 0 and stall), never below 1 or above replicas.
 */
export function unavailableCount(replicas: number, maxUnavailable: MaxUnavailable): number {
  const count = typeof maxUnavailable === "number" ? maxUnavailable : Math.ceil((replicas * Number(maxUnavailable.slice(0, -1))) / 100);
  return Math.max(1, Math.min(replicas, count));
}

/** Replica indices per wave, in order: wave k+1 changes only after wave k serves. */
export function rolloutWaves(replicas: number, maxUnavailable: MaxUnavailable): number[][] {
  const size = unavailableCount(replicas, maxUnavailable);
  return Array.from({ length: Math.ceil(replicas / size) }, (_, wave) =>
    Array.from({ length: Math.min(size, replicas - wave * size) }, (_, i) => wave * size + i),
  );
}
