#!/usr/bin/env bash
# rbln-serving lease lock: one writer per resource (a model download, a compile key) on a
# filesystem every host or pod mounts, NFS included. It relies only on mkdir being atomic, never
# on flock. The writer holds a lease that a heartbeat renews; a writer whose heartbeat stops (its
# host died, it was SIGKILLed) is taken over once the lease expires. Waiters wait for the writer's
# completion marker.
#
#   lease-lock.sh run -- CMD...                 CMD runs once: the writer runs it and marks it
#                                               complete; every other caller waits for the marker.
#   lease-lock.sh run --ready CHECK -- CMD...   every caller runs CMD (a server): the writer holds
#                                               the lease until `bash -c CHECK` succeeds (the
#                                               compile cache is saved once warm-up succeeds);
#                                               the others start CMD after the marker and load.
#   --name NAME                                 the resource, instead of LOCK_NAME: one script file
#                                               serves every compile key of a host.
#
# Sourced with LEASE_LOCK_LIBRARY=1 it defines the lease_* functions and runs nothing.
# Exit status: CMD's; 3 when the wait limit passes without a marker.
set -euo pipefail

# --- settings (the renderer writes the real values here) ---
LOCK_ROOT=/var/lib/rbln-serving/locks
LOCK_NAME=example
LEASE_SECONDS=120
HEARTBEAT_SECONDS=20
POLL_SECONDS=5
WAIT_LIMIT_SECONDS=43200
# --- end of settings ---

LEASE_OWNER="${LEASE_OWNER:-$(hostname)-$$}"
LEASE_GENERATION=0
LEASE_HEARTBEAT_PID=

lease_log() { printf 'lease-lock %s: %s\n' "$LOCK_NAME" "$*" >&2; }
lease_dir() { printf '%s/%s.lease' "$LOCK_ROOT" "$LOCK_NAME"; }
lease_marker() { printf '%s/%s.done' "$LOCK_ROOT" "$LOCK_NAME"; }
lease_is_complete() { [[ -e $(lease_marker) ]]; }

# The filesystem's clock, not this host's: a file's mtime is set by the server that holds it.
lease_now() {
  local probe
  probe="$LOCK_ROOT/.clock.$LEASE_OWNER"
  touch "$probe"
  stat -c %Y "$probe"
  rm -f "$probe"
}

# The newest lease generation (0: none). Taking over creates the next one, so only one waiter wins.
lease_current_generation() {
  local entry name newest=0
  for entry in "$(lease_dir)"/*; do
    name=${entry##*/}
    if [[ -d $entry && $name =~ ^[0-9]+$ ]] && ((name > newest)); then newest=$name; fi
  done
  printf '%s\n' "$newest"
}

lease_owner_of() { cat "$(lease_dir)/$1/owner" 2>/dev/null || printf 'unknown'; }

# Seconds since generation $1's last heartbeat (its creation before the first one); 0 when it is
# gone meanwhile (its writer finished or gave up), so the caller looks again instead of taking over.
lease_age() {
  local generation_dir beat
  generation_dir="$(lease_dir)/$1"
  beat=$(stat -c %Y "$generation_dir/heartbeat" 2>/dev/null || stat -c %Y "$generation_dir" 2>/dev/null || true)
  if [[ -z $beat ]]; then echo 0; else echo $(($(lease_now) - beat)); fi
}

lease_try_acquire() {
  local generation_dir
  generation_dir="$(lease_dir)/$1"
  mkdir "$generation_dir" 2>/dev/null || return 1
  printf '%s\n' "$LEASE_OWNER" >"$generation_dir/owner"
  touch "$generation_dir/heartbeat"
  LEASE_GENERATION=$1
  if lease_is_complete; then
    # The writer finished between our look at the marker and our mkdir: nothing to write.
    rm -rf "$generation_dir"
    LEASE_GENERATION=0
    return 1
  fi
  return 0
}

# Returns 0 once this caller is the writer, 1 once the marker exists; exits 3 past the wait limit.
lease_acquire_or_wait() {
  local generation age waited_from=$SECONDS announced=
  mkdir -p "$LOCK_ROOT"
  while true; do
    lease_is_complete && return 1
    mkdir -p "$(lease_dir)"
    generation=$(lease_current_generation)
    if ((generation == 0)); then
      lease_try_acquire 1 && return 0
      continue
    fi
    age=$(lease_age "$generation")
    if ((age > LEASE_SECONDS)); then
      lease_log "the lease of $(lease_owner_of "$generation") expired ${age}s after its last heartbeat; taking over"
      lease_try_acquire $((generation + 1)) && return 0
      continue
    fi
    if [[ -z $announced ]]; then
      lease_log "$(lease_owner_of "$generation") is writing; waiting for its completion marker"
      announced=1
    fi
    if ((SECONDS - waited_from > WAIT_LIMIT_SECONDS)); then
      lease_log "no completion marker after ${WAIT_LIMIT_SECONDS}s"
      exit 3
    fi
    sleep "$POLL_SECONDS"
  done
}

