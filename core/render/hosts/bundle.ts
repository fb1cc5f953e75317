import type { Deployment, HostPlacement } from "../../plan/deployment";
import { commandWords, engineReadyTimeoutSeconds } from "../../plan/argv";
import { bindRank } from "../../plan/bind";
import { pipIndexUrls } from "../../plan/pipIndexes";
import type { PackagePlan } from "../../plan/types";
import { envFileLine, execStartLine, quoteExecWord, renderEnvFile } from "./systemd";
import { compileLockWords, hostCacheLayout, weightsLockName } from "../../cache/hostCache";
import { envPath as envPathOf, legacyEnvPath, legacyUnitName, unitName, venvsDir } from "./names";
import { installScript, preflightScript, readinessScript, unitApplyScript, unitRemoveScript, weightsScript } from "./scripts";

export const SERVICE_USER = "rbln-serving";
/** The Hugging Face downloader the weights step installs into its own venv, apart from the serving stack. */
export const DOWNLOADER_REQUIREMENT = "huggingface_hub==0.35.3";

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
}

/** How long a starting unit waits for its NPU device nodes (the driver loads late after a reboot). */
const DEVICE_WAIT_SECONDS = 300;
const STOP_TIMEOUT_SECONDS = 120;
/** How long a unit step waits for another deploy's switch on the host: a unit stopped and a unit started, device wait included. */
const HOST_LOCK_WAIT_SECONDS = 2 * STOP_TIMEOUT_SECONDS + DEVICE_WAIT_SECONDS + 60;

/** Crash-loop bounds: 3 starts in 30 minutes. A compile takes hours, so a rank that crashes after one restarts; one that crashes at once is failed within minutes. */
const RESTART_DEFAULTS = { restartSeconds: 30, startLimitBurst: 3, startLimitIntervalSeconds: 1800 };

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
}

export interface RenderedHost {
  placement: HostPlacement;
  venv: string;
  preflightScript: string;
  installScript: string;
  weightsScript: string;
  /** Polls every rank of the host: for operators (`render`); each unit step polls its own rank. */
  readinessScript: string;
  /** How long a unit step waits for its rank: the engine's ready timeout from the recipe. */
  readyTimeoutSeconds: number;
  ranks: RenderedRank[];
  /** Index settings for the pip.conf the install and weights steps read from stdin. */
  pipIndexes: PipIndexes;
}

export interface PipIndexes {
  indexUrl: string | null;
  extraIndexUrls: string[];
  /** Hosts that receive the username and password. */
  credentialHosts: string[];
  username: string | null;
  retries: number;
  timeoutSeconds: number;
}

/** The venv directory carries the pinned versions, so a version change is a new venv beside the old, in the deployment's own folder. */
export function venvPath(installRoot: string, id: string, packages: readonly PackagePlan[]): string {
  return `${venvsDir(installRoot, id)}/${packages.map((p) => `${p.name}-${p.version}`).join("_")}`;
}

/** A model's completion marker; it holds the commit that was downloaded. */
export function weightsMarker(cacheRoot: string, model: string): string {
  return `${cacheRoot}/huggingface/rbln-serving-complete/${model.replace(/\//g, "--")}`;
}

/** Where huggingface_hub keeps a model under `$HF_HOME/hub`. */
export function modelCacheDir(model: string): string {
  return `models--${model.replace(/\//g, "--")}`;
}

/** Written once a host holds the compiled cache of these compile keys, copied from a peer. */
export function compileMarker(cacheRoot: string, keys: string): string {
  return `${cacheRoot}/vllm/rbln-serving-complete/compile-${keys}`;
}

/** The pip.conf for a host: index URLs, with the credentials only on the hosts that take them. */
export function renderPipConfig(indexes: PipIndexes, password: string | null): string {
  const withAuth = (url: string) => {
    if (!indexes.username || password === null || password === "") return url;
    const parsed = new URL(url);
    if (!indexes.credentialHosts.includes(parsed.host)) return url;
    parsed.username = encodeURIComponent(indexes.username);
    parsed.password = encodeURIComponent(password);
    return parsed.toString();
  };
  const lines = ["[global]"];
  if (indexes.indexUrl) lines.push(`index-url = ${withAuth(indexes.indexUrl)}`);
  if (indexes.extraIndexUrls.length > 0) lines.push("extra-index-url =", ...indexes.extraIndexUrls.map((u) => `    ${withAuth(u)}`));
  lines.push(`retries = ${indexes.retries}`, `timeout = ${indexes.timeoutSeconds}`);
  return `${lines.join("\n")}\n`;
}

