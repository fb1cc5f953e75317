import { httpUrl, listeningAddress } from "../../address";
import { commandWords } from "../../plan/argv";
import { bindRank } from "../../plan/bind";
import { isDataParallelGroup } from "../../plan/dataParallel";
import type { Host } from "../../config/schema";
import { splitCredentialEnv } from "../../config/secrets";
import type { Deployment, FrontDoorEndpoint, HostPlacement, RankPlan, RolePlan } from "../../plan/types";
import { renderTemplate } from "../../template";
import { megaCacheModelDir } from "../compileCache";
import { compileLockWords, type HostCacheLayout } from "./cacheLayout";
import { HOST_DEFAULTS } from "./defaults";
import {
  compileMarker,
  deploymentUnitGlob,
  envPath as envPathOf,
  groupRestartUnitName,
  legacyEnvPath,
  legacyUnitName,
  rolloutStateDir,
  sidecarUnitName,
  unitName,
} from "./names";
import { unitApplyScript, unitRemoveScript, type FrontDoorAccess, type ServingWait } from "./scripts";
import { readyTimeoutSeconds, stopTimeoutSeconds, switchSeconds, timeoutsOf, unitStepWaits, type StepTimeouts } from "./stepTimeouts";
import { execStartLine, quoteExecWord, renderEnvFile } from "./systemd";
import type { CommandParts } from "../shellCommand";

export interface RenderedRank {
  role: string;
  rank: number;
  unitName: string;
  unitText: string;
  envPath: string;
  /** The non-secret environment; secrets are appended on the host from the command's stdin. */
  envText: string;
  /** The variables whose values carry URL credentials (holdsUrlCredentials), in env-file syntax: on the step's stdin with the secrets, never in its script. */
  credentialEnvText: string;
  /** Their names, for `render`'s placeholders. */
  credentialEnvNames: string[];
  port: number;
  /** Where vllm-rbln keeps the model's compiled bundles: a start with one there loads, else it compiles (progress lines). */
  bundleDir: string;
  url: string;
  applyScript: string;
  removeScript: string;
  /** Behind the front door: its step reads the front door key on stdin, before the secret variables. */
  behindFrontDoor: boolean;
  /** Its step's Pulumi timeouts: the sum of what unit-apply.sh and unit-remove.sh wait for. */
  timeouts: StepTimeouts;
  /** What the unit runs, placeholders bound, as a shell command shows it (`plan`): the venv's vllm, its flags, its non-secret environment. */
  launch: CommandParts;
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
    routers: frontDoor.routers.map(({ host: router }) => ({ address: router.address, port: router.port, hostKey: router.hostKey ?? "" })),
    bind: host.address,
    endpoints,
    renewSeconds: HOST_DEFAULTS.frontDoor.drainRenewSeconds,
  };
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

/** The units the stack runs on the context's host: every rank's, a data-parallel group's restart unit, and its routing sidecar's. */
function hostUnits(context: HostContext): string[] {
  const { deployment, placement, id } = context;
  const roles = deployment.plan.roles.filter((r) => r.node === placement.node);
  const ranks = roles.flatMap((r) => r.ranks.map((k) => unitName(id, r.role, k.rank)));
  const groupRestarts = roles.filter(isDataParallelGroup).map((r) => groupRestartUnitName(id, r.role));
  const sidecar = deployment.frontDoor?.sidecars.some((s) => s.host === placement.host.name) ? [sidecarUnitName(id)] : [];
  return [...ranks, ...groupRestarts, ...sidecar];
}

/**
 * The values of the recipe's placeholders on a server of the hosts platform, for every step that runs
 * a rank's command line there (its unit, a compile or pull of its key): the server's own address for
 * `<POD_IP>`, and for the KV-events endpoint of the recipe's router (`<EPP_HOST>`) the front door:
 * its virtual address (the active EPP's host), else its first router host.
 */
export function hostPlaceholders(deployment: Deployment, server: Pick<Host, "address">): Record<string, string> {
  const door = deployment.frontDoor;
  return { POD_IP: server.address, ...(door ? { EPP_HOST: door.virtualAddress ?? door.routers[0]!.host.address } : {}) };
}

/** One rank on its host: the unit, the env file, and the steps that apply and remove them. */
export function renderRank(context: HostContext, role: RolePlan, rank: RankPlan): RenderedRank {
  const { settings } = context.deployment;
  const { host } = context.placement;
  const bound = bindRank(rank, hostPlaceholders(context.deployment, host), "hosts");
  const name = unitName(context.id, role.role, rank.rank);
  const envPath = envPathOf(settings.installRoot, context.id, role.role, rank.rank);
  const command = commandWords(bound.argv, bound.flags);
  // A variable whose value carries URL credentials goes on the step's stdin, never into what is shown (plan) or the script.
  const { plain, credentials } = splitCredentialEnv(bound.env);
  const launch: CommandParts = {
    command: [`${context.venv}/bin/${command[0]}`, ...command.slice(1)],
    flags: host.listenAddress ? [...bound.flags, { name: "--host", values: [host.listenAddress] }] : bound.flags,
    env: {
      ...plain,
      HF_HOME: `${context.cache.root}/huggingface`,
      VLLM_CACHE_ROOT: `${context.cache.root}/vllm`,
      RBLN_OFFLOAD_DIR: `${settings.cacheRoot}/offload`,
    },
  };
  const port = rank.ports[0]!;
  const compileLock = compileLockWords(context.cache, role.compileKey, context.probeHost, port);
  const execLines = [...(compileLock.length > 0 ? [compileLock] : []), [...launch.command], ...launch.flags.map((f) => [f.name, ...f.values])];
  const text = unitText(context, role, rank, envPath, execLines);
  const envText = renderEnvFile(launch.env);
  const stateDir = rolloutStateDir(settings.installRoot);
  const frontDoor = frontDoorAccess(context.deployment, host, (e) => e.role === role.role && e.rank === rank.rank);
  const readySeconds = readyTimeoutSeconds(context.cache, bound.env);
  const bundleDir = megaCacheModelDir(`${context.cache.root}/vllm/rbln`, command[2]!);
  return {
    role: role.role,
    rank: rank.rank,
    unitName: name,
    unitText: text,
    envPath,
    envText,
    credentialEnvText: renderEnvFile(credentials),
    credentialEnvNames: Object.keys(credentials),
    launch,
    port,
    bundleDir,
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
      rank: { unitName: name, label: `${role.role} rank ${rank.rank}`, port, bundleDir },
      wait: servingWait(context, readySeconds),
      frontDoor,
      compileMarker: compileMarker(context.cache.root, role.compileKey),
      hostUnits: { glob: deploymentUnitGlob(context.id), keep: hostUnits(context) },
      cacheBundleDir: bundleDir,
    }),
    removeScript: unitRemoveScript({ hostName: host.name, unitName: name, envPath, stateDir }),
    behindFrontDoor: frontDoor !== null,
    timeouts: timeoutsOf(
      unitStepWaits(context.deployment, context.cache, {
        host,
        readySeconds,
        intervalSeconds: context.timings.readinessIntervalSeconds,
        endpoints: frontDoor?.endpoints.length ?? 0,
      }),
    ),
  };
}
