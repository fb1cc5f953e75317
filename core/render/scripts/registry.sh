# shellcheck shell=bash
# A compiled-cache registry through skopeo (an OCI registry the team runs: Harbor, Zot, distribution).
# A key's cache is one OCI artifact of our own artifact type, tagged by the compile key: a config
# blob naming the key and one uncompressed tar layer, built reproducibly (sorted, fixed times and
# owners), so two pushes of one key give one digest. Pulls go by digest and are checked before
# anything is extracted. The password comes on stdin and goes to `skopeo login --password-stdin`
# only; the login's auth file lives in the step's 0700 work folder under /run and goes with it. The
# artifacts themselves (tens of GB) are built and pulled in `scratch`, beside the cache on its disk.
# Reads: host_name, key, repository, registry_user, registry_password, artifact_type, config_type,
# layer_type, work, scratch, service_user, cache_dir (VLLM_CACHE_ROOT/rbln), files_list.
# shellcheck disable=SC2154

registry_fail() { echo "compile ${host_name} ${key}: $*" >&2; exit 1; }

# skopeo's options for every call: our auth file (never the user's), nothing else.
registry_opts=(--authfile "$work/auth.json")

registry_login() {
  command -v skopeo >/dev/null || registry_fail "skopeo not found (apt-get install skopeo): compile.registry needs it"
  printf '{"auths":{}}\n' > "$work/auth.json"
  [ -n "$registry_user" ] || return 0
  printf '%s' "$registry_password" | skopeo login "${registry_opts[@]}" --username "$registry_user" --password-stdin "${repository%%/*}" >/dev/null 2>"$work/err" ||
    registry_fail "login to ${repository%%/*} as ${registry_user} failed: $(tail -n 1 "$work/err")"
}

# Prints the digest the key's tag points to, or nothing when the registry has no such tag.
registry_digest() {
  if skopeo inspect --raw "${registry_opts[@]}" "docker://${repository}:${key}" > "$work/remote-manifest" 2>"$work/err"; then
    echo "sha256:$(sha256sum "$work/remote-manifest" | cut -d ' ' -f 1)"
  elif grep -qiE 'manifest unknown|not found|404' "$work/err"; then
    return 0
  else
    registry_fail "asking ${repository} for ${key} failed: $(tail -n 1 "$work/err")"
  fi
}

# Pulls the artifact at digest $1, checks it (its digest, our artifact type, every blob's hash, a
# tar of plain files and folders under relative paths), and only then extracts it into cache_dir
# and records its file list. A bad artifact changes nothing here.
registry_pull() {
  local digest=$1 layout="$scratch/pulled" manifest layer
  skopeo copy --quiet --preserve-digests "${registry_opts[@]}" "docker://${repository}@${digest}" "oci:${layout}:${key}" 2>"$work/err" ||
    registry_fail "pulling ${repository}@${digest} failed: $(tail -n 1 "$work/err"); nothing changed"
  for blob in "$layout"/blobs/sha256/*; do
    [ "$(sha256sum "$blob" | cut -d ' ' -f 1)" = "$(basename "$blob")" ] || registry_fail "${repository}@${digest}: blob $(basename "$blob") does not match its digest; refused, nothing changed"
  done
  manifest="$layout/blobs/sha256/${digest#sha256:}"
  [ -f "$manifest" ] || registry_fail "${repository}@${digest}: the pulled manifest is not that digest; refused, nothing changed"
  layer=$(python3 - "$manifest" "$artifact_type" "$config_type" "$layer_type" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
artifact, config, layer = sys.argv[2:5]
ok = m.get("artifactType") == artifact and m.get("config", {}).get("mediaType") == config and [l.get("mediaType") for l in m.get("layers", [])] == [layer]
print(m["layers"][0]["digest"].split(":", 1)[1] if ok else "")
PY
)
  [ -n "$layer" ] || registry_fail "${repository}@${digest}: not an rbln-serving compiled cache (artifact type ${artifact_type}); refused, nothing changed"
  layer="$layout/blobs/sha256/$layer"
  tar -tvf "$layer" > "$work/listing" || registry_fail "${repository}@${digest}: its layer is not a tar; refused, nothing changed"
  if grep -qvE '^[-d]' "$work/listing" || tar -tf "$layer" | grep -qE '^/|(^|/)\.\.(/|$)'; then
    registry_fail "${repository}@${digest}: its layer holds links, devices or paths outside the cache; refused, nothing changed"
  fi
  install -d -o "$service_user" -g "$service_user" -m 0750 "$cache_dir"
  tar -xf "$layer" -C "$cache_dir" --no-same-owner --no-same-permissions
  tar -tf "$layer" | { grep -v '/$' || true; } | LC_ALL=C sort > "$files_list.tmp"
  mv "$files_list.tmp" "$files_list"
  chown -R "$service_user:$service_user" "$cache_dir"
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
      registry_fail "pushing to ${repository}:${key} failed: $(tail -n 1 "$work/err")"
    remote=$(registry_digest)
  fi
  [ -n "$remote" ] || registry_fail "${repository}:${key} is not there after the push"
  echo "$remote"
}
