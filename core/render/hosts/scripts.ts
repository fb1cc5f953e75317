import { heredocDelimiter, renderScript as renderScriptFile, type ScriptValue } from "../../template";
import { PROBE_SCRIPT } from "../../probe";
import { HOST_DEFAULTS } from "./defaults";

/** Where the host scripts are, under the package root. */
export const HOST_SCRIPT_DIR = "core/render/hosts/scripts";

function renderScript(file: string, purpose: string, values: Readonly<Record<string, ScriptValue>>): string {
  return renderScriptFile(`${HOST_SCRIPT_DIR}/${file}`, purpose, values);
}

/**
 * The bash scripts that run on the NPU hosts over SSH, rendered from the files in `scripts/`.
 * Secrets never appear here: they arrive on the script's stdin.
 */

export interface PreflightInput {
  hostName: string;
  /** Where the driver's sysfs and device nodes are: `/sys` and `/dev` on a host. */
  sysRoot?: string;
  devRoot?: string;
  npus: number;
  cacheRoot: string;
  /** cache.shared: where the weights go instead of cacheRoot; none by default. */
  sharedRoot?: string;
  minFreeDiskGb: number;
  weightsMarkers: readonly string[];
  /** The units' user: it must be able to open the RSD group nodes. */
  serviceUser: string;
  /** This deployment's units on the host (and their names before deployment ids): their processes' NPU contexts are not another's. */
  ownUnits: readonly string[];
}

export function preflightScript(p: PreflightInput): string {
  return renderScript("preflight.sh", `preflight checks on ${p.hostName}; reads only, changes nothing`, {
    host_name: p.hostName,
    sys_root: p.sysRoot ?? "/sys",
    dev_root: p.devRoot ?? "/dev",
    npus_needed: p.npus,
    cache_root: p.cacheRoot,
    shared_root: p.sharedRoot ?? "",
    min_free_gb: p.minFreeDiskGb,
    weights_markers: p.weightsMarkers,
    python_versions: HOST_DEFAULTS.pythonVersions,
    min_glibc: HOST_DEFAULTS.minGlibc,
    service_user: p.serviceUser,
    own_units: p.ownUnits,
  });
}

/** The shared cache's folder, its leases' folder and the lease-lock script, written by install and weights (all "" without cache.shared). */
export interface SharedCacheInput {
  sharedRoot: string;
  sharedLockRoot: string;
  leaseLockPath: string;
  leaseLockText: string;
}

function sharedSettings(p: SharedCacheInput) {
  return { shared_root: p.sharedRoot, shared_lock_root: p.sharedLockRoot, lease_lock_path: p.leaseLockPath, lease_lock_text: p.leaseLockText };
}

/** How often a long step prints a progress line (progress.sh); tests shorten it. */
export interface ProgressInput {
  progressSeconds: number;
}

export interface InstallInput extends SharedCacheInput, ProgressInput {
  hostName: string;
  installRoot: string;
  cacheRoot: string;
  venv: string;
  requirements: readonly string[];
  imports: readonly string[];
  serviceUser: string;
}

/** The pinned install into a venv named after the versions, then an atomic switch of `current`. stdin: the pip.conf. */
export function installScript(p: InstallInput): string {
  return renderScript("install.sh", `install ${p.requirements.join(" ")} on ${p.hostName}`, {
    host_name: p.hostName,
    install_root: p.installRoot,
    cache_root: p.cacheRoot,
    venv: p.venv,
    requirements: p.requirements,
    imports: p.imports,
    service_user: p.serviceUser,
    setup_lock: HOST_DEFAULTS.locks.setup,
    ...sharedSettings(p),
    budget_s: HOST_DEFAULTS.steps.installSeconds,
    progress_s: p.progressSeconds,
  });
}

