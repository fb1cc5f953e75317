#!/usr/bin/env bash
# Removes the hosts' front door key from the router host: its authorized_keys line and the key.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
authorized_keys=/root/.ssh/authorized_keys
tag='rbln-serving-front-door dev'
# --- end of settings ---

grant_label="front door access on ${host_name}"
# shellcheck source=authorized-keys.sh
. authorized-keys.sh
edit_authorized_keys ""
rm -rf "$state_dir/access"
echo "front door access ${host_name}: revoked"
