#!/usr/bin/env bash
# Restarts a data-parallel group as one, run by its unit when a rank of it failed (each rank's
# OnFailure=). vLLM's ranks of one group step together: once one is gone, its peers hang in the
# group's collectives while they still answer /health, and nothing re-forms the group
# (test/fixtures/vllm-0.30.0/shutdown.json, dp.rankDeath). So the peers are stopped and every rank
# starts again together, after the front door took the group's endpoints out (its agent lists a
# group only while every rank of it serves). A crash loop ends with every rank stopped. A rank whose
# unit step is switching it (a deploy) is left to that step, which rolls back or goes on.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-1
label='decode data-parallel group'
units=(rbln-serving-dev.decode-0.service rbln-serving-dev.decode-1.service)
state_dir=/opt/rbln-serving/rollout
history=/run/rbln-serving-dev.decode-group.restarts
start_limit_burst=3
start_limit_interval_s=1800
restart_s=30
leave_s=6
stop_grace_s=10
# --- end of settings ---

say() { echo "group ${host_name}: $label: $*"; }

active_units() {
  local unit
  for unit in "${units[@]}"; do
    if systemctl is-active --quiet "$unit"; then echo "$unit"; fi
  done
}

failed=()
for unit in "${units[@]}"; do
  if systemctl is-failed --quiet "$unit"; then failed+=("$unit"); fi
done
say "${failed[*]:-a rank} failed; its peers cannot serve without it"
for unit in "${units[@]}"; do
  if [ -f "$state_dir/$unit.pending" ]; then
    say "a deploy is changing $unit; its unit step decides what runs"
    exit 0
  fi
done

# Stops every rank still running: SIGTERM, then SIGKILL after stop_grace_s, as a hung peer never
# finishes its in-flight requests (vLLM's --shutdown-timeout would wait for them in vain).
stop_group() {
  local running
  mapfile -t running < <(active_units)
  [ "${#running[@]}" -gt 0 ] || return 0
  say "stopping ${running[*]}"
  systemctl kill --kill-whom=main -s TERM "${running[@]}" || true
  local deadline=$(( $(date +%s) + stop_grace_s ))
  while [ -n "$(active_units)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
  mapfile -t running < <(active_units)
  [ "${#running[@]}" -eq 0 ] || systemctl kill --kill-whom=all -s KILL "${running[@]}" || true
  while [ -n "$(active_units)" ]; do sleep 0.5; done
}

now=$(date +%s)
recent=()
if [ -f "$history" ]; then
  while read -r at; do
    if [ $(( now - at )) -lt "$start_limit_interval_s" ]; then recent+=("$at"); fi
  done < "$history"
fi
if [ "${#recent[@]}" -ge "$start_limit_burst" ]; then
  stop_group
  say "restarted ${#recent[@]} times within ${start_limit_interval_s}s; every rank stays stopped (run pulumi up, or start its units once fixed)"
  exit 1
fi
printf '%s\n' "${recent[@]}" "$now" > "$history"

# The front door's agent takes the whole group out at its next probe of the failed rank; then the
# requests the EPP had placed reach their ranks.
if [ -n "$(active_units)" ]; then
  say "waiting ${leave_s}s for the front door to take its endpoints out"
  sleep "$leave_s"
fi
stop_group
say "every rank stopped; starting them again in ${restart_s}s"
sleep "$restart_s"
if ! systemctl start "${units[@]}"; then
  stop_group
  say "a rank did not start (see its journal); every rank stays stopped"
  exit 1
fi
say "every rank started again; the front door lists them once all serve"
