# shellcheck shell=bash
# A compiled-cache registry through skopeo (an OCI registry the team runs: Harbor, Zot, distribution).
# A key's cache is one OCI artifact of our own artifact type, tagged by the compile key: a config
# blob naming the key and one uncompressed tar layer, built reproducibly (sorted, fixed times and
# owners), so two pushes of one key give one digest. Pulls go by digest and are checked before
# anything is extracted. The password comes on stdin and goes to `skopeo login --password-stdin`
# only; the login's auth file lives in the step's 0700 work folder under /run and goes with it. The
# artifacts themselves (tens of GB) are built and pulled in `scratch`, beside the cache on its disk.
# Reads: host_name, key, repository, registry_user, registry_password, artifact_type, config_type,
# layer_type, work, scratch, service_user, cache_dir (VLLM_CACHE_ROOT/rbln), files_list, and
# cache-files.sh's functions (compile-flow.sh sources both).
# shellcheck disable=SC2154

registry_fail() { echo "compile ${host_name} ${key}: $*" >&2; exit 1; }

# skopeo's options for every call: our auth file (never the user's), nothing else.
registry_opts=(--authfile "$work/auth.json")

registry_login() {
  command -v skopeo >/dev/null || registry_fail "skopeo not found (apt-get install skopeo): compile.registry needs it"
  printf '{"auths":{}}\n' > "$work/auth.json"
  [ -n "$registry_user" ] || return 0
  printf '%s' "$registry_password" | skopeo login "${registry_opts[@]}" --username "$registry_user" --password-stdin "${repository%%/*}" >/dev/null 2>"$work/err" ||
    registry_fail "login to ${repository%%/*} as ${registry_user} failed: $(registry_error)"
}

# skopeo's error, as one line: the message of its last log line, without the log's frame.
registry_error() {
  tail -n 1 "$work/err" | sed -E 's/^time="[^"]*" level=[a-z]+ msg="(.*)"$/\1/; s/\\"/"/g' | cut -c 1-300
}

# Prints the digest the key's tag points to, or nothing when the registry has no such tag. Absent is
# only what a registry that answered its ping (skopeo pings /v2/ before anything, and stops there
# if that fails) says of the key's manifest: MANIFEST_UNKNOWN, or NAME_UNKNOWN for a repository that
# has no tag yet (containers/image prints these error codes as "manifest unknown", "name unknown").
# Everything else (a /v2/ that is not a registry's, a bare 404, a 5xx, no answer, a refused login)
# fails the step: it must not pass for "absent" and start hours of compiling.
registry_digest() {
  local unknown="reading manifest ${key} in ${repository}: "
  if skopeo inspect --raw "${registry_opts[@]}" "docker://${repository}:${key}" > "$work/remote-manifest" 2>"$work/err"; then
    echo "sha256:$(sha256sum "$work/remote-manifest" | cut -d ' ' -f 1)"
    return 0
  fi
  case "$(registry_error)" in
    *"$unknown"'manifest unknown' | *"$unknown"'manifest unknown:'* | *"$unknown"'name unknown' | *"$unknown"'name unknown:'*) return 0 ;;
  esac
  registry_fail "asking ${repository} for ${key} failed: $(registry_error)"
}