lease_still_held() { [[ $(lease_current_generation) == "$LEASE_GENERATION" ]]; }

# Renews the lease while this script lives; if the lease is lost or this script dies, stops $1.
lease_heartbeat_start() {
  local worker=$1 script=$$
  (
    while sleep "$HEARTBEAT_SECONDS"; do
      if ! kill -0 "$script" 2>/dev/null; then
        kill -TERM "$worker" 2>/dev/null || true
        exit 0
      fi
      if ! lease_still_held || ! touch "$(lease_dir)/$LEASE_GENERATION/heartbeat"; then
        lease_log "lease lost to a newer writer; stopping"
        kill -TERM "$worker" 2>/dev/null || true
        exit 0
      fi
    done
  ) &
  LEASE_HEARTBEAT_PID=$!
}

lease_heartbeat_stop() {
  if [[ -n $LEASE_HEARTBEAT_PID ]]; then
    kill "$LEASE_HEARTBEAT_PID" 2>/dev/null || true
    wait "$LEASE_HEARTBEAT_PID" 2>/dev/null || true
    LEASE_HEARTBEAT_PID=
  fi
}

# Writes the completion marker (atomically, by rename) while still holding the lease, then frees it.
lease_complete() {
  local marker
  marker=$(lease_marker)
  lease_heartbeat_stop
  if ! lease_still_held; then
    lease_log "lease lost before completion; not marking complete"
    return 1
  fi
  printf '%s %s\n' "$LEASE_OWNER" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$marker.tmp.$LEASE_OWNER"
  mv -f "$marker.tmp.$LEASE_OWNER" "$marker"
  rm -rf "$(lease_dir)"
  lease_log "complete"
}

# Gives the lease up without a marker, so a waiter takes over at once instead of after the lease.
lease_release() {
  lease_heartbeat_stop
  if lease_still_held; then rm -rf "$(lease_dir)/${LEASE_GENERATION:?}"; fi
  LEASE_GENERATION=0
}

lease_run() {
  local ready="" worker status=0
  while (($# > 0)); do
    case $1 in
      --ready) ready=$2; shift 2 ;;
      --name) LOCK_NAME=$2; shift 2 ;;
      --) shift; break ;;
      *) lease_log "unknown option $1"; return 2 ;;
    esac
  done
  if (($# == 0)); then lease_log "usage: lease-lock.sh run [--name NAME] [--ready CHECK] -- CMD..."; return 2; fi

  if ! lease_acquire_or_wait; then
    if [[ -z $ready ]]; then
      lease_log "already complete"
      return 0
    fi
    lease_log "complete; starting, loading what the writer made"
    exec "$@"
  fi

  lease_log "writing as $LEASE_OWNER (lease generation $LEASE_GENERATION)"
  "$@" &
  worker=$!
  trap 'kill -TERM "$worker" 2>/dev/null || true' TERM INT
  lease_heartbeat_start "$worker"
  if [[ -z $ready ]]; then
    wait "$worker" || status=$?
    trap - TERM INT
    if ((status == 0)); then lease_complete || status=1; else lease_release; fi
    return "$status"
  fi
  until bash -c "$ready" >/dev/null 2>&1; do
    if ! kill -0 "$worker" 2>/dev/null; then
      wait "$worker" || status=$?
      lease_release
      lease_log "exited with status $status before it was ready"
      return $((status == 0 ? 1 : status))
    fi
    sleep "$POLL_SECONDS"
  done
  lease_complete || true
  # A stop signal interrupts `wait`: wait again, so the server finishes its graceful shutdown
  # before this script (a unit's main process) exits and the rest of its group is killed.
  wait "$worker" || status=$?
  while kill -0 "$worker" 2>/dev/null; do status=0; wait "$worker" || status=$?; done
  return "$status"
}

if [[ ${LEASE_LOCK_LIBRARY:-0} != 1 ]]; then
  case ${1:-} in
    run) shift; lease_run "$@" ;;
    *) lease_log "usage: lease-lock.sh run [--name NAME] [--ready CHECK] -- CMD..."; exit 2 ;;
  esac
fi