export interface WeightsInput extends SharedCacheInput, ProgressInput {
  hostName: string;
  installRoot: string;
  cacheRoot: string;
  serviceUser: string;
  /** Hugging Face repos to fetch. */
  models: readonly string[];
  /** The pinned commit of each model, "" where the hub's current commit is resolved and recorded. */
  revisions: readonly string[];
  markers: readonly string[];
  downloaderVenv: string;
  downloaderRequirement: string;
  /** With a shared cache, each model's download lease. */
  lockNames: readonly string[];
}

/** Downloads the models into HF_HOME once per host, or once for all with a shared cache. stdin: line 1 the HF token (may be empty), then a pip.conf. */
export function weightsScript(p: WeightsInput): string {
  return renderScript("weights.sh", `download ${p.models.join(", ")} into the weights cache on ${p.hostName}`, {
    host_name: p.hostName,
    install_root: p.installRoot,
    cache_root: p.cacheRoot,
    hf_home: `${p.sharedRoot || p.cacheRoot}/huggingface`,
    service_user: p.serviceUser,
    setup_lock: HOST_DEFAULTS.locks.setup,
    models: p.models,
    revisions: p.revisions,
    markers: p.markers,
    downloader_venv: p.downloaderVenv,
    downloader_requirement: p.downloaderRequirement,
    ...sharedSettings(p),
    lock_names: p.lockNames,
    budget_s: HOST_DEFAULTS.steps.downloadSeconds,
    progress_s: p.progressSeconds,
  });
}

/** How a step waits for ranks: where it asks, how long, how often, and how many restarts mean a crash loop. */
export interface ServingWait {
  /** The address the ranks answer on from the host itself. */
  probeHost: string;
  timeoutSeconds: number;
  intervalSeconds: number;
  /** The unit's StartLimitBurst: this many automatic restarts end the wait as failed. */
  startLimitBurst: number;
}

export interface UnitApplyInput {
  hostName: string;
  unitDir?: string;
  unitName: string;
  unitText: string;
  envPath: string;
  envText: string;
  /** Keeps the previous unit and env file of each unit, for rolling back. */
  stateDir: string;
  /** Free disk under it (GiB) a (re)start needs: the compile cache grows there. */
  cacheRoot: string;
  minFreeDiskGbToRestart: number;
  /** The same rank's unit and env file as versions before deployment ids named them: the step takes their place. */
  legacy: { unitName: string; envPath: string };
  /** The host-wide lock deploys take turns at switching units under; tests give their own. */
  hostLock?: string;
  /** How long the step waits for that lock before it fails. */
  hostLockWaitSeconds: number;
  rank: ReadinessRank;
  wait: ServingWait;
  /** The front door this rank is behind, if any: its unit step takes the rank out before a restart. */
  frontDoor?: FrontDoorAccess | null;
  /** The marker of the rank's compile key: present when its compiled cache was placed ahead (copied, pulled, compiled off the NPUs), and then the rank must load it. */
  compileMarker: string;
  /**
   * This deployment's units on the host (`glob`) and those the stack runs there (`keep`): any other is
   * a stray (a removed role or rank) the step stops before its rank (re)starts (stray-units.sh).
   */
  hostUnits?: { glob: string; keep: string[] };
  /** The folder of the rank's model's mega-cache bundles (megaCacheModelDir), whose files tell a load from a compile. */
  cacheBundleDir: string;
}

/** How a host's steps reach the router host to take its endpoints out of the front door and back. */
export interface FrontDoorAccess {
  /** Each router host's SSH address, port and host key (empty with insecureSkipHostKeyCheck), in the stack's order: the order of the keys on stdin. */
  routers: { address: string; port: number; hostKey: string }[];
  /** This host's own address, which the router's grant accepts. */
  bind: string;
  /** The endpoints the step takes out: a rank's own, or every rank's of the host for its sidecar. */
  endpoints: string[];
  /** How often the step renews its drains' lease while it runs. */
  renewSeconds: number;
}

