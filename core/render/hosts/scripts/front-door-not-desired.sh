# shellcheck shell=bash
# shellcheck disable=SC2154
not_desired() {
  python3 - "$1" "$state_dir/epp/endpoints.yaml" <<'PY'
import json, sys
desired = {e["name"] for e in json.load(open(sys.argv[1]))["endpoints"]}
with open(sys.argv[2]) as f:
    print(" ".join(line.split('"')[1] for line in f if line.startswith("- name: ") and line.split('"')[1] not in desired))
PY
}
