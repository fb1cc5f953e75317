import { httpUrl, listeningAddress } from "../../address";
import { commandWords, engineReadyTimeoutSeconds } from "../../plan/argv";
import { bindRank } from "../../plan/bind";
import { isDataParallelGroup } from "../../plan/dataParallel";
import type { Host } from "../../config/schema";
import type { Deployment, FrontDoorEndpoint, HostPlacement, RankPlan, RolePlan } from "../../plan/types";
import { renderTemplate } from "../../template";
import { compileLockWords, type HostCacheLayout } from "./cacheLayout";
import { HOST_DEFAULTS } from "./defaults";
import { compileMarker, envPath as envPathOf, groupRestartUnitName, legacyEnvPath, legacyUnitName, rolloutStateDir, unitName } from "./names";
import { unitApplyScript, unitRemoveScript, type FrontDoorAccess, type ServingWait } from "./scripts";
import { execStartLine, quoteExecWord, renderEnvFile } from "./systemd";

export interface RenderedRank {
  role: string;
  rank: number;
  unitName: string;
  unitText: string;
  envPath: string;
  /** The non-secret environment; secrets are appended on the host from the command's stdin. */
  envText: string;
  port: number;
  url: string;
  applyScript: string;
  removeScript: string;
  /** Behind the front door: its step reads the front door key on stdin, before the secret variables. */
  behindFrontDoor: boolean;
}

/** How a host's units start, restart and wait: the defaults, or a test's shorter ones. */
export interface UnitTimings {
  restartSeconds: number;
  startLimitBurst: number;
  startLimitIntervalSeconds: number;
  readinessIntervalSeconds: number;
  /** Where the NPU device nodes appear: `/dev` on a host. */
  devRoot: string;
  /** A data-parallel group's restart: how long its peers get after SIGTERM before SIGKILL. */
  groupStopGraceSeconds: number;
}

/** What every rank of a host shares. */
export interface HostContext {
  deployment: Deployment;
  placement: HostPlacement;
  /** The deployment id (`deploymentId`): it names the units and files. */
  id: string;
  venv: string;
  cache: HostCacheLayout;
  /** The address the ranks answer on from the host itself. */
  probeHost: string;
  timings: UnitTimings;
}

/** How a host's step reaches the front door for its endpoints that `which` picks; null when it has none behind one. */
export function frontDoorAccess(deployment: Deployment, host: Host, which: (endpoint: FrontDoorEndpoint) => boolean): FrontDoorAccess | null {
  const frontDoor = deployment.frontDoor;
  const endpoints = frontDoor?.endpoints.filter((e) => e.host === host.name && which(e)).map((e) => e.name) ?? [];
  if (!frontDoor || endpoints.length === 0) return null;
  return {
    address: frontDoor.host.address,
    port: frontDoor.host.port,
    hostKey: frontDoor.host.hostKey ?? "",
    bind: host.address,
    endpoints,
    renewSeconds: HOST_DEFAULTS.frontDoor.drainRenewSeconds,
  };
}

/** How long systemd gives a stopping rank: vLLM's shutdown timeout (its in-flight requests finish), then the engine processes end. */
export function stopTimeoutSeconds(deployment: Deployment): number {
  return deployment.shutdownTimeoutSeconds + HOST_DEFAULTS.unit.stopMarginSeconds;
}

/** The longest a switch of units can take: a unit stopped (its drain included) and a unit started, device wait included. */
export function switchSeconds(deployment: Deployment): number {
  return 2 * stopTimeoutSeconds(deployment) + HOST_DEFAULTS.unit.deviceWaitSeconds + 60;
}

/** How long a rank may take to serve: the engine's ready timeout; with a shared cache a first-wave rank may wait for another host's compile, then load. */
export function readyTimeoutSeconds(cache: HostCacheLayout, env: Readonly<Record<string, string>>): number {
  return engineReadyTimeoutSeconds(env) * (cache.leaseLock ? 2 : 1);
}

export function servingWait(context: HostContext, timeoutSeconds: number): ServingWait {
  return {
    probeHost: context.probeHost,
    timeoutSeconds,
    intervalSeconds: context.timings.readinessIntervalSeconds,
    startLimitBurst: context.timings.startLimitBurst,
  };
}