/** Secret variables in env-file syntax, appended to each rank's EnvironmentFile on the host. */
export function renderSecretEnv(secrets: Readonly<Record<string, string | undefined>>): string {
  return Object.entries(secrets)
    .filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== "")
    .map(([name, value]) => `${envFileLine(name, value)}\n`)
    .join("");
}

function describe(text: string): string {
  return text.replace(/%/g, "%%");
}

/** A host's scripts and units; `id` names the deployment on the host (`deploymentId`), so deployments sharing a host never touch each other's units. */
export function renderHost(deployment: Deployment, placement: HostPlacement, id: string, options: HostRenderOptions = {}): RenderedHost {
  const { settings, plan } = deployment;
  const { host } = placement;
  const node = plan.nodes[placement.node]!;
  const venv = venvPath(settings.installRoot, id, plan.packages);
  // The served model and its draft models: units run offline (HF_HUB_OFFLINE=1) and fetch nothing.
  const models = plan.models.map((m) => m.id);
  const cache = hostCacheLayout(settings);
  const markers = models.map((m) => weightsMarker(cache.root, m));
  const shared = { sharedRoot: settings.cache.shared ?? "", leaseLockPath: cache.leaseLock?.path ?? "", leaseLockText: cache.leaseLock?.text ?? "" };
  const intervalSeconds = options.readinessIntervalSeconds ?? 30;
  const restart = { ...RESTART_DEFAULTS, ...options };
  const stateDir = `${settings.installRoot}/rollout`;
  const probeHost = host.listenAddress && !["0.0.0.0", "::"].includes(host.listenAddress) ? host.listenAddress : "127.0.0.1";
  // With a shared cache a rank of the first wave may wait for another host's compile, then load.
  const readyTimeoutOf = (env: Readonly<Record<string, string>>) => engineReadyTimeoutSeconds(env) * (cache.leaseLock ? 2 : 1);
  const waitFor = (timeoutSeconds: number) => ({ probeHost, timeoutSeconds, intervalSeconds, startLimitBurst: restart.startLimitBurst });
  const cacheEnv = {
    HF_HOME: `${cache.root}/huggingface`,
    VLLM_CACHE_ROOT: `${cache.root}/vllm`,
    RBLN_OFFLOAD_DIR: `${settings.cacheRoot}/offload`,
  };

  const ranks: RenderedRank[] = plan.roles
    .filter((role) => role.node === placement.node)
    .flatMap((role) =>
      role.ranks.map((rank) => {
        const bound = bindRank(rank, { POD_IP: host.address }, "hosts");
        const name = unitName(id, role.role, rank.rank);
        const envPath = envPathOf(settings.installRoot, id, role.role, rank.rank);
        const command = commandWords(bound.argv, bound.flags);
        const flags = host.listenAddress ? [...bound.flags, { name: "--host", values: [host.listenAddress] }] : bound.flags;
        const port = rank.ports[0]!;
        const compileLock = compileLockWords(cache, role.compileKey, probeHost, port);
        const execLines = [...(compileLock.length > 0 ? [compileLock] : []), [`${venv}/bin/${command[0]}`, ...command.slice(1)], ...flags.map((f) => [f.name, ...f.values])];
        const deviceNodes = rank.devices.map((i) => `${options.devRoot ?? "/dev"}/rbln${i}`);
        const waitForDevices = ["/usr/bin/timeout", String(DEVICE_WAIT_SECONDS), "/bin/sh", "-c", `until ${deviceNodes.map((d) => `[ -e ${d} ]`).join(" && ")}; do sleep 2; done`];
        const timeout = readyTimeoutOf(bound.env);
        const unitText = [
          "# Managed by rbln-serving (Pulumi); local edits are overwritten.",
          "[Unit]",
          `Description=${describe(`rbln-serving ${plan.model} ${role.role} rank ${rank.rank}`)}`,
          "After=network-online.target",
          "Wants=network-online.target",
          // After a reboot the shared cache is an NFS mount that may come up late.
          ...(settings.cache.shared !== undefined ? [`RequiresMountsFor=${settings.cache.shared}`] : []),
          // A crash loop ends in `failed`, which the unit step sees and rolls back from.
          `StartLimitIntervalSec=${restart.startLimitIntervalSeconds}s`,
          `StartLimitBurst=${restart.startLimitBurst}`,
          "",
          "[Service]",
          "Type=exec",
          `User=${SERVICE_USER}`,
          `Group=${SERVICE_USER}`,
          `WorkingDirectory=${settings.cacheRoot}`,
          `EnvironmentFile=${envPath}`,
          // After a reboot the unit may start before the RBLN driver has created the rank's NPUs.
          `ExecStartPre=${waitForDevices.map(quoteExecWord).join(" ")}`,
          execStartLine(execLines),
          "Restart=on-failure",
          `RestartSec=${restart.restartSeconds}s`,
          // With Type=exec the start timeout bounds only ExecStartPre and the exec, not vLLM's
          // readiness (vLLM does not notify systemd; the unit step polls the rank instead): enough
          // for the device wait, which systemd's 90 s default would cut short.
          `TimeoutStartSec=${DEVICE_WAIT_SECONDS + 60}s`,
          `TimeoutStopSec=${STOP_TIMEOUT_SECONDS}s`,
          // Data-parallel ranks fork engine processes: SIGTERM the main process, then the group.
          "KillMode=mixed",
          "LimitNOFILE=1048576",
          "LimitMEMLOCK=infinity",
          "",
          "[Install]",
          "WantedBy=multi-user.target",
          "",
        ].join("\n");
        const envText = renderEnvFile({ ...bound.env, ...cacheEnv });
        return {
          role: role.role,
          rank: rank.rank,
          unitName: name,
          unitText,
          envPath,
          envText,
          port,
          url: `http://${host.address.includes(":") ? `[${host.address}]` : host.address}:${port}`,
          applyScript: unitApplyScript({
            hostName: host.name,
            unitName: name,
            unitText,
            envPath,
            envText,
            stateDir,
            // Where a start compiles into: the shared folder with cache.shared.
            cacheRoot: cache.root,
            minFreeDiskGbToRestart: settings.minFreeDiskGbToRestart,
            legacy: { unitName: legacyUnitName(role.role, rank.rank), envPath: legacyEnvPath(settings.installRoot, role.role, rank.rank) },
            hostLockWaitSeconds: HOST_LOCK_WAIT_SECONDS,
            rank: { unitName: name, label: `${role.role} rank ${rank.rank}`, port },
            wait: waitFor(timeout),
          }),
          removeScript: unitRemoveScript({ hostName: host.name, unitName: name, envPath, stateDir }),
        };
      }),
    );

  const firstRank = plan.roles.find((r) => r.node === placement.node)!.ranks[0]!;
  const readyTimeout = readyTimeoutOf(firstRank.env);

  return {
    placement,
    venv,
    preflightScript: preflightScript({ hostName: host.name, npus: node.npus, cacheRoot: settings.cacheRoot, sharedRoot: shared.sharedRoot, minFreeDiskGb: settings.minFreeDiskGb, weightsMarkers: markers, serviceUser: SERVICE_USER, ownUnits: ranks.flatMap((r) => [r.unitName, legacyUnitName(r.role, r.rank)]) }),
    installScript: installScript({
      hostName: host.name,
      installRoot: settings.installRoot,
      cacheRoot: settings.cacheRoot,
      venv,
      requirements: plan.packages.map((p) => p.requirement),
      imports: plan.packages.map((p) => p.importName),
      serviceUser: SERVICE_USER,
      ...shared,
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
      ...shared,
      lockNames: plan.models.map((m) => weightsLockName(m.id, m.revision)),
    }),
    readinessScript: readinessScript({
      hostName: host.name,
      ranks: ranks.map((r) => ({ unitName: r.unitName, label: `${r.role} rank ${r.rank}`, port: r.port })),
      wait: waitFor(readyTimeout),
    }),
    readyTimeoutSeconds: readyTimeout,
    ranks,
    pipIndexes: {
      ...pipIndexUrls(settings.pip, plan),
      username: settings.pip.username ?? null,
      retries: options.pipRetries ?? 5,
      timeoutSeconds: options.pipTimeoutSeconds ?? 60,
    },
  };
}

