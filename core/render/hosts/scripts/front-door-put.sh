# shellcheck shell=bash
# put PATH TEXT MODE [OWNER]: writes TEXT by rename, fsynced before it and the folder after (a power
# loss leaves the old file or the new, which the agent reads: desired.json); 0 when it changed the file.
put() {
  local new
  new=$(mktemp "$1.XXXXXX")
  printf '%s\n' "$2" > "$new"
  chmod "$3" "$new"
  [ -z "${4:-}" ] || chown "$4" "$new"
  if cmp -s "$new" "$1"; then rm -f "$new"; return 1; fi
  sync "$new"
  # -T: over an empty folder in PATH's place too, never into it.
  mv -fT "$new" "$1"
  sync "$(dirname "$1")"
}
