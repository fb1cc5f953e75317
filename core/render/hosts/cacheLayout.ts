import { createHash } from "node:crypto";
import type { StackSettings } from "../../config/stackConfig";
import { healthCheck, lockNameOf, renderLeaseLock } from "../../cache/leaseLock";
import { HOST_DEFAULTS } from "./defaults";

/**
 * Where a host keeps the weights and the compiled cache. Alone, under its own cacheRoot: the seed
 * downloads and the others copy (core/render/hosts/copies.ts). With `cache.shared`, under that
 * folder of a filesystem every host mounts: nothing is copied, and a lease lock on the shared
 * folder keeps one writer per model download and per compile key (a dead writer is taken over
 * after its lease).
 */
export interface HostCacheLayout {
  /** HF_HOME is `<root>/huggingface`, VLLM_CACHE_ROOT `<root>/vllm`. */
  root: string;
  /** The lease lock on the host and its folder of leases on the shared filesystem, or null without a shared cache. */
  leaseLock: { path: string; text: string; lockRoot: string } | null;
}

export function hostCacheLayout(settings: Pick<StackSettings, "cacheRoot" | "installRoot" | "cache">): HostCacheLayout {
  const shared = settings.cache.shared;
  if (shared === undefined) return { root: settings.cacheRoot, leaseLock: null };
  const lockRoot = `${shared}/${HOST_DEFAULTS.sharedLockDir}`;
  const text = renderLeaseLock({ lockRoot, lockName: "unnamed", ...HOST_DEFAULTS.sharedLease });
  // Named by its content: a unit keeps pointing at the script it was written with, and two
  // deployments on one host with different shared folders never overwrite each other's.
  const digest = createHash("sha256").update(text).digest("hex").slice(0, 12);
  return { root: shared, leaseLock: { path: `${settings.installRoot}/bin/lease-lock-${digest}.sh`, text, lockRoot } };
}

/** The lease of one model download at one revision ("latest" when the hub's current commit is taken). */
export function weightsLockName(model: string, revision: string | null | undefined): string {
  return lockNameOf("weights", model, revision ?? "latest");
}

/**
 * The words that start a rank under the compile lock: the first rank of a compile key compiles
 * and holds the lease until it answers on `probeHost`; every other waits for its marker, then
 * starts and loads. Nothing without a shared cache (each host compiles into its own).
 */
export function compileLockWords(layout: HostCacheLayout, compileKey: string, probeHost: string, port: number): string[] {
  if (!layout.leaseLock) return [];
  return ["/bin/bash", layout.leaseLock.path, "run", "--name", lockNameOf("compile", compileKey), "--ready", healthCheck(probeHost, [port]), "--"];
}
