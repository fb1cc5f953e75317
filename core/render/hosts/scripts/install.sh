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
budget_s=7200
progress_s=30
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
# shellcheck source=../../scripts/progress-run.sh
. ../../scripts/progress-run.sh
current="$(dirname "$venv")/current"

# What pip has done: packages collected (resolved and fetched) while it resolves, then, once it
# names what it installs, how many of those are installed (their .dist-info folders).
install_amount() {
  local names installed
  names=$(sed -n 's/^Installing collected packages: //p' "$progress_log" | tail -n 1)
  if [ -z "$names" ]; then
    echo "packages $(grep -c '^Collecting ' "$progress_log") collected"
    return
  fi
  installed=$(($(find "$site_packages" -maxdepth 1 -name '*.dist-info' | wc -l) - packages_before))
  echo "packages $installed of $(($(tr -cd , <<< "$names" | wc -c) + 1)) installed"
}
previous=$(readlink "$current" 2>/dev/null || echo "nothing")
if [ -f "$venv/.rbln-serving-complete" ]; then
  echo "install ${host_name}: $venv is complete; nothing to install"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  chmod 0700 "$work"
  pip_conf=$work/pip.conf
  (umask 077; cat > "$pip_conf")
  # pip's output is shown, with the index password masked (pip hides it too, in the URLs it prints).
  progress_secrets=$(progress_secrets_from_urls "$pip_conf")
  progress_log=$work/pip.log
  # A venv without the marker is what a failed run left behind: start it again.
  rm -rf "$venv"
  python3 -m venv "$venv"
  site_packages=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  packages_before=$(find "$site_packages" -maxdepth 1 -name '*.dist-info' | wc -l)
  if ! PIP_CONFIG_FILE="$pip_conf" progress_run "$host_name" packages install "$budget_s" install_amount -- \
    "$venv/bin/pip" install --disable-pip-version-check --no-input --progress-bar off "${requirements[@]}"; then
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
