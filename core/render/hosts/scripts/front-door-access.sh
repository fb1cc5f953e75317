#!/usr/bin/env bash
# One host's key to the front door, which its unit and sidecar steps take their own endpoints out
# with: made once on the router host (kept there, root only), and let into root's account by ONE
# authorized_keys line that accepts it only from that host's address, with no shell, forwarding
# or pty, and runs only the front door's `drain NAME`, `renew NAME` and `rejoin NAME` for NAME one
# of that host's endpoints (front-door.py ssh DIR HOST). So root on one host cannot drain
# another's. stdout: the private key (a secret output, that host's steps' stdin).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
authorized_keys=/root/.ssh/authorized_keys
tag='rbln-serving-front-door-drain dev npu-0'
drain_host=npu-0
from_address=10.0.0.1
agent_path=/opt/rbln-serving/bin/front-door-0123456789ab.py
# --- end of settings ---

fail() { echo "front door access ${host_name}: $*" >&2; exit 1; }
case "$from_address$state_dir$agent_path$drain_host" in *[\"\ \\,]*) fail "addresses, paths and host names may not hold quotes, spaces, commas or backslashes" ;; esac
keys="$state_dir/drain-keys/$drain_host"
install -d -m 0700 "$state_dir/drain-keys" "$keys"
[ -f "$keys/id" ] || ssh-keygen -q -t ed25519 -N '' -C "$tag" -f "$keys/id"
line="from=\"${from_address}\",restrict,command=\"/usr/bin/env python3 ${agent_path} ssh ${state_dir} ${drain_host}\" $(cut -d ' ' -f 1,2 "$keys/id.pub") ${tag}"

grant_label="front door access of ${drain_host} on ${host_name}"
# shellcheck source=authorized-keys.sh
. authorized-keys.sh
edit_authorized_keys "$line"
echo "front door access ${host_name}: ${drain_host} (${from_address}) may take its own endpoints out and back" >&2
cat "$keys/id"
