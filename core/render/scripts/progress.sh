# shellcheck shell=bash
# Progress lines of the long steps, one format on both platforms (docs/progress.md; its TypeScript
# twin is core/render/progress.ts, and test/progress.test.ts holds the two to each other):
#   <host> <who> <phase>  <elapsed>  (budget <budget>, <left> left)[  <amount>][  last: "<line>"]
# and the filter that masks secrets in what the steps' tools print, so no step has to go silent.
# Reads: progress_s (seconds between lines), progress_secrets (a file of secrets, may be unset).
# shellcheck disable=SC2154

# A duration in seconds as people read it: "42 s" under 2 min, "42 min" under 2 h, else "2 h 40 min".
progress_duration() {
  local s=$(($1 < 0 ? 0 : $1))
  if [ "$s" -lt 120 ]; then
    echo "${s} s"
  elif [ "$s" -lt 7200 ]; then
    echo "$((s / 60)) min"
  else
    echo "$((s / 3600)) h $((s % 3600 / 60)) min"
  fi
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

# progress_line HOST WHO PHASE STARTED BUDGET_S [AMOUNT [LAST]]: one progress line on stdout.
# STARTED is the phase's start (epoch seconds), BUDGET_S its bound; WHO is one word (role/rank, a
# compile key, the step); LAST, a line of a log, is cut to 160 characters and its quotes kept.
progress_line() {
  local host=$1 who=${2// /_} phase=$3 started=$4 budget=$5 amount=${6:-} last=${7:-} elapsed line
  elapsed=$(($(date +%s) - started))
  line="${host} ${who} ${phase}  $(progress_duration "$elapsed")  (budget $(progress_duration "$budget"), $(progress_duration $((budget - elapsed))) left)"
  [ -z "$amount" ] || line="${line}  ${amount}"
  if [ -n "$last" ]; then
    last=${last//$'\r'/}
    line="${line}  last: \"${last:0:160}\""
  fi
  printf '%s\n' "$line"
}

# progress_transfer DONE TOTAL PREVIOUS SECONDS: "<done> of <total>, <rate>, ETA <eta>" from two
# samples SECONDS apart; TOTAL 0 when unknown (then no ETA), PREVIOUS -1 for the first sample.
progress_transfer() {
  local done=$1 total=$2 previous=$3 seconds=$4 text rate
  text=$(progress_bytes "$done")
  [ "$total" -le 0 ] || text="$text of $(progress_bytes "$total")"
  if [ "$previous" -ge 0 ] && [ "$seconds" -gt 0 ]; then
    rate=$(((done - previous) / seconds))
    [ "$rate" -ge 0 ] || rate=0
    text="$text, $(progress_bytes "$rate")/s"
    if [ "$total" -gt 0 ] && [ "$rate" -gt 0 ]; then
      text="$text, ETA $(progress_duration $(((total - done + rate - 1) / rate)))"
    fi
  fi
  echo "$text"
}

# progress_run HOST WHO PHASE BUDGET_S AMOUNT_FUNCTION -- COMMAND...: runs COMMAND (a program, not a
# function) with its output, stdout and stderr, through the secrets mask, and every progress_s
# seconds until it ends prints a progress line whose amount is AMOUNT_FUNCTION's output (none for
# ""). Returns COMMAND's status. A signal ends COMMAND too: a step cut short leaves nothing running.
# Reads: progress_s, progress_secrets (see progress_mask), progress_log (a file the masked output is
# added to, for AMOUNT_FUNCTION to read; may be unset).
progress_run() {
  local host=$1 who=$2 phase=$3 budget=$4 amount_of=$5 started next pid mask_pid status=0 fifo
  shift 6
  fifo=$(mktemp -u "${TMPDIR:-/tmp}/rbln-serving-progress.XXXXXX")
  mkfifo -m 0600 "$fifo"
  { progress_mask < "$fifo" | tee -a "${progress_log:-/dev/null}"; } &
  mask_pid=$!
  started=$(date +%s)
  next=$((started + progress_s))
  "$@" > "$fifo" 2>&1 &
  pid=$!
  # shellcheck disable=SC2064 # the pids are known now
  trap "kill $pid 2>/dev/null; wait $mask_pid; rm -f '$fifo'; exit 1" HUP INT TERM PIPE
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$(date +%s)" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      progress_line "$host" "$who" "$phase" "$started" "$budget" "$([ -z "$amount_of" ] || "$amount_of")" | progress_mask
      next=$((next + progress_s))
    fi
  done
  wait "$pid" || status=$?
  wait "$mask_pid" || true
  rm -f "$fifo"
  trap - HUP INT TERM PIPE
  return "$status"
}

# Copies stdin to stdout line by line, every secret of the file $progress_secrets (one a line; no
# file, nothing to mask) replaced by ***, as written and URL-encoded (quote and quote_plus), and any
# URL's user info too, as mask.sh's mask_url_credentials does: pip, huggingface_hub and skopeo print
# URLs and errors that are not ours to vouch for.
progress_mask_py='import os, re, sys, urllib.parse
secrets = set()
path = os.environ.get("PROGRESS_SECRETS", "")
if path:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f.read().splitlines():
            if len(line) >= 3:
                secrets |= {line, urllib.parse.quote(line, safe=""), urllib.parse.quote_plus(line), urllib.parse.quote(line)}
ordered = sorted(secrets, key=len, reverse=True)
out = sys.stdout.buffer
for raw in iter(sys.stdin.buffer.readline, b""):
    text = raw.decode("utf-8", "surrogateescape")
    for secret in ordered:
        text = text.replace(secret, "***")
    text = re.sub(r"(://)[^/?#\s\"\x27]*@", r"\1***@", text)
    out.write(text.encode("utf-8", "surrogateescape"))
    out.flush()'
progress_mask() {
  PROGRESS_SECRETS=${progress_secrets:-} python3 -u -c "$progress_mask_py"
}

# progress_secrets_from_urls FILE: the password of every URL with user info in FILE (a pip.conf),
# decoded, one a line on stdout, for the mask's file.
progress_secrets_from_urls() {
  python3 -c 'import re, sys, urllib.parse
for url in re.findall(r"[a-z][a-z0-9+.-]*://[^\s/@]+@[^\s]+", open(sys.argv[1]).read()):
    password = urllib.parse.urlsplit(url).password
    if password: print(urllib.parse.unquote(password))' "$1"
}
