#!/usr/bin/env bash
# The unit step of one rank: writes its environment file (0600; secrets appended from stdin) and its
# unit, restarts it only when either changed or it is not running, and waits until it serves.
# A change that does not serve is rolled back: the previous files go back, the rank restarts on
# them and serves again, and the step fails with one line saying so. The rank's unit of versions
# before deployment ids, if any, is taken over the same way (legacy-unit.sh).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
unit=rbln-serving-dev.main-0.service
label='main rank 0'
unit_path=/etc/systemd/system/rbln-serving-dev.main-0.service
env_path=/opt/rbln-serving/env/dev.main-0.env
state_dir=/opt/rbln-serving/rollout
cache_root=/var/lib/rbln-serving
restart_free_gb=50
legacy_unit=rbln-serving-main-0.service
legacy_env_path=/opt/rbln-serving/env/main-0.env
managed_marker='# Managed by rbln-serving (Pulumi); local edits are overwritten.'
host_lock=/run/rbln-serving-units.lock
host_lock_wait_s=600
port=8000
probe_host=127.0.0.1
timeout_s=9600
interval_s=30
start_limit_burst=3
compile_marker=/var/lib/rbln-serving/vllm/rbln-serving-complete/compile-1cf6c9744861508e
cache_hit_line='Loaded rbln mega-cache bundle from '
cache_warmup_line='rbln_backend [warm-up]'
cache_saved_line='Saved rbln mega-cache bundle to '
env_text="VLLM_ENGINE_READY_TIMEOUT_S='9600'"
unit_text='[Service]
ExecStart=/bin/true'
# --- end of settings ---

# shellcheck source=serving.sh
. serving.sh
# shellcheck source=restart-disk.sh
. restart-disk.sh
# shellcheck source=cache-hit.sh
. cache-hit.sh

umask 077
install -d -m 0700 "$(dirname "$env_path")" "$state_dir"
# Two runs of one unit step must not overlap (two people deploying one stack): the second fails at once.
exec 8>"$state_dir/$unit.lock"
flock -n 8 || { echo "${host_name} ${label}: another rbln-serving deploy is changing $unit right now; run again when it ends" >&2; exit 1; }
# Deploys to this host, of any deployment, take turns at switching units: from writing the files to
# the (re)start, and on the way back. Not while a rank loads, which can take hours.
exec 7>"$host_lock"
if ! flock -n 7; then
  echo "unit ${host_name}: waiting up to ${host_lock_wait_s}s for another rbln-serving deploy to finish switching units on this host"
  flock -w "$host_lock_wait_s" 7 || { echo "${host_name} ${label}: another rbln-serving deploy held $host_lock for ${host_lock_wait_s}s; run again when it ends" >&2; exit 1; }
fi
# shellcheck source=legacy-unit.sh
. legacy-unit.sh

previous_unit="$state_dir/$unit.previous"
previous_env="$state_dir/$unit.previous-env"
# Present while a change has not yet served: a run that finds it resumes the change (after a reboot
# or a lost connection) and still rolls back to the previous files if it fails.
pending="$state_dir/$unit.pending"

env_new=$(mktemp "$env_path.XXXXXX")
unit_new=$(mktemp "$unit_path.XXXXXX")
trap 'rm -f "$env_new" "$unit_new"' EXIT
printf '%s\n' "$env_text" > "$env_new"
cat >> "$env_new"
printf '%s\n' "$unit_text" > "$unit_new"
chmod 0644 "$unit_new"

if cmp -s "$env_new" "$env_path" && cmp -s "$unit_new" "$unit_path"; then
  if [ -f "$pending" ]; then
    mode=change
    echo "unit ${host_name}: resuming the unfinished change of $unit"
  elif systemctl is-active --quiet "$unit"; then
    mode=none
    echo "unit ${host_name}: $unit unchanged and running"
  else
    mode=start
  fi
  [ "$mode" = none ] || check_restart_disk
else
  mode=change
  check_restart_disk
  # Keep what serves now, unless it is itself a change that never served.
  if [ ! -f "$pending" ] && [ -f "$unit_path" ] && [ -f "$env_path" ]; then
    cp -p "$unit_path" "$previous_unit"
    cp -p "$env_path" "$previous_env"
  fi
  touch "$pending"
  mv -f "$env_new" "$env_path"
  mv -f "$unit_new" "$unit_path"
  systemctl daemon-reload
fi
systemctl enable --quiet "$unit"

# The API key (if any) is in the env file; read with Python's shlex, which takes the env-file quoting
# as written, so nothing in the file is ever run by a shell.
API_KEY=$(python3 -c 'import shlex, sys
for line in open(sys.argv[1]):
    for word in shlex.split(line, comments=True):
        name, _, value = word.partition("=")
        if name == "VLLM_API_KEY":
            print(value, end="")' "$env_path")
export API_KEY

restart() {
  started=$(date +%s)
  systemctl reset-failed "$unit" 2>/dev/null || true
  # A start that fails outright (vllm cannot run, the device wait ends) leaves the unit failed, which
  # wait_serving reports: rolled back like any other failure, never left half-switched.
  systemctl restart "$unit" || true
  echo "unit ${host_name}: (re)started $unit"
}

started=$(date +%s)
legacy_stop
[ "$mode" = none ] || restart
flock -u 7
if wait_serving "$unit" "$label" "$port" "$started"; then
  rm -f "$pending"
  legacy_remove
  exit 0
fi
new_failure=$failure
journal_tail "$unit" "$started"

# Going back is a switch too; it waits as long as it takes, since what served must serve again.
flock 7
# What served before loads the cache it compiled or got then.
expect_cache_hit=no
if [ "$legacy" = yes ]; then
  legacy_give_back
  unit=$legacy_unit
elif [ "$mode" != change ]; then
  echo "${host_name} ${label}: $unit does not serve ($new_failure)" >&2
  exit 1
elif [ ! -f "$previous_unit" ]; then
  systemctl stop "$unit" || true
  rm -f "$pending"
  echo "${host_name} ${label}: the new config failed ($new_failure); there is no previous config to go back to, so $unit is stopped" >&2
  exit 1
else
  cp -p "$previous_env" "$env_path"
  cp -p "$previous_unit" "$unit_path"
  rm -f "$pending"
  systemctl daemon-reload
fi
restart
if wait_serving "$unit" "$label" "$port" "$started"; then
  echo "${host_name} ${label}: the new config failed ($new_failure); the previous config is restored and serving" >&2
else
  journal_tail "$unit" "$started"
  echo "${host_name} ${label}: the new config failed ($new_failure); the previous config is restored but does not serve either ($failure)" >&2
fi
exit 1
