# shellcheck shell=bash
# A rank whose compiled cache was placed ahead (copied, pulled or compiled on the compile host: its
# key's marker exists) must load it. A miss would compile on the NPUs for hours, so it fails the
# change. Told from the bundles' files, not from the rank's log, which extraEnv can silence
# (VLLM_LOGGING_LEVEL, VLLM_CONFIGURE_LOGGING, VLLM_LOGGING_CONFIG_PATH): vllm-rbln saves a bundle
# after every warm-up, before the engine is ready, renaming it over the one it loaded or writing it
# at a new path (its signature's) when it compiled (bundle.savedEveryStart in
# test/fixtures/vllm-rbln-0.12.0.json). So, of the model's bundles newer than the (re)start: one
# that was there before it means a load; only new ones mean a compile; none once the rank serves
# means no save at all, which cannot be told from a compile.
# Reads: compile_marker, cache_bundle_dir, state_dir, unit, host_name, mode (unit-apply.sh).
# shellcheck disable=SC2154
expect_cache_hit=no
[ -n "$compile_marker" ] && [ -f "$compile_marker" ] && expect_cache_hit=yes
# The model's bundles before the (re)start, and a file made at the (re)start on the cache's own file
# system (its clock is the one that stamps the bundles, on a shared cache too).
cache_bundles_before="$state_dir/$unit.bundles"
cache_start_mark="$(dirname "$compile_marker")/.rank-start.${host_name}.${unit}"

# Before a (re)start of a rank that must load: notes what is there and when it starts.
cache_note_start() {
  [ "$expect_cache_hit" = yes ] || return 0
  { find "$cache_bundle_dir" -name mega_cache.bin -type f -print 2>/dev/null || true; } | LC_ALL=C sort > "$cache_bundles_before"
  rm -f "$cache_start_mark"
  : > "$cache_start_mark"
}

# 0, with the reason in `failure`, when a rank restarted that must load its cache did not: it saved
# only new bundles, or ($3 = yes) it serves and saved none.
cache_miss() {
  [ "$expect_cache_hit" = yes ] && [ "$mode" != none ] && [ -f "$cache_start_mark" ] || return 1
  local bundle loaded='' compiled=''
  while IFS= read -r -d '' bundle; do
    if grep -qxF -- "$bundle" "$cache_bundles_before"; then loaded=$bundle; else compiled=$bundle; fi
  done < <(find "$cache_bundle_dir" -name mega_cache.bin -type f -size +0 -newer "$cache_start_mark" -print0 2>/dev/null || true)
  [ -z "$loaded" ] || return 1
  if [ -n "$compiled" ]; then
    failure="compiled cache miss: the compiled cache of its key is here ($compile_marker), but the rank compiles instead of loading it (it saved a new bundle, ${compiled#"$cache_bundle_dir"/})"
    return 0
  fi
  if [ "${3:-}" = yes ]; then
    failure="compiled cache not confirmed: the compiled cache of its key is here ($compile_marker), but the rank serves and saved no bundle since its start (a load saves it again), so it may have compiled; see its log"
    return 0
  fi
  return 1
}
