# shellcheck shell=bash
# The service account, its cache folders and its NPU device group. Install and weights run side by
# side and both need them, so both run this, one at a time under a lock.
# Reads: service_user, install_root, cache_root, setup_lock.
# shellcheck disable=SC2154
exec 9>"$setup_lock"
flock 9
if ! id -u "$service_user" >/dev/null 2>&1; then
  useradd --system --home-dir "$cache_root" --no-create-home --shell /usr/sbin/nologin "$service_user"
fi
# Only folders this creates get an owner and a mode: an existing folder (the operator's) keeps its own.
for dir in "$install_root" "$install_root/venvs"; do
  [ -d "$dir" ] || install -d -m 0755 "$dir"
done
[ -d "$install_root/env" ] || install -d -m 0700 "$install_root/env"
for dir in "$cache_root" "$cache_root/huggingface" "$cache_root/vllm" "$cache_root/offload"; do
  [ -d "$dir" ] || install -d -o "$service_user" -g "$service_user" -m 0750 "$dir"
done
for device in /dev/rbln[0-9]*; do
  [ -e "$device" ] || continue
  group=$(stat -c %G "$device")
  if [ "$group" != root ] && ! id -nG "$service_user" | tr ' ' '\n' | grep -qx "$group"; then
    usermod -aG "$group" "$service_user"
  fi
done
flock -u 9
