#!/usr/bin/env bash
# Preflight of the compile host (compile.host): a CPU server, no NPU. Reads only, changes nothing.
# It needs what the NPU hosts need to install and download (python3 with venv, glibc, disk under
# cacheRoot), systemd (the compile-only run is a transient unit), GNU tar, and skopeo with a registry.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=compile-0
cache_root=/var/lib/rbln-serving
min_free_gb=300
python_versions=(3.10 3.11 3.12 3.13)
min_glibc=2.39
needs_skopeo=no
min_memory_gb=384
# --- end of settings ---

# shellcheck source=disk.sh
. disk.sh

fail() { echo "preflight ${host_name}: $1" >&2; exit 1; }

command -v python3 >/dev/null || fail "python3: not found (apt-get install python3 python3-venv)"
version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ " ${python_versions[*]} " == *" $version "* ]] || fail "python3 $version: vllm-rbln needs one of ${python_versions[*]}"
python3 -c 'import ensurepip, venv' 2>/dev/null || fail "python3 venv: missing (apt-get install python3-venv)"
glibc=$(getconf GNU_LIBC_VERSION | cut -d ' ' -f 2)
[ "$(printf '%s\n%s\n' "$min_glibc" "$glibc" | sort -V | head -n 1)" = "$min_glibc" ] || fail "glibc $glibc: the vLLM CPU wheel needs $min_glibc or newer"
command -v systemd-run >/dev/null || fail "systemd-run: not found (the compile runs as a transient systemd unit)"
tar --version 2>/dev/null | grep -q 'GNU tar' || fail "GNU tar: not found (apt-get install tar)"
if [ "$needs_skopeo" = yes ]; then command -v skopeo >/dev/null || fail "skopeo: not found (apt-get install skopeo): compile.registry needs it"; fi
free_space "$cache_root"
[ "$free_gb" -ge "$min_free_gb" ] || fail "free disk: ${free_gb} GiB under $free_under, need ${min_free_gb} GiB (weights and compiled caches)"
memory_gb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1048576 ))
# Not a refusal: the figure is this package's serving-pod memory, not one Rebellions publishes.
[ "$memory_gb" -ge "$min_memory_gb" ] || echo "preflight ${host_name}: warning: ${memory_gb} GiB of memory; a compile holds the model in host memory, and the serving pods get ${min_memory_gb} GiB for the same"
echo "preflight ${host_name}: ok (compile host)"
