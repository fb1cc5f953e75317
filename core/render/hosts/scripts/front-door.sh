# shellcheck shell=bash
# Taking this host's endpoints out of the front door before their ranks stop, and back once the step
# is done: over SSH to the router host, where the key this step was handed runs only the front door's
# `drain NAME` and `rejoin NAME` (front-door.py). The router's agent also lists an endpoint again by
# itself once it has restarted and serves, so a step that never gets to rejoin leaves nothing out
# for good. Nothing without a front door (router_ssh_address empty).
# Reads: router_ssh_address, router_ssh_port, router_ssh_host_key, router_ssh_bind; the key from stdin.
# shellcheck disable=SC2154

# shellcheck source=peer-ssh.sh
. peer-ssh.sh

front_door_key=
front_door_drained=()

# The key the router host's access step made: the first lines of stdin, through the key's last line.
read_front_door_key() {
  [ -n "$router_ssh_address" ] || return 0
  local line
  while IFS= read -r line; do
    front_door_key+="$line"$'\n'
    [ "$line" != "-----END OPENSSH PRIVATE KEY-----" ] || return 0
  done
  echo "${host_name}: no front door key on stdin (the router host's access step prints it)" >&2
  exit 1
}

# front_door_ctl drain|rejoin NAME...: one SSH session per endpoint; fails at the first that fails.
front_door_ctl() {
  local action=$1 dir name status=0
  shift
  dir=$(mktemp -d /run/rbln-serving-front-door.XXXXXX)
  (umask 077; printf '%s' "$front_door_key" > "$dir/id")
  peer_ssh_setup "$dir" "$router_ssh_address" "$router_ssh_port" "$router_ssh_host_key" "$router_ssh_bind"
  for name in "$@"; do
    "${peer_ssh[@]}" "$peer_remote" "$action $name" || { status=1; break; }
  done
  rm -rf "$dir"
  return "$status"
}

# Out of the front door before a restart; the router's one-line reason and exit 1 when it cannot
# (it would leave a role without an endpoint, the router is unreachable), with nothing changed.
front_door_drain() {
  [ -n "$router_ssh_address" ] && [ "$#" -gt 0 ] || return 0
  front_door_drained=("$@")
  if ! front_door_ctl drain "$@"; then
    front_door_drained=()
    echo "${host_name}: the front door did not take $* out (see above); nothing changed" >&2
    exit 1
  fi
}

# Back in, once; the agent does it anyway when the router cannot be reached now.
front_door_rejoin() {
  [ "${#front_door_drained[@]}" -gt 0 ] || return 0
  local names=("${front_door_drained[@]}")
  front_door_drained=()
  front_door_ctl rejoin "${names[@]}" || echo "${host_name}: the front door was not told that ${names[*]} may serve again; its agent lists them once they serve" >&2
}
