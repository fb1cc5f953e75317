#!/usr/bin/env bash
# One compile key on a host, ahead of the NPU units that run it, in the flow compile-flow.sh shares
# with the compile Job: here on the compile host every rank of the role runs its exact command line
# in vllm-rbln's compile-only mode, with no NPU, each as a transient systemd unit of the service
# user, all together (a data-parallel group starts whole, as on its NPU host). On an NPU host
# without a compile host this only pulls: a key the registry lacks is compiled by the rank's first
# start, as without compile ahead. The last line of stdout is `compiled <key> <digest|local|none>`.
# stdin: line 1 the registry password (may be empty), then the variables whose values carry URL
# credentials, in env-file syntax, for every rank's environment.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=compile-0
key=1cf6c9744861508e
roles=(main)
cache_root=/var/lib/rbln-serving
service_user=rbln-serving
marker=/var/lib/rbln-serving/vllm/rbln-serving-complete/compile-1cf6c9744861508e
compile_here=yes
units=(rbln-serving-dev.compile-1cf6c9744861508e-0.service)
command_words=(/opt/rbln-serving/venvs/dev/current/bin/vllm serve MiniMaxAI/MiniMax-M2.7 --port 8000 --host 127.0.0.1)
command_lengths=(7)
env_texts=("VLLM_RBLN_COMPILE_ONLY='1'")
probe_host=127.0.0.1
probe_py='import sys'
timeout_s=9600
interval_s=30
repository=''
registry_user=''
artifact_type=application/vnd.rbln-serving.compile-cache.v1
config_type=application/vnd.rbln-serving.compile-cache.config.v1+json
layer_type=application/vnd.rbln-serving.compile-cache.layer.v1.tar
# --- end of settings ---

registry_password=
IFS= read -r registry_password || true
credential_env=$(cat)
# Each rank's compile-only port, chosen free as it starts.
ports=()
cache_dir="$cache_root/vllm/rbln"
files_list="$marker.files"
cache_place=here
first_compiler="the first start of ${roles[*]} here"
umask 022
work=$(mktemp -d /run/rbln-serving-compile.XXXXXX)
scratch='' compile_dir=''
trap 'systemctl stop "${units[@]}" 2>/dev/null || true; rm -rf "$work" ${scratch:+"$scratch"} ${compile_dir:+"$(dirname "$compile_dir")"}; rmdir "$cache_root/vllm/.rbln-serving-scratch" "$cache_root/vllm/.rbln-serving-compile" 2>/dev/null || true' EXIT
chmod 0700 "$work"
# One run per key at a time on this host (two stacks of one key): the second waits, then finds it done.
exec 9>"/run/rbln-serving-compile-${key}.lock"
if ! flock -n 9; then
  echo "compile ${host_name} ${key}: waiting for another rbln-serving deploy that is bringing ${key} here"
  flock -w "$timeout_s" 9 || { echo "compile ${host_name} ${key}: another rbln-serving deploy held ${key} for ${timeout_s}s; run again when it ends" >&2; exit 1; }
fi
# The key's own folders, beside the cache on its disk: the compile's (which the compile-only units see
# as the cache, so they write nothing else's and no other compile's files mix with it) and the pull's
# scratch. What a run cut short left (the host died) is removed: the key starts over.
compile_dir="$cache_root/vllm/.rbln-serving-compile/$key/rbln"
scratch="$cache_root/vllm/.rbln-serving-scratch/$key"
rm -rf "$(dirname "$compile_dir")" "$scratch"
install -d -m 0700 "$scratch"

# shellcheck source=../../scripts/compile-flow.sh
. ../../scripts/compile-flow.sh
# shellcheck source=mask.sh
. mask.sh
# shellcheck source=../../scripts/progress.sh
. ../../scripts/progress.sh
# Everything the step prints (skopeo's errors, the compile's log lines) masked of the registry
# password and the credentials, so that it can log (components/hosts/steps.ts).
progress_secrets=$(printf '%s\n' "$registry_password"; progress_env_values <<< "$credential_env")
exec > >(progress_mask) 2> >(progress_mask >&2)

# 0 when rank $1's compile-only server answers /health: every engine is past its warm-up (core/probe.py; PID 0: no API key, /health needs none).
healthy() { python3 -c "$probe_py" "$probe_host" 10 "${ports[$1]}" /health 0 2>/dev/null; }

# A port free on the listen address for a compile-only server (the rank's own may be taken by
# another compile on this host). The port is not keyed (vllm-rbln zeroes the ports it hashes).
free_port() {
  python3 -c 'import socket, sys; s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$probe_host"
}

