# shellcheck shell=bash
# edit_authorized_keys LINE: removes the lines ending in " $tag" from $authorized_keys, then adds LINE
# unless it is empty; under a lock, since grants to several destinations run side by side. Fails
# unless the file then holds LINE and no other line with the tag (none at all for an empty LINE).
# Reads: authorized_keys, tag, grant_label (names the grant in the messages).
# shellcheck disable=SC2154

# The lines of $authorized_keys that hold the tag as whole words, wherever and however they end (a
# line edited by hand may end in spaces or a CR, and still let its key in).
tagged_lines() {
  TAG=$tag awk 'BEGIN { tag = " " ENVIRON["TAG"] " " } { line = " " $0 " "; gsub(/[ \t\r]+/, " ", line) } index(line, tag)' "$authorized_keys"
}

edit_authorized_keys() {
  # The tag is built from the deployment id and a host name: anything else (a newline would start a
  # key line of its own) never reaches root's file.
  case "$tag" in *[!A-Za-z0-9\ ._-]* | "") echo "${grant_label}: the grant's tag ${tag@Q} may hold only letters, digits, spaces, '.', '_' and '-'" >&2; exit 1 ;; esac
  install -d -m 0700 "$(dirname "$authorized_keys")"
  exec 8>>"$authorized_keys.rbln-serving.lock"
  flock 8
  local next="$authorized_keys.rbln-serving.tmp" others
  if [ -f "$authorized_keys" ]; then
    # The tag through the environment: awk -v would expand backslash escapes in it.
    TAIL=" $tag" awk 'BEGIN { tail = ENVIRON["TAIL"] } length($0) < length(tail) || substr($0, length($0) - length(tail) + 1) != tail' "$authorized_keys" > "$next"
  else
    : > "$next"
  fi
  [ -z "$1" ] || printf '%s\n' "$1" >> "$next"
  chmod 0600 "$next"
  mv "$next" "$authorized_keys"
  # Checked more loosely than the removal: any line with the tag but LINE would still let a copy key in.
  others=$(tagged_lines | grep -cvxF -e "${1:-}" || true)
  if [ "$others" != 0 ] || { [ -n "$1" ] && ! grep -qxF -e "$1" "$authorized_keys"; }; then
    echo "${grant_label}: ${authorized_keys} still holds ${others} line(s) with \"${tag}\" that are not this grant's; remove them by hand" >&2
    exit 1
  fi
  flock -u 8
}
