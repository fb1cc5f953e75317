# shellcheck shell=bash
# The waits of a front door's apply step (front-door-apply.sh, front-door-models-apply.sh), after its
# units (re)started. Reads: host_name, probe_address, front_door_port, epp_metrics_ports,
# agent_unit_names, tls_name, units, ready_timeout_s, settle_s; not_desired (front-door-not-desired.sh)
# and, with several router hosts, envoy_takes_traffic (front-door-roll.sh).
# shellcheck disable=SC2154

# front_door_ready: Envoy takes connections, every EPP answers on its metrics port, every agent runs,
# and with several router hosts Envoy sees this host's EPPs healthy.
front_door_ready() {
  tcp_open "$probe_address" "$front_door_port" || return 1
  local port unit
  for port in "${epp_metrics_ports[@]}"; do http_ok "http://${probe_address}:${port}/metrics" || return 1; done
  for unit in "${agent_unit_names[@]}"; do systemctl is-active --quiet "$unit" || return 1; done
  [ -z "$tls_name" ] || envoy_takes_traffic
}

# wait_ready: until front_door_ready, by a deadline ready_timeout_s from now, which the waits after it share.
wait_ready() {
  deadline=$(( $(date +%s) + ready_timeout_s ))
  until front_door_ready; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      for unit in "${units[@]}"; do journalctl -u "$unit" -n 20 --no-pager >&2 || true; done
      fail "Envoy (${probe_address}:${front_door_port}), an EPP (${probe_address}, ports ${epp_metrics_ports[*]}, /metrics) or an agent did not answer within ${ready_timeout_s}s; their last journal lines are above"
    fi
    sleep 2
  done
}

# wait_removed REMOVED AGENT_UNIT: endpoints the stack no longer has (REMOVED, read before the agent saw
# the new desired.json of state_dir) out of the EPP's file, then the settle of a drain, for the
# requests the EPP placed just before; nothing when REMOVED is empty.
wait_removed() {
  [ -n "$1" ] || return 0
  until [ -z "$(not_desired "$state_dir/desired.json")" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "the endpoints agent did not take $1 out of the EPP's file within ${ready_timeout_s}s (journalctl -u $2)"
    sleep 1
  done
  sleep "$settle_s"
  echo "front door ${host_name}: $1 out of the endpoints (the stack no longer has them); their in-flight requests finish under vLLM's --shutdown-timeout"
}
