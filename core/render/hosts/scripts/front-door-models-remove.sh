#!/usr/bin/env bash
# Removes the front door of a stack of models from its router host: its units, Envoy's files and each
# model's EPP files and state. Images stay.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dirs=(/opt/rbln-serving/router/dev /opt/rbln-serving/router/dev.rbln-serving-chat)
unit_dir=/etc/systemd/system
units=(rbln-serving-dev.rbln-serving-chat.front-door-epp.service rbln-serving-dev.front-door-proxy.service)
# --- end of settings ---

for unit in "${units[@]}"; do
  systemctl disable --now --quiet "$unit" 2>/dev/null || true
  rm -f "$unit_dir/$unit"
done
systemctl daemon-reload
for dir in "${state_dirs[@]}"; do
  rm -rf "$dir/epp" "$dir/envoy" "$dir/drains" "$dir/served" "$dir/desired.json" "$dir/lock" "$dir/models.list"
done
echo "front door ${host_name}: removed"
