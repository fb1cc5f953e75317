# shellcheck shell=bash
# SSH from this host to a peer of the stack (a copy source, the router host), with a key the deploy
# handed this step: only that key, only the peer's host key (from the stack config), and from this
# host's own address, which the peer's grant accepts (`from=`).

# peer_ssh_setup DIR ADDRESS PORT HOST_KEY BIND: the key is DIR/id; sets peer_ssh (the ssh command,
# as words without spaces), peer_remote (root at ADDRESS, as ssh takes it: an IPv6 address bare,
# since ssh would look `[v6]` up as a name) and peer_rsync_remote (as rsync's `host:path` takes
# it: an IPv6 address in brackets). An empty HOST_KEY is insecureSkipHostKeyCheck: true.
peer_ssh_setup() {
  local dir=$1 address=$2 port=$3 host_key=$4 bind=$5 check
  if [ -n "$host_key" ]; then
    printf 'rbln-serving-peer %s\n' "$host_key" > "$dir/known_hosts"
    check=(-o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$dir/known_hosts" -o HostKeyAlias=rbln-serving-peer)
  else
    check=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null)
  fi
  peer_ssh=(ssh -i "$dir/id" -p "$port" -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes -o GlobalKnownHostsFile=/dev/null "${check[@]}" -o "BindAddress=$bind" -o ConnectTimeout=30 -o ServerAliveInterval=30)
  peer_remote="root@${address}"
  # shellcheck disable=SC2034 # read by copy.sh (rsync); the drains use peer_remote (ssh)
  case "$address" in
    *:*) peer_rsync_remote="root@[${address}]" ;;
    *) peer_rsync_remote=$peer_remote ;;
  esac
}
