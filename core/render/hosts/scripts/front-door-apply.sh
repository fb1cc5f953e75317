#!/usr/bin/env bash
# The front door on one router host: the endpoint picker (EPP, file discovery) and Envoy as
# containers, the agent that keeps the EPP's endpoints file, and with a virtual address keepalived,
# each a systemd unit. Writes their files, pulls the images, (re)starts a unit only when its files
# changed or it is not running, and waits until Envoy takes connections on the front door's port and
# the EPP answers on its metrics port. The endpoints file is the agent's; this writes it only once,
# empty, for the EPP's first start. With several router hosts (tls_name set) a change rolls here as
# front-door-roll.sh says: the steps of the router hosts run one after the other. stdin: with several
# router hosts, this host's TLS certificates (its tls step's two lines); then with apiKey, Envoy's API
# key filter config (it holds the key).
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
runtime=/usr/bin/podman
images=(ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 docker.io/envoyproxy/envoy:distroless-v1.37.11)
agent_path=/opt/rbln-serving/bin/front-door-0123456789ab.py
agent_text='#!/usr/bin/env python3'
epp_config='kind: EndpointPickerConfig'
envoy_config='static_resources: {}'
api_key=false
api_key_config=/opt/rbln-serving/router/dev/envoy/api-key.json
envoy_uid=65532
desired_json='{"endpoints": []}'
unit_dir=/etc/systemd/system
units=(rbln-serving-dev.front-door-epp.service rbln-serving-dev.front-door-proxy.service rbln-serving-dev.front-door-agent.service)
epp_unit='[Service]
ExecStart=/bin/true'
proxy_unit='[Service]
ExecStart=/bin/true'
agent_unit='[Service]
ExecStart=/bin/true'
probe_address=127.0.0.1
front_door_port=8080
epp_metrics_port=9090
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
epp_grpc_port=9002
drain_timeout_s=3600
takeover_s=15
# --- end of settings ---

# shellcheck source=http.sh
. http.sh
# shellcheck source=images.sh
. images.sh
# shellcheck source=front-door-roll.sh
. front-door-roll.sh
proxy_unit_name=${units[1]}
local_epps=("epp::127.0.0.1:${epp_grpc_port}")

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

install -d -m 0755 "$state_dir" "$state_dir/epp" "$state_dir/envoy" "$(dirname "$agent_path")"
install -d -m 0700 "$state_dir/drains" "$state_dir/served"
[ -e "$state_dir/epp/endpoints.yaml" ] || put "$state_dir/epp/endpoints.yaml" 'endpoints: []' 0644 || true
[ ! -f "$state_dir/epp/endpoints.yaml" ] || chmod 0644 "$state_dir/epp/endpoints.yaml"
# Endpoints the stack no longer has (a server, a replica or a role removed) leave the EPP's file before
# this step ends: their ranks are deleted after it (Pulumi deletes last, or a unit step of another role
# stops them), so they stop only once the EPP has let go of them. Which ones: those the file lists that
# the new desired endpoints lack, read before the agent sees them (it rewrites the file on its next
# pass); then the settle of a drain, for the requests the EPP placed just before.
# shellcheck source=front-door-not-desired.sh
. front-door-not-desired.sh
removed=$(not_desired <(printf '%s\n' "$desired_json"))
restart=(no no no)
put "$state_dir/epp/epp.yaml" "$epp_config" 0644 && restart[0]=yes
put "$state_dir/envoy/envoy.yaml" "$envoy_config" 0644 && restart[1]=yes
[ -z "$tls_name" ] || { write_tls && restart[1]=yes; }
# With apiKey, Envoy's API key filter reads its config from this file (ECDS), for Envoy's user
# alone. Envoy reloads it when it changes; a restart makes sure it did.
if [ "$api_key" = true ]; then
  put "$api_key_config" "$api_key_filter" 0400 "$envoy_uid:$envoy_uid" && restart[1]=yes
  unset api_key_filter
else
  rm -f "$api_key_config"
fi
# The agent reads it on every pass.
put "$state_dir/desired.json" "$desired_json" 0644 || true
# Named by its content: a new agent is a new file, and the access step's key points at it.
[ -f "$agent_path" ] || put "$agent_path" "$agent_text" 0755
restart_vrrp=no
[ -z "$keepalived_unit_name" ] || { write_vrrp && restart_vrrp=yes; }
pull_images

reload=no
for i in 0 1 2; do
  text=$epp_unit
  [ "$i" != 1 ] || text=$proxy_unit
  [ "$i" != 2 ] || text=$agent_unit
  if put "$unit_dir/${units[$i]}" "$text" 0644; then restart[i]=yes; reload=yes; fi
done
if [ -n "$keepalived_unit_name" ] && put "$unit_dir/$keepalived_unit_name" "$keepalived_unit" 0644; then restart_vrrp=yes; reload=yes; fi
[ "$reload" = no ] || systemctl daemon-reload
# With several router hosts, a change that restarts Envoy or keepalived first hands the virtual
# address to a peer and drains this Envoy (front-door-roll.sh).
[ -z "$tls_name" ] || [ "${restart[1]}$restart_vrrp" = nono ] || leave_service "${restart[1]}"
for i in 0 1 2; do
  systemctl enable --quiet "${units[$i]}"
  if [ "${restart[$i]}" = yes ] || ! systemctl is-active --quiet "${units[$i]}"; then
    systemctl reset-failed "${units[$i]}" 2>/dev/null || true
    systemctl restart "${units[$i]}"
    echo "front door ${host_name}: (re)started ${units[$i]}"
  fi
done

# shellcheck source=front-door-wait.sh
. front-door-wait.sh
epp_metrics_ports=("$epp_metrics_port") agent_unit_names=("${units[2]}")
wait_ready
wait_removed "$removed" "${units[2]}"
# Only now may it hold the virtual address again: keepalived starts as a backup.
[ -z "$keepalived_unit_name" ] || start_vrrp "$restart_vrrp"
echo "front door ${host_name}: serving"
