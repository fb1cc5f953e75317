"""What `rbln-serving status` reads on a host, over SSH, for each of its ranks: the unit's state
(`systemctl show`), its data-parallel group's restart unit, its journal since its process started
(the last line, and whether vllm-rbln logged a cache load or a warm-up), the model's compiled-cache
bundles (any, and any saved since the start: a warm-up is over), the markers the
install, weights and compile steps write when done, and whether an install or a download of this
deployment runs now (a process naming its venv, or its weights' marker, or an rsync into HF_HOME).
On a router host, the front door's drains. Reads systemd, /proc and files only: never the steps'
own output, whose format is theirs. Prints one JSON document; changes nothing.
The renderer (core/render/hosts/statusRead.ts) puts the spec in place of SPEC_JSON."""
import json
import os
import subprocess
import time

SPEC = json.loads(SPEC_JSON)
UNIT_PROPERTIES = ["LoadState", "ActiveState", "SubState", "StateChangeTimestamp", "ExecMainStartTimestamp", "NRestarts", "Result"]


def run(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def epoch(value):
    # --timestamp=unix prints "@1700000000"; an empty or "n/a" value is a time never reached.
    value = value.strip()
    return int(value[1:]) if value.startswith("@") and value[1:].isdigit() and value != "@0" else None


def unit(name):
    shown = dict(line.split("=", 1) for line in run(["systemctl", "show", "--timestamp=unix", *[f"-p{p}" for p in UNIT_PROPERTIES], name]).splitlines() if "=" in line)
    restarts = shown.get("NRestarts", "0")
    return {
        "load": shown.get("LoadState", "unknown"),
        "active": shown.get("ActiveState", "unknown"),
        "sub": shown.get("SubState", "unknown"),
        "since": epoch(shown.get("StateChangeTimestamp", "")),
        "started": epoch(shown.get("ExecMainStartTimestamp", "")),
        "restarts": int(restarts) if restarts.isdigit() else 0,
        "result": shown.get("Result", "unknown"),
    }


def log(name, started):
    last = run(["journalctl", "-u", name, "-n", "1", "-o", "cat", "--no-pager"]).strip().splitlines()
    since = run(["journalctl", "-u", name, "--since", f"@{started}", "-o", "cat", "--no-pager"]) if started else ""
    return {
        "last": last[-1][:200] if last else None,
        "hit": SPEC["hitLine"] in since,
        "warmUp": SPEC["warmUpLine"] in since,
    }


def bundles(folder, started):
    """The model's mega-cache bundles (vllm-rbln saves one after every warm-up): any, and any saved since the start."""
    found = []
    for root, _, files in os.walk(folder):
        found += [os.path.join(root, f) for f in files if f == "mega_cache.bin"]
    mtimes = []
    for path in found:
        try:
            mtimes.append(os.stat(path).st_mtime)
        except OSError:
            continue
    return {"any": bool(mtimes), "savedSinceStart": bool(started) and any(m >= started for m in mtimes)}


def boot_time():
    with open("/proc/stat") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("btime "))


def processes():
    """Every process's argv and its start (epoch seconds)."""
    found, ticks, booted = [], os.sysconf("SC_CLK_TCK"), boot_time()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat") as f:
                started = booted + int(f.read().rsplit(")", 1)[1].split()[19]) // ticks
        except (OSError, ValueError, IndexError):
            continue
        if argv:
            found.append((argv, started))
    return found


def first_start(running, matches):
    starts = [started for argv, started in running if matches(argv)]
    return min(starts) if starts else None


def installing(argv, venv):
    return any(a == venv or a.startswith(venv + "/") for a in argv)


def downloading(argv, markers, hf_home):
    copying = os.path.basename(argv[0]) == "rsync" and any(a.startswith(hf_home + "/") for a in argv)
    return copying or any(a in markers for a in argv)


def rank(spec, running):
    state = unit(spec["unit"])
    markers = spec["weightsMarkers"]
    return {
        "unit": state,
        "group": unit(spec["group"]) if spec["group"] else None,
        "log": log(spec["unit"], state["started"]),
        "bundles": bundles(spec["bundleDir"], state["started"]),
        "venv": {
            "complete": os.path.isfile(spec["venv"] + "/.rbln-serving-complete"),
            "installing": first_start(running, lambda argv: installing(argv, spec["venv"])),
        },
        "weights": {
            "complete": all(os.path.isfile(m) for m in markers),
            "downloading": first_start(running, lambda argv: downloading(argv, markers, spec["hfHome"])),
        },
        "compiled": os.path.isfile(spec["compileMarker"]),
    }


def drains(folder):
    found = {}
    for name in sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else []:
        if name.endswith(".json"):
            try:
                with open(os.path.join(folder, name)) as f:
                    found[name[: -len(".json")]] = json.load(f)
            except (OSError, ValueError):
                continue
    return found


running = processes() if SPEC["ranks"] else []
print(json.dumps({"now": time.time(), "ranks": {r["key"]: rank(r, running) for r in SPEC["ranks"]}, "drains": drains(SPEC.get("drainsDir"))}))
