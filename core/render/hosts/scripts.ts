import { quoteShellWord, shellComment } from "../../shell";

/**
 * Bash scripts that run on the NPU hosts over SSH. Each starts with its settings as shell
 * variables (quoted with quoteShellWord) so the body is fixed text; secrets never appear here,
 * they arrive on the script's stdin.
 */

const q = quoteShellWord;
const array = (values: readonly string[]) => `(${values.map(q).join(" ")})`;

function header(purpose: string, vars: Record<string, string | number | readonly string[]>): string {
  const lines = Object.entries(vars).map(([name, value]) => `${name}=${Array.isArray(value) ? array(value) : q(String(value))}`);
  return ["#!/usr/bin/env bash", shellComment(`rbln-serving: ${purpose}`), "set -euo pipefail", ...lines, ""].join("\n");
}

/** Python versions vllm-rbln 0.12 supports with the kv_connectors extra (lmcache stops at 3.13). */
export const PYTHON_VERSIONS = ["3.10", "3.11", "3.12", "3.13"];
/** The vLLM 0.30 CPU wheel that vllm-rbln 0.12 pulls in is built for glibc 2.39. */
export const MIN_GLIBC = "2.39";

export interface PreflightInput {
  hostName: string;
  /** Where the driver's sysfs and device nodes are: `/sys` and `/dev` on a host. */
  sysRoot?: string;
  devRoot?: string;
  npus: number;
  cacheRoot: string;
  minFreeDiskGb: number;
  weightsMarkers: readonly string[];
}

export function preflightScript(p: PreflightInput): string {
  return `${header(`preflight checks on ${p.hostName}; reads only, changes nothing`, {
    host_name: p.hostName,
    sys_root: p.sysRoot ?? "/sys",
    dev_root: p.devRoot ?? "/dev",
    npus_needed: p.npus,
    cache_root: p.cacheRoot,
    min_free_gb: p.minFreeDiskGb,
    weights_markers: p.weightsMarkers,
    python_versions: PYTHON_VERSIONS,
    min_glibc: MIN_GLIBC,
  })}
fail() {
  echo "preflight \${host_name}: $1" >&2
  exit 1
}

[ -d "$sys_root/module/rebellions" ] || fail "kernel module rebellions: not loaded (install the RBLN driver)"

devices=$(find "$dev_root" -maxdepth 1 -name 'rbln[0-9]*' | wc -l)
[ "$devices" -ge "$npus_needed" ] || fail "NPU devices: found $devices $dev_root/rbln*, need $npus_needed"

command -v rbln-smi >/dev/null || fail "rbln-smi: not found (it ships with the RBLN driver)"
smi_json=$(rbln-smi -j 2>/dev/null) || fail "rbln-smi: 'rbln-smi -j' failed"
seen=$(printf '%s' "$smi_json" | python3 -c 'import json, sys; print(len(json.load(sys.stdin).get("devices", [])))' 2>/dev/null) ||
  fail "rbln-smi: 'rbln-smi -j' printed no device list"
[ "$seen" -ge "$npus_needed" ] || fail "rbln-smi: sees $seen NPUs, need $npus_needed"

command -v python3 >/dev/null || fail "python: python3 not found"
python_version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
supported=no
for version in "\${python_versions[@]}"; do
  [ "$python_version" = "$version" ] && supported=yes
done
[ "$supported" = yes ] || fail "python: python3 is $python_version, need one of \${python_versions[*]}"
python3 -c 'import ensurepip, venv' 2>/dev/null || fail "python: the venv module is missing (apt-get install python3-venv)"

glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
oldest=$(printf '%s\\n%s\\n' "$min_glibc" "$glibc" | sort -V | head -n 1)
[ "$oldest" = "$min_glibc" ] || fail "glibc: $glibc is older than $min_glibc (the vLLM CPU wheel needs it; use Ubuntu 24.04)"

cached=yes
for marker in "\${weights_markers[@]}"; do
  [ -f "$marker" ] || cached=no
done
existing=$cache_root
while [ ! -d "$existing" ]; do existing=$(dirname "$existing"); done
free_gb=$(( $(df -Pk "$existing" | awk 'NR == 2 {print $4}') / 1048576 ))
if [ "$cached" = no ] && [ "$free_gb" -lt "$min_free_gb" ]; then
  fail "disk: $free_gb GB free under $existing, need $min_free_gb GB for the weights and caches"
fi

echo "preflight \${host_name}: ok ($devices NPUs, python $python_version, glibc $glibc, $free_gb GB free)"
`;
}

