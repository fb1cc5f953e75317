#!/usr/bin/env python3
"""rbln-serving front door on a router host: keeps the endpoint picker's endpoints file.

The llm-d endpoint picker (EPP) reads the endpoints it routes to from a file it watches (its
file-discovery plugin). This keeps that file true: it lists every endpoint the stack plans
(desired.json) that serves, and that no unit step has drained. Writes are whole files renamed into
place, which the EPP reloads.

  front-door.py agent DIR          the loop: probe every endpoint, rewrite the file when it changes
  front-door.py ssh DIR HOST       the command of HOST's SSH key: $SSH_ORIGINAL_COMMAND is
                                   `drain NAME`, `renew NAME` or `rejoin NAME`, NAME one of HOST's
                                   own endpoints
  front-door.py drain DIR NAME     take NAME out before its unit restarts; waits while that would
                                   leave its role without an endpoint on another host, unless no
                                   other host of the role can serve before NAME's step ends. Asked
                                   again while NAME is out (a resumed step, a step's way back), it
                                   holds the drain that is there, with a new lease
  front-door.py renew DIR NAME     extend NAME's drain by its lease; nothing when NAME is not drained
  front-door.py rejoin DIR NAME    end NAME's drain; it is listed again as soon as it serves

A drain ends only when it is told to: by its unit step's rejoin, once the step has decided (the new
config serves, or the old one is back), or when its lease runs out (`drainLeaseSeconds`), which the
step renews while it runs: a step that died, or cannot reach this host, stops renewing it. What the
agent sees of a drained rank (down, then serving again) never ends its drain: a restart by systemd
after a crash, a cut step's restart and the step's own look the same from here. An endpoint that is
not drained is listed exactly while it answers: a crashed rank leaves at the first probe it fails
and comes back once it serves. The ranks of a data-parallel group (endpoints with one `group`) are
listed together or not at all: one that fails or is drained takes its whole group out, since its
peers hang in the group's collectives while they still answer /health (vLLM 0.30, dp.rankDeath),
and the group comes back once every rank of it serves and none is drained. A group's ranks are all
on one host (`<host>-<role>`), so a host's key drains its own groups whole.

State files are written whole, fsynced, renamed into place, and their folder fsynced, so a crash
or a power loss leaves the old file or the new one. One that cannot be read all the same (empty,
cut, not UTF-8, not JSON, wrong types or keys, a folder in its place) never stops the agent, and
is logged once; what it stands for then, by kind:

  drains/NAME.json   a drain from now, written over it: NAME stays out for one lease, unless its
                     step renews or rejoins it (the safe side: its rank may be restarting); its
                     group stays out with it
  desired.json       the last one read is kept (on a start with none, the endpoints file is left
                     as it is, and read again every second); drain, renew and rejoin refuse
  served/NAME        only its presence counts, whatever it is
  epp/endpoints.yaml lists nothing for a drain's decision, and is written again on the next pass
  lock               that pass is skipped; drain, renew and rejoin refuse
"""
import contextlib
import fcntl
import json
import math
import os
import sys
import tempfile
import threading
import time
import urllib.request

NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-")
# What a unit step's key may ask for, each of one endpoint.
STEP_COMMANDS = ("drain", "renew", "rejoin")


def log(message):
    print(f"front door: {message}", flush=True)


