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
budget_s=28800
progress_s=30
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
# shellcheck source=../../scripts/progress-run.sh
. ../../scripts/progress-run.sh
hf_token=
IFS= read -r hf_token || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
pip_conf=$work/pip.conf
(umask 077; cat > "$pip_conf")
# What pip and the hub client print is shown, the token and the index password masked.
progress_secrets=$(printf '%s\n' "$hf_token"; progress_secrets_from_urls "$pip_conf")

# Bytes of model i on disk (its blobs, partial ones included) of its size on the hub, with the rate
# since the last line and the ETA; the size is what the download wrote to $work/total-i.
download_amount() {
  local bytes total previous=-1
  bytes=$(progress_file_bytes "$hf_home/hub/models--${models[$i]//\//--}" "${cache_user[@]}")
  total=$(cat "$work/total-$i" 2>/dev/null)
  [ ! -f "$work/done-$i" ] || previous=$(cat "$work/done-$i")
  echo "${bytes:-0}" > "$work/done-$i"
  progress_transfer "${bytes:-0}" "${total:-0}" "$previous" "$progress_s"
}

# shellcheck source=../../scripts/hub-download.sh
. ../../scripts/hub-download.sh

for i in "${!models[@]}"; do
  have "$i" && continue
  if [ ! -f "$downloader_venv/.rbln-serving-complete" ]; then
    rm -rf "$downloader_venv"
    python3 -m venv "$downloader_venv"
    PIP_CONFIG_FILE="$pip_conf" progress_run "$host_name" downloader install "$budget_s" "" -- \
      "$downloader_venv/bin/pip" install --disable-pip-version-check --no-input --progress-bar off "$downloader_requirement"
    touch "$downloader_venv/.rbln-serving-complete"
  fi
  # The download writes the size it will fetch here, as the service user on a shared cache.
  install -m 0644 -o "$service_user" /dev/null "$work/total-$i"
  download=("$downloader_venv/bin/python" -c "$download_py" "$host_name" "${models[$i]}" "${revisions[$i]}" "${markers[$i]}" "$work/total-$i")
  # The progress lines say how far it is; the hub client's bars would only fill the log.
  export HF_HUB_DISABLE_PROGRESS_BARS=1
  if [ -z "$shared_root" ]; then
    HF_HOME="$hf_home" HF_TOKEN="$hf_token" progress_run "$host_name" "${models[$i]}" download "$budget_s" download_amount -- "${download[@]}"
    chown -R "$service_user:$service_user" "$hf_home/hub"
    continue
  fi
  # The writer writes the model's marker before the lock's: a lock marker without the model's means
  # the weights were removed since, so the lock's is stale.
  lock_done="$shared_lock_root/${lock_names[$i]}.done"
  if "${cache_user[@]}" test -f "$lock_done" && ! have "$i"; then "${cache_user[@]}" rm -f "$lock_done"; fi
  HF_HOME="$hf_home" HF_TOKEN="$hf_token" LEASE_OWNER="${host_name}-$$" progress_run "$host_name" "${models[$i]}" download "$budget_s" download_amount -- "${cache_user[@]}" bash "$lease_lock_path" run --name "${lock_names[$i]}" -- "${download[@]}"
  have "$i" || { echo "weights ${host_name}: ${models[$i]}: the shared download ended without its marker ${markers[$i]}" >&2; exit 1; }
done
echo "weights ${host_name}: done"
report
