#!/usr/bin/env bash
# Stops, disables and removes a rank's unit, environment file and rollback state; the caches stay.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
unit=rbln-serving-dev.main-0.service
unit_path=/etc/systemd/system/rbln-serving-dev.main-0.service
env_path=/opt/rbln-serving/env/dev.main-0.env
state_dir=/opt/rbln-serving/rollout
# --- end of settings ---

# shellcheck source=unit-files.sh
. unit-files.sh

systemctl disable --now --quiet "$unit" 2>/dev/null || true
remove_unit_files "$unit" "$unit_path" "$env_path"
echo "unit ${host_name}: removed $unit"
