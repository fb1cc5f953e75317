# shellcheck shell=bash
# A long program run with progress lines (progress.sh) every progress_s seconds, and the amounts of a
# transfer: the install, download and copy steps on the hosts.
# Reads: progress_s (seconds between lines), progress_secrets, progress_log.
# shellcheck disable=SC2154

# shellcheck source=progress.sh
. progress.sh

# progress_file_bytes DIR [AS...]: the bytes of the regular files under DIR (partial ones too), what
# a transfer has written, read by the command AS (runuser -u <user> --, for a shared cache) if given.
# Not du's count, which adds the directories' own sizes.
progress_file_bytes() {
  "${@:2}" find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{ sum += $1 } END { printf "%d\n", sum }'
}

# A byte count in decimal units with one decimal (tenths cut, not rounded): "512 B", "1.5 kB", "230.0 GB".
progress_bytes() {
  local n=$1 unit=B i=0 units=(B kB MB GB TB PB)
  if [ "$n" -lt 1000 ]; then
    echo "${n} B"
    return
  fi
  local scale=1
  while [ "$i" -lt 5 ] && [ "$n" -ge $((scale * 1000)) ]; do
    scale=$((scale * 1000))
    i=$((i + 1))
  done
  unit=${units[$i]}
  echo "$((n / scale)).$((n % scale * 10 / scale)) ${unit}"
}

# progress_transfer DONE TOTAL PREVIOUS SECONDS: "<done> of <total>, <rate>, ETA <eta>" from two
# samples SECONDS apart; TOTAL 0 when unknown (then no ETA), PREVIOUS -1 for the first sample.
progress_transfer() {
  local bytes=$1 total=$2 previous=$3 seconds=$4 text rate
  text=$(progress_bytes "$bytes")
  [ "$total" -le 0 ] || text="$text of $(progress_bytes "$total")"
  if [ "$previous" -ge 0 ] && [ "$seconds" -gt 0 ]; then
    rate=$(((bytes - previous) / seconds))
    [ "$rate" -ge 0 ] || rate=0
    text="$text, $(progress_bytes "$rate")/s"
    if [ "$total" -gt 0 ] && [ "$rate" -gt 0 ]; then
      text="$text, ETA $(progress_duration $(((total - bytes + rate - 1) / rate)))"
    fi
  fi
  echo "$text"
}

# progress_run HOST WHO PHASE BUDGET_S AMOUNT_FUNCTION -- COMMAND...: runs COMMAND (a program, not a
# function) with its stdout and its stderr each through the secrets mask, and every progress_s
# seconds until it ends prints a progress line whose amount is AMOUNT_FUNCTION's output (none for
# ""). Returns COMMAND's status. A signal ends COMMAND too: a step cut short leaves nothing running.
# Reads: progress_s, progress_secrets (see progress_mask), progress_log (a file COMMAND's masked
# stdout is added to, for AMOUNT_FUNCTION to read; may be unset).
progress_run() {
  local host=$1 who=$2 phase=$3 budget=$4 amount_of=$5 started next pid out_pid err_pid status=0 fifos
  shift 6
  fifos=$(mktemp -d "${TMPDIR:-/tmp}/rbln-serving-progress.XXXXXX")
  mkfifo -m 0600 "$fifos/out" "$fifos/err"
  { progress_mask < "$fifos/out" | tee -a "${progress_log:-/dev/null}"; } &
  out_pid=$!
  progress_mask < "$fifos/err" >&2 &
  err_pid=$!
  started=$(date +%s)
  next=$((started + progress_s))
  "$@" > "$fifos/out" 2> "$fifos/err" &
  pid=$!
  # shellcheck disable=SC2064 # the pids are known now
  trap "kill $pid 2>/dev/null; wait $out_pid $err_pid; rm -rf '$fifos'; exit 1" HUP INT TERM PIPE
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$(date +%s)" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      progress_line "$host" "$who" "$phase" "$started" "$budget" "$([ -z "$amount_of" ] || "$amount_of")" | progress_mask || true
      next=$((next + progress_s))
    fi
  done
  wait "$pid" || status=$?
  wait "$out_pid" "$err_pid" || true
  rm -rf "$fifos"
  trap - HUP INT TERM PIPE
  return "$status"
}

# progress_secrets_from_urls FILE: the password of every URL with user info in FILE (a pip.conf),
# decoded, one a line on stdout, for progress_secrets.
progress_secrets_from_urls() {
  python3 -c 'import re, sys, urllib.parse
for url in re.findall(r"[a-z][a-z0-9+.-]*://[^\s/@]+@[^\s]+", open(sys.argv[1]).read()):
    password = urllib.parse.urlsplit(url).password
    if password: print(urllib.parse.unquote(password))' "$1"
}