/** The settings a step that drains through the front door reads (front-door.sh): each router host's SSH login, in the stack's order. */
export function frontDoorSettings(access: FrontDoorAccess | null | undefined) {
  return {
    router_ssh_address: access?.routers.map((r) => r.address) ?? [],
    router_ssh_port: access?.routers.map((r) => String(r.port)) ?? [],
    router_ssh_host_key: access?.routers.map((r) => r.hostKey) ?? [],
    router_ssh_bind: access?.bind ?? "",
  };
}

function waitSettings(w: ServingWait) {
  return { probe_host: w.probeHost, timeout_s: w.timeoutSeconds, interval_s: w.intervalSeconds, start_limit_burst: w.startLimitBurst, probe_py: PROBE_SCRIPT };
}

/**
 * Writes a rank's env file and unit, restarts it only on change (or when it is not running), waits
 * until it serves, and rolls a change that does not serve back. stdin: the secret variables, in
 * env-file syntax.
 */
export function unitApplyScript(p: UnitApplyInput): string {
  const unitPath = `${p.unitDir ?? HOST_DEFAULTS.systemdUnitDir}/${p.unitName}`;
  const { probe_host, timeout_s, interval_s, start_limit_burst, probe_py } = waitSettings(p.wait);
  return renderScript("unit-apply.sh", `launch unit ${p.unitName} on ${p.hostName}, then wait until it serves`, {
    host_name: p.hostName,
    unit: p.unitName,
    label: p.rank.label,
    unit_path: unitPath,
    env_path: p.envPath,
    state_dir: p.stateDir,
    cache_root: p.cacheRoot,
    restart_free_gb: p.minFreeDiskGbToRestart,
    legacy_unit: p.legacy.unitName,
    legacy_env_path: p.legacy.envPath,
    managed_marker: HOST_DEFAULTS.managedMarker,
    host_lock: p.hostLock ?? HOST_DEFAULTS.locks.units,
    host_lock_wait_s: p.hostLockWaitSeconds,
    port: p.rank.port,
    probe_host,
    timeout_s,
    interval_s,
    start_limit_burst,
    probe_py,
    ...frontDoorSettings(p.frontDoor),
    front_door_endpoint: p.frontDoor?.endpoints.join(" ") ?? "",
    front_door_renew_s: p.frontDoor?.renewSeconds ?? HOST_DEFAULTS.frontDoor.drainRenewSeconds,
    compile_marker: p.compileMarker,
    stray_glob: p.hostUnits?.glob ?? "",
    host_units: p.hostUnits?.keep ?? [],
    cache_bundle_dir: p.cacheBundleDir,
    env_text: p.envText,
    unit_text: p.unitText,
  });
}

/** Stops, disables and removes a rank's unit, env file and rollback state; the caches stay. */
export function unitRemoveScript(p: { hostName: string; unitDir?: string; unitName: string; envPath: string; stateDir: string }): string {
  return renderScript("unit-remove.sh", `remove launch unit ${p.unitName} from ${p.hostName} (caches stay)`, {
    host_name: p.hostName,
    unit: p.unitName,
    unit_path: `${p.unitDir ?? HOST_DEFAULTS.systemdUnitDir}/${p.unitName}`,
    env_path: p.envPath,
    state_dir: p.stateDir,
  });
}

export interface ReadinessRank {
  unitName: string;
  label: string;
  port: number;
  /** Where vllm-rbln keeps the rank's model's compiled bundles: whether a start compiles or loads (its progress lines). */
  bundleDir: string;
}

/** Waits until every rank of a host serves, or names the one that failed; run as root (it reads each rank's API key from its process). */
export function readinessScript(p: { hostName: string; ranks: readonly ReadinessRank[]; wait: ServingWait }): string {
  return renderScript("readiness.sh", `wait until every rank on ${p.hostName} serves`, {
    host_name: p.hostName,
    units: p.ranks.map((r) => r.unitName),
    labels: p.ranks.map((r) => r.label),
    ports: p.ranks.map((r) => String(r.port)),
    bundle_dirs: p.ranks.map((r) => r.bundleDir),
    ...waitSettings(p.wait),
  });
}