# Pulls the artifact at digest $1 and checks it before anything is placed: its digest, every blob's
# hash, our artifact type and media types, its config and annotation naming this key (not another
# key's artifact under this key's tag), and a tar of plain files and folders under names the cache
# takes, within its size and the free space (cache_files_py). Unpacked into scratch, its files are
# placed as a compile's are (place_files): only new ones, never over another key's.
registry_pull() {
  local digest=$1 layout="$scratch/pulled" manifest layer
  skopeo copy --quiet --preserve-digests "${registry_opts[@]}" "docker://${repository}@${digest}" "oci:${layout}:${key}" 2>"$work/err" ||
    registry_fail "pulling ${repository}@${digest} failed: $(registry_error); nothing changed"
  for blob in "$layout"/blobs/sha256/*; do
    [ "$(sha256sum "$blob" | cut -d ' ' -f 1)" = "$(basename "$blob")" ] || registry_fail "${repository}@${digest}: blob $(basename "$blob") does not match its digest; refused, nothing changed"
  done
  manifest="$layout/blobs/sha256/${digest#sha256:}"
  [ -f "$manifest" ] || registry_fail "${repository}@${digest}: the pulled manifest is not that digest; refused, nothing changed"
  layer=$(python3 - "$manifest" "$layout/blobs/sha256" "$key" "$artifact_type" "$config_type" "$layer_type" 2>"$work/err" <<'PY'
import json, os, sys
manifest, blobs, key, artifact, config, layer = sys.argv[1:7]
m = json.load(open(manifest))
if not (m.get("artifactType") == artifact and m.get("config", {}).get("mediaType") == config and [l.get("mediaType") for l in m.get("layers", [])] == [layer]):
    sys.exit(f"not an rbln-serving compiled cache (artifact type {artifact})")
named = {
    "its config": json.load(open(os.path.join(blobs, m["config"]["digest"].split(":", 1)[1]))).get("compileKey"),
    "its annotation": (m.get("annotations") or {}).get("ai.rbln-serving.compile-key"),
}
for where, value in named.items():
    if value != key:
        sys.exit(f"{where} names key {value!r}, not {key}: another key's artifact")
print(m["layers"][0]["digest"].split(":", 1)[1])
PY
) || registry_fail "${repository}@${digest}: $(tail -n 1 "$work/err"); refused, nothing changed"
  install -d -m 0700 "$scratch/unpacked"
  cache_files_py tar "$layout/blobs/sha256/$layer" "$scratch/unpacked" "$scratch" "$work/pulled" 2>"$work/err" ||
    registry_fail "${repository}@${digest}: its layer $(tail -n 1 "$work/err"); refused, nothing changed"
  place_files "$scratch/unpacked" "$work/pulled"
}

# Builds the key's artifact from the files of files_list (relative to cache_dir) as an OCI layout
# and pushes it; a tag that exists meanwhile is left as it is. Prints the digest the tag points to.
registry_push() {
  local layout="$scratch/push" remote
  mkdir -p "$layout/blobs/sha256"
  tar --create --file "$scratch/layer.tar" --directory "$cache_dir" --sort=name --format=pax --pax-option=delete=atime,delete=ctime \
    --mtime=@0 --owner=0 --group=0 --numeric-owner --mode=a+rX,u+w,go-w --verbatim-files-from --files-from "$files_list"
  python3 - "$layout" "$scratch/layer.tar" "$key" "$artifact_type" "$config_type" "$layer_type" <<'PY'
import hashlib, json, os, sys
layout, layer, key, artifact, config_type, layer_type = sys.argv[1:7]
def blob(data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + digest, "size": len(data)}
def dump(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
h = hashlib.sha256()
with open(layer, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
layer_digest = h.hexdigest()
os.replace(layer, os.path.join(layout, "blobs", "sha256", layer_digest))
manifest = dump({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "artifactType": artifact,
    "config": {"mediaType": config_type, **blob(dump({"compileKey": key}))},
    "layers": [{"mediaType": layer_type, "digest": "sha256:" + layer_digest, "size": os.path.getsize(os.path.join(layout, "blobs", "sha256", layer_digest))}],
    "annotations": {"ai.rbln-serving.compile-key": key},
})
m = blob(manifest)
with open(os.path.join(layout, "index.json"), "wb") as f:
    f.write(dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", **m, "annotations": {"org.opencontainers.image.ref.name": key}}]}))
with open(os.path.join(layout, "oci-layout"), "wb") as f:
    f.write(dump({"imageLayoutVersion": "1.0.0"}))
PY
  remote=$(registry_digest)
  if [ -z "$remote" ]; then
    skopeo copy --quiet --preserve-digests "${registry_opts[@]}" "oci:${layout}:${key}" "docker://${repository}:${key}" 2>"$work/err" ||
      registry_fail "pushing to ${repository}:${key} failed: $(registry_error)"
    remote=$(registry_digest)
  fi
  [ -n "$remote" ] || registry_fail "${repository}:${key} is not there after the push"
  echo "$remote"
}
