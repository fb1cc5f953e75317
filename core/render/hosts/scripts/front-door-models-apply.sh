#!/usr/bin/env bash
# The front door of a stack of models on one router host (issue 30): one Envoy that routes by the
# request body's model, and per model its own endpoint picker (EPP, file discovery) and the agent
# that keeps that EPP's endpoints file, each in the model's own folder. Each is a systemd unit. As
# front-door-apply.sh does for one model: writes the files, pulls the images, (re)starts a unit only
# when its files changed or it is not running, waits until Envoy takes connections and every EPP
# answers on its metrics port, and until endpoints the stack no longer has are out of their EPP's
# file. Envoy's routes and the EPPs' clusters are files Envoy reads again when one is moved into place
# (RDS and CDS from files): a model added or removed changes them, not Envoy's bootstrap, so Envoy
# takes the change without a restart and the other models' requests go on. A model the stack no
# longer has leaves Envoy's routes first, then its cluster, then its EPP and agent stop. With several
# router hosts (tls_name set) each model's EPP falls back to the peers' EPPs of that model, and a
# change that restarts Envoy or keepalived rolls as front-door-roll.sh says. stdin: with several router
# hosts, this host's TLS certificates (its tls step's two lines); then with apiKey, Envoy's API key
# filter config (it holds the key).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
runtime=/usr/bin/podman
images=(ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 docker.io/envoyproxy/envoy:distroless-v1.37.11)
agent_path=/opt/rbln-serving/bin/front-door-0123456789ab.py
agent_text='#!/usr/bin/env python3'
envoy_config='static_resources: {}'
envoy_routes='version_info: routes-0
resources: []'
envoy_clusters='version_info: clusters-0
resources: []'
envoy_peer_routes=''
cds_clusters=(epp-chat)
removed_model_drain_s=60
local_epps=(epp-chat::127.0.0.1:9002)
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
tls_name=''
keepalived=/usr/sbin/keepalived
keepalived_unit_name=''
keepalived_unit=''
keepalived_config=''
own_address=''
virtual_address=''
admin_port=9901
drain_timeout_s=3600
takeover_s=15
# --- end of settings ---

# shellcheck source=http.sh
. http.sh
# shellcheck source=images.sh
. images.sh
# shellcheck source=front-door-roll.sh
. front-door-roll.sh

