#!/usr/bin/env bash
# Removes one host's front door key from the router host: its authorized_keys line and the key.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
authorized_keys=/root/.ssh/authorized_keys
tag='rbln-serving-front-door-drain dev npu-0'
drain_host=npu-0
# --- end of settings ---

case "$drain_host" in "" | *[!a-z0-9-]*) echo "front door access ${host_name}: ${drain_host@Q} is not a host name" >&2; exit 1 ;; esac
grant_label="front door access of ${drain_host} on ${host_name}"
# shellcheck source=authorized-keys.sh
. authorized-keys.sh
edit_authorized_keys ""
rm -rf "$state_dir/drain-keys/$drain_host"
echo "front door access ${host_name}: ${drain_host}'s key revoked"
