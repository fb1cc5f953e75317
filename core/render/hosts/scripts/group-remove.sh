#!/usr/bin/env bash
# Removes a data-parallel group's restart unit, its script and its restart history; its ranks are
# removed by their own steps, before this one.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-1
unit=rbln-serving-dev.decode-group-restart.service
unit_path=/etc/systemd/system/rbln-serving-dev.decode-group-restart.service
script_path=/opt/rbln-serving/bin/rbln-serving-dev.decode-group-restart.sh
history=/run/rbln-serving-dev.decode-group.restarts
# --- end of settings ---

systemctl stop "$unit" 2>/dev/null || true
rm -f "$unit_path" "$script_path" "$history"
systemctl daemon-reload
systemctl reset-failed "$unit" 2>/dev/null || true
echo "group ${host_name}: removed $unit"