/**
 * The command string a remote.Command runs: the script verbatim inside a quoted heredoc, handed to
 * bash with stdin left free for secrets. The login shell only sees the two wrapper lines, so the
 * script runs under bash whatever the user's shell is; `sudo -n` when the user is not root.
 */
export function remoteCommand(script: string, asRoot: boolean): string {
  const body = script.endsWith("\n") ? script : `${script}\n`;
  const delimiter = heredocDelimiter("RBLN_SERVING_SCRIPT", body);
  return `${asRoot ? "" : "sudo -n "}bash -c "$(cat <<'${delimiter}'\n${body}${delimiter}\n)" rbln-serving`;
}

/** One host's one-time read access to another's cache root: the grant and revoke steps run on the source. */
export interface CopyAccessInput {
  sourceName: string;
  destName: string;
  destAddress: string;
  cacheRoot: string;
  /** root's authorized_keys on the source. */
  authorizedKeys: string;
  /** Ends the grant's authorized_keys line, naming the deployment (its id) and the destination, so exactly it is removed; letters, digits, spaces, `.`, `_` and `-` only (the scripts refuse others). */
  tag: string;
  expiryHours: number;
  /** A hash of the copy script: a changed copy gets a new key, and its revoke runs again. */
  copyId: string;
}

export function copyAllowScript(p: CopyAccessInput): string {
  return renderScript(
    "copy-allow.sh",
    `let ${p.destName} read ${p.cacheRoot} on ${p.sourceName} once (read-only, from ${p.destAddress}); stdout: the one-time private key`,
    {
      host_name: p.sourceName,
      dest_name: p.destName,
      dest_address: p.destAddress,
      cache_root: p.cacheRoot,
      authorized_keys: p.authorizedKeys,
      tag: p.tag,
      expiry_hours: p.expiryHours,
      copy_id: p.copyId,
    },
  );
}

export function copyRevokeScript(p: CopyAccessInput): string {
  return renderScript("copy-revoke.sh", `remove ${p.destName}'s copy access from ${p.sourceName}`, {
    host_name: p.sourceName,
    dest_name: p.destName,
    authorized_keys: p.authorizedKeys,
    tag: p.tag,
    copy_id: p.copyId,
  });
}

export interface CopyInput extends ProgressInput {
  hostName: string;
  sourceName: string;
  sourceAddress: string;
  sourcePort: number;
  /** This host's own address, the one the source's grant accepts (`from=`). */
  bindAddress: string;
  /** The source's public host key line; null only with insecureSkipHostKeyCheck. */
  sourceHostKey: string | null;
  installRoot: string;
  cacheRoot: string;
  serviceUser: string;
  /** What is copied, in words; for a compile cache it names the compile keys, so a changed key copies again. */
  what: string;
  /** Directories under the cache root. */
  dirs: readonly string[];
  /** The source's completion marker of each directory, under its cache root ("" when the graph alone orders it). */
  sourceMarkers: readonly string[];
  /** This host's marker of each directory, written last. */
  markers: readonly string[];
}

/** Copies cache directories from a peer with rsync over SSH, checked. stdin: the one-time private key. */
export function copyScript(p: CopyInput): string {
  return renderScript("copy.sh", `copy ${p.what} from ${p.sourceName} to ${p.hostName}, checked`, {
    host_name: p.hostName,
    source_name: p.sourceName,
    source_address: p.sourceAddress,
    source_port: p.sourcePort,
    bind_address: p.bindAddress,
    source_host_key: p.sourceHostKey ?? "",
    install_root: p.installRoot,
    cache_root: p.cacheRoot,
    service_user: p.serviceUser,
    setup_lock: HOST_DEFAULTS.locks.setup,
    what: p.what,
    dirs: p.dirs,
    source_markers: p.sourceMarkers,
    markers: p.markers,
    budget_s: HOST_DEFAULTS.steps.copySeconds,
    progress_s: p.progressSeconds,
  });
}
