import { specificListenAddress } from "../../address";
import { weightsMarker } from "../../cache/markers";
import { isDataParallelGroup } from "../../plan/dataParallel";
import type { Deployment, HostPlacement } from "../../plan/types";
import type { Host } from "../../config/schema";
import { hostCacheLayout, weightsLockName, type HostCacheLayout } from "./cacheLayout";
import { HOST_DEFAULTS } from "./defaults";
import { legacyUnitName, venvPath, venvsDir } from "./names";
import { pipIndexes, type PipIndexes } from "./pip";
import { renderGroup, type RenderedGroup } from "./group";
import { renderRank, servingWait, type HostContext, type RenderedRank } from "./rank";
import { commandStepWaits, installStepWaits, readyTimeoutSeconds, timeoutsOf, weightsStepWaits, type StepTimeouts } from "./stepTimeouts";
import { installScript, preflightScript, readinessScript, weightsScript } from "./scripts";
import { envFileLine } from "./systemd";

export const SERVICE_USER = HOST_DEFAULTS.serviceUser;
/** The Hugging Face downloader the weights step installs into its own venv, apart from the serving stack. */
export const DOWNLOADER_REQUIREMENT = HOST_DEFAULTS.downloaderRequirement;

/** Host timings a test may shorten; the defaults (HOST_DEFAULTS) suit real servers. */
export interface HostRenderOptions {
  readinessIntervalSeconds?: number;
  pipRetries?: number;
  pipTimeoutSeconds?: number;
  /** systemd's RestartSec for a rank that exited. */
  restartSeconds?: number;
  /** A rank that starts this many times within the interval is failed for good (a crash loop). */
  startLimitBurst?: number;
  startLimitIntervalSeconds?: number;
  /** Where the NPU device nodes appear: `/dev` on a host. */
  devRoot?: string;
  /** A data-parallel group's restart: seconds its peers get after SIGTERM before SIGKILL. */
  groupStopGraceSeconds?: number;
  /** The front door's container runtime: router.runtime's binary, or a test's stand-in. */
  containerRuntime?: string;
  /** nft, which loads a decode host's sidecar guard: /usr/sbin/nft, or a test's stand-in where hosts share one network namespace. */
  firewall?: string;
  /** How often the install and weights steps print a progress line (docs/progress.md). */
  progressSeconds?: number;
  /** Where a compile-only run listens, if it serves: loopback on a compile host (tests on shared loopback give each host its own). */
  compileListenAddress?: string;
}

export interface RenderedHost {
  placement: HostPlacement;
  venv: string;
  preflightScript: string;
  installScript: string;
  weightsScript: string;
  /** Polls every rank of the host: for operators (`render`); each unit step polls its own rank. */
  readinessScript: string;
  ranks: RenderedRank[];
  /** The Pulumi timeouts of the host's setup steps, from what each waits for (stepTimeouts.ts); each rank carries its unit step's. */
  timeouts: SetupTimeouts;
  /** The host's data-parallel groups of several processes (core/plan/dataParallel.ts): each restarts as one. */
  groups: RenderedGroup[];
  /** Index settings for the pip.conf the install and weights steps read from stdin. */
  pipIndexes: PipIndexes;
}

/** The timeouts of a host's preflight, install and weights steps. */
export interface SetupTimeouts {
  preflight: StepTimeouts;
  install: StepTimeouts;
  weights: StepTimeouts;
}

/** The setup steps' timeouts on `host` (an NPU host or the compile host, which run the same install and weights). */
export function setupTimeouts(host: Host, cache: HostCacheLayout): SetupTimeouts {
  return {
    preflight: timeoutsOf(commandStepWaits(host)),
    install: timeoutsOf(installStepWaits(host)),
    weights: timeoutsOf(weightsStepWaits(host, cache)),
  };
}

/** Secret variables in env-file syntax, appended to each rank's EnvironmentFile on the host. */
export function renderSecretEnv(secrets: Readonly<Record<string, string | undefined>>): string {
  return Object.entries(secrets)
    .filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== "")
    .map(([name, value]) => `${envFileLine(name, value)}\n`)
    .join("");
}

