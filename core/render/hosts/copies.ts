import { createHash } from "node:crypto";
import type { Deployment, HostPlacement } from "../../plan/deployment";
import { modelCacheDir, weightsMarker } from "../../cache/markers";
import { HOST_DEFAULTS } from "./defaults";
import { compileMarker } from "./names";
import { copyAllowScript, copyRevokeScript, copyScript, type CopyAccessInput } from "./scripts";
import { commandStepWaits, copyStepWaits, timeoutsOf, type StepTimeouts } from "./stepTimeouts";

/**
 * Download once, compile once: the seed host (the first of the first rollout wave) downloads the
 * models from the hub and every other host copies them from it; a host of a later wave copies the
 * compiled cache of its roles' compile keys from a host of the nearest earlier wave that compiled
 * (or copied) them, and a host of the wave where a key first appears from the first host of that
 * wave that runs it. Each copy is three steps: a one-time grant on the source, the copy on the
 * destination (stdin: the grant's private key), then the revoke on the source.
 */
export interface CopySource {
  kind: "weights" | "compile";
  source: HostPlacement;
  dest: HostPlacement;
  /** compile: the compile keys the source has for the destination's roles. */
  compileKeys: string[];
}

/** The compile keys a host's ranks run with. */
function compileKeysOf(deployment: Deployment, placement: HostPlacement): string[] {
  return [...new Set(deployment.plan.roles.filter((r) => r.node === placement.node).map((r) => r.compileKey))];
}

/**
 * The hosts that run the weights step: the seed alone (the compile host when there is one), or with
 * cache.shared every host, whose lease lock on the shared folder lets exactly one of them download.
 */
export function weightsHosts(deployment: Deployment, waves: readonly HostPlacement[][], compiler?: HostPlacement): HostPlacement[] {
  if (deployment.settings.cache.shared !== undefined) return [...(compiler ? [compiler] : []), ...waves.flat()];
  const seed = compiler ?? waves[0]?.[0];
  return seed ? [seed] : [];
}

/**
 * Who copies what from whom, given the rollout waves (core/rollout/hostWaves.ts); nothing with a
 * shared cache. A compile host (compile.host) comes before the first wave: it is the seed and has
 * every compile key, so the first wave copies from it and compiles nothing.
 */
export function copySources(deployment: Deployment, npuWaves: readonly HostPlacement[][], compiler?: HostPlacement): CopySource[] {
  const waves = compiler ? [[compiler], ...npuWaves] : npuWaves;
  const seed = waves[0]?.[0];
  if (!seed || deployment.settings.cache.shared !== undefined) return [];
  const allKeys = [...new Set(deployment.plan.roles.map((r) => r.compileKey))];
  const keysOf = (p: HostPlacement) => (p === compiler ? allKeys : compileKeysOf(deployment, p));
  const weights: CopySource[] = waves
    .flat()
    .filter((p) => p !== seed)
    .map((dest) => ({ kind: "weights", source: seed, dest, compileKeys: [] }));
  const compile: CopySource[] = [];
  waves.forEach((wave, k) => {
    wave.forEach((dest, position) => {
      if (dest === compiler) return;
      const bySource = new Map<HostPlacement, string[]>();
      for (const key of keysOf(dest)) {
        // The nearest earlier wave that has the key; spread the destinations over its hosts.
        const earlier = waves
          .slice(0, k)
          .reverse()
          .map((w) => w.filter((p) => keysOf(p).includes(key)))
          .find((w) => w.length > 0);
        // A key no earlier wave has is compiled by the first host of this wave that runs it; the
        // others copy from it, and keep serving their previous config while it compiles.
        const firstInWave = wave.slice(0, position).find((p) => keysOf(p).includes(key));
        const source = earlier ? earlier[position % earlier.length] : firstInWave;
        if (!source) continue;
        bySource.set(source, [...(bySource.get(source) ?? []), key]);
      }
      for (const [source, compileKeys] of bySource) compile.push({ kind: "compile", source, dest, compileKeys });
    });
  });
  return [...weights, ...compile];
}

