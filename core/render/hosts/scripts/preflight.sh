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
service_user=rbln-serving
own_units=(rbln-serving-dev.main-0.service rbln-serving-main-0.service)
# --- end of settings ---

# shellcheck source=disk.sh
. disk.sh

fail() {
  echo "preflight ${host_name}: $1" >&2
  exit 1
}

[ -d "$sys_root/module/rebellions" ] || fail "kernel module rebellions: not loaded (install the RBLN driver)"

devices=$(find "$dev_root" -maxdepth 1 -name 'rbln[0-9]*' | wc -l)
[ "$devices" -ge "$npus_needed" ] || fail "NPU devices: found $devices $dev_root/rbln*, need $npus_needed"

# The units run as the service user, which must open the RSD group nodes (multi-NPU runs) read-write.
# Once it exists, ask the kernel as that user (ACLs included). Before the install creates it, judge by
# mode and group: the install adds it to the group of each /dev/rbln* that is not root
# (service-account.sh), and to nothing else.
if id -u "$service_user" >/dev/null 2>&1; then
  user_exists=yes
  user_groups=$(id -nG "$service_user")
else
  user_exists=no
  user_groups=$(stat -c %G "$dev_root"/rbln[0-9]* | { grep -vx root || true; } | sort -u | paste -sd ' ')
fi
for rsd in "$dev_root"/rsd[0-9]*; do
  [ -e "$rsd" ] || continue
  read -r mode owner group < <(stat -c '%A %U %G' "$rsd")
  why=""
  if [ "$user_exists" = yes ]; then
    runuser -u "$service_user" -- test -r "$rsd" -a -w "$rsd" && continue
  else
    [ "${mode:7:2}" = rw ] && continue
    [ "${mode:4:2}" = rw ] && [[ " $user_groups " == *" $group "* ]] && continue
    why=" (not created yet; the install puts it in the groups of $dev_root/rbln*: ${user_groups:-none but its own})"
  fi
  if [ "${mode:4:2}" = rw ] && [ "$group" != root ]; then
    fix="add it to group $group (usermod -aG $group $service_user)"
  else
    target=${user_groups%% *}
    fix="give rsd devices a group it is in and mode 0660 with a udev rule: KERNEL==\"rsd[0-9]*\", GROUP=\"${target:-$service_user}\", MODE=\"0660\""
  fi
  fail "device access: $service_user cannot open $rsd read-write ($mode $owner:$group)$why; $fix"
done

command -v rbln-smi >/dev/null || fail "rbln-smi: not found (it ships with the RBLN driver)"
smi_json=$(rbln-smi -j 2>/dev/null) || fail "rbln-smi: 'rbln-smi -j' failed"
seen=$(printf '%s' "$smi_json" | python3 -c 'import json, sys; print(len(json.load(sys.stdin).get("devices", [])))' 2>/dev/null) ||
  fail "rbln-smi: 'rbln-smi -j' printed no device list"
[ "$seen" -ge "$npus_needed" ] || fail "rbln-smi: sees $seen NPUs, need $npus_needed"

# Idle NPUs: no context of another process. rbln-smi lists contexts at the top level
# ({ctx_id, npu, process, pid, memalloc, ...}; npu and pid a number or a string, `cmd` in some
# builds) or, in some versions, per device; unknown fields are ignored. A context's npu is an index
# within its RSD group, not a device, so a context anywhere on the host counts. Processes in the
# cgroup of this deployment's units on the host (a re-run while they serve; also the units of
# the names before deployment ids, which the unit steps take over) are not another process's.
idle_check=$(cat <<'PY'
import json, sys
owns = sys.argv[1:]
data = json.load(sys.stdin)
devices = [d for d in data.get("devices") or [] if isinstance(d, dict)]
listed = [(None, data["contexts"])] if isinstance(data.get("contexts"), list) else []
listed += [(d.get("device"), d["contexts"]) for d in devices if isinstance(d.get("contexts"), list)]
if not listed:
    print("unknown")
    sys.exit()

def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None

def ours(pid):
    for line in (read(f"/proc/{pid}/cgroup") or "").splitlines():
        parts = line.split(":", 2)[-1].split("/")
        if any(a == "system.slice" and b in owns for a, b in zip(parts, parts[1:])):
            return True
    return False

users = {}
for device, contexts in listed:
    for context in contexts:
        if not isinstance(context, dict):
            continue
        pid = str(context.get("pid") or "").strip()
        if pid.isdigit() and ours(pid):
            continue
        comm = read(f"/proc/{pid}/comm") if pid.isdigit() else None
        name = context.get("process") or context.get("cmd") or (comm or "").strip() or "?"
        gone = ", exited" if pid.isdigit() and comm is None else ""
        who = f"pid {pid or '?'} ({name}{gone})"
        where = device or (f"npu {context['npu']}" if "npu" in context else "an NPU")
        users.setdefault(who, []).append(str(where))
print("; ".join(f"{who} on {', '.join(dict.fromkeys(where))}" for who, where in users.items()))
PY
)
busy=$(printf '%s' "$smi_json" | python3 -c "$idle_check" "${own_units[@]}" 2>/dev/null) || fail "rbln-smi: could not read the contexts in 'rbln-smi -j'"
if [ "$busy" = unknown ]; then
  echo "preflight ${host_name}: warning: this rbln-smi lists no contexts, so whether other processes use the NPUs is not checked"
elif [ -n "$busy" ]; then
  fail "NPUs in use by other processes: $busy; stop them (or wait until rbln-smi -j lists no contexts) and run again"
fi

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
  # An unmounted mount point is an empty local folder: every host would download and compile alone.
  shared_mount=$(findmnt -n -o TARGET --target "$shared_root" 2>/dev/null || echo /)
  [ "$shared_mount" != / ] || fail "cache.shared: $shared_root is on the root filesystem, not on a mount of its own (mount the shared filesystem there on every host first)"
  weights_root=$shared_root
fi
cached=yes
for marker in "${weights_markers[@]}"; do
  [ -f "$marker" ] || cached=no
done
free_space "$weights_root"
if [ "$cached" = no ] && [ "$free_gb" -lt "$min_free_gb" ]; then
  fail "disk: $free_gb GiB free under $free_under, need $min_free_gb GiB for the weights and caches"
fi

echo "preflight ${host_name}: ok ($devices NPUs, python $python_version, glibc $glibc, $free_gb GiB free)"
