# shellcheck shell=bash
# The unit step's disk check: a (re)start grows the compile cache (and offload files) under the cache
# root, so every one needs restart_free_gb there, not only the first preflight.
# Reads: host_name, label, cache_root, restart_free_gb.
# shellcheck disable=SC2154

# shellcheck source=disk.sh
. disk.sh

# Ends the step with one line when too little is free. Called before the step changes anything, so
# the running unit and its files stay as they are.
check_restart_disk() {
  free_space "$cache_root"
  if [ "$free_gb" -lt "$restart_free_gb" ]; then
    echo "${host_name} ${label}: only $free_gb GiB free under $free_under, need $restart_free_gb GiB to restart (the compile cache grows on a start); nothing changed" >&2
    exit 1
  fi
}
