#!/usr/bin/env bash
# Downloads the models into HF_HOME from the hub (on the seed host; the others copy from it), each at
# its pinned revision or, when none is pinned, at the hub's current commit. Each model's completion
# marker holds the commit; the last lines of stdout name it: `revision <model> <commit>`.
# With cache.shared every host runs this on the one shared HF_HOME: a lease lock per model lets
# one host download while the others wait for its marker.
# stdin: line 1 the HF token (may be empty), then a pip.conf.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
install_root=/opt/rbln-serving
cache_root=/var/lib/rbln-serving
hf_home=/var/lib/rbln-serving/huggingface
service_user=rbln-serving
models=(MiniMaxAI/MiniMax-M2.7)
revisions=('')
markers=(/var/lib/rbln-serving/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7)
downloader_venv=/opt/rbln-serving/venvs/dev/huggingface_hub-0.35.3
downloader_requirement=huggingface_hub==0.35.3
shared_root=''
lease_lock_path=''
lease_lock_text=''
lock_names=('')
# --- end of settings ---

# A marker counts when it exists and, for a pinned revision, holds that commit.
have() {
  [ -f "${markers[$1]}" ] && { [ -z "${revisions[$1]}" ] || [ "$(cat "${markers[$1]}")" = "${revisions[$1]}" ]; }
}
report() {
  for i in "${!models[@]}"; do echo "revision ${models[$i]} $(cat "${markers[$i]}")"; done
}
missing=no
for i in "${!models[@]}"; do
  have "$i" || missing=yes
done
if [ "$missing" = no ]; then
  echo "weights ${host_name}: ${models[*]} already in $hf_home; nothing to download"
  report
  exit 0
fi

# shellcheck source=service-account.sh
. service-account.sh
# shellcheck source=shared-cache.sh
. shared-cache.sh
hf_token=
IFS= read -r hf_token || true
pip_conf=$(mktemp)
trap 'rm -f "$pip_conf"' EXIT
chmod 0600 "$pip_conf"
cat > "$pip_conf"

download() {
  local i=$1 snapshot commit
  if [ ! -f "$downloader_venv/.rbln-serving-complete" ]; then
    rm -rf "$downloader_venv"
    python3 -m venv "$downloader_venv"
    PIP_CONFIG_FILE="$pip_conf" "$downloader_venv/bin/pip" install --disable-pip-version-check --no-input "$downloader_requirement"
    touch "$downloader_venv/.rbln-serving-complete"
  fi
  echo "weights ${host_name}: downloading ${models[$i]}${revisions[$i]:+ at ${revisions[$i]}} into $hf_home"
  # snapshot_download returns .../snapshots/<commit>: the commit the hub resolved, recorded in the marker.
  snapshot=$(HF_HOME="$hf_home" HF_TOKEN="$hf_token" "$downloader_venv/bin/python" -c \
    'import sys; from huggingface_hub import snapshot_download; print(snapshot_download(repo_id=sys.argv[1], revision=sys.argv[2] or None))' "${models[$i]}" "${revisions[$i]}" | tail -n 1)
  commit=$(basename "$snapshot")
  chown -R "$service_user:$service_user" "$hf_home/hub"
  install -d -m 0755 "$(dirname "${markers[$i]}")"
  printf '%s\n' "$commit" > "${markers[$i]}.tmp"
  mv "${markers[$i]}.tmp" "${markers[$i]}"
}

if [ -n "$shared_root" ]; then
  # shellcheck source=/dev/null
  LEASE_LOCK_LIBRARY=1 . "$lease_lock_path"
fi
for i in "${!models[@]}"; do
  have "$i" && continue
  if [ -z "$shared_root" ]; then
    download "$i"
    continue
  fi
  # The writer writes the model's marker before the lock's: a lock marker without the model's means
  # the weights were removed since, so the lock's is stale.
  lock_done="$shared_lock_root/${lock_names[$i]}.done"
  if [ -f "$lock_done" ] && ! have "$i"; then rm -f "$lock_done"; fi
  LEASE_OWNER="${host_name}-$$" lease_run --name "${lock_names[$i]}" -- download "$i"
  have "$i" || { echo "weights ${host_name}: ${models[$i]}: the shared download ended without its marker ${markers[$i]}" >&2; exit 1; }
done
echo "weights ${host_name}: done"
report
