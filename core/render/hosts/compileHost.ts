import { splitCredentialEnv } from "../../config/secrets";
import { compileFlowSettings, compileOnlyEnv } from "../compileCache";
import { commandWords, engineReadyTimeoutSeconds } from "../../plan/argv";
import { bindRank } from "../../plan/bind";
import type { CompileAheadPlan, CompileKeyPlan, Deployment, HostPlacement } from "../../plan/types";
import { PROBE_SCRIPT } from "../../probe";
import { renderScript } from "../../template";
import { renderHost, setupTimeouts, type HostRenderOptions, type RenderedHost, type SetupTimeouts } from "./bundle";
import { hostCacheLayout } from "./cacheLayout";
import { HOST_DEFAULTS } from "./defaults";
import { compileMarker, venvPath } from "./names";
import { hostPlaceholders } from "./rank";
import { HOST_SCRIPT_DIR } from "./scripts";
import { compileStepWaits, timeoutsOf, type StepTimeouts } from "./stepTimeouts";
import { renderEnvFile } from "./systemd";

/** One compile key's step on a host: the compile host's compile ahead, or an NPU host's pull. */
export interface RenderedCompileStep {
  key: string;
  roles: string[];
  script: string;
  /** Its Pulumi timeouts: a registry transfer, and the compile-only run of every rank as long as a first start (stepTimeouts.ts). */
  timeouts: StepTimeouts;
  /** The role's variables whose values carry URL credentials, in env-file syntax: on stdin after the registry password, never in the script. */
  credentialEnvText: string;
}

/** The compile host: preflight, the NPU hosts' install and weights steps (it is the seed), one step per compile key. */
export interface RenderedCompileHost {
  placement: HostPlacement;
  preflightScript: string;
  installScript: string;
  weightsScript: string;
  pipIndexes: RenderedHost["pipIndexes"];
  timeouts: SetupTimeouts;
  steps: RenderedCompileStep[];
}

/** One rank of the key's role as the compile step runs it: its transient unit, exact command line (the venv's vllm) and environment. */
export interface CompileRank {
  unit: string;
  command: readonly string[];
  /** The rank's environment with the compile-only variables, in env-file syntax. */
  envText: string;
}

export interface CompileStepInput {
  hostName: string;
  key: string;
  roles: readonly string[];
  /** HF_HOME and VLLM_CACHE_ROOT are under it: the same path as on the NPU hosts (the cache key may depend on it). */
  cacheRoot: string;
  serviceUser: string;
  /** The key's completion marker, which the NPU unit steps also read. */
  marker: string;
  /** false on an NPU host without a compile host: pull if the registry has the key, else leave it to the first start. */
  compileHere: boolean;
  /** Every rank of the key's first role, run together: a data-parallel group starts whole, as on the NPU host. */
  ranks: readonly CompileRank[];
  /** Where the compile-only servers answer, if they serve: on ports free at the time, in place of each rank's `--port`. */
  probeHost: string;
  timeoutSeconds: number;
  intervalSeconds: number;
  registry: { repository: string; username?: string } | null;
}

/** The step that makes one compile key's cache present: here already, pulled, or compiled off the NPUs (and pushed). stdin: the registry password line. */
export function compileStepScript(p: CompileStepInput): string {
  const what = p.compileHere ? "compile ahead" : "pull the compiled cache of";
  return renderScript(`${HOST_SCRIPT_DIR}/compile-key.sh`, `${what} key ${p.key} (${p.roles.join(", ")}) on ${p.hostName}`, {
    host_name: p.hostName,
    key: p.key,
    roles: p.roles,
    cache_root: p.cacheRoot,
    service_user: p.serviceUser,
    marker: p.marker,
    compile_here: p.compileHere ? "yes" : "no",
    // Bash has no lists of lists: every rank's words in one list, and how many are each rank's.
    units: p.ranks.map((r) => r.unit),
    command_words: p.ranks.flatMap((r) => r.command),
    command_lengths: p.ranks.map((r) => String(r.command.length)),
    env_texts: p.ranks.map((r) => r.envText),
    probe_host: p.probeHost,
    probe_py: PROBE_SCRIPT,
    timeout_s: p.timeoutSeconds,
    interval_s: p.intervalSeconds,
    ...compileFlowSettings(p.registry),
  });
}

/**
 * One key's step on `placement`: with `compileHere`, every rank of the key's first role runs in
 * compile-only mode with its exact command line and environment, at the NPU hosts' paths, together:
 * the ranks of a data-parallel group (decode's four) start as one group, as on their NPU host and in
 * the Kubernetes compile Job, and each rank's start must find the cache it looks up.
 */
