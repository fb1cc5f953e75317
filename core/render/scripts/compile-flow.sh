# shellcheck shell=bash
# One compile key's flow, the same on a compile host (compile-key.sh: root, systemd, the registry
# password on stdin) and in a compile Job's pod (compile-job.sh: no root, the password from the
# environment of the containers that talk to the registry only). Three phases, run in order:
# - pull: a key whose marker is here is done; a key the registry has is pulled by digest, checked
#   and placed;
# - compile: with compile_here, the platform's compile_only runs the role in vllm-rbln's
#   compile-only mode, writing to a folder of its own (compile_dir, which that run sees as
#   $VLLM_CACHE_ROOT/rbln); once its bundle is saved there, those files are the key's, placed in
#   the shared cache. Without compile_here a key the registry lacks is left to the first start;
# - push: a key compiled here that the registry lacks is pushed (again, if the registry lost it).
# A Kubernetes Job runs each phase in a container of its own, so that the compile, which runs the
# model's own code, never has the registry password. The last line of stdout of the run that
# decides is `compiled <key> <digest|local|none>`.
# Reads: host_name, key, roles, marker, compile_here, repository, cache_dir, files_list, work,
# compile_dir, and registry.sh's; cache_place (where the marker is, in messages) and first_compiler
# (who compiles a key left to the first start). The sourcing script defines compile_only, which
# runs the compile-only server into compile_dir and returns once bundle_saved and it served or
# ended well.
# shellcheck disable=SC2154

fail() { echo "compile ${host_name} ${key}: $*" >&2; exit 1; }
say() { echo "compile ${host_name} ${key}: $*"; }
report() { echo "compiled ${key} $1"; }
mark() { mkdir -p "$(dirname "$marker")"; printf '%s\n' "$1" > "$marker.tmp"; mv "$marker.tmp" "$marker"; }

# shellcheck source=cache-files.sh
. cache-files.sh
# shellcheck source=registry.sh
. registry.sh

# What this run did to the key: pulled, compiled, none (left to the first start), or nothing (it was here).
brought=

# 0 once the compile-only run saved its bundle: a mega_cache.bin, not empty, in its own folder. vllm-rbln
# renames the bundle there only once it is written whole, after the warm-up (bundle.write,
# bundle.savedEveryStart in test/fixtures/vllm-rbln-0.12.0.json): a file, not a log line that the
# logging settings may hide.
bundle_saved() {
  [ -n "$(find "$compile_dir" -name mega_cache.bin -type f -size +0 -print -quit 2>/dev/null)" ]
}

# The key's cache is what the compile-only run wrote in its own folder: placed in the shared cache.
record_compiled_files() {
  cache_files_py dir "$compile_dir" "$work/compiled" 2>"$work/err" || fail "the compile-only run $(tail -n 1 "$work/err")"
  [ -s "$work/compiled" ] || fail "the compile-only run saved nothing under $compile_dir"
  place_files "$compile_dir" "$work/compiled"
}

pull_phase() {
  local remote
  [ -n "$repository" ] && [ ! -f "$marker" ] || return 0
  remote=$(registry_digest)
  [ -n "$remote" ] || return 0
  registry_pull "$remote"
  mark "$remote"
  brought=pulled
  say "pulled ${repository}@${remote} and checked it: nothing to compile"
}

# A key the registry lacks and that is not compiled here is left to the first start: nothing to push.
compile_phase() {
  local started
  [ ! -f "$marker" ] || return 0
  if [ "$compile_here" != yes ]; then
    say "${repository} has no ${key}: ${first_compiler} compiles it"
    report none
    brought=none
    return 0
  fi
  started=$(date +%s)
  compile_only
  record_compiled_files
  mark local
  brought=compiled
  say "compiled $(wc -l < "$files_list") file(s) in $(( $(date +%s) - started ))s"
}

push_phase() {
  local remote=
  [ -f "$marker" ] || fail "no compiled cache of ${key} ${cache_place} to push"
  # Pulled just now: the digest pulled is the one to report, wherever the tag points by now.
  [ "$brought" != pulled ] || { report "$(cat "$marker")"; return 0; }
  [ -z "$repository" ] || remote=$(registry_digest)
  if [ -n "$repository" ] && [ -z "$remote" ] && [ "$compile_here" = yes ] && [ -f "$files_list" ]; then
    remote=$(registry_push)
    mark "$remote"
    if [ "$brought" = compiled ]; then say "pushed to ${repository}@${remote}"; else say "already compiled ${cache_place}; pushed to ${repository}@${remote}"; fi
  elif [ -z "$brought" ]; then
    say "already ${cache_place}${remote:+ (${repository}@${remote})}; nothing to do"
  fi
  report "${remote:-$(cat "$marker")}"
}

# The key's flow: every phase, or the one named ($1: pull, compile or push; a Job's container each).
# Each phase is a plain command, never part of a && or || list, so that set -e holds inside it.
compile_key() {
  local phase=${1:-all}
  [ -z "$repository" ] || [ "$phase" = compile ] || registry_login
  case "$phase" in pull | all) pull_phase ;; esac
  case "$phase" in compile | all) compile_phase ;; esac
  case "$phase" in push | all) [ "$brought" = none ] || push_phase ;; esac
}
