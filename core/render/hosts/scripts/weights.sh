#!/usr/bin/env bash
# Downloads the models into HF_HOME from the hub (on the seed host; the others copy from it), each at
# its pinned revision or, when none is pinned, at the hub's current commit. Each model's completion
# marker holds the commit; the last lines of stdout name it: `revision <model> <commit>`.
# With cache.shared every host runs this on the one shared HF_HOME: a lease lock per model lets
# one host download while the others wait for its marker. There everything in the shared folder is
# read and written as the service user, never as root, which an NFS export may squash.
# stdin: line 1 the HF token (may be empty), then a pip.conf.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
install_root=/opt/rbln-serving
cache_root=/var/lib/rbln-serving
hf_home=/var/lib/rbln-serving/huggingface
service_user=rbln-serving
setup_lock=/run/rbln-serving-setup.lock
models=(MiniMaxAI/MiniMax-M2.7)
revisions=('')
markers=(/var/lib/rbln-serving/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7)
downloader_venv=/opt/rbln-serving/venvs/dev/huggingface_hub-0.35.3
downloader_requirement=huggingface_hub==0.35.3
shared_root=''
shared_lock_root=''
lease_lock_path=''
lease_lock_text=''
lock_names=('')
# --- end of settings ---

# What this writes (venvs, weights) is read by the service user, whatever root's umask is.
umask 022

# Who touches HF_HOME: root on a host's own cache, the service user on the shared one.
cache_user=()
[ -z "$shared_root" ] || cache_user=(runuser -u "$service_user" --)
# A marker counts when it exists and, for a pinned revision, holds that commit. (Before the first
# install the service user does not exist yet: then nothing counts, quietly.)
have() {
  "${cache_user[@]}" test -f "${markers[$1]}" 2>/dev/null && { [ -z "${revisions[$1]}" ] || [ "$("${cache_user[@]}" cat "${markers[$1]}")" = "${revisions[$1]}" ]; }
}
report() {
  for i in "${!models[@]}"; do echo "revision ${models[$i]} $("${cache_user[@]}" cat "${markers[$i]}")"; done
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

# Downloads model i and records the commit snapshot_download resolved (its snapshot folder's name)
# in the marker, by rename; runs as whoever runs it, so the files are theirs.
download_py='import os, sys
from huggingface_hub import snapshot_download
host, repo, revision, marker = sys.argv[1:5]
at = " at " + revision if revision else ""
print("weights %s: downloading %s%s into %s" % (host, repo, at, os.environ["HF_HOME"]), flush=True)
commit = os.path.basename(snapshot_download(repo_id=repo, revision=revision or None))
os.makedirs(os.path.dirname(marker), exist_ok=True)
with open(marker + ".tmp", "w") as f:
    f.write(commit + "\n")
os.replace(marker + ".tmp", marker)'

for i in "${!models[@]}"; do
  have "$i" && continue
  if [ ! -f "$downloader_venv/.rbln-serving-complete" ]; then
    rm -rf "$downloader_venv"
    python3 -m venv "$downloader_venv"
    PIP_CONFIG_FILE="$pip_conf" "$downloader_venv/bin/pip" install --disable-pip-version-check --no-input "$downloader_requirement"
    touch "$downloader_venv/.rbln-serving-complete"
  fi
  download=("$downloader_venv/bin/python" -c "$download_py" "$host_name" "${models[$i]}" "${revisions[$i]}" "${markers[$i]}")
  if [ -z "$shared_root" ]; then
    HF_HOME="$hf_home" HF_TOKEN="$hf_token" "${download[@]}"
    chown -R "$service_user:$service_user" "$hf_home/hub"
    continue
  fi
  # The writer writes the model's marker before the lock's: a lock marker without the model's means
  # the weights were removed since, so the lock's is stale.
  lock_done="$shared_lock_root/${lock_names[$i]}.done"
  if "${cache_user[@]}" test -f "$lock_done" && ! have "$i"; then "${cache_user[@]}" rm -f "$lock_done"; fi
  HF_HOME="$hf_home" HF_TOKEN="$hf_token" LEASE_OWNER="${host_name}-$$" "${cache_user[@]}" bash "$lease_lock_path" run --name "${lock_names[$i]}" -- "${download[@]}"
  have "$i" || { echo "weights ${host_name}: ${models[$i]}: the shared download ended without its marker ${markers[$i]}" >&2; exit 1; }
done
echo "weights ${host_name}: done"
report
