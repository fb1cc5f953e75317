#!/usr/bin/env bash
# Removes the front door from its router host: its units, files and state. Images stay.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
unit_dir=/etc/systemd/system
units=(rbln-serving-dev.front-door-epp.service rbln-serving-dev.front-door-proxy.service rbln-serving-dev.front-door-agent.service)
# --- end of settings ---

for unit in "${units[@]}"; do
  systemctl disable --now --quiet "$unit" 2>/dev/null || true
  rm -f "$unit_dir/$unit"
done
systemctl daemon-reload
rm -rf "$state_dir/epp" "$state_dir/envoy" "$state_dir/drains" "$state_dir/served" "$state_dir/desired.json" "$state_dir/lock"
echo "front door ${host_name}: removed"
