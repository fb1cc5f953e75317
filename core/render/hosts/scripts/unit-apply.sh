#!/usr/bin/env bash
# The unit step of one rank: writes its environment file (0600; secrets appended from stdin) and its
# unit, restarts it only when either changed or it is not running, and waits until it serves.
# A change that does not serve is rolled back: the previous files go back, the rank restarts on
# them and serves again, and the step fails with one line saying so. The rank's unit of versions
# before deployment ids, if any, is taken over the same way (legacy-unit.sh). Once what serves may
# change, every way out of the step goes through `finish`: whichever line fails, the rank ends on a
# config that was seen to serve, or the step says it could not get there.
set -Eeuo pipefail
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
probe_py='import sys'
router_ssh_address=()
router_ssh_port=()
router_ssh_host_key=()
router_ssh_bind=''
front_door_endpoint=''
front_door_renew_s=60
compile_marker=/var/lib/rbln-serving/vllm/rbln-serving-complete/compile-1cf6c9744861508e
stray_glob='rbln-serving-dev.*.service'
host_units=(rbln-serving-dev.main-0.service)
cache_bundle_dir=/var/lib/rbln-serving/vllm/rbln/MiniMaxAI_MiniMax-M2.7-15923874
env_text="VLLM_ENGINE_READY_TIMEOUT_S='9600'"
unit_text='[Service]
ExecStart=/bin/true'
# --- end of settings ---

# shellcheck source=serving.sh
. serving.sh
# shellcheck source=restart-disk.sh
. restart-disk.sh
# shellcheck source=front-door.sh
. front-door.sh
# shellcheck source=cache-hit.sh
. cache-hit.sh
# shellcheck source=stray-units.sh
. stray-units.sh

# Where the step is: before (nothing changed yet), switching (what serves may have changed and has
# not been seen to serve), served, back (going back to the previous config), ended (its last line
# said), cut (by a signal).
phase=before
failed=
going_back_for=
in_finish=no
env_new=
unit_new=

# The ERR trap (inherited by functions: set -E): names the command that failed, for the last line.
# In a subshell it changes nothing; within finish bash names the command that led there, so only the
# status is known.
# shellcheck disable=SC2317 # run by the trap
on_error() {
  [ "$BASH_SUBSHELL" -eq 0 ] || return 0
  local command=${2//$'\n'/ }
  if [ "$in_finish" = yes ]; then failed="exit $1"; else failed="\`${command:0:120}\` exited $1"; fi
  if [ "$phase" = back ]; then
    phase=ended
    echo "${host_name} ${label}: ${going_back_for}; going back to the previous config failed too (${failed}, see above); run the step again" >&2
  fi
}
trap 'on_error $? "$BASH_COMMAND"' ERR

# Every way out of the step. While switching, a way out that did not see the new config serve goes back
# to the previous one, so no line of that phase, now or added later, can leave the rank half-switched.
# A signal (a cut connection, a reboot) leaves the change pending instead, for the next run to resume,
# and the rank drained: it may be stopping (vLLM answers /health while it drains) or on a config never
# seen to serve. The next run holds that drain as its own; without one it ends with its lease.
# shellcheck disable=SC2317 # run by the trap
finish() {
  local status=$?
  in_finish=yes
  rm -f "$env_new" "$unit_new"
  case "$phase" in
    switching) go_back "the unit step failed (${failed:-exit $status})" ;;
    before) [ -z "$failed" ] || echo "${host_name} ${label}: the unit step failed (${failed}); nothing changed" >&2 ;;
    served) [ -z "$failed" ] || echo "${host_name} ${label}: the new config serves, but the step failed after (${failed})" >&2 ;;
  esac
  [ "$phase" = cut ] || front_door_rejoin
  exit "$status"
}

# Ends the step from within finish's way back, where finish does not run again.
leave() {
  front_door_rejoin
  exit "$1"
}
trap finish EXIT
trap '[ "$phase" != switching ] || phase=cut; exit 1' HUP INT TERM PIPE

restart() {
  started=$(date +%s)
  cache_note_start
  systemctl reset-failed "$unit" 2>/dev/null || true
  # A start that fails outright (vllm cannot run, the device wait ends) leaves the unit failed, which
  # wait_serving reports: rolled back like any other failure, never left half-switched.
  systemctl restart "$unit" || true
  echo "unit ${host_name}: (re)started $unit"
}