umask 022
fail() { echo "front door ${host_name}: $*" >&2; exit 1; }
[ -x "$runtime" ] || fail "$runtime not found: install $(basename "$runtime") (router.runtime), or choose the runtime this host has"
command -v python3 >/dev/null || fail "python3 not found (the front door's agent runs on it)"
[ -z "$keepalived_unit_name" ] || check_vrrp_tools
# stdin in order: the TLS lines first, up to the line of this host's certificate.
[ -z "$tls_name" ] || read_tls
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
state_dir=$stack_dir
units+=("$proxy_unit_name") texts+=("$proxy_unit")
if put "$stack_dir/envoy/envoy.yaml" "$envoy_config" 0644; then restart+=(yes); else restart+=(no); fi
proxy=$(( ${#units[@]} - 1 ))
[ -z "$tls_name" ] || { write_tls && restart[proxy]=yes; }
restart_vrrp=no
[ -z "$keepalived_unit_name" ] || { write_vrrp && restart_vrrp=yes; }
# The models this step set up before (a line each: EPP unit, agent unit, folder), from its own list.
models_list=$stack_dir/models.list
[ -f "$models_list" ] || : > "$models_list"
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
if [ -n "$keepalived_unit_name" ] && put "$unit_dir/$keepalived_unit_name" "$keepalived_unit" 0644; then restart_vrrp=yes; reload=yes; fi
[ "$reload" = no ] || systemctl daemon-reload
# An Envoy that (re)starts reads its routes and clusters as it starts; a running one takes them below,
# once every model's EPP answers.
envoy_restarts=${restart[proxy]}
systemctl is-active --quiet "$proxy_unit_name" || envoy_restarts=yes
if [ "$envoy_restarts" = yes ]; then
  put "$stack_dir/envoy/routes.yaml" "$envoy_routes" 0644 || true
  put "$stack_dir/envoy/clusters.yaml" "$envoy_clusters" 0644 || true
  [ -z "$tls_name" ] || put "$stack_dir/envoy/peer-routes.yaml" "$envoy_peer_routes" 0644 || true
fi
# With several router hosts, a change that restarts Envoy or keepalived first hands the virtual
# address to a peer and drains this Envoy (front-door-roll.sh).
[ -z "$tls_name" ] || [ "${envoy_restarts}$restart_vrrp" = nono ] || leave_service "$envoy_restarts"
for i in "${!units[@]}"; do
  systemctl enable --quiet "${units[$i]}"
  if [ "${restart[$i]}" = yes ] || ! systemctl is-active --quiet "${units[$i]}"; then
    systemctl reset-failed "${units[$i]}" 2>/dev/null || true
    systemctl restart "${units[$i]}"
    echo "front door ${host_name}: (re)started ${units[$i]}"
  fi
done

# shellcheck source=front-door-wait.sh
. front-door-wait.sh
wait_ready

# envoy_loaded route_configs|active_clusters: what Envoy runs from its files (its admin's /config_dump),
# a line each: each route config's name and version, or each cluster's name.
envoy_loaded() {
  admin GET "/config_dump?resource=dynamic_$1" | python3 -c '
import json, sys
for c in json.load(sys.stdin).get("configs", []):
    print(*([c["route_config"]["name"], c["version_info"]] if sys.argv[1] == "route_configs" else [c["cluster"]["name"]]))
' "$1"
}
# epp_in_flight CLUSTER: the requests Envoy has open to a model's EPP (ext_proc streams live as long as their requests).
epp_in_flight() {
  admin GET "/stats?filter=^cluster\\.$1\\.upstream_rq_active$" | awk -F': ' '{n += $2} END {print n + 0}'
}
# discover FILE TEXT [ROUTES]: moves Envoy's file into place, and waits until Envoy runs it: the route
# config ROUTES at the file's version, or (no ROUTES) exactly the file's clusters.
discover() {
  local want
  put "$stack_dir/envoy/$1" "$2" 0644 || return 0
  if [ -n "${3:-}" ]; then want="$3 $(sed -n 's/^version_info: //p' <<<"$2")"; else want=$(printf '%s\n' "${cds_clusters[@]}" | sort); fi
  local kind=active_clusters
  [ -z "${3:-}" ] || kind=route_configs
  until if [ -n "${3:-}" ]; then envoy_loaded "$kind" | grep -qxF "$want"; else [ "$(envoy_loaded "$kind" | sort)" = "$want" ]; fi; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "Envoy did not take its new $1 within ${ready_timeout_s}s: it runs $(envoy_loaded "$kind" | paste -sd, -), not ${want//$'\n'/,} (journalctl -u ${proxy_unit_name})"
    sleep 1
  done
  echo "front door ${host_name}: Envoy runs the new $1"
}
if [ "$envoy_restarts" = no ]; then
  dropped=$(comm -23 <(envoy_loaded active_clusters | sort) <(printf '%s\n' "${cds_clusters[@]}" | sort))
  # A model taken out leaves the routes first (its new requests get 404), its requests in flight end (up
  # to the stack's shutdown timeout), then the peers' way in and its clusters go; a model added has its
  # clusters and the peers' way in before its routes.
  if [ -n "$dropped" ]; then
    discover routes.yaml "$envoy_routes" front-door
    drain_end=$(( $(date +%s) + removed_model_drain_s ))
    for cluster in $dropped; do
      while [ "$(epp_in_flight "$cluster")" != 0 ] && [ "$(date +%s)" -lt "$drain_end" ]; do sleep 1; done
      echo "front door ${host_name}: ${cluster}'s requests in flight ended ($(epp_in_flight "$cluster") left)"
    done
    [ -z "$tls_name" ] || discover peer-routes.yaml "$envoy_peer_routes" peer-epp
    discover clusters.yaml "$envoy_clusters"
  else
    discover clusters.yaml "$envoy_clusters"
    [ -z "$tls_name" ] || discover peer-routes.yaml "$envoy_peer_routes" peer-epp
    discover routes.yaml "$envoy_routes" front-door
  fi
fi
# The EPPs and agents of models the stack no longer has: Envoy routes to them no more.
now_listed=$(for i in "${!model_dirs[@]}"; do printf '%s %s %s\n' "${epp_unit_names[$i]}" "${agent_unit_names[$i]}" "${model_dirs[$i]}"; done)
while read -r epp agent dir; do
  if [ -z "$epp" ] || grep -qxF "$epp $agent $dir" <<<"$now_listed"; then continue; fi
  systemctl disable --now --quiet "$epp" "$agent" 2>/dev/null || true
  rm -f "$unit_dir/$epp" "$unit_dir/$agent"
  rm -rf "$dir"
  systemctl daemon-reload
  echo "front door ${host_name}: removed ${epp%.service} and ${agent%.service} (a model the stack no longer has)"
done < "$models_list"
put "$models_list" "$now_listed" 0644 || true

for i in "${!model_dirs[@]}"; do
  state_dir=${model_dirs[$i]}
  wait_removed "${removed[$i]}" "${agent_unit_names[$i]}"
done
state_dir=$stack_dir
# Only now may it hold the virtual address again: keepalived starts as a backup.
[ -z "$keepalived_unit_name" ] || start_vrrp "$restart_vrrp"
echo "front door ${host_name}: serving"