/** A host's scripts and units; `id` names the deployment on the host (`deploymentId`), so deployments sharing a host never touch each other's units. */
export function renderHost(deployment: Deployment, placement: HostPlacement, id: string, options: HostRenderOptions = {}): RenderedHost {
  const { settings, plan } = deployment;
  const { host } = placement;
  const node = plan.nodes[placement.node]!;
  const cache = hostCacheLayout(settings);
  const context: HostContext = {
    deployment,
    placement,
    id,
    venv: venvPath(settings.installRoot, id, plan.packages),
    cache,
    probeHost: specificListenAddress(host) ?? "127.0.0.1",
    timings: {
      restartSeconds: options.restartSeconds ?? HOST_DEFAULTS.unit.restartSeconds,
      startLimitBurst: options.startLimitBurst ?? HOST_DEFAULTS.unit.startLimitBurst,
      startLimitIntervalSeconds: options.startLimitIntervalSeconds ?? HOST_DEFAULTS.unit.startLimitIntervalSeconds,
      readinessIntervalSeconds: options.readinessIntervalSeconds ?? HOST_DEFAULTS.readinessIntervalSeconds,
      devRoot: options.devRoot ?? "/dev",
      groupStopGraceSeconds: options.groupStopGraceSeconds ?? HOST_DEFAULTS.unit.groupStopGraceSeconds,
    },
  };
  // The served model and its draft models: units run offline (HF_HUB_OFFLINE=1) and fetch nothing.
  const models = plan.models.map((m) => m.id);
  const markers = models.map((m) => weightsMarker(`${cache.root}/huggingface`, m));
  const shared = {
    sharedRoot: settings.cache.shared ?? "",
    sharedLockRoot: cache.leaseLock?.lockRoot ?? "",
    leaseLockPath: cache.leaseLock?.path ?? "",
    leaseLockText: cache.leaseLock?.text ?? "",
  };
  const roles = plan.roles.filter((role) => role.node === placement.node);
  const ranks = roles.flatMap((role) => role.ranks.map((rank) => renderRank(context, role, rank)));
  const readyTimeout = readyTimeoutSeconds(cache, roles[0]!.ranks[0]!.env);

  return {
    placement,
    venv: context.venv,
    preflightScript: preflightScript({
      hostName: host.name,
      npus: node.npus,
      cacheRoot: settings.cacheRoot,
      sharedRoot: shared.sharedRoot,
      minFreeDiskGb: settings.minFreeDiskGb,
      weightsMarkers: markers,
      serviceUser: SERVICE_USER,
      ownUnits: ranks.flatMap((r) => [r.unitName, legacyUnitName(r.role, r.rank)]),
    }),
    installScript: installScript({
      hostName: host.name,
      installRoot: settings.installRoot,
      cacheRoot: settings.cacheRoot,
      venv: context.venv,
      requirements: plan.packages.map((p) => p.requirement),
      imports: plan.packages.map((p) => p.importName),
      serviceUser: SERVICE_USER,
      ...shared,
      progressSeconds: options.progressSeconds ?? HOST_DEFAULTS.progressIntervalSeconds,
    }),
    weightsScript: weightsScript({
      hostName: host.name,
      installRoot: settings.installRoot,
      cacheRoot: settings.cacheRoot,
      serviceUser: SERVICE_USER,
      models,
      revisions: plan.models.map((m) => m.revision ?? ""),
      markers,
      downloaderVenv: `${venvsDir(settings.installRoot, id)}/${DOWNLOADER_REQUIREMENT.replace("==", "-")}`,
      downloaderRequirement: DOWNLOADER_REQUIREMENT,
      progressSeconds: options.progressSeconds ?? HOST_DEFAULTS.progressIntervalSeconds,
      ...shared,
      lockNames: plan.models.map((m) => weightsLockName(m.id, m.revision)),
    }),
    readinessScript: readinessScript({
      hostName: host.name,
      ranks: ranks.map((r) => ({ unitName: r.unitName, label: `${r.role} rank ${r.rank}`, port: r.port, bundleDir: r.bundleDir })),
      wait: servingWait(context, readyTimeout),
    }),
    ranks,
    timeouts: setupTimeouts(host, cache),
    groups: roles.filter(isDataParallelGroup).map((role) => renderGroup(context, role)),
    pipIndexes: pipIndexes(deployment, { retries: options.pipRetries, timeoutSeconds: options.pipTimeoutSeconds }),
  };
}
