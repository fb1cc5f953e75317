#!/usr/bin/env bash
# The compile Job of one compile key on Kubernetes (compile.enabled), in a pod with no NPU, in the
# flow compile-flow.sh shares with the compile host: the role's launch script runs in vllm-rbln's
# compile-only mode until vllm-rbln has saved the warmed-up cache, and is stopped. Without
# compile.enabled (a registry only) it only pulls. $1 names the phase a container runs (pull,
# compile, push; all for one container that runs them all): with a registry and compile.enabled
# the pull and the push run in containers of their own, before and after the compile's, so that
# the compile, which runs the model's own code, never has the registry password. The compile runs
# under the role's compile lock (the serving pods' lease of the same key). Env: the compile-only
# variables and VLLM_CACHE_ROOT; REGISTRY_PASSWORD from the stack's registry Secret in the pull and
# push containers only.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=compile-job
key=1cf6c9744861508e
roles=(main)
service_user=''
marker=/var/lib/rbln-serving/vllm/rbln-serving-complete/compile-1cf6c9744861508e
compile_here=yes
launch=/etc/rbln-serving/launch.sh
ports=8000
probe_py='import sys'
timeout_s=9600
interval_s=30
repository=''
registry_user=''
artifact_type=application/vnd.rbln-serving.compile-cache.v1
config_type=application/vnd.rbln-serving.compile-cache.config.v1+json
layer_type=application/vnd.rbln-serving.compile-cache.layer.v1.tar
# --- end of settings ---

: "${VLLM_CACHE_ROOT:?VLLM_CACHE_ROOT names the compile-cache volume}"
phase=${1:-all}
registry_password=${REGISTRY_PASSWORD:-}
unset REGISTRY_PASSWORD
cache_dir="$VLLM_CACHE_ROOT/rbln"
files_list="$marker.files"
cache_place="on the compile-cache volume"
first_compiler="the first pod of ${roles[*]}"
work=$(mktemp -d)
# The key's own folders on the volume: the compile's, which the compile-only run takes as its
# VLLM_CACHE_ROOT (vLLM and vllm-rbln key no compiled graph on it: it is in vLLM's ignored
# compile factors and not in vllm-rbln's RBLN_COMPILE_ENV), so a serving pod that saves its bundle
# meanwhile never mixes with this key's files; and the pull's and push's scratch. A run cut short
# left them behind: each phase starts its own over.
compile_dir="$VLLM_CACHE_ROOT/.rbln-serving-compile/$key/rbln"
scratch="$VLLM_CACHE_ROOT/.rbln-serving-scratch/$key"
case "$phase" in
  compile) rm -rf "$(dirname "$compile_dir")"; mkdir -p "$compile_dir" ;;
  *) rm -rf "$scratch"; mkdir -p "$scratch" ;;
esac
trap 'rm -rf "$work" "$scratch" "$(dirname "$compile_dir")"; rmdir "$(dirname "$scratch")" "$(dirname "$(dirname "$compile_dir")")" 2>/dev/null || true' EXIT
# No root in the pod: the files stay the pod user's, and chown has nothing to do.
chown() { :; }
install() { [ "$1" = -d ] && mkdir -p "${@: -1}"; }

# shellcheck source=../../scripts/compile-flow.sh
. ../../scripts/compile-flow.sh
# shellcheck source=../../scripts/progress.sh
. ../../scripts/progress.sh

# 0 when every port answers /health (core/probe.py; PID 0: no API key, /health needs none).
healthy() { python3 -c "$probe_py" 127.0.0.1 10 "$ports" /health 0 2>/dev/null; }

compile_only() {
  local pid started status
  started=$(date +%s)
  VLLM_CACHE_ROOT=$(dirname "$compile_dir") bash "$launch" > >(tee "$work/log") 2>&1 &
  pid=$!
  say "compiling for ${roles[*]} in compile-only mode, with no NPU"
  while :; do
    if bundle_saved && { healthy || ! kill -0 "$pid" 2>/dev/null; }; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      status=0
      wait "$pid" || status=$?
      bundle_saved && [ "$status" = 0 ] && break
      fail "the compile-only run ended (exit ${status}) before vllm-rbln saved the cache"
    fi
    [ $(( $(date +%s) - started )) -lt "$timeout_s" ] || fail "vllm-rbln saved no cache within ${timeout_s}s"
    # The pod's name stands for the host (kubectl logs job/<name> shows these lines).
    progress_line "${HOSTNAME:-$host_name}" "key:${key}" compile "$started" "$timeout_s" "" "$(tail -n 1 "$work/log")" | progress_mask || true
    sleep "$interval_s"
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

compile_key "$phase"
