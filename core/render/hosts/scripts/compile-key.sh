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
port=8000
probe_host=127.0.0.1
probe_py='import sys'
timeout_s=9600
interval_s=30
saved_line='Saved rbln mega-cache bundle to '
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
install -d -m 0755 "$(dirname "$marker")"
work=$(mktemp -d /run/rbln-serving-compile.XXXXXX)
scratch=$(mktemp -d "$cache_root/vllm/.rbln-serving-scratch.XXXXXX")
trap 'systemctl stop "$unit" 2>/dev/null || true; rm -rf "$work" "$scratch"' EXIT
chmod 0700 "$work" "$scratch"

# shellcheck source=../../scripts/compile-flow.sh
. ../../scripts/compile-flow.sh

# 0 when the compile-only server answers /health: every engine is past its warm-up (core/probe.py; PID 0: no API key, /health needs none).
healthy() { python3 -c "$probe_py" "$probe_host" 10 "$port" /health 0 2>/dev/null; }

# Runs the role's command in compile-only mode as a transient unit of the service user and waits for
# vllm-rbln's "saved" line, then for the server to answer or the process to end well: what serve
# does once compile-only has compiled is not documented, so either counts; dying first does not.
compile_only() {
  local started log active result status elapsed reason
  [ -x "${command[0]}" ] || fail "${command[0]} not found (the install step puts it there)"
  command -v systemd-run >/dev/null || fail "systemd-run not found: the compile host needs systemd"
  install -d -o "$service_user" -g "$service_user" -m 0750 "$cache_dir"
  printf '%s\n' "$env_text" > "$work/env"
  touch "$work/start"
  systemctl stop "$unit" 2>/dev/null || true
  systemctl reset-failed "$unit" 2>/dev/null || true
  started=$(date +%s)
  systemd-run --quiet --unit="$unit" --property=User="$service_user" --property=Group="$service_user" \
    --property=EnvironmentFile="$work/env" --property=WorkingDirectory="$cache_root" --property=KillMode=mixed -- "${command[@]}"
  say "compiling for ${roles[*]} in compile-only mode, with no NPU; this takes as long as a first start"
  while :; do
    log=$(journalctl -u "$unit" --since "@$started" -o cat --no-pager 2>/dev/null || true)
    active=$(systemctl show -p ActiveState --value "$unit" 2>/dev/null || echo unknown)
    result=$(systemctl show -p Result --value "$unit" 2>/dev/null || echo unknown)
    status=$(systemctl show -p ExecMainStatus --value "$unit" 2>/dev/null || echo 0)
    if grep -qF -- "$saved_line" <<<"$log"; then
      if healthy || { [ "$active" != active ] && [ "$active" != activating ] && [ "$result" = success ]; }; then break; fi
    fi
    if [ "$active" = failed ] || { [ "$active" = inactive ] && [ "$result" != success ]; } || { [ "$active" = inactive ] && ! grep -qF -- "$saved_line" <<<"$log"; }; then
      reason=$(grep -iE 'error' <<<"$log" | tail -n 1 | cut -c 1-200 || true)
      fail "the compile-only run ended (exit ${status}) before vllm-rbln saved the cache${reason:+: $reason}"
    fi
    elapsed=$(( $(date +%s) - started ))
    [ "$elapsed" -lt "$timeout_s" ] || fail "vllm-rbln saved no cache within ${timeout_s}s (unit ${active})"
    say "waiting for the compile (${elapsed}s)"
    sleep "$interval_s"
  done
  systemctl stop "$unit" 2>/dev/null || true
}

compile_key
