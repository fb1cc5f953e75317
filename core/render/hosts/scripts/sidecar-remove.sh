#!/usr/bin/env bash
# Removes a decode host's routing sidecar: its unit and its guard's nftables table. The image stays.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-1
unit=rbln-serving-dev.sidecar.service
unit_path=/etc/systemd/system/rbln-serving-dev.sidecar.service
firewall=/usr/sbin/nft
firewall_removal='table inet rbln_serving_sidecar_0123456789ab; delete table inet rbln_serving_sidecar_0123456789ab'
# --- end of settings ---

systemctl disable --now --quiet "$unit" 2>/dev/null || true
rm -f "$unit_path"
systemctl daemon-reload
# After the sidecar: its ports are closed by then.
[ ! -x "$firewall" ] || "$firewall" "$firewall_removal"
echo "sidecar ${host_name}: removed"
