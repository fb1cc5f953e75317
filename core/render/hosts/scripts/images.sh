# shellcheck shell=bash
# The container images a host runs, pulled once: `--pull never` at every start, so a unit starts
# from what is here whatever a registry answers then. A mirror's images (router.images) work alike.
# Reads: host_name, runtime, images.
# shellcheck disable=SC2154
pull_images() {
  local image attempt
  for image in "${images[@]}"; do
    "$runtime" image inspect --format '{{.Id}}' "$image" >/dev/null 2>&1 && continue
    for attempt in 1 2 3; do
      echo "images ${host_name}: pulling $image"
      "$runtime" pull "$image" && break
      [ "$attempt" -lt 3 ] || { echo "${host_name}: could not pull $image (see above); for an air-gapped site set router.images to a mirror's" >&2; exit 1; }
      sleep 10
    done
  done
}
