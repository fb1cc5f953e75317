#!/usr/bin/env bash
# On a copy source: lets one destination host read the cache root, once. Generates an ephemeral
# ed25519 key pair in tmpfs, adds ONE authorized_keys line for root that accepts it only from the
# destination's address, with no shell, forwarding or pty, only `rrsync -ro <cache root>`, and only
# until it expires; prints the private key on stdout (a secret output, the copy step's stdin) and
# deletes it here. A line with the same tag (an earlier grant to the same destination) is replaced.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
dest_name=npu-1
dest_address=10.0.0.2
cache_root=/var/lib/rbln-serving
authorized_keys=/root/.ssh/authorized_keys
tag='rbln-serving-copy dev weights-npu-1'
expiry_hours=8
copy_id=0123456789abcdef
# --- end of settings ---

fail() { echo "copy access ${host_name} -> ${dest_name}: $*" >&2; exit 1; }
rrsync=$(command -v rrsync) || fail "rrsync not found (Debian's rsync package ships /usr/bin/rrsync: apt-get install rsync)"
case "$cache_root$dest_address" in *[\"\ \\,]*) fail "cache root and address may not hold quotes, spaces, commas or backslashes" ;; esac
keys=$(mktemp -d /dev/shm/rbln-serving-allow.XXXXXX)
trap 'rm -rf "$keys"' EXIT
ssh-keygen -q -t ed25519 -N '' -C "$tag" -f "$keys/id"
expiry=$(date -u -d "+${expiry_hours} hours" +%Y%m%d%H%M%S)
line="from=\"${dest_address}\",restrict,expiry-time=\"${expiry}\",command=\"${rrsync} -ro ${cache_root}\" $(cut -d ' ' -f 1,2 "$keys/id.pub") ${tag}"

grant_label="copy access ${host_name} -> ${dest_name}"
# shellcheck source=authorized-keys.sh
. authorized-keys.sh
edit_authorized_keys "$line"
echo "copy access ${host_name} -> ${dest_name}: granted read-only ${cache_root} to ${dest_address} until ${expiry}Z (${copy_id})" >&2
cat "$keys/id"
