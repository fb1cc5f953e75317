#!/usr/bin/env bash
# Downloads the models into HF_HOME once per host. stdin: line 1 the HF token (may be empty), then a pip.conf.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
install_root=/opt/rbln-serving
cache_root=/var/lib/rbln-serving
hf_home=/var/lib/rbln-serving/huggingface
service_user=rbln-serving
models=(MiniMaxAI/MiniMax-M2.7)
markers=(/var/lib/rbln-serving/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7)
downloader_venv=/opt/rbln-serving/venvs/huggingface_hub-0.35.3
downloader_requirement=huggingface_hub==0.35.3
# --- end of settings ---

missing=no
for marker in "${markers[@]}"; do
  [ -f "$marker" ] || missing=yes
done
if [ "$missing" = no ]; then
  echo "weights ${host_name}: ${models[*]} already in $hf_home; nothing to download"
  exit 0
fi

# shellcheck source=service-account.sh
. service-account.sh
hf_token=
IFS= read -r hf_token || true
pip_conf=$(mktemp)
trap 'rm -f "$pip_conf"' EXIT
chmod 0600 "$pip_conf"
cat > "$pip_conf"

if [ ! -f "$downloader_venv/.rbln-serving-complete" ]; then
  rm -rf "$downloader_venv"
  python3 -m venv "$downloader_venv"
  PIP_CONFIG_FILE="$pip_conf" "$downloader_venv/bin/pip" install --disable-pip-version-check --no-input "$downloader_requirement"
  touch "$downloader_venv/.rbln-serving-complete"
fi

for i in "${!models[@]}"; do
  [ -f "${markers[$i]}" ] && continue
  echo "weights ${host_name}: downloading ${models[$i]} into $hf_home"
  HF_HOME="$hf_home" HF_TOKEN="$hf_token" "$downloader_venv/bin/python" -c \
    'import sys; from huggingface_hub import snapshot_download; snapshot_download(repo_id=sys.argv[1])' "${models[$i]}"
  install -d -m 0755 "$(dirname "${markers[$i]}")"
  touch "${markers[$i]}"
done
chown -R "$service_user:$service_user" "$hf_home"
echo "weights ${host_name}: done"
