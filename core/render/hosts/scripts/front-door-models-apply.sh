#!/usr/bin/env bash
# The front door of a stack of models on one router host (issue 30): one Envoy that routes by the
# request body's model, and per model its own endpoint picker (EPP, file discovery) and the agent
# that keeps that EPP's endpoints file, each in the model's own folder. Each is a systemd unit. As
# front-door-apply.sh does for one model: writes the files, pulls the images, (re)starts a unit only
# when its files changed or it is not running, waits until Envoy takes connections and every EPP
# answers on its metrics port, and until endpoints the stack no longer has are out of their EPP's
# file. stdin: with apiKey, Envoy's API key filter config (it holds the key).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
runtime=/usr/bin/podman
images=(ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 docker.io/envoyproxy/envoy:distroless-v1.37.11)
agent_path=/opt/rbln-serving/bin/front-door-0123456789ab.py
agent_text='#!/usr/bin/env python3'
envoy_config='static_resources: {}'
api_key=false
api_key_config=/opt/rbln-serving/router/dev/envoy/api-key.json
envoy_uid=65532
unit_dir=/etc/systemd/system
proxy_unit_name=rbln-serving-dev.front-door-proxy.service
proxy_unit='[Service]
ExecStart=/bin/true'
model_dirs=(/opt/rbln-serving/router/dev.rbln-serving-chat)
epp_configs=('kind: EndpointPickerConfig')
desired_jsons=('{"endpoints": []}')
epp_unit_names=(rbln-serving-dev.rbln-serving-chat.front-door-epp.service)
epp_units=('[Service]
ExecStart=/bin/true')
agent_unit_names=(rbln-serving-dev.rbln-serving-chat.front-door-agent.service)
agent_units=('[Service]
ExecStart=/bin/true')
epp_metrics_ports=(9090)
probe_address=127.0.0.1
front_door_port=8080
ready_timeout_s=600
settle_s=3
# --- end of settings ---

# shellcheck source=http.sh
. http.sh
# shellcheck source=images.sh
. images.sh

umask 022
fail() { echo "front door ${host_name}: $*" >&2; exit 1; }
[ -x "$runtime" ] || fail "$runtime not found: install $(basename "$runtime") (router.runtime), or choose the runtime this host has"
command -v python3 >/dev/null || fail "python3 not found (the front door's agent runs on it)"
api_key_filter=
if [ "$api_key" = true ]; then
  api_key_filter=$(cat)
  [ -n "$api_key_filter" ] || fail "no API key filter config on stdin (apiKey is set); nothing changed"
fi

# shellcheck source=front-door-put.sh
. front-door-put.sh
# shellcheck source=front-door-not-desired.sh
. front-door-not-desired.sh

stack_dir=$state_dir
install -d -m 0755 "$stack_dir" "$stack_dir/envoy" "$(dirname "$agent_path")"
# Each model's EPP, desired endpoints and drains in its own folder, as one model's front door keeps
# them: its hosts' drain keys name that folder. removed[i]: the model's endpoints the stack no longer has.
units=() texts=() restart=() removed=()
for i in "${!model_dirs[@]}"; do
  state_dir=${model_dirs[$i]}
  install -d -m 0755 "$state_dir" "$state_dir/epp"
  install -d -m 0700 "$state_dir/drains" "$state_dir/served"
  [ -e "$state_dir/epp/endpoints.yaml" ] || put "$state_dir/epp/endpoints.yaml" 'endpoints: []' 0644 || true
  removed[i]=$(not_desired <(printf '%s\n' "${desired_jsons[$i]}"))
  units+=("${epp_unit_names[$i]}" "${agent_unit_names[$i]}")
  texts+=("${epp_units[$i]}" "${agent_units[$i]}")
  if put "$state_dir/epp/epp.yaml" "${epp_configs[$i]}" 0644; then restart+=(yes); else restart+=(no); fi
  restart+=(no)
  put "$state_dir/desired.json" "${desired_jsons[$i]}" 0644 || true
done
units+=("$proxy_unit_name") texts+=("$proxy_unit")
if put "$stack_dir/envoy/envoy.yaml" "$envoy_config" 0644; then restart+=(yes); else restart+=(no); fi
proxy=$(( ${#units[@]} - 1 ))
if [ "$api_key" = true ]; then
  put "$api_key_config" "$api_key_filter" 0400 "$envoy_uid:$envoy_uid" && restart[proxy]=yes
  unset api_key_filter
else
  rm -f "$api_key_config"
fi
[ -f "$agent_path" ] || put "$agent_path" "$agent_text" 0755
pull_images

reload=no
for i in "${!units[@]}"; do
  if put "$unit_dir/${units[$i]}" "${texts[$i]}" 0644; then restart[i]=yes; reload=yes; fi
done
[ "$reload" = no ] || systemctl daemon-reload
for i in "${!units[@]}"; do
  systemctl enable --quiet "${units[$i]}"
  if [ "${restart[$i]}" = yes ] || ! systemctl is-active --quiet "${units[$i]}"; then
    systemctl reset-failed "${units[$i]}" 2>/dev/null || true
    systemctl restart "${units[$i]}"
    echo "front door ${host_name}: (re)started ${units[$i]}"
  fi
done

# ready: Envoy takes connections, every EPP answers, every agent runs.
ready() {
  tcp_open "$probe_address" "$front_door_port" || return 1
  local port unit
  for port in "${epp_metrics_ports[@]}"; do http_ok "http://${probe_address}:${port}/metrics" || return 1; done
  for unit in "${agent_unit_names[@]}"; do systemctl is-active --quiet "$unit" || return 1; done
}
deadline=$(( $(date +%s) + ready_timeout_s ))
until ready; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    for unit in "${units[@]}"; do journalctl -u "$unit" -n 20 --no-pager >&2 || true; done
    fail "Envoy (${probe_address}:${front_door_port}) or an EPP (ports ${epp_metrics_ports[*]}, /metrics) or an agent did not answer within ${ready_timeout_s}s; their last journal lines are above"
  fi
  sleep 2
done
for i in "${!model_dirs[@]}"; do
  [ -n "${removed[$i]}" ] || continue
  state_dir=${model_dirs[$i]}
  until [ -z "$(not_desired "$state_dir/desired.json")" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "the endpoints agent did not take ${removed[$i]} out of the EPP's file within ${ready_timeout_s}s (journalctl -u ${agent_unit_names[$i]})"
    sleep 1
  done
  sleep "$settle_s"
  echo "front door ${host_name}: ${removed[$i]} out of the endpoints (the stack no longer has them); their in-flight requests finish under vLLM's --shutdown-timeout"
done
echo "front door ${host_name}: serving"
