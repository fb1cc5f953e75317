# shellcheck shell=bash
# Units of this deployment on this host that the stack no longer runs here (a role or a rank removed,
# the strategy changed): Pulumi deletes them last, after every unit step, but the new rank may need
# their port or NPUs first. They are stopped and disabled right before this rank (re)starts (the front
# door took their endpoints out in its own step, which every unit step comes after), and started again
# if the new config does not serve and there is nothing to go back to; their delete removes their files.
# Nothing without stray_glob. Reads: host_name, stray_glob, host_units.
# shellcheck disable=SC2154

strays=()

strays_stop() {
  [ -n "$stray_glob" ] || return 0
  local name
  while read -r name _; do
    case " ${host_units[*]} " in *" $name "*) continue ;; esac
    case "$name" in *.front-door-*) continue ;; esac
    strays+=("$name")
  done < <(systemctl list-units --all --plain --no-legend --type=service "$stray_glob" 2>/dev/null || true)
  [ "${#strays[@]}" -gt 0 ] || return 0
  # All at once: each stop may drain for vLLM's shutdown timeout, and the step's timeout counts one.
  systemctl disable --now --quiet "${strays[@]}" || true
  for name in "${strays[@]}"; do
    echo "unit ${host_name}: stopped $name, which the stack no longer runs on this host (its delete removes its files)"
  done
}

strays_give_back() {
  local name
  for name in "${strays[@]}"; do
    systemctl enable --now --quiet "$name" || true
    echo "unit ${host_name}: started $name again"
  done
  strays=()
}