# Starts rank $1, whose words begin at $2 in command_words, as a transient unit of the service user,
# on a free port in place of its own, its cache folder bound to the key's own (the same path, so the
# same VLLM_CACHE_ROOT as the NPU units).
start_rank() {
  local words=() word skip=
  for word in "${command_words[@]:$2:${command_lengths[$1]}}"; do
    if [ -n "$skip" ]; then skip=; continue; fi
    case "$word" in --port) skip=yes ;; --port=*) ;; *) words+=("$word") ;; esac
  done
  ports[$1]=$(free_port)
  (umask 077; printf '%s\n' "${env_texts[$1]}" ${credential_env:+"$credential_env"} > "$work/env-$1")
  systemctl stop "${units[$1]}" 2>/dev/null || true
  systemctl reset-failed "${units[$1]}" 2>/dev/null || true
  systemd-run --quiet --unit="${units[$1]}" --property=User="$service_user" --property=Group="$service_user" \
    --property=EnvironmentFile="$work/env-$1" --property=WorkingDirectory="$cache_root" --property=KillMode=mixed \
    --property=BindPaths="$compile_dir:$cache_dir" -- "${words[@]}" --port "${ports[$1]}"
}

# Rank $1 since $started: "done" once the bundle is saved (a file, not a log line) and the server
# answers or the process ended well (what serve does once compile-only has compiled is not
# documented, so either counts); "failed: <why>" when it ended first; else "running".
rank_state() {
  local active result status reason
  active=$(systemctl show -p ActiveState --value "${units[$1]}" 2>/dev/null || echo unknown)
  result=$(systemctl show -p Result --value "${units[$1]}" 2>/dev/null || echo unknown)
  status=$(systemctl show -p ExecMainStatus --value "${units[$1]}" 2>/dev/null || echo 0)
  if bundle_saved; then
    if healthy "$1" || { [ "$active" != active ] && [ "$active" != activating ] && [ "$result" = success ]; }; then echo "done"; return 0; fi
  fi
  if [ "$active" = failed ] || { [ "$active" = inactive ] && [ "$result" != success ]; } || { [ "$active" = inactive ] && ! bundle_saved; }; then
    reason=$(journalctl -u "${units[$1]}" --since "@$started" -o cat --no-pager 2>/dev/null | grep -iE 'error' | tail -n 1 | mask_url_credentials | cut -c 1-200 || true)
    echo "failed: the compile-only run${rank_label:+ of rank $1} ended (exit ${status}) before vllm-rbln saved the cache${reason:+: $reason}"
    return 0
  fi
  echo running
}

# Runs every rank of the role in compile-only mode and waits until each has saved the cache; any rank
# that ends first fails the step, and the others are stopped.
compile_only() {
  local started i first state elapsed waiting last_waiting=0 rank_label=
  [ "${#units[@]}" -le 1 ] || rank_label=yes
  [ -x "${command_words[0]}" ] || fail "${command_words[0]} not found (the install step puts it there)"
  command -v systemd-run >/dev/null || fail "systemd-run not found: the compile host needs systemd"
  install -d -o "$service_user" -g "$service_user" -m 0750 "$cache_dir" "$compile_dir"
  started=$(date +%s)
  first=0
  for i in "${!units[@]}"; do
    start_rank "$i" "$first"
    first=$(( first + command_lengths[i] ))
  done
  local on="port ${ports[0]}"
  [ "${#ports[@]}" -le 1 ] || on="ports ${ports[*]}"
  say "compiling for ${roles[*]} (${#units[@]} rank(s)) in compile-only mode, with no NPU, on ${on}; this takes as long as a first start"
  while :; do
    waiting=0
    for i in "${!units[@]}"; do
      state=$(rank_state "$i")
      case "$state" in
        done) ;;
        failed:*) fail "${state#failed: }" ;;
        *) waiting=$(( waiting + 1 )) last_waiting=$i ;;
      esac
    done
    [ "$waiting" -gt 0 ] || break
    elapsed=$(( $(date +%s) - started ))
    [ "$elapsed" -lt "$timeout_s" ] || fail "vllm-rbln saved no cache for ${waiting} of ${#units[@]} rank(s) within ${timeout_s}s"
    progress_line "$host_name" "key:${key}" compile "$started" "$timeout_s" "ranks $(( ${#units[@]} - waiting )) of ${#units[@]} saved" \
      "$(journalctl "_SYSTEMD_UNIT=${units[$last_waiting]}" --since "@$started" -n 1 -o cat --no-pager 2>/dev/null || true)"
    sleep "$interval_s"
  done
  systemctl stop "${units[@]}" 2>/dev/null || true
}

compile_key all
