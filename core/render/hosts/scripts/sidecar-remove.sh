#!/usr/bin/env bash
# Removes a decode host's routing sidecar: its unit. The image stays.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-1
unit=rbln-serving-dev.sidecar.service
unit_path=/etc/systemd/system/rbln-serving-dev.sidecar.service
# --- end of settings ---

systemctl disable --now --quiet "$unit" 2>/dev/null || true
rm -f "$unit_path"
systemctl daemon-reload
echo "sidecar ${host_name}: removed"
