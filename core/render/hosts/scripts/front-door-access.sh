#!/usr/bin/env bash
# The key the stack's hosts take their endpoints out of the front door with: made once on the router
# host, kept there (root only), and let into root's account by ONE authorized_keys line that accepts
# it only from the stack's hosts, with no shell, forwarding or pty, and only the front door's
# `drain NAME`, `renew NAME` and `rejoin NAME`. stdout: the private key (a secret output, the unit
# steps' stdin).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
authorized_keys=/root/.ssh/authorized_keys
tag='rbln-serving-front-door dev'
from_addresses=10.0.0.1,10.0.0.2
agent_path=/opt/rbln-serving/bin/front-door-0123456789ab.py
# --- end of settings ---

fail() { echo "front door access ${host_name}: $*" >&2; exit 1; }
case "$from_addresses$state_dir$agent_path" in *[\"\ \\]*) fail "addresses and paths may not hold quotes, spaces or backslashes" ;; esac
install -d -m 0700 "$state_dir/access"
[ -f "$state_dir/access/id" ] || ssh-keygen -q -t ed25519 -N '' -C "$tag" -f "$state_dir/access/id"
line="from=\"${from_addresses}\",restrict,command=\"/usr/bin/env python3 ${agent_path} ssh ${state_dir}\" $(cut -d ' ' -f 1,2 "$state_dir/access/id.pub") ${tag}"

grant_label="front door access on ${host_name}"
# shellcheck source=authorized-keys.sh
. authorized-keys.sh
edit_authorized_keys "$line"
echo "front door access ${host_name}: ${from_addresses} may take their endpoints out and back" >&2
cat "$state_dir/access/id"
