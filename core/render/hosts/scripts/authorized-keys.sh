# shellcheck shell=bash
# edit_authorized_keys LINE: removes the lines ending in " $tag" from $authorized_keys, then adds LINE
# unless it is empty; under a lock, since grants to several destinations run side by side. Reads: authorized_keys, tag.
# shellcheck disable=SC2154
edit_authorized_keys() {
  install -d -m 0700 "$(dirname "$authorized_keys")"
  exec 8>>"$authorized_keys.rbln-serving.lock"
  flock 8
  local next="$authorized_keys.rbln-serving.tmp"
  if [ -f "$authorized_keys" ]; then
    awk -v tail=" $tag" 'length($0) < length(tail) || substr($0, length($0) - length(tail) + 1) != tail' "$authorized_keys" > "$next"
  else
    : > "$next"
  fi
  [ -z "$1" ] || printf '%s\n' "$1" >> "$next"
  chmod 0600 "$next"
  mv "$next" "$authorized_keys"
  flock -u 8
}
