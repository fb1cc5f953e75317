# shellcheck shell=bash
# Waiting for a rank to serve, and telling a rank that is still starting from one that has failed.
# Reads: host_name, probe_host, timeout_s, interval_s, start_limit_burst, probe_py (core/probe.py);
# for the progress lines cache_bundle_dir (the model's compiled bundles), load_record (a file that
# keeps the last load's seconds) and secret_env_lines (the secret variables in env-file syntax, which
# progress_secrets is read from at the first line), each may be empty.
# shellcheck disable=SC2154

# 0 when GET /health and GET /v1/models both answer 200 on the rank's port ($1). The API key, if the
# rank has one, is read from the environment systemd gave its main process ($2, a pid; 0 for none):
# exactly what vLLM got, whatever the env file's quoting, and after a rollback the old config's key.
probe() {
  python3 -c "$probe_py" "$probe_host" 10 "$1" /health,/v1/models "$2"
}

# Sets active, sub, restarts, result, exit_status and main_pid from systemd's view of the unit.
unit_state() {
  active=unknown sub=unknown restarts=0 result=success exit_status=0 main_pid=0
  local key value
  while IFS='=' read -r key value; do
    case "$key" in
      ActiveState) active=$value ;;
      SubState) sub=$value ;;
      NRestarts) restarts=${value:-0} ;;
      Result) result=$value ;;
      ExecMainStatus) exit_status=${value:-0} ;;
      MainPID) main_pid=${value:-0} ;;
    esac
  done < <(systemctl show -p ActiveState -p SubState -p NRestarts -p Result -p ExecMainStatus -p MainPID "$1" 2>/dev/null || true)
}

# shellcheck source=mask.sh
. mask.sh

# The last line of the unit's log since $2 (epoch seconds) that reports an error, without the prefix.
last_error() {
  { journalctl -u "$1" --since "@$2" -o cat --no-pager 2>/dev/null || true; } |
    { grep -iE 'error' || true; } | tail -n 1 | sed -E 's/^.*[Ee][Rr][Rr][Oo][Rr]:[[:space:]]*//' | mask_url_credentials | cut -c 1-200
}

journal_tail() {
  echo "last journal lines of $1:" >&2
  { journalctl -u "$1" --since "@$2" -n 40 --no-pager 2>/dev/null || true; } | mask_url_credentials >&2
}

# shellcheck source=../../scripts/progress.sh
. ../../scripts/progress.sh

# What a starting rank does, for its progress line: it loads when a compiled bundle of its model was
# there before its (re)start ($1), else it compiles (and then loads what it compiled). Unknown
# without the bundles' folder: then it is called a load, as the step cannot tell.
rank_phase() {
  if [ -n "${cache_bundle_dir:-}" ] && [ -z "$(find "$cache_bundle_dir" -name mega_cache.bin -type f ! -newermt "@$1" -print -quit 2>/dev/null)" ]; then
    echo compile
  else
    echo load
  fi
}

# A starting rank's progress line: its phase, the time since its (re)start against the wait's bound,
# for a load the last one's time on this host, and the last line of its log, masked.
rank_progress() {
  local unit=$1 label=$2 since=$3 phase=$4 amount='' last
  if [ "$phase" = load ]; then
    if [ -s "${load_record:-}" ]; then amount="expected $(progress_duration "$(cat "$load_record")") (the last load here)"; else amount="expected: not timed here yet"; fi
  fi
  if [ -n "${secret_env_lines:-}" ] && [ -z "${progress_secrets:-}" ]; then
    progress_secrets=$(progress_env_values <<< "$secret_env_lines")
  fi
  # The rank's own last line (_SYSTEMD_UNIT: its processes'; -u would add systemd's lines about it).
  last=$({ journalctl "_SYSTEMD_UNIT=$unit" --since "@$since" -n 1 -o cat --no-pager 2>/dev/null || true; } | tail -n 1)
  # A progress line that cannot be printed never fails the wait.
  progress_line "$host_name" "${label/ rank //}" "$phase" "$since" "$timeout_s" "$amount" "$last" | progress_mask || true
}

# Waits until the rank answers. Fails as soon as its unit has failed or restarted past the start
# limit, or at the deadline, with the reason in `failure`. A rank that is still starting (its process
# alive, compiling for hours) is waited for until the deadline, never called failed.
# Args: unit, label, port, since (epoch seconds of the (re)start).
wait_serving() {
  local unit=$1 label=$2 port=$3 since=$4 start elapsed reason phase
  start=$(date +%s)
  phase=$(rank_phase "$since")
  while :; do
    # A rank that must load a compiled cache and compiles instead has failed (cache-hit.sh, in the unit step).
    [ "${expect_cache_hit:-no}" = yes ] && cache_miss "$unit" "$since" && return 1
    unit_state "$unit"
    if probe "$port" "$main_pid"; then
      [ "${expect_cache_hit:-no}" = yes ] && cache_miss "$unit" "$since" yes && return 1
      echo "ready ${host_name}: $label serves on port $port after $(( $(date +%s) - start ))s"
      [ "$phase" != load ] || [ -z "${load_record:-}" ] || echo "$(( $(date +%s) - since ))" > "$load_record" || true
      return 0
    fi
    if [ "$active" = failed ] || [ "$restarts" -ge "$start_limit_burst" ]; then
      case "$result" in
        signal | core-dump) failure="unit killed by signal $exit_status" ;;
        *) failure="unit exited $exit_status" ;;
      esac
      [ "$active" = failed ] || failure="$failure, restarted $restarts times"
      reason=$(last_error "$unit" "$since")
      [ -z "$reason" ] || failure="$failure: $reason"
      return 1
    fi
    elapsed=$(( $(date +%s) - start ))
    if [ "$elapsed" -ge "$timeout_s" ]; then
      failure="no ready answer within ${timeout_s}s, unit $active/$sub"
      return 1
    fi
    rank_progress "$unit" "$label" "$since" "$phase"
    sleep "$interval_s"
  done
}
