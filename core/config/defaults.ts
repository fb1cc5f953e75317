/**
 * Defaults of stack settings that code below the config reads too (the schema in schema.ts
 * applies them; the checks and renderers that explain a value name them). The config is the root of
 * the core's data flow, so these live here and everything else imports them.
 */

/** What both platforms give the weights by default, in GiB: hosts' free disk under cacheRoot, Kubernetes' weights volume. */
export const DEFAULT_WEIGHTS_STORAGE_GIB = 500;

/**
 * Free disk a host's unit step wants under cacheRoot before it (re)starts a rank, in GiB: room for one
 * compiled cache, which a start that compiles writes there (its size is not published; the deploy
 * model assumes 50 GB, `bench/deployModel.ts`).
 */
export const DEFAULT_RESTART_FREE_GIB = 50;

/**
 * A replica's start from its role's compiled cache, in seconds: read the weights, load the graphs.
 * Assumed 15 min (the deploy model's load stage, `bench/deployModel.ts`); the scaler's windows and
 * alerts on Kubernetes follow it.
 */
export const REPLICA_LOAD_SECONDS = 900;

/** Decimals a scaler's threshold keeps (KEDA's metadata, the trigger query, the alerts write it so); a target must not round to 0. */
export const THRESHOLD_DECIMALS = 3;
export const MIN_THRESHOLD = 10 ** -THRESHOLD_DECIMALS;

/** How many replicas a change may take down at once, by default. */
export const DEFAULT_MAX_UNAVAILABLE = "25%";

/** The longest --shutdown-timeout the stack gives vLLM (rollout.shutdownTimeoutSeconds, or derived from router.requestTimeout): a day. */
export const MAX_SHUTDOWN_TIMEOUT_SECONDS = 86400;

/** `1h30m`, `90m`, `3600s`, `500ms` (a Gateway API duration) in whole seconds, rounded up. */
export function durationSeconds(duration: string): number {
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  let seconds = 0;
  for (const [, amount, suffix] of duration.matchAll(/([0-9]+)(h|ms|m|s)/g)) seconds += Number(amount) * unit[suffix!]!;
  return Math.ceil(seconds);
}

/** Serving never reaches the hub: huggingface_hub (and so vLLM and transformers) reads only the local snapshot. */
export const OFFLINE_ENV: Readonly<Record<string, string>> = { HF_HUB_OFFLINE: "1" };

/** A 40-hex commit hash: the only revision that names one snapshot for good (a branch or tag moves). */
export const COMMIT_HASH = /^[0-9a-f]{40}$/;
