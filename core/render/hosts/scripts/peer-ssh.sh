# shellcheck shell=bash
# SSH from this host to a peer of the stack (a copy source, the router host), with a key the deploy
# handed this step: only that key, only the peer's host key (from the stack config), and from this
# host's own address, which the peer's grant accepts (`from=`).

# peer_ssh_setup DIR ADDRESS PORT HOST_KEY BIND: the key is DIR/id; sets peer_ssh (the ssh command,
# as words without spaces) and peer_remote (root at ADDRESS). An empty HOST_KEY is
# insecureSkipHostKeyCheck: true.
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
  case "$address" in *:*) peer_remote="root@[${address}]" ;; esac
}
