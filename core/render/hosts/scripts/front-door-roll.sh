# shellcheck shell=bash
# A front door of several router hosts (router.hosts), on one of them. Its steps run one router host
# after the other, so a change rolls: a host whose Envoy or keepalived restarts first gives the
# virtual address up (keepalived stops, sending priority 0: a peer takes it at once), then drains
# Envoy (admin /healthcheck/fail and /drain_listeners?graceful: clients are told to go, the
# listeners close after --drain-time-s, and the requests in flight finish, up to the longest a
# request may run), restarts, and takes the address back only as a backup once Envoy is ready and
# sees its EPP healthy. A change of the EPP alone moves nothing: the EPP's stop lets its in-flight
# streams finish while Envoy sends new ones to a peer's EPP (the ext_proc cluster's priority 1).
# Reads: host_name, state_dir, tls_name, envoy_uid, keepalived, keepalived_unit_name, keepalived_config,
# own_address, virtual_address, admin_port, front_door_port, drain_timeout_s, takeover_s,
# proxy_unit_name, local_epps (each EPP of this host as Envoy's /clusters names it: cluster::address:port);
# stdin (read_tls): the CA and this host's certificate and key (front-door-tls.sh's output).
# shellcheck disable=SC2154

check_vrrp_tools() {
  [ -x "$keepalived" ] || fail "$keepalived not found: install keepalived (Debian and RHEL package it); it holds router.virtualAddress"
  [ -x /usr/bin/curl ] || fail "/usr/bin/curl not found: install curl (keepalived's check of Envoy's readiness runs it)"
  command -v ip >/dev/null || fail "ip not found: install iproute2 (it finds the interface that holds ${own_address})"
}

# read_tls: the CA and this host's certificate and key from stdin, up to the line of this host's
# certificate (an API key filter config may follow).
tls_ca='' tls_crt='' tls_key=''
read_tls() {
  local line name
  # The last line may come without its newline (a step's output is trimmed).
  while IFS=' ' read -r name line || [ -n "$name" ]; do
    case $name in
      ca) tls_ca=$line ;;
      "$tls_name") tls_crt=${line%% *} tls_key=${line#* } ;;
    esac
    [ -z "$tls_crt" ] || [ -z "$tls_ca" ] || break
  done
  if [ -z "$tls_ca" ] || [ -z "$tls_crt" ] || [ -z "$tls_key" ]; then fail "no TLS certificate for ${tls_name} on stdin (the first router host's tls step makes them)"; fi
}

# write_tls: Envoy's certificates (read_tls); 0 when they changed. The key is readable by the user of
# Envoy's image only.
write_tls() {
  local changed=1
  install -d -m 0755 "$state_dir/envoy/tls"
  put "$state_dir/envoy/tls/ca.crt" "$(printf '%s' "$tls_ca" | base64 -d)" 0644 && changed=0
  put "$state_dir/envoy/tls/tls.crt" "$(printf '%s' "$tls_crt" | base64 -d)" 0644 && changed=0
  (umask 077; put "$state_dir/envoy/tls/tls.key" "$(printf '%s' "$tls_key" | base64 -d)" 0400) && changed=0
  chown "$envoy_uid:$envoy_uid" "$state_dir/envoy/tls/tls.key"
  unset tls_key
  return "$changed"
}

