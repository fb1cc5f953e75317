#!/usr/bin/env bash
# Waits until every rank of the host serves, or says which rank failed. Run as root: the probe reads
# each rank's API key from its process (serving.sh).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
units=(rbln-serving-dev.main-0.service)
labels=('main rank 0')
ports=(8000)
bundle_dirs=(/var/lib/rbln-serving/vllm/rbln/MiniMaxAI_MiniMax-M2.7-15923874)
probe_host=127.0.0.1
timeout_s=9600
interval_s=30
start_limit_burst=3
probe_py='import sys'
# --- end of settings ---

# shellcheck source=serving.sh
. serving.sh

now=$(date +%s)
for i in "${!ports[@]}"; do
  cache_bundle_dir=${bundle_dirs[$i]}
  if ! wait_serving "${units[$i]}" "${labels[$i]}" "${ports[$i]}" "$now"; then
    journal_tail "${units[$i]}" "$now"
    echo "ready ${host_name}: ${labels[$i]} (port ${ports[$i]}) does not serve: $failure" >&2
    exit 1
  fi
done
