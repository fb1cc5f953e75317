#!/usr/bin/env bash
# Preflight checks of an NPU host; reads only, changes nothing. A failure is one line naming the check.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=npu-0
sys_root=/sys
dev_root=/dev
npus_needed=4
cache_root=/var/lib/rbln-serving
shared_root=''
min_free_gb=300
weights_markers=(/var/lib/rbln-serving/huggingface/rbln-serving-complete/example)
python_versions=(3.10 3.11 3.12 3.13)
min_glibc=2.39
# --- end of settings ---

fail() {
  echo "preflight ${host_name}: $1" >&2
  exit 1
}

[ -d "$sys_root/module/rebellions" ] || fail "kernel module rebellions: not loaded (install the RBLN driver)"

devices=$(find "$dev_root" -maxdepth 1 -name 'rbln[0-9]*' | wc -l)
[ "$devices" -ge "$npus_needed" ] || fail "NPU devices: found $devices $dev_root/rbln*, need $npus_needed"

command -v rbln-smi >/dev/null || fail "rbln-smi: not found (it ships with the RBLN driver)"
smi_json=$(rbln-smi -j 2>/dev/null) || fail "rbln-smi: 'rbln-smi -j' failed"
seen=$(printf '%s' "$smi_json" | python3 -c 'import json, sys; print(len(json.load(sys.stdin).get("devices", [])))' 2>/dev/null) ||
  fail "rbln-smi: 'rbln-smi -j' printed no device list"
[ "$seen" -ge "$npus_needed" ] || fail "rbln-smi: sees $seen NPUs, need $npus_needed"

command -v python3 >/dev/null || fail "python: python3 not found"
python_version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
supported=no
for version in "${python_versions[@]}"; do
  [ "$python_version" = "$version" ] && supported=yes
done
[ "$supported" = yes ] || fail "python: python3 is $python_version, need one of ${python_versions[*]}"
python3 -c 'import ensurepip, venv' 2>/dev/null || fail "python: the venv module is missing (apt-get install python3-venv)"

glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
oldest=$(printf '%s\n%s\n' "$min_glibc" "$glibc" | sort -V | head -n 1)
[ "$oldest" = "$min_glibc" ] || fail "glibc: $glibc is older than $min_glibc (the vLLM CPU wheel needs it; use Ubuntu 24.04)"

# With cache.shared the weights go to the shared folder: it must be there (mounted) already.
weights_root=$cache_root
if [ -n "$shared_root" ]; then
  [ -d "$shared_root" ] || fail "cache.shared: $shared_root is not a directory (mount the shared filesystem there on every host first)"
  weights_root=$shared_root
fi
cached=yes
for marker in "${weights_markers[@]}"; do
  [ -f "$marker" ] || cached=no
done
existing=$weights_root
while [ ! -d "$existing" ]; do existing=$(dirname "$existing"); done
free_gb=$(( $(df -Pk "$existing" | awk 'NR == 2 {print $4}') / 1048576 ))
if [ "$cached" = no ] && [ "$free_gb" -lt "$min_free_gb" ]; then
  fail "disk: $free_gb GB free under $existing, need $min_free_gb GB for the weights and caches"
fi

echo "preflight ${host_name}: ok ($devices NPUs, python $python_version, glibc $glibc, $free_gb GB free)"