# write_vrrp: keepalived's config, on the interface that holds own_address (the virtual address must
# be of that interface's network), checked by keepalived itself; 0 when it changed.
write_vrrp() {
  local found interface changed=1
  found=$(ip -o address show to "$own_address" | awk '{print $2, $4; exit}')
  interface=${found%% *}
  [ -n "$interface" ] || fail "no interface of this host holds ${own_address} (its router host address); keepalived moves router.virtualAddress on the interface that does"
  python3 - "${found#* }" "$virtual_address" <<'PY' || fail "router.virtualAddress ${virtual_address} is not in ${found#* } on ${interface}, the network of ${own_address}: keepalived can move only an address of the router hosts' own network"
import ipaddress, sys
sys.exit(0 if ipaddress.ip_address(sys.argv[2]) in ipaddress.ip_interface(sys.argv[1]).network else 1)
PY
  install -d -m 0755 "$state_dir/keepalived"
  put "$state_dir/keepalived/interface.conf" "\$INTERFACE=$interface" 0644 && changed=0
  put "$state_dir/keepalived/keepalived.conf" "$keepalived_config" 0644 && changed=0
  local check
  check=$("$keepalived" -t -e -f "$state_dir/keepalived/keepalived.conf" 2>&1) || { printf '%s\n' "$check" >&2; fail "keepalived refuses its config (above)"; }
  return "$changed"
}

# admin METHOD PATH: Envoy's admin answer on stdout; 1 unless 200.
admin() {
  python3 - "$1" "http://127.0.0.1:${admin_port}$2" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(urllib.request.Request(sys.argv[2], method=sys.argv[1], data=b"" if sys.argv[1] == "POST" else None), timeout=5) as answer:
        sys.stdout.write(answer.read().decode("utf-8", "replace"))
except Exception:
    sys.exit(1)
PY
}

in_flight() {
  admin GET '/stats?filter=^http\.front_door\.downstream_rq_active$' | awk -F': ' '{print $2; exit}'
}

holds_address() {
  ip -o address show | grep -qF " ${virtual_address}/"
}

# leave_service ENVOY_RESTARTS: out of the clients' way before Envoy or keepalived restarts: the address
# goes to a peer, and Envoy drains when it is about to restart (a drained Envoy serves no more).
leave_service() {
  local unit=$proxy_unit_name started n held=no deadline
  if [ -n "$keepalived_unit_name" ] && systemctl is-active --quiet "$keepalived_unit_name"; then
    ! holds_address || held=yes
    systemctl stop "$keepalived_unit_name"
    if [ "$held" = yes ]; then
      deadline=$(( $(date +%s) + takeover_s ))
      until tcp_open "$virtual_address" "$front_door_port"; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
          echo "front door ${host_name}: no peer answers at ${virtual_address} ${takeover_s}s after this host gave it up; clients reach no front door until this host serves again" >&2
          break
        fi
        sleep 0.2
      done
      echo "front door ${host_name}: gave up ${virtual_address}"
    fi
  fi
  if [ "$1" != yes ] || ! systemctl is-active --quiet "$unit"; then return 0; fi
  n=$(in_flight || echo 0)
  started=$(date +%s)
  admin POST /healthcheck/fail >/dev/null || true
  admin POST '/drain_listeners?graceful&skip_exit' >/dev/null || true
  deadline=$(( started + drain_timeout_s ))
  while [ "$(in_flight || echo 0)" != 0 ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
  echo "front door ${host_name}: Envoy drained (${n:-0} requests in flight at the start, $(( $(date +%s) - started ))s)"
}

# envoy_takes_traffic: Envoy is ready (LIVE) and sees each EPP of this host healthy.
envoy_takes_traffic() {
  local clusters epp
  admin GET /ready >/dev/null && clusters=$(admin GET /clusters) || return 1
  for epp in "${local_epps[@]}"; do grep -qxF "${epp}::health_flags::healthy" <<<"$clusters" || return 1; done
}

# start_vrrp CHANGED: keepalived, as a backup (nopreempt): it takes the address only when no peer holds it.
start_vrrp() {
  systemctl enable --quiet "$keepalived_unit_name"
  if [ "$1" = yes ] || ! systemctl is-active --quiet "$keepalived_unit_name"; then
    systemctl reset-failed "$keepalived_unit_name" 2>/dev/null || true
    systemctl restart "$keepalived_unit_name"
    echo "front door ${host_name}: (re)started ${keepalived_unit_name}"
  fi
}
