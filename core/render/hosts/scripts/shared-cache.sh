# shellcheck shell=bash
# With cache.shared: the shared folders and the lease lock the steps and units take there. Install
# and weights run side by side and both need them; the lock script is written to its content-named
# path by rename, so either may write it first. Nothing without a shared cache.
# Reads: host_name, shared_root, shared_lock_root (the leases' folder), service_user, lease_lock_path,
# lease_lock_text (all "" without cache.shared).
# shellcheck disable=SC2154
if [ -n "$shared_root" ]; then
  # Folders this creates belong to the service user: every host's units write the compiled cache
  # and take compile leases there (the same uid on every host, see the README).
  service_uid=$(id -u "$service_user")
  for dir in "$shared_root/huggingface" "$shared_root/vllm" "$shared_lock_root"; do
    [ -d "$dir" ] || install -d -o "$service_user" -g "$service_user" -m 0750 "$dir"
    owner=$(stat -c %u "$dir")
    if [ "$owner" != "$service_uid" ]; then
      echo "cache.shared ${host_name}: $dir belongs to uid $owner, but $service_user is uid $service_uid here; the service user needs the same uid on every host (see docs/caches.md, A shared cache)" >&2
      exit 1
    fi
  done
  if [ ! -f "$lease_lock_path" ]; then
    [ -d "$(dirname "$lease_lock_path")" ] || install -d -m 0755 "$(dirname "$lease_lock_path")"
    lease_lock_new=$(mktemp "$lease_lock_path.XXXXXX")
    printf '%s\n' "$lease_lock_text" > "$lease_lock_new"
    chmod 0755 "$lease_lock_new"
    mv -f "$lease_lock_new" "$lease_lock_path"
  fi
fi