/** Per compile key, the first NPU host that runs it: without a compile host, the one that compiles it (or pulls it from a registry) for the others. */
export function firstHostsOfKeys(deployment: Deployment, waves: readonly HostPlacement[][]): { key: string; placement: HostPlacement }[] {
  const keys = [...new Set(deployment.plan.roles.map((r) => r.compileKey))];
  return keys.flatMap((key) => {
    const placement = waves.flat().find((p) => compileKeysOf(deployment, p).includes(key));
    return placement ? [{ key, placement }] : [];
  });
}

export interface HostCopyOptions {
  /** The deployment's id on the hosts (`deploymentId`), which tags each grant's authorized_keys line: no raw stack or instance name reaches root's file. */
  deploymentId: string;
  /** root's authorized_keys on a source host. */
  authorizedKeysFile?: string;
  /** A grant left behind by a failed copy stops working after this many hours: longer than a copy may take (8 h). */
  grantExpiryHours?: number;
  /** How often the copy prints a progress line; tests shorten it. */
  progressSeconds?: number;
}

export interface RenderedCopy extends CopySource {
  allowScript: string;
  copyScript: string;
  revokeScript: string;
  /** The Pulumi timeouts of its three steps: the grant and revoke on the source, the copy here (stepTimeouts.ts). */
  timeouts: { allow: StepTimeouts; copy: StepTimeouts; revoke: StepTimeouts };
}

export function renderCopy(deployment: Deployment, copy: CopySource, options: HostCopyOptions): RenderedCopy {
  const { settings, plan } = deployment;
  const { source, dest } = copy;
  const { cacheRoot } = settings;
  const models = plan.models.map((m) => m.id);
  const what = copy.kind === "weights" ? `weights ${models.join(", ")}` : `compiled cache ${copy.compileKeys.join(", ")}`;
  const script = copyScript({
    hostName: dest.host.name,
    sourceName: source.host.name,
    sourceAddress: source.host.address,
    sourcePort: source.host.port,
    bindAddress: dest.host.address,
    sourceHostKey: source.host.hostKey ?? null,
    installRoot: settings.installRoot,
    cacheRoot,
    serviceUser: HOST_DEFAULTS.serviceUser,
    what,
    progressSeconds: options.progressSeconds ?? HOST_DEFAULTS.progressIntervalSeconds,
    ...(copy.kind === "weights"
      ? {
          dirs: models.map((m) => `huggingface/hub/${modelCacheDir(m)}`),
          sourceMarkers: models.map((m) => weightsMarker("huggingface", m)),
          markers: models.map((m) => weightsMarker(`${cacheRoot}/huggingface`, m)),
        }
      : {
          // RBLN's cache layout is its own: the whole directory, with a marker per key (a second
          // key's pass finds nothing left to transfer), which tells the unit step to expect a load.
          dirs: copy.compileKeys.map(() => "vllm/rbln"),
          sourceMarkers: copy.compileKeys.map(() => ""),
          markers: copy.compileKeys.map((key) => compileMarker(cacheRoot, key)),
        }),
  });
  const access: CopyAccessInput = {
    sourceName: source.host.name,
    destName: dest.host.name,
    destAddress: dest.host.address,
    cacheRoot,
    authorizedKeys: options.authorizedKeysFile ?? HOST_DEFAULTS.copy.authorizedKeys,
    tag: `rbln-serving-copy ${options.deploymentId} ${copy.kind}-${dest.host.name}`,
    expiryHours: options.grantExpiryHours ?? HOST_DEFAULTS.copy.grantExpiryHours,
    copyId: createHash("sha256").update(script).digest("hex").slice(0, 16),
  };
  const onSource = timeoutsOf(commandStepWaits(source.host));
  return {
    ...copy,
    copyScript: script,
    allowScript: copyAllowScript(access),
    revokeScript: copyRevokeScript(access),
    timeouts: { allow: onSource, copy: timeoutsOf(copyStepWaits(dest.host)), revoke: onSource },
  };
}