/** A rank's systemd unit: its command line (under the compile lock with a shared cache), environment file, device wait and restart bounds. */
function unitText(context: HostContext, role: RolePlan, rank: RankPlan, envPath: string, execLines: readonly (readonly string[])[]): string {
  const grouped = isDataParallelGroup(role);
  const { settings, plan } = context.deployment;
  const { unit } = HOST_DEFAULTS;
  const deviceNodes = rank.devices.map((i) => `${context.timings.devRoot}/rbln${i}`);
  const waitForDevices = [
    "/usr/bin/timeout",
    String(unit.deviceWaitSeconds),
    "/bin/sh",
    "-c",
    `until ${deviceNodes.map((d) => `[ -e ${d} ]`).join(" && ")}; do sleep 2; done`,
  ];
  return renderTemplate("core/render/hosts/templates/rank.service", {
    managed_marker: HOST_DEFAULTS.managedMarker,
    // `%` would be a unit specifier.
    description: `rbln-serving ${plan.model} ${role.role} rank ${rank.rank}`.replace(/%/g, "%%"),
    requires_mounts_for: settings.cache.shared ?? null,
    start_limit_interval_s: context.timings.startLimitIntervalSeconds,
    start_limit_burst: context.timings.startLimitBurst,
    service_user: HOST_DEFAULTS.serviceUser,
    working_directory: settings.cacheRoot,
    env_path: envPath,
    wait_for_devices: waitForDevices.map(quoteExecWord).join(" "),
    exec_start: execStartLine(execLines),
    // A rank of a data-parallel group restarts only with its group.
    on_failure: grouped ? groupRestartUnitName(context.id, role.role) : null,
    restart: grouped ? "no" : "on-failure",
    restart_s: context.timings.restartSeconds,
    start_timeout_s: unit.startTimeoutSeconds,
    stop_timeout_s: stopTimeoutSeconds(context.deployment),
    limit_nofile: unit.limitNofile,
  });
}

/** One rank on its host: the unit, the env file, and the steps that apply and remove them. */
export function renderRank(context: HostContext, role: RolePlan, rank: RankPlan): RenderedRank {
  const { settings } = context.deployment;
  const { host } = context.placement;
  // The KV-events endpoint of the recipe's router (<EPP_HOST>) is the front door's host.
  const bound = bindRank(
    rank,
    { POD_IP: host.address, ...(context.deployment.frontDoor ? { EPP_HOST: context.deployment.frontDoor.host.address } : {}) },
    "hosts",
  );
  const name = unitName(context.id, role.role, rank.rank);
  const envPath = envPathOf(settings.installRoot, context.id, role.role, rank.rank);
  const command = commandWords(bound.argv, bound.flags);
  const flags = host.listenAddress ? [...bound.flags, { name: "--host", values: [host.listenAddress] }] : bound.flags;
  const port = rank.ports[0]!;
  const compileLock = compileLockWords(context.cache, role.compileKey, context.probeHost, port);
  const execLines = [
    ...(compileLock.length > 0 ? [compileLock] : []),
    [`${context.venv}/bin/${command[0]}`, ...command.slice(1)],
    ...flags.map((f) => [f.name, ...f.values]),
  ];
  const text = unitText(context, role, rank, envPath, execLines);
  const envText = renderEnvFile({
    ...bound.env,
    HF_HOME: `${context.cache.root}/huggingface`,
    VLLM_CACHE_ROOT: `${context.cache.root}/vllm`,
    RBLN_OFFLOAD_DIR: `${settings.cacheRoot}/offload`,
  });
  const stateDir = rolloutStateDir(settings.installRoot);
  const frontDoor = frontDoorAccess(context.deployment, host, (e) => e.role === role.role && e.rank === rank.rank);
  return {
    role: role.role,
    rank: rank.rank,
    unitName: name,
    unitText: text,
    envPath,
    envText,
    port,
    // Published where the rank listens: its SSH address may be another interface.
    url: httpUrl(listeningAddress(host), port),
    applyScript: unitApplyScript({
      hostName: host.name,
      unitName: name,
      unitText: text,
      envPath,
      envText,
      stateDir,
      // Where a start compiles into: the shared folder with cache.shared.
      cacheRoot: context.cache.root,
      minFreeDiskGbToRestart: settings.minFreeDiskGbToRestart,
      legacy: { unitName: legacyUnitName(role.role, rank.rank), envPath: legacyEnvPath(settings.installRoot, role.role, rank.rank) },
      hostLockWaitSeconds: switchSeconds(context.deployment),
      rank: { unitName: name, label: `${role.role} rank ${rank.rank}`, port },
      wait: servingWait(context, readyTimeoutSeconds(context.cache, bound.env)),
      frontDoor,
      compileMarker: compileMarker(context.cache.root, role.compileKey),
    }),
    removeScript: unitRemoveScript({ hostName: host.name, unitName: name, envPath, stateDir }),
    behindFrontDoor: frontDoor !== null,
  };
}
