#!/usr/bin/env bash
# One compile key on a host, ahead of the NPU units that run it, in the flow compile-flow.sh shares
# with the compile Job: here on the compile host the role's exact command line runs in vllm-rbln's
# compile-only mode, with no NPU, as a transient systemd unit of the service user. On an NPU host
# without a compile host this only pulls: a key the registry lacks is compiled by the rank's first
# start, as without compile ahead. The last line of stdout is `compiled <key> <digest|local|none>`.
# stdin: line 1 the registry password (may be empty).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=compile-0
key=1cf6c9744861508e
roles=(main)
cache_root=/var/lib/rbln-serving
service_user=rbln-serving
marker=/var/lib/rbln-serving/vllm/rbln-serving-complete/compile-1cf6c9744861508e
compile_here=yes
unit=rbln-serving-dev.compile-1cf6c9744861508e.service
command=(/opt/rbln-serving/venvs/dev/current/bin/vllm serve MiniMaxAI/MiniMax-M2.7 --port 8000 --host 127.0.0.1)
env_text="VLLM_RBLN_COMPILE_ONLY='1'"
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
cache_dir="$cache_root/vllm/rbln"
files_list="$marker.files"
cache_place=here
first_compiler="the first start of ${roles[*]} here"
umask 022
work=$(mktemp -d /run/rbln-serving-compile.XXXXXX)
scratch='' compile_dir=''
trap 'systemctl stop "$unit" 2>/dev/null || true; rm -rf "$work" ${scratch:+"$scratch"} ${compile_dir:+"$(dirname "$compile_dir")"}; rmdir "$cache_root/vllm/.rbln-serving-scratch" "$cache_root/vllm/.rbln-serving-compile" 2>/dev/null || true' EXIT
chmod 0700 "$work"
# One run per key at a time on this host (two stacks of one key): the second waits, then finds it done.
exec 9>"/run/rbln-serving-compile-${key}.lock"
if ! flock -n 9; then
  echo "compile ${host_name} ${key}: waiting for another rbln-serving deploy that is bringing ${key} here"
  flock -w "$timeout_s" 9 || { echo "compile ${host_name} ${key}: another rbln-serving deploy held ${key} for ${timeout_s}s; run again when it ends" >&2; exit 1; }
fi
# The key's own folders, beside the cache on its disk: the compile's (which the compile-only unit sees
# as the cache, so it writes nothing else's and no other compile's files mix with it) and the pull's
# scratch. What a run cut short left (the host died) is removed: the key starts over.
compile_dir="$cache_root/vllm/.rbln-serving-compile/$key/rbln"
scratch="$cache_root/vllm/.rbln-serving-scratch/$key"
rm -rf "$(dirname "$compile_dir")" "$scratch"
install -d -m 0700 "$scratch"

# shellcheck source=../../scripts/compile-flow.sh
. ../../scripts/compile-flow.sh

# 0 when the compile-only server answers /health on its port: every engine is past its warm-up (core/probe.py; PID 0: no API key, /health needs none).
healthy() { python3 -c "$probe_py" "$probe_host" 10 "$port" /health 0 2>/dev/null; }

# A port free on the listen address for the compile-only server (the role's own may be taken by
# another compile on this host). The port is not keyed (vllm-rbln zeroes the ports it hashes).
free_port() {
  python3 -c 'import socket, sys; s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$probe_host"
}

# Runs the role's command in compile-only mode as a transient unit of the service user, its cache
# folder bound to the key's own (the same path, so the same VLLM_CACHE_ROOT as the NPU units), and
# waits for the bundle, then for the server to answer or the process to end well: what serve does
# once compile-only has compiled is not documented, so either counts; dying first does not.
compile_only() {
  local started active result status elapsed reason i
  [ -x "${command[0]}" ] || fail "${command[0]} not found (the install step puts it there)"
  command -v systemd-run >/dev/null || fail "systemd-run not found: the compile host needs systemd"
  install -d -o "$service_user" -g "$service_user" -m 0750 "$cache_dir" "$compile_dir"
  port=$(free_port)
  for i in "${!command[@]}"; do
    case "${command[$i]}" in --port) unset 'command[i]' 'command[i+1]' ;; --port=*) unset 'command[i]' ;; esac
  done
  command=("${command[@]}" --port "$port")
  printf '%s\n' "$env_text" > "$work/env"
  systemctl stop "$unit" 2>/dev/null || true
  systemctl reset-failed "$unit" 2>/dev/null || true
  started=$(date +%s)
  systemd-run --quiet --unit="$unit" --property=User="$service_user" --property=Group="$service_user" \
    --property=EnvironmentFile="$work/env" --property=WorkingDirectory="$cache_root" --property=KillMode=mixed \
    --property=BindPaths="$compile_dir:$cache_dir" -- "${command[@]}"
  say "compiling for ${roles[*]} in compile-only mode, with no NPU, on port ${port}; this takes as long as a first start"
  while :; do
    active=$(systemctl show -p ActiveState --value "$unit" 2>/dev/null || echo unknown)
    result=$(systemctl show -p Result --value "$unit" 2>/dev/null || echo unknown)
    status=$(systemctl show -p ExecMainStatus --value "$unit" 2>/dev/null || echo 0)
    if bundle_saved; then
      if healthy || { [ "$active" != active ] && [ "$active" != activating ] && [ "$result" = success ]; }; then break; fi
    fi
    if [ "$active" = failed ] || { [ "$active" = inactive ] && [ "$result" != success ]; } || { [ "$active" = inactive ] && ! bundle_saved; }; then
      reason=$(journalctl -u "$unit" --since "@$started" -o cat --no-pager 2>/dev/null | grep -iE 'error' | tail -n 1 | cut -c 1-200 || true)
      fail "the compile-only run ended (exit ${status}) before vllm-rbln saved the cache${reason:+: $reason}"
    fi
    elapsed=$(( $(date +%s) - started ))
    [ "$elapsed" -lt "$timeout_s" ] || fail "vllm-rbln saved no cache within ${timeout_s}s (unit ${active})"
    say "waiting for the compile (${elapsed}s)"
    sleep "$interval_s"
  done
  systemctl stop "$unit" 2>/dev/null || true
}

compile_key all
