# shellcheck shell=bash
# Taking this host's endpoints out of the front door before their ranks stop, and back once the step
# has decided: over SSH to the router host, where the key this step was handed runs only the front
# door's `drain NAME`, `renew NAME` and `rejoin NAME` (front-door.py). A drain ends only by the
# step's rejoin, or when its lease runs out: while the step runs, a keeper renews it in the
# background, so a step that dies (killed, its host rebooted) leaves its endpoints out for one lease
# at most, and one that runs for hours keeps them out throughout. Nothing without a front door
# (router_ssh_address empty).
# Reads: router_ssh_address, router_ssh_port, router_ssh_host_key, router_ssh_bind,
# front_door_renew_s; the key from stdin.
# shellcheck disable=SC2154

# shellcheck source=peer-ssh.sh
. peer-ssh.sh

front_door_key=
front_door_drained=()
front_door_keeper=

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

# front_door_ctl drain|renew|rejoin NAME...: one SSH session per endpoint; fails at the first that fails.
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

# Renews the drains of $@ every front_door_renew_s while this step ($1) lives; a renewal that fails
# (the router host rebooting) is tried again at the next turn. Ends on TERM, or once the step is gone.
front_door_keep() {
  local step=$1 nap='' fd
  shift
  # The step's locks are descriptors it holds open (unit-apply.sh): the keeper may outlive the step by
  # a turn, and must not hold them then.
  for fd in /proc/self/fd/*; do
    fd=${fd##*/}
    [ "$fd" -le 2 ] || eval "exec $fd>&-"
  done 2>/dev/null
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do
    sleep "$front_door_renew_s" &
    nap=$!
    wait "$nap"
    kill -0 "$step" 2>/dev/null || exit 0
    front_door_ctl renew "$@" || true
  done
}

# Out of the front door before a restart: 1 when it cannot (it would leave a role without an
# endpoint, the router is unreachable), the router's reason on stderr. Asked again (the way back, a
# resumed step), it holds the drain that is there with a fresh lease. What it took out before a
# failure goes back with the rejoin.
front_door_drain() {
  [ -n "$router_ssh_address" ] && [ "$#" -gt 0 ] || return 0
  front_door_drained=("$@")
  front_door_ctl drain "$@" || return 1
  [ -z "$front_door_keeper" ] || return 0
  # Its own output goes nowhere: the step's end must not wait for it.
  (trap - ERR; set +e; front_door_keep "$$" "$@") </dev/null >/dev/null 2>&1 &
  front_door_keeper=$!
}

# Back in, once the step has decided; the drain runs out one lease after the step when the router
# cannot be reached now.
front_door_rejoin() {
  [ "${#front_door_drained[@]}" -gt 0 ] || return 0
  local names=("${front_door_drained[@]}")
  front_door_drained=()
  [ -z "$front_door_keeper" ] || kill "$front_door_keeper" 2>/dev/null || true
  front_door_keeper=
  front_door_ctl rejoin "${names[@]}" || echo "${host_name}: the front door was not told that ${names[*]} may serve again; they are listed again once their drain's lease runs out and they serve" >&2
}
