#!/usr/bin/env bash
# A data-parallel group on this host: the unit that restarts every rank of it as one when one fails
# (group-restart.sh, which each rank's OnFailure= names), and its script. Written, never started
# here: it runs only when a rank fails.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-1
unit=rbln-serving-dev.decode-group-restart.service
unit_path=/etc/systemd/system/rbln-serving-dev.decode-group-restart.service
unit_text='[Service]
ExecStart=/bin/true'
script_path=/opt/rbln-serving/bin/rbln-serving-dev.decode-group-restart.sh
script_text='#!/usr/bin/env bash'
# --- end of settings ---

umask 022
changed=no
# Args: path, text, mode. Renamed into place, only when it changes.
put() {
  if [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; then return 0; fi
  local new
  new=$(mktemp "$1.XXXXXX")
  printf '%s\n' "$2" > "$new"
  chmod "$3" "$new"
  mv -f "$new" "$1"
  changed=yes
}
install -d -m 0755 "$(dirname "$script_path")"
put "$script_path" "$script_text" 0755
put "$unit_path" "$unit_text" 0644
if [ "$changed" = yes ]; then
  systemctl daemon-reload
  echo "group ${host_name}: wrote $unit"
else
  echo "group ${host_name}: $unit unchanged"
fi
