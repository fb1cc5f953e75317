#!/usr/bin/env bash
# Installs the pinned packages into a virtualenv named after their versions, in the deployment's own
# folder of venvs, checks the imports, then switches the deployment's `current` to it atomically. A
# complete venv is not touched again, nor is another deployment's. stdin: the pip.conf.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
install_root=/opt/rbln-serving
cache_root=/var/lib/rbln-serving
venv=/opt/rbln-serving/venvs/dev/rebel-compiler-0.12.0_vllm-rbln-0.12.0
requirements=(rebel-compiler==0.12.0 'vllm-rbln[kv_connectors]==0.12.0')
imports=(rebel vllm_rbln)
service_user=rbln-serving
setup_lock=/run/rbln-serving-setup.lock
shared_root=''
shared_lock_root=''
lease_lock_path=''
lease_lock_text=''
# --- end of settings ---

# What this writes (venvs, weights) is read by the service user, whatever root's umask is.
umask 022

case "$venv" in
  "$install_root"/venvs/?*/?*) ;;
  *) echo "install ${host_name}: refusing venv path $venv outside $install_root/venvs" >&2; exit 1 ;;
esac

# shellcheck source=service-account.sh
. service-account.sh
# shellcheck source=shared-cache.sh
. shared-cache.sh
current="$(dirname "$venv")/current"
previous=$(readlink "$current" 2>/dev/null || echo "nothing")
if [ -f "$venv/.rbln-serving-complete" ]; then
  echo "install ${host_name}: $venv is complete; nothing to install"
else
  pip_conf=$(mktemp)
  trap 'rm -f "$pip_conf"' EXIT
  chmod 0600 "$pip_conf"
  cat > "$pip_conf"
  # A venv without the marker is what a failed run left behind: start it again.
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! PIP_CONFIG_FILE="$pip_conf" "$venv/bin/pip" install --disable-pip-version-check --no-input "${requirements[@]}"; then
    echo "install ${host_name}: pip install failed (its reason is above); current still points to $previous" >&2
    exit 1
  fi
  for module in "${imports[@]}"; do
    if ! "$venv/bin/python" -c "import $module"; then
      echo "install ${host_name}: import $module failed after install; current still points to $previous" >&2
      exit 1
    fi
  done
  printf '%s\n' "${requirements[@]}" > "$venv/.rbln-serving-complete"
  echo "install ${host_name}: installed ${requirements[*]} into $venv"
fi

if [ "$previous" != "$venv" ]; then
  ln -sfn "$venv" "$current.new"
  mv -Tf "$current.new" "$current"
  echo "install ${host_name}: $current -> $venv (was $previous)"
fi
