# shellcheck shell=bash
# Taking this host's endpoints out of the front door before their ranks stop, and back once the step
# has decided: over SSH to each router host, where the key this step was handed for it runs only the
# front door's `drain NAME`, `renew NAME` and `rejoin NAME` (front-door.py). A drain ends only by the
# step's rejoin, or when its lease runs out: while the step runs, a keeper renews it in the
# background, so a step that dies (killed, its host rebooted) leaves its endpoints out for one lease
# at most, and one that runs for hours keeps them out throughout. With several router hosts each
# keeps its own endpoints file: a drain asks every one, and passes over one that cannot be reached (it
# serves nobody this host cannot reach either; its agent lists the endpoint again only as it serves),
# unless none can be. Nothing without a front door (router_ssh_address empty).
# Reads: router_ssh_address, router_ssh_port, router_ssh_host_key (arrays, one entry per router
# host), router_ssh_bind, front_door_renew_s; the keys from stdin, in the router hosts' order.
# shellcheck disable=SC2154

# shellcheck source=peer-ssh.sh
. peer-ssh.sh

front_door_keys=()
front_door_drained=()
front_door_keeper=

# The keys the router hosts' access steps made: the first lines of stdin, one key through its last line per router host.
read_front_door_key() {
  [ "${#router_ssh_address[@]}" -gt 0 ] || return 0
  local line key=
  while IFS= read -r line; do
    key+="$line"$'\n'
    [ "$line" = "-----END OPENSSH PRIVATE KEY-----" ] || continue
    front_door_keys+=("$key")
    key=
    [ "${#front_door_keys[@]}" -lt "${#router_ssh_address[@]}" ] || return 0
  done
  echo "${host_name}: no front door key on stdin for each of the ${#router_ssh_address[@]} router hosts (their access steps print them)" >&2
  exit 1
}

# front_door_ctl drain|renew|rejoin NAME...: on each router host, one SSH session per endpoint; fails
# at the first router host that refuses, or when none can be reached (ssh's status 255).
front_door_ctl() {
  local action=$1 dir name i status reached=0
  shift
  for i in "${!router_ssh_address[@]}"; do
    dir=$(mktemp -d /run/rbln-serving-front-door.XXXXXX)
    (umask 077; printf '%s' "${front_door_keys[$i]}" > "$dir/id")
    peer_ssh_setup "$dir" "${router_ssh_address[$i]}" "${router_ssh_port[$i]}" "${router_ssh_host_key[$i]}" "$router_ssh_bind"
    status=0
    for name in "$@"; do
      "${peer_ssh[@]}" "$peer_remote" "$action $name" || { status=$?; break; }
    done
    rm -rf "$dir"
    case $status in
      0) reached=$((reached + 1)) ;;
      255) [ "${#router_ssh_address[@]}" -eq 1 ] || echo "${host_name}: the front door on ${router_ssh_address[$i]} could not be reached to $action $*; passed over" >&2 ;;
      *) return 1 ;;
    esac
  done
  [ "$reached" -gt 0 ]
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
  [ "${#router_ssh_address[@]}" -gt 0 ] && [ "$#" -gt 0 ] || return 0
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