/**
 * The service account, its cache folders and its NPU device group. Install and weights run side by
 * side and both need them, so both run this, one at a time under a lock.
 */
const SERVICE_ACCOUNT_SETUP = `exec 9>/run/rbln-serving-setup.lock
flock 9
if ! id -u "$service_user" >/dev/null 2>&1; then
  useradd --system --home-dir "$cache_root" --no-create-home --shell /usr/sbin/nologin "$service_user"
fi
install -d -m 0755 "$install_root" "$install_root/venvs"
install -d -m 0700 "$install_root/env"
install -d -o "$service_user" -g "$service_user" -m 0750 "$cache_root" "$cache_root/huggingface" "$cache_root/vllm" "$cache_root/offload"
for device in /dev/rbln[0-9]*; do
  [ -e "$device" ] || continue
  group=$(stat -c %G "$device")
  if [ "$group" != root ] && ! id -nG "$service_user" | tr ' ' '\\n' | grep -qx "$group"; then
    usermod -aG "$group" "$service_user"
  fi
done
flock -u 9
`;

export interface InstallInput {
  hostName: string;
  installRoot: string;
  cacheRoot: string;
  venv: string;
  requirements: readonly string[];
  imports: readonly string[];
  serviceUser: string;
}

/**
 * Installs the pinned packages into a virtualenv named after their versions, checks the imports,
 * then switches `current` to it atomically. stdin: the pip.conf to use (index URLs, credentials).
 */
export function installScript(p: InstallInput): string {
  return `${header(`install ${p.requirements.join(" ")} on ${p.hostName}`, {
    host_name: p.hostName,
    install_root: p.installRoot,
    cache_root: p.cacheRoot,
    venv: p.venv,
    requirements: p.requirements,
    imports: p.imports,
    service_user: p.serviceUser,
  })}
case "$venv" in
  "$install_root"/venvs/?*) ;;
  *) echo "install \${host_name}: refusing venv path $venv outside $install_root/venvs" >&2; exit 1 ;;
esac

${SERVICE_ACCOUNT_SETUP}
previous=$(readlink "$install_root/current" 2>/dev/null || echo "nothing")
if [ -f "$venv/.rbln-serving-complete" ]; then
  echo "install \${host_name}: $venv is complete; nothing to install"
else
  pip_conf=$(mktemp)
  trap 'rm -f "$pip_conf"' EXIT
  chmod 0600 "$pip_conf"
  cat > "$pip_conf"
  # A venv without the marker is what a failed run left behind: start it again.
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! PIP_CONFIG_FILE="$pip_conf" "$venv/bin/pip" install --disable-pip-version-check --no-input "\${requirements[@]}"; then
    echo "install \${host_name}: pip install failed (its reason is above); current still points to $previous" >&2
    exit 1
  fi
  for module in "\${imports[@]}"; do
    if ! "$venv/bin/python" -c "import $module"; then
      echo "install \${host_name}: import $module failed after install; current still points to $previous" >&2
      exit 1
    fi
  done
  printf '%s\\n' "\${requirements[@]}" > "$venv/.rbln-serving-complete"
  echo "install \${host_name}: installed \${requirements[*]} into $venv"
fi

if [ "$previous" != "$venv" ]; then
  ln -sfn "$venv" "$install_root/current.new"
  mv -Tf "$install_root/current.new" "$install_root/current"
  echo "install \${host_name}: current -> $venv (was $previous)"
fi
`;
}

export interface WeightsInput {
  hostName: string;
  installRoot: string;
  cacheRoot: string;
  serviceUser: string;
  /** Hugging Face repos to fetch. */
  models: readonly string[];
  markers: readonly string[];
  downloaderVenv: string;
  downloaderRequirement: string;
}

