#!/usr/bin/env bash
# Copies finished cache directories from a peer host of the stack with rsync over SSH: only once the
# peer's completion marker exists, resumable (--partial), then checked: files whose names are their
# sha256 (the hub cache's blobs) are hashed, every other file is compared by size with the peer's.
# Writes this host's own marker last. stdin: the one-time private key from the peer's grant step.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-1
source_name=npu-0
source_address=10.0.0.1
source_port=22
bind_address=10.0.0.2
source_host_key='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExample'
install_root=/opt/rbln-serving
cache_root=/var/lib/rbln-serving
service_user=rbln-serving
setup_lock=/run/rbln-serving-setup.lock
what='weights MiniMaxAI/MiniMax-M2.7'
dirs=(huggingface/hub/models--MiniMaxAI--MiniMax-M2.7)
source_markers=(huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7)
markers=(/var/lib/rbln-serving/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7)
budget_s=28800
progress_s=30
# --- end of settings ---

fail() { echo "copy ${host_name} <- ${source_name}: $*" >&2; exit 1; }
key=$(cat)
missing=no
for marker in "${markers[@]}"; do [ -f "$marker" ] || missing=yes; done
if [ "$missing" = no ]; then
  echo "copy ${host_name} <- ${source_name}: ${what} already here; nothing to copy"
  exit 0
fi
command -v rsync >/dev/null || fail "rsync not found (apt-get install rsync)"
[ -n "$key" ] || fail "no key on stdin (the grant step on ${source_name} prints it)"

# shellcheck source=service-account.sh
. service-account.sh
work=$(mktemp -d /run/rbln-serving-copy.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0700 "$work"
(umask 077; printf '%s\n' "$key" > "$work/id")
unset key
# shellcheck source=peer-ssh.sh
. peer-ssh.sh
peer_ssh_setup "$work" "$source_address" "$source_port" "$source_host_key" "$bind_address"
ssh_command="${peer_ssh[*]}"
remote=$peer_rsync_remote
peer() { rsync -e "$ssh_command" "$@"; }
# shellcheck source=../../scripts/progress-run.sh
. ../../scripts/progress-run.sh

# Bytes of the directory here of its size on the peer (a dry run's total), rate and ETA.
copy_amount() {
  local bytes previous=-1
  bytes=$(progress_file_bytes "$cache_root/$dir")
  [ ! -f "$work/copied" ] || previous=$(cat "$work/copied")
  echo "${bytes:-0}" > "$work/copied"
  progress_transfer "${bytes:-0}" "$total" "$previous" "$progress_s"
}

for i in "${!dirs[@]}"; do
  [ -f "${markers[$i]}" ] && continue
  dir=${dirs[$i]}
  if [ -n "${source_markers[$i]}" ]; then
    peer -q "$remote:${source_markers[$i]}" "$work/source-marker" 2>"$work/err" ||
      fail "${source_markers[$i]} is not on ${source_name} yet: its download has not finished ($(tail -n 1 "$work/err"))"
  fi
  install -d -o "$service_user" -g "$service_user" -m 0750 "$cache_root/$dir"
  echo "copy ${host_name} <- ${source_name}: ${dir}"
  total=$(peer -rln --stats "$remote:$dir/" "$cache_root/$dir/" 2>/dev/null | sed -n 's/^Total file size: \([0-9,]*\) bytes.*/\1/p' | tr -d ,)
  total=${total:-0}
  rm -f "$work/copied"
  progress_run "$host_name" "from:${source_name}" copy "$budget_s" copy_amount -- \
    rsync -e "$ssh_command" -rlt --partial --partial-dir=.rsync-partial "$remote:$dir/" "$cache_root/$dir/"
  # Check: a dry run by size lists every file that still differs from the peer's; then the blobs' hashes.
  differ=$(peer -rln --size-only --out-format='%i %n' "$remote:$dir/" "$cache_root/$dir/" | grep -E '^[<>ch][fL]' || true)
  [ -z "$differ" ] || fail "${dir}: differs from ${source_name} after the copy: ${differ//$'\n'/, }"
  while IFS= read -r -d '' blob; do
    actual=$(sha256sum "$blob" | cut -d ' ' -f 1)
    if [ "$actual" != "$(basename "$blob")" ]; then
      rm -f "$blob"
      fail "${blob}: sha256 ${actual} does not match its name (corrupt on ${source_name}, or in transit; removed here)"
    fi
  done < <(find "$cache_root/$dir" -type f -regextype posix-extended -regex '.*/blobs/[0-9a-f]{64}' -print0)
  install -d -m 0755 "$(dirname "${markers[$i]}")"
  if [ -n "${source_markers[$i]}" ]; then cp "$work/source-marker" "${markers[$i]}.tmp"; else echo "${what}" > "${markers[$i]}.tmp"; fi
  mv "${markers[$i]}.tmp" "${markers[$i]}"
done
chown -R "$service_user:$service_user" "$cache_root/huggingface" "$cache_root/vllm"
echo "copy ${host_name} <- ${source_name}: ${what} copied and checked"
