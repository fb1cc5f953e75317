# shellcheck shell=bash
# One compile key's flow, the same on a compile host (compile-key.sh: root, systemd, the registry
# password on stdin) and in a compile Job's pod (compile-job.sh: no root, the password from the
# environment): a key whose marker is here is done (pushed first if the registry lost it and the
# files this host compiled are here); a key the registry has is pulled by digest, checked and
# extracted; otherwise, with compile_here, the platform's compile_only runs the role in vllm-rbln's
# compile-only mode and what it wrote is the key's cache, pushed to the registry if there is one.
# Without compile_here a key the registry lacks is left to the first start. The last line of stdout
# is `compiled <key> <digest|local|none>`.
# Reads: host_name, key, roles, marker, compile_here, repository, cache_dir, files_list, work, and
# registry.sh's; cache_place (where the marker is, in messages) and first_compiler (who compiles a
# key left to the first start). The sourcing script defines compile_only, which writes the cache
# under cache_dir after it touched "$work/start".
# shellcheck disable=SC2154

fail() { echo "compile ${host_name} ${key}: $*" >&2; exit 1; }
say() { echo "compile ${host_name} ${key}: $*"; }
report() { echo "compiled ${key} $1"; }
mark() { printf '%s\n' "$1" > "$marker.tmp"; mv "$marker.tmp" "$marker"; }

# shellcheck source=registry.sh
. registry.sh

# The key's cache: what the compile-only run wrote (RBLN's layout is its own; a key's bundles are files of their own).
record_compiled_files() {
  (cd "$cache_dir" && find . -type f -newer "$work/start" ! -name '*.tmp' -printf '%P\n' | LC_ALL=C sort) > "$files_list.tmp"
  [ -s "$files_list.tmp" ] || fail "the compile-only run saved nothing under $cache_dir"
  mv "$files_list.tmp" "$files_list"
}

compile_key() {
  local have remote started
  [ -z "$repository" ] || registry_login
  if [ -f "$marker" ]; then
    have=$(cat "$marker")
    remote=$([ -z "$repository" ] || registry_digest)
    if [ -n "$repository" ] && [ -z "$remote" ] && [ "$compile_here" = yes ] && [ -f "$files_list" ]; then
      remote=$(registry_push)
      mark "$remote"
      say "already compiled ${cache_place}; pushed to ${repository}@${remote}"
      report "$remote"
    else
      say "already ${cache_place}${remote:+ (${repository}@${remote})}; nothing to do"
      report "${remote:-$have}"
    fi
    return 0
  fi
  remote=$([ -z "$repository" ] || registry_digest)
  if [ -n "$remote" ]; then
    registry_pull "$remote"
    mark "$remote"
    say "pulled ${repository}@${remote} and checked it: nothing to compile"
    report "$remote"
    return 0
  fi
  if [ "$compile_here" != yes ]; then
    say "${repository} has no ${key}: ${first_compiler} compiles it"
    report none
    return 0
  fi
  started=$(date +%s)
  compile_only
  record_compiled_files
  say "compiled $(wc -l < "$files_list") file(s) in $(( $(date +%s) - started ))s"
  if [ -n "$repository" ]; then
    remote=$(registry_push)
    mark "$remote"
    say "pushed to ${repository}@${remote}"
    report "$remote"
  else
    mark local
    report local
  fi
}
