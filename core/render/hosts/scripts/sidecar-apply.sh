#!/usr/bin/env bash
# The llm-d routing sidecar of a decode host, as a container under a systemd unit: listens on the
# front door's ports for this host's ranks and forwards each to its rank. Pulls the image, writes the
# unit, and restarts it only when it changed or is not running: then this host's endpoints leave the
# front door first (the sidecar ends at once on SIGTERM, without a drain of its own) and come back
# once it answers again. Its unit loads the sidecar's guard (an nftables table: its ports open to
# the router host and this host only) before every start. stdin: the front door key.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-1
runtime=/usr/bin/podman
images=(ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0)
unit=rbln-serving-dev.sidecar.service
unit_path=/etc/systemd/system/rbln-serving-dev.sidecar.service
unit_text='[Service]
ExecStart=/bin/true'
ports=(8000 8001 8002 8003)
firewall=/usr/sbin/nft
ready_timeout_s=300
router_ssh_address=()
router_ssh_port=()
router_ssh_host_key=()
router_ssh_bind=''
front_door_endpoint=''
front_door_renew_s=60
# --- end of settings ---

# shellcheck source=http.sh
. http.sh
# shellcheck source=images.sh
. images.sh
# shellcheck source=front-door.sh
. front-door.sh

umask 022
[ -x "$runtime" ] || { echo "sidecar ${host_name}: $runtime not found: install $(basename "$runtime") (router.runtime)" >&2; exit 1; }
[ -x "$firewall" ] || { echo "sidecar ${host_name}: $firewall not found: install nftables (the sidecar's ports are open to the router host only)" >&2; exit 1; }
read_front_door_key
trap front_door_rejoin EXIT
pull_images

new=$(mktemp "$unit_path.XXXXXX")
printf '%s\n' "$unit_text" > "$new"
chmod 0644 "$new"
if cmp -s "$new" "$unit_path" && systemctl is-active --quiet "$unit"; then
  rm -f "$new"
  echo "sidecar ${host_name}: $unit unchanged and running"
  exit 0
fi
# shellcheck disable=SC2086 # no endpoint: no words
front_door_drain $front_door_endpoint || { echo "${host_name}: the front door did not take $front_door_endpoint out (see above); nothing changed" >&2; exit 1; }
mv -f "$new" "$unit_path"
systemctl daemon-reload
systemctl enable --quiet "$unit"
systemctl reset-failed "$unit" 2>/dev/null || true
systemctl restart "$unit"
deadline=$(( $(date +%s) + ready_timeout_s ))
for port in "${ports[@]}"; do
  until http_ok "http://127.0.0.1:${port}/health"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      journalctl -u "$unit" -n 20 --no-pager >&2 || true
      echo "sidecar ${host_name}: no answer on port ${port} within ${ready_timeout_s}s; its last journal lines are above" >&2
      exit 1
    fi
    sleep 1
  done
done
echo "sidecar ${host_name}: serving on ports ${ports[*]}"
