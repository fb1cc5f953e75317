# shellcheck shell=bash
# A rank whose compiled cache was placed ahead (copied, pulled or compiled on the compile host: its
# key's marker exists) must load it. A miss would compile on the NPUs for hours, so it is a failure
# of the change, found as soon as the rank's log shows it: a warm-up (or a save) with no load of
# the bundle before it. vllm-rbln prints nothing on a miss (test/fixtures/vllm-rbln-0.12.0.json).
# Reads: compile_marker, cache_hit_line, cache_warmup_line, cache_saved_line, mode (unit-apply.sh).
# shellcheck disable=SC2154
expect_cache_hit=no
[ -n "$compile_marker" ] && [ -f "$compile_marker" ] && expect_cache_hit=yes

# 0, with the reason in `failure`, when a rank restarted since $2 that must load its cache did not:
# its log has a warm-up or a save and no load, or ($3 = yes) it serves without having loaded.
cache_miss() {
  [ "$expect_cache_hit" = yes ] && [ "$mode" != none ] || return 1
  local log
  log=$(journalctl -u "$1" --since "@$2" -o cat --no-pager 2>/dev/null || true)
  grep -qF -- "$cache_hit_line" <<<"$log" && return 1
  if [ "${3:-}" = yes ] || grep -qF -e "$cache_warmup_line" -e "$cache_saved_line" <<<"$log"; then
    failure="compiled cache miss: the compiled cache of its key is here ($compile_marker), but the rank compiles instead of loading it"
    return 0
  fi
  return 1
}