/** Downloads the models into HF_HOME once per host. stdin: line 1 the HF token (may be empty), then a pip.conf. */
export function weightsScript(p: WeightsInput): string {
  return `${header(`download ${p.models.join(", ")} into the weights cache on ${p.hostName}`, {
    host_name: p.hostName,
    install_root: p.installRoot,
    cache_root: p.cacheRoot,
    hf_home: `${p.cacheRoot}/huggingface`,
    service_user: p.serviceUser,
    models: p.models,
    markers: p.markers,
    downloader_venv: p.downloaderVenv,
    downloader_requirement: p.downloaderRequirement,
  })}
missing=no
for marker in "\${markers[@]}"; do
  [ -f "$marker" ] || missing=yes
done
if [ "$missing" = no ]; then
  echo "weights \${host_name}: \${models[*]} already in $hf_home; nothing to download"
  exit 0
fi

${SERVICE_ACCOUNT_SETUP}
hf_token=
IFS= read -r hf_token || true
pip_conf=$(mktemp)
trap 'rm -f "$pip_conf"' EXIT
chmod 0600 "$pip_conf"
cat > "$pip_conf"

if [ ! -f "$downloader_venv/.rbln-serving-complete" ]; then
  rm -rf "$downloader_venv"
  python3 -m venv "$downloader_venv"
  PIP_CONFIG_FILE="$pip_conf" "$downloader_venv/bin/pip" install --disable-pip-version-check --no-input "$downloader_requirement"
  touch "$downloader_venv/.rbln-serving-complete"
fi

for i in "\${!models[@]}"; do
  [ -f "\${markers[$i]}" ] && continue
  echo "weights \${host_name}: downloading \${models[$i]} into $hf_home"
  HF_HOME="$hf_home" HF_TOKEN="$hf_token" "$downloader_venv/bin/python" -c \\
    'import sys; from huggingface_hub import snapshot_download; snapshot_download(repo_id=sys.argv[1])' "\${models[$i]}"
  install -d -m 0755 "$(dirname "\${markers[$i]}")"
  touch "\${markers[$i]}"
done
chown -R "$service_user:$service_user" "$hf_home"
echo "weights \${host_name}: done"
`;
}

/** Where the units go on the hosts. */
export const SYSTEMD_UNIT_DIR = "/etc/systemd/system";

export interface UnitApplyInput {
  hostName: string;
  unitDir?: string;
  unitName: string;
  unitText: string;
  envPath: string;
  envText: string;
  /** The rank this unit runs, polled after a (re)start. */
  rank: ReadinessRank;
  timeoutSeconds: number;
  intervalSeconds: number;
}

const HEREDOC_UNIT = "RBLN_SERVING_UNIT";
const HEREDOC_ENV = "RBLN_SERVING_ENV";

function heredocBody(text: string, delimiter: string): string {
  if (text.split("\n").includes(delimiter)) throw new Error(`text contains the heredoc delimiter ${delimiter}`);
  return text.endsWith("\n") ? text : `${text}\n`;
}

/**
 * Writes a rank's environment file (0600) and unit, enables it, restarts it only when either
 * changed or it is not running, then waits until the rank serves. stdin: the secret variables,
 * already in env-file syntax.
 */
export function unitApplyScript(p: UnitApplyInput): string {
  return `${header(`launch unit ${p.unitName} on ${p.hostName}, then wait until it serves`, {
    host_name: p.hostName,
    unit: p.unitName,
    unit_path: `${p.unitDir ?? SYSTEMD_UNIT_DIR}/${p.unitName}`,
    env_path: p.envPath,
    ...readinessVars([p.rank], p.timeoutSeconds, p.intervalSeconds),
  })}
umask 077
install -d -m 0700 "$(dirname "$env_path")"
env_new=$(mktemp "$env_path.XXXXXX")
unit_new=$(mktemp "$unit_path.XXXXXX")
trap 'rm -f "$env_new" "$unit_new"' EXIT
cat > "$env_new" <<'${HEREDOC_ENV}'
${heredocBody(p.envText, HEREDOC_ENV)}${HEREDOC_ENV}
cat >> "$env_new"
cat > "$unit_new" <<'${HEREDOC_UNIT}'
${heredocBody(p.unitText, HEREDOC_UNIT)}${HEREDOC_UNIT}
chmod 0644 "$unit_new"

changed=no
if ! cmp -s "$env_new" "$env_path"; then mv -f "$env_new" "$env_path"; changed=yes; fi
if ! cmp -s "$unit_new" "$unit_path"; then mv -f "$unit_new" "$unit_path"; changed=yes; fi
[ "$changed" = yes ] && systemctl daemon-reload
systemctl enable --quiet "$unit"
if [ "$changed" = yes ] || ! systemctl is-active --quiet "$unit"; then
  systemctl restart "$unit"
  echo "unit \${host_name}: (re)started $unit"
else
  echo "unit \${host_name}: $unit unchanged and running"
fi

# The API key (if any) is in the env file just written; bash reads the env-file quoting as its own.
# shellcheck source=/dev/null
API_KEY=$(. "$env_path" && printf '%s' "\${VLLM_API_KEY:-}")
export API_KEY
${READINESS_BODY}`;
}

