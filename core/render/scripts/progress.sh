# shellcheck shell=bash
# Progress lines of the long steps, one format on both platforms (docs/progress.md; its TypeScript
# twin is core/render/progress.ts, and test/progress.test.ts holds the two to each other):
#   <host> <who> <phase>  <elapsed>  (budget <budget>, <left> left)[  <amount>][  last: "<line>"]
# and the filter that masks secrets in what the steps' tools print, so no step has to go silent.
# progress-run.sh adds the amounts of transfers and the runner of a long program.
# Reads: progress_secrets (the secrets a step holds, one a line, in a variable and never in a file;
# may be unset).
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

# Copies stdin to stdout line by line, every secret of $progress_secrets (one a line; handed to
# python in its environment, which only root and the step's user can read) replaced by ***, as written and URL-encoded (quote and quote_plus), and any
# URL's user info too, as mask.sh's mask_url_credentials does: pip, huggingface_hub and skopeo print
# URLs and errors that are not ours to vouch for.
progress_mask_py='import os, re, sys, urllib.parse
secrets = set()
for line in os.environ.get("PROGRESS_SECRETS", "").splitlines():
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

# The values of env-file lines on stdin (NAME='value' or NAME="value" with \ escapes, as
# core/render/hosts/systemd.ts's envFileLine writes them), one a line, for progress_secrets.
progress_env_values() {
  python3 -c 'import re, sys
for line in sys.stdin.read().splitlines():
    name, _, value = line.partition("=")
    if len(value) >= 2 and value[0] == value[-1] == "\x27":
        print(value[1:-1])
    elif len(value) >= 2 and value[0] == value[-1] == "\"":
        print(re.sub(r"\\(.)", r"\1", value[1:-1]))
    elif value:
        print(value)'
}
