#!/usr/bin/env bash
# On a copy source: removes the authorized_keys line a grant added for one destination, once its copy
# is done (and when the grant is deleted), and fails while a line with its tag is left. Idempotent.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
dest_name=npu-1
authorized_keys=/root/.ssh/authorized_keys
tag='rbln-serving-copy dev weights-npu-1'
copy_id=0123456789abcdef
# --- end of settings ---

grant_label="copy access ${host_name} -> ${dest_name}"
# shellcheck source=authorized-keys.sh
. authorized-keys.sh
edit_authorized_keys ""
echo "copy access ${host_name} -> ${dest_name}: revoked (${copy_id})"