export function renderCompileStep(
  deployment: Deployment,
  placement: HostPlacement,
  id: string,
  key: CompileKeyPlan,
  registry: CompileAheadPlan["registry"],
  compileHere: boolean,
  options: HostRenderOptions = {},
): RenderedCompileStep {
  const { settings, plan } = deployment;
  const cache = hostCacheLayout(settings);
  const role = plan.roles.find((r) => r.role === key.roles[0])!;
  const venv = venvPath(settings.installRoot, id, plan.packages);
  // Loopback only: if compile-only serves at all, nobody else should reach it (--host is not keyed).
  const listen = options.compileListenAddress ?? "127.0.0.1";
  const bound = role.ranks.map((planned) => bindRank(planned, hostPlaceholders(deployment, placement.host), "hosts"));
  // A role's credentials come from its extraEnv: the same for every rank.
  const credentials = renderEnvFile(splitCredentialEnv(bound[0]!.env).credentials);
  const ranks = bound.map((rank, i): CompileRank => {
    const command = commandWords(rank.argv, rank.flags);
    const flags = [...rank.flags.filter((f) => f.name !== "--host"), { name: "--host", values: [listen] }];
    if (renderEnvFile(splitCredentialEnv(rank.env).credentials) !== credentials) throw new Error(`${role.role}'s ranks differ in their credentials`);
    return {
      unit: `rbln-serving-${id}.compile-${key.key}-${role.ranks[i]!.rank}.service`,
      command: [`${venv}/bin/${command[0]}`, ...command.slice(1), ...flags.flatMap((f) => [f.name, ...f.values])],
      envText: renderEnvFile({
        ...splitCredentialEnv(rank.env).plain,
        HF_HOME: `${cache.root}/huggingface`,
        VLLM_CACHE_ROOT: `${cache.root}/vllm`,
        RBLN_OFFLOAD_DIR: `${settings.cacheRoot}/offload`,
        ...compileOnlyEnv(key.targetSoc),
      }),
    };
  });
  const timeoutSeconds = engineReadyTimeoutSeconds(role.ranks[0]!.env);
  const intervalSeconds = options.readinessIntervalSeconds ?? HOST_DEFAULTS.readinessIntervalSeconds;
  return {
    key: key.key,
    roles: key.roles,
    credentialEnvText: credentials,
    timeouts: timeoutsOf(compileStepWaits(placement.host, { compileHere, registry: registry !== null, timeoutSeconds, intervalSeconds, ranks: ranks.length })),
    script: compileStepScript({
      hostName: placement.host.name,
      key: key.key,
      roles: key.roles,
      cacheRoot: cache.root,
      serviceUser: HOST_DEFAULTS.serviceUser,
      marker: compileMarker(cache.root, key.key),
      compileHere,
      ranks,
      probeHost: listen,
      timeoutSeconds,
      intervalSeconds,
      registry,
    }),
  };
}

/** The compile host's steps (compile.host): it installs the pinned packages and downloads the weights as an NPU host would, then compiles every key. */
export function renderCompileHost(deployment: Deployment, id: string, options: HostRenderOptions = {}): RenderedCompileHost {
  const { settings, compile: ahead } = deployment;
  const host = settings.compile.host!;
  const proxy = host.proxy ?? settings.sshProxy;
  const placement: HostPlacement = { replica: -1, node: 0, host: { ...host, ...(proxy ? { proxy } : {}) } };
  const bundle = renderHost(deployment, placement, id, options);
  return {
    placement,
    preflightScript: renderScript(`${HOST_SCRIPT_DIR}/compile-preflight.sh`, `preflight checks on the compile host ${host.name}; reads only, changes nothing`, {
      host_name: host.name,
      cache_root: hostCacheLayout(settings).root,
      min_free_gb: settings.minFreeDiskGb + HOST_DEFAULTS.compile.cacheRoomGib,
      python_versions: HOST_DEFAULTS.pythonVersions,
      min_glibc: HOST_DEFAULTS.minGlibc,
      needs_skopeo: ahead.registry ? "yes" : "no",
      min_memory_gb: HOST_DEFAULTS.compile.minMemoryGib,
    }),
    installScript: bundle.installScript,
    weightsScript: bundle.weightsScript,
    pipIndexes: bundle.pipIndexes,
    timeouts: setupTimeouts(placement.host, hostCacheLayout(settings)),
    steps: ahead.keys.map((key) => renderCompileStep(deployment, placement, id, key, ahead.registry, true, options)),
  };
}
