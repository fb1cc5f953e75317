# shellcheck shell=bash
# Taking over from the rank's unit of versions before deployment ids (`rbln-serving-<role>-<rank>.service`
# and `<installRoot>/env/<role>-<rank>.env`), which serves the same rank on the same port: stopped
# right before the new unit starts, removed once the new unit serves, back if the new unit does not.
# Reads: host_name, unit, unit_path, unit_text, env_path, state_dir, legacy_unit, legacy_env_path, managed_marker.
# shellcheck disable=SC2154

# shellcheck source=unit-files.sh
. unit-files.sh

# The address a unit's vLLM listens on: its `--host` line, or "" for all interfaces.
listen_address() {
  sed -n 's/^ *--host \([^ \\]*\).*$/\1/p' | head -n 1
}

# Whether two listen addresses take the same port: either is all interfaces, or both are one.
overlap() {
  case "$1" in "" | 0.0.0.0 | ::) return 0 ;; esac
  case "$2" in "" | 0.0.0.0 | ::) return 0 ;; esac
  [ "$1" = "$2" ]
}

legacy_unit_path="$(dirname "$unit_path")/$legacy_unit"
legacy=no
# Only a unit rbln-serving wrote (its name says it is this role and rank, so this port), and only
# when it is in the way: it listens where this unit will. One on another address belongs to another
# deployment that shares the host, and keeps serving.
if [ -f "$legacy_unit_path" ] && [ "$(head -n 1 "$legacy_unit_path")" = "$managed_marker" ] &&
  overlap "$(printf '%s\n' "$unit_text" | listen_address)" "$(listen_address < "$legacy_unit_path")"; then
  legacy=yes
fi

# Disabled too: after a reboot midway, only the new unit starts.
legacy_stop() {
  [ "$legacy" = yes ] || return 0
  systemctl disable --now --quiet "$legacy_unit"
  echo "unit ${host_name}: stopped $legacy_unit; $unit takes its place"
}

legacy_remove() {
  [ "$legacy" = yes ] || return 0
  remove_unit_files "$legacy_unit" "$legacy_unit_path" "$legacy_env_path"
  echo "unit ${host_name}: removed $legacy_unit, which $unit replaced"
}

# The new unit failed: it goes entirely (the state still holds the old delete step, which knows only
# the old names) and the old unit is enabled to start again.
legacy_give_back() {
  systemctl disable --now --quiet "$unit" 2>/dev/null || true
  remove_unit_files "$unit" "$unit_path" "$env_path"
  systemctl enable --quiet "$legacy_unit"
}