# Puts back what served before the change, restarts it and waits until it serves, then ends the step.
# Args: what failed, for the last line.
go_back() {
  going_back_for=$1
  phase=back
  # Going back restarts the rank, so through a drain as well: the one the step holds, with a fresh
  # lease, or a new one if it ran out (the rank may be listed again). Without it the rank restarts
  # only when it does not serve, so that the front door cannot list it.
  # shellcheck disable=SC2086 # no endpoint: no words
  if ! front_door_drain $front_door_endpoint; then
    unit_state "$unit"
    if probe "$port" "$main_pid"; then
      phase=ended
      echo "${host_name} ${label}: $1; the front door did not take it out to go back (see above), so it stays on the new config, which serves; run the step again" >&2
      leave 1
    fi
  fi
  # Going back is a switch too; it waits as long as it takes, since what served must serve again.
  flock 7
  # What served before loads the cache it compiled or got then.
  expect_cache_hit=no
  if [ "$legacy" = yes ]; then
    legacy_give_back
    unit=$legacy_unit
  elif [ ! -f "$previous_unit" ]; then
    # Disabled too: a reboot must not start a config that never served.
    systemctl disable --now --quiet "$unit" || true
    rm -f "$pending"
    strays_give_back
    phase=ended
    echo "${host_name} ${label}: $1; there is no previous config to go back to, so $unit is stopped and disabled" >&2
    leave 1
  else
    cp -p "$previous_env" "$env_path"
    cp -p "$previous_unit" "$unit_path"
    systemctl daemon-reload
    rm -f "$pending"
  fi
  restart
  if wait_serving "$unit" "$label" "$port" "$started"; then
    phase=ended
    echo "${host_name} ${label}: $1; the previous config is restored and serving" >&2
  else
    phase=ended
    journal_tail "$unit" "$started"
    echo "${host_name} ${label}: $1; the previous config is restored but does not serve either ($failure)" >&2
  fi
  leave 1
}

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

read_front_door_key
env_new=$(mktemp "$env_path.XXXXXX")
unit_new=$(mktemp "$unit_path.XXXXXX")
printf '%s\n' "$env_text" > "$env_new"
cat >> "$env_new"
# For the progress lines (serving.sh): the secret variables, which the rank's log lines the step
# shows are masked of, and the last load's time.
secret_env_lines=$(tail -n +"$(($(wc -l <<< "$env_text") + 1))" "$env_new")
load_record="$state_dir/$unit.load-seconds"
printf '%s\n' "$unit_text" > "$unit_new"
chmod 0644 "$unit_new"

write_files=no
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
  write_files=yes
  check_restart_disk
  # Keep what serves now, unless it is itself a change that never served.
  if [ ! -f "$pending" ] && [ -f "$unit_path" ] && [ -f "$env_path" ]; then
    cp -p "$unit_path" "$previous_unit"
    cp -p "$env_path" "$previous_env"
  fi
fi
# A rank about to stop leaves the front door first, so its in-flight requests are its last. The drain
# may wait for another server of the role to serve: not under the host lock, which other deploys need.
if [ "$mode" != none ] || [ "$legacy" = yes ]; then
  flock -u 7
  # shellcheck disable=SC2086 # no endpoint: no words
  front_door_drain $front_door_endpoint || { echo "${host_name}: the front door did not take $front_door_endpoint out (see above); nothing changed" >&2; exit 1; }
  flock -w "$host_lock_wait_s" 7 || { echo "${host_name} ${label}: another rbln-serving deploy held $host_lock for ${host_lock_wait_s}s; run again when it ends" >&2; exit 1; }
fi
# From here on what serves may change: finish owns every way out.
if [ "$mode" = change ] || [ "$legacy" = yes ]; then phase=switching; fi
if [ "$write_files" = yes ]; then
  touch "$pending"
  mv -f "$env_new" "$env_path"
  mv -f "$unit_new" "$unit_path"
  systemctl daemon-reload
fi
systemctl enable --quiet "$unit"

started=$(date +%s)
legacy_stop
[ "$mode" = none ] || strays_stop
[ "$mode" = none ] || restart
flock -u 7
if wait_serving "$unit" "$label" "$port" "$started"; then
  phase=served
  rm -f "$pending"
  legacy_remove
  exit 0
fi
journal_tail "$unit" "$started"
if [ "$phase" != switching ]; then
  phase=ended
  echo "${host_name} ${label}: $unit does not serve ($failure)" >&2
  exit 1
fi
go_back "the new config failed ($failure)"