/** Stops, disables and removes a rank's unit and environment file; the caches stay. */
export function unitRemoveScript(p: { hostName: string; unitDir?: string; unitName: string; envPath: string }): string {
  return `${header(`remove launch unit ${p.unitName} from ${p.hostName} (caches stay)`, {
    host_name: p.hostName,
    unit: p.unitName,
    unit_path: `${p.unitDir ?? SYSTEMD_UNIT_DIR}/${p.unitName}`,
    env_path: p.envPath,
  })}
systemctl disable --now --quiet "$unit" 2>/dev/null || true
rm -f "$unit_path" "$env_path"
systemctl daemon-reload
echo "unit \${host_name}: removed $unit"
`;
}

export interface ReadinessRank {
  unitName: string;
  label: string;
  port: number;
}

export interface ReadinessInput {
  hostName: string;
  ranks: readonly ReadinessRank[];
  timeoutSeconds: number;
  intervalSeconds: number;
}

function readinessVars(ranks: readonly ReadinessRank[], timeoutSeconds: number, intervalSeconds: number) {
  return {
    units: ranks.map((r) => r.unitName),
    labels: ranks.map((r) => r.label),
    ports: ranks.map((r) => String(r.port)),
    timeout_s: timeoutSeconds,
    interval_s: intervalSeconds,
  };
}

/** Polls each rank's /health and /v1/models until both answer 200, printing progress; journal lines on timeout. */
const READINESS_BODY = `
# 0 when GET /health and GET /v1/models both answer 200.
probe() {
  python3 - "$1" <<'PY'
import os, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
headers = {"Authorization": f"Bearer {os.environ['API_KEY']}"} if os.environ.get("API_KEY") else {}
try:
    for path in ("/health", "/v1/models"):
        with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=10) as response:
            if response.status != 200:
                sys.exit(1)
except Exception:
    sys.exit(1)
PY
}

start=$(date +%s)
for i in "\${!ports[@]}"; do
  until probe "\${ports[$i]}"; do
    elapsed=$(( $(date +%s) - start ))
    if [ "$elapsed" -ge "$timeout_s" ]; then
      echo "ready \${host_name}: \${labels[$i]} (port \${ports[$i]}) not ready after \${elapsed}s; last journal lines of \${units[$i]}:" >&2
      journalctl -u "\${units[$i]}" -n 50 --no-pager >&2 2>/dev/null || true
      exit 1
    fi
    echo "ready \${host_name}: waiting for \${labels[$i]} on port \${ports[$i]} (\${elapsed}s)"
    sleep "$interval_s"
  done
  echo "ready \${host_name}: \${labels[$i]} serves on port \${ports[$i]} after $(( $(date +%s) - start ))s"
done
`;

/** Polls every rank of a host until it serves or the deadline. stdin: line 1 the API key (may be empty). */
export function readinessScript(p: ReadinessInput): string {
  return `${header(`wait until every rank on ${p.hostName} serves`, { host_name: p.hostName, ...readinessVars(p.ranks, p.timeoutSeconds, p.intervalSeconds) })}
api_key=
IFS= read -r api_key || true
export API_KEY=$api_key
${READINESS_BODY}`;
}

const SCRIPT_DELIMITER = "RBLN_SERVING_SCRIPT";

/**
 * The command string a remote.Command runs: the script verbatim inside a quoted heredoc, handed to
 * bash with stdin left free for secrets. The login shell only sees the two wrapper lines, so the
 * script runs under bash whatever the user's shell is; `sudo -n` when the user is not root.
 */
export function remoteCommand(script: string, asRoot: boolean): string {
  const body = heredocBody(script, SCRIPT_DELIMITER);
  return `${asRoot ? "" : "sudo -n "}bash -c "$(cat <<'${SCRIPT_DELIMITER}'\n${body}${SCRIPT_DELIMITER}\n)" rbln-serving`;
}