def fail(message):
    print(f"front door: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def say(error):
    """An error in a few words, the same each time for the same cause (no temporary file names)."""
    if isinstance(error, OSError) and error.strerror:
        return f"{type(error).__name__}: {error.strerror}"
    return f"{type(error).__name__}: {error}"


class Unreadable(Exception):
    """A state file that is there but cannot be used: why, in a few words."""


def sync_folder(folder):
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clear_empty_folder(path):
    """An empty folder where a state file belongs (made by hand, or by a tool) goes; a full one stays, and the write fails."""
    if os.path.isdir(path) and not os.path.islink(path):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def write_whole(path, text, mode=0o644):
    """PATH holds TEXT, or what it held: written beside it, fsynced, renamed over it, its folder fsynced."""
    folder = os.path.dirname(path)
    clear_empty_folder(path)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
    sync_folder(folder)


def read_json(path):
    """A state file's JSON; FileNotFoundError when it is not there, Unreadable when it is but cannot be read."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError, RecursionError) as error:
        raise Unreadable(say(error)) from None


def is_number(value, least=0):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= least


def check_desired(desired):
    """desired.json as the renderer writes it (frontDoor.ts, desiredEndpoints); Unreadable naming the first thing that is not."""
    if not isinstance(desired, dict):
        raise Unreadable(f"not an object but {type(desired).__name__}")
    if not isinstance(desired.get("namespace"), str) or not isinstance(desired.get("allowEmpty"), bool):
        raise Unreadable("namespace or allowEmpty missing, or of the wrong type")
    for key in ("drainWaitSeconds", "settleSeconds", "drainLeaseSeconds", "probeTimeoutSeconds"):
        if not is_number(desired.get(key)):
            raise Unreadable(f"{key} is not a number >= 0")
    if not is_number(desired.get("intervalSeconds"), 0.01):
        raise Unreadable("intervalSeconds is not a number >= 0.01")
    endpoints = desired.get("endpoints")
    if not isinstance(endpoints, list):
        raise Unreadable("endpoints is not a list")
    group_hosts = {}
    for i, e in enumerate(endpoints):
        fields = isinstance(e, dict) and all(isinstance(e.get(k), str) and e[k] for k in ("name", "host", "role", "address"))
        if not fields or not set(e["name"]) <= NAME_CHARS or not all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) for k in ("rank", "port", "rankPort", "wave")):
            raise Unreadable(f"endpoints[{i}] lacks a name (of a-z, 0-9 and -), host, role, address, rank, port, rankPort or wave")
        # A group is one host's (`<host>-<role>`): a host's key, which drains only its own endpoints, takes it out whole.
        if "group" in e and not (isinstance(e["group"], str) and e["group"] and group_hosts.setdefault(e["group"], e["host"]) == e["host"]):
            raise Unreadable(f"endpoints[{i}].group is not a name, or names a group of another host")
        labels = e.get("labels")
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise Unreadable(f"endpoints[{i}].labels is not an object of strings")
    return desired


def check_drain(drain):
    """A drain as write_drain writes it ({since, until}; one of before leases has no until)."""
    if not isinstance(drain, dict) or not is_number(drain.get("since")) or ("until" in drain and not is_number(drain["until"])):
        raise Unreadable("not an object with a number since (and until)")
    return drain


class FrontDoor:
    def __init__(self, directory):
        self.dir = directory
        self.desired = None
        self.endpoints = {}
        self.file = os.path.join(directory, "epp", "endpoints.yaml")
        self.drains = os.path.join(directory, "drains")
        # A marker for each endpoint the file has listed: it has served in this front door.
        self.served = os.path.join(directory, "served")
        # What was last said about each state file that cannot be used: said again only when it changes.
        self.said = {}
        for folder in (self.drains, self.served):
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as error:
                self.warn(folder, f"{folder} is not a folder ({say(error)}); its files read as unreadable")
        self.reload()

    def warn(self, key, message):
        """Logs MESSAGE about KEY once, until KEY's message changes or is cleared (message None)."""
        if message is not None and self.said.get(key) != message:
            log(message)
        self.said[key] = message

    def reload(self):
        """desired.json, read again; the last one read is kept when it cannot be (see the module's doc)."""
        path = os.path.join(self.dir, "desired.json")
        try:
            self.desired = check_desired(read_json(path))
        except (FileNotFoundError, Unreadable) as error:
            why = "it is missing" if isinstance(error, FileNotFoundError) else str(error)
            kept = "the last one read is kept" if self.desired is not None else "the endpoints file is left as it is until it can be read"
            self.warn(path, f"{path} cannot be read ({why}); {kept}")
            return
        self.warn(path, None)
        self.endpoints = {e["name"]: e for e in self.desired["endpoints"]}

    def require_desired(self):
        if self.desired is None:
            fail(f"{os.path.join(self.dir, 'desired.json')} cannot be read (see above); run the front door's apply step again")

    @contextlib.contextmanager
    def locked(self):
        path = os.path.join(self.dir, "lock")
        clear_empty_folder(path)
        with open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def serves(self, endpoint):
        """The rank answers /health on its own port and, behind a routing sidecar, on the sidecar's."""
        ports = sorted({endpoint["rankPort"], endpoint["port"]})
        try:
            for port in ports:
                with urllib.request.urlopen(f"http://{endpoint['address']}:{port}/health", timeout=self.desired["probeTimeoutSeconds"]) as answer:
                    if answer.status != 200:
                        return False
            return True
        except Exception:
            return False

    def probe_all(self):
        results = {}

        def probe(endpoint):
            results[endpoint["name"]] = self.serves(endpoint)

        threads = [threading.Thread(target=probe, args=(e,)) for e in self.endpoints.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def listing(self):
        """The names the file lists now (the EPP's view); None when it cannot be read (the agent's next pass writes it again)."""
        try:
            with open(self.file, encoding="utf-8") as f:
                return [line.split('"')[1] for line in f if line.startswith('- name: "')]
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            self.warn(self.file, f"{self.file} cannot be read ({say(error)}); it is written again at the next pass")
            return None

    def listed(self):
        return self.listing() or []

    def write(self, names):
        """The file, listing `names` in the stack's order; renamed into place, only when it changes."""
        for name in names:
            self.mark_served(name)
        lines = []
        for endpoint in self.endpoints.values():
            if endpoint["name"] not in names:
                continue
            lines += [f'- name: "{endpoint["name"]}"', f'  namespace: "{self.desired["namespace"]}"', f'  address: "{endpoint["address"]}"', f'  port: "{endpoint["port"]}"']
            if endpoint["labels"]:
                lines.append("  labels:")
                lines += [f'    "{key}": "{value}"' for key, value in sorted(endpoint["labels"].items())]
        text = "endpoints:\n" + "".join(f"{line}\n" for line in lines) if lines else "endpoints: []\n"
        try:
            with open(self.file, "rb") as f:
                if f.read() == text.encode("utf-8"):
                    return
        except OSError:
            pass
        try:
            write_whole(self.file, text)
        except OSError as error:
            self.warn(f"{self.file} write", f"{self.file} cannot be written ({say(error)}); the EPP keeps what it read last")
            return
        self.warn(f"{self.file} write", None)
        self.warn(self.file, None)
        log(f"endpoints: {', '.join(n for n in self.endpoints if n in names) or '(none)'}")

    def mark_served(self, name):
        marker = os.path.join(self.served, name)
        if os.path.lexists(marker):
            return
        try:
            write_whole(marker, "")
        except OSError as error:
            self.warn(marker, f"{marker} cannot be written ({say(error)}); a drain does not count {name} as a server that has served")

    def drain_path(self, name):
        return os.path.join(self.drains, f"{name}.json")

    def read_drain(self, name):
        """NAME's drain, or None; one that cannot be read is a drain from now, written over it."""
        path = self.drain_path(name)
        try:
            return check_drain(read_json(path))
        except FileNotFoundError:
            return None
        except Unreadable as error:
            why = str(error)
        now = time.time()
        drain = {"since": now, "until": now + self.desired["drainLeaseSeconds"]}
        try:
            self.write_drain(name, drain)
        except OSError as error:
            self.warn(path, f"{name}: {path} cannot be read ({why}) nor replaced ({say(error)}); {name} stays out of the endpoints until it is removed")
            return drain
        log(f"{name}: {path} could not be read ({why}); it is a drain from now, for one lease of {self.desired['drainLeaseSeconds']}s unless its step renews or rejoins it")
        return drain

    def write_drain(self, name, drain):
        write_whole(self.drain_path(name), json.dumps(drain), 0o600)

    def end_drain(self, name, why):
        path = self.drain_path(name)
        try:
            os.remove(path)
        except FileNotFoundError:
            return
        except OSError as error:
            self.warn(path, f"{name}: {path} cannot be removed ({say(error)}); {name} stays out of the endpoints until it is removed")
            return
        sync_folder(self.drains)
        log(f"{name}: drain over ({why})")

    def members(self, name):
        """NAME's data-parallel group, NAME alone when it has none."""
        group = self.endpoints[name].get("group")
        return [n for n, e in self.endpoints.items() if group is not None and e.get("group") == group] or [name]

    def whole_groups(self, names):
        """The names whose whole group is among `names`."""
        return [n for n in names if all(m in names for m in self.members(n))]

    def tick(self, serving):
        """One pass of the agent: drains whose lease ran out, then the file."""
        now = time.time()
        with self.locked():
            for name in self.endpoints:
                drain = self.read_drain(name)
                if drain is not None and now >= self.lease_end(drain):
                    self.end_drain(name, f"its lease of {self.desired['drainLeaseSeconds']}s ran out: its unit step ended without a rejoin, or stopped renewing it")
            self.write(self.whole_groups([n for n in self.endpoints if serving[n] and self.read_drain(n) is None]))

    def lease_end(self, drain):
        # A drain written before leases (by an older agent) lasts one lease from its start.
        return drain.get("until", drain["since"] + self.desired["drainLeaseSeconds"])

    def hold(self, name, drain):
        """Writes NAME's drain with a lease from now; kept from `drain` (one there already): when it began."""
        self.write_drain(name, {"since": drain["since"] if drain else time.time(), "until": time.time() + self.desired["drainLeaseSeconds"]})

    def others_listed(self, name):
        endpoint = self.endpoints[name]
        return [n for n in self.listed() if n != name and self.endpoints.get(n, {}).get("role") == endpoint["role"] and self.endpoints[n]["host"] != endpoint["host"]]

    def drain(self, name):
        endpoint = self.endpoints[name]
        role, host = endpoint["role"], endpoint["host"]
        others = [e for e in self.endpoints.values() if e["role"] == role and e["host"] != host]
        # Worth waiting for: a server whose step runs before or beside this one, or one that has served and
        # may come back by itself. A new server of a later wave starts only after this step: waiting for it
        # would hold both until drainWaitSeconds.
        awaited = [e for e in others if e["wave"] <= endpoint["wave"] or os.path.exists(os.path.join(self.served, e["name"]))]
        deadline = time.time() + self.desired["drainWaitSeconds"]
        said = 0.0
        while True:
            with self.locked():
                readable = self.listing() is not None
                if readable:
                    if name not in self.listed() or self.others_listed(name) or self.desired["allowEmpty"]:
                        self.hold(name, self.read_drain(name))
                        self.write([n for n in self.listed() if n not in self.members(name)])
                        break
            # A file that cannot be read is written again by the agent's next pass: decide on what it lists then.
            if readable and not others:
                fail(f"draining {name} would leave role {role} with no endpoint in the front door ({host} is its only server); add a replica, or set rollout.allowEmptyFrontDoor: true to accept the outage")
            if readable and not awaited:
                new = ", ".join(sorted({e["host"] for e in others}))
                fail(f"draining {name} would leave role {role} with no endpoint in the front door ({new} never served and changes only after {host}); deploy {new} first with role {role} unchanged, or set rollout.allowEmptyFrontDoor: true to accept the outage")
            if time.time() >= deadline and not readable:
                fail(f"draining {name}: {self.file} could not be read for {self.desired['drainWaitSeconds']}s (see above); nothing was drained")
            if time.time() >= deadline:
                fail(f"draining {name} would leave role {role} with no endpoint in the front door, and none of its other servers came back within {self.desired['drainWaitSeconds']}s; run again once one serves")
            if time.time() - said >= 30:
                log(f"{name}: waiting for another {role} server to serve before taking it out")
                said = time.time()
            time.sleep(self.desired["intervalSeconds"])
        # The EPP reloads on the rename; give it and the requests it already placed a moment.
        time.sleep(self.desired["settleSeconds"])
        log(f"{name}: out of the endpoints; its in-flight requests finish under vLLM's --shutdown-timeout")

    def renew(self, name):
        with self.locked():
            drain = self.read_drain(name)
            if drain is not None:
                self.hold(name, drain)

    def rejoin(self, name):
        with self.locked():
            self.end_drain(name, "its unit step is done")
            listed = self.listing()
            group = self.members(name)
            # Not while a rank of its group is drained (one whose drain could not be removed, or cannot be read,
            # counts), nor over a file that cannot be read: the agent's next pass decides then.
            if listed is not None and name not in listed and not os.path.lexists(self.drain_path(name)) and all(self.read_drain(m) is None and self.serves(self.endpoints[m]) for m in group):
                self.write(listed + group)
        log(f"{name}: back in the endpoints as soon as it serves")


def run_agent(directory):
    """The agent's loop. A pass that fails (a state file, the disk) is logged and tried again at the next: nothing here ends it."""
    door = FrontDoor(directory)
    log(f"keeping {door.file} for {len(door.endpoints)} endpoints")
    while True:
        try:
            door.reload()
            if door.desired is not None:
                door.tick(door.probe_all())
            door.warn("pass", None)
        except Exception as error:  # whatever it was, the next pass tries again
            door.warn("pass", f"a pass failed ({say(error)}); trying again")
        time.sleep(door.desired["intervalSeconds"] if door.desired else 1)


def main(argv):
    if len(argv) < 2 or argv[0] not in ("agent", "ssh", *STEP_COMMANDS):
        fail(f"usage: front-door.py agent|ssh|{'|'.join(STEP_COMMANDS)} DIR [NAME|HOST]")
    command, directory, rest = argv[0], argv[1], argv[2:]
    if command == "agent":
        run_agent(directory)
    # The key of one host: its own endpoints only.
    host = None
    if command == "ssh":
        if len(rest) != 1:
            fail("usage: front-door.py ssh DIR HOST")
        host = rest[0]
        words = os.environ.get("SSH_ORIGINAL_COMMAND", "").split()
        if len(words) != 2 or words[0] not in STEP_COMMANDS:
            fail("this key runs `drain NAME`, `renew NAME` or `rejoin NAME` only")
        command, rest = words[0], words[1:]
    door = FrontDoor(directory)
    door.require_desired()
    name = rest[0] if len(rest) == 1 else ""
    if not set(name) <= NAME_CHARS or name not in door.endpoints:
        fail(f"{name!r} is no endpoint of this front door; endpoints: {', '.join(door.endpoints)}")
    if host is not None and door.endpoints[name]["host"] != host:
        mine = [n for n, e in door.endpoints.items() if e["host"] == host]
        fail(f"{name} is an endpoint of {door.endpoints[name]['host']}; the key of {host} drains only its own: {', '.join(mine) or '(none)'}")
    try:
        getattr(door, command)(name)
    except OSError as error:
        fail(f"{command} {name}: {say(error)}")


if __name__ == "__main__":
    main(sys.argv[1:])
