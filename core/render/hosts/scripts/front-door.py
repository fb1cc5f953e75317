#!/usr/bin/env python3
"""rbln-serving front door on a router host: keeps the endpoint picker's endpoints file.

The llm-d endpoint picker (EPP) reads the endpoints it routes to from a file it watches (its
file-discovery plugin). This keeps that file true: it lists every endpoint the stack plans
(desired.json) that serves, and that no unit step has drained. Writes are whole files renamed into
place, which the EPP reloads.

  front-door.py agent DIR          the loop: probe every endpoint, rewrite the file when it changes
  front-door.py ssh DIR            the command of the unit steps' SSH key: $SSH_ORIGINAL_COMMAND is
                                   `drain NAME`, `renew NAME` or `rejoin NAME`
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
and the group comes back once every rank of it serves and none is drained.
"""
import contextlib
import fcntl
import json
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


class FrontDoor:
    def __init__(self, directory):
        self.dir = directory
        with open(os.path.join(directory, "desired.json")) as f:
            self.desired = json.load(f)
        self.endpoints = {e["name"]: e for e in self.desired["endpoints"]}
        self.file = os.path.join(directory, "epp", "endpoints.yaml")
        self.drains = os.path.join(directory, "drains")
        # A marker for each endpoint the file has listed: it has served in this front door.
        self.served = os.path.join(directory, "served")
        for folder in (self.drains, self.served):
            os.makedirs(folder, exist_ok=True)

    @contextlib.contextmanager
    def locked(self):
        with open(os.path.join(self.dir, "lock"), "a") as lock:
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

    def listed(self):
        """The names the file lists now (the EPP's view)."""
        try:
            with open(self.file) as f:
                return [line.split('"')[1] for line in f if line.startswith("- name: ")]
        except FileNotFoundError:
            return []

    def write(self, names):
        """The file, listing `names` in the stack's order; renamed into place, only when it changes."""
        for name in names:
            marker = os.path.join(self.served, name)
            if not os.path.exists(marker):
                open(marker, "a").close()
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
            with open(self.file) as f:
                if f.read() == text:
                    return
        except FileNotFoundError:
            pass
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(self.file), prefix=".endpoints.")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, self.file)
        log(f"endpoints: {', '.join(n for n in self.endpoints if n in names) or '(none)'}")

    def drain_path(self, name):
        return os.path.join(self.drains, f"{name}.json")

    def read_drain(self, name):
        try:
            with open(self.drain_path(name)) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def write_drain(self, name, drain):
        fd, temporary = tempfile.mkstemp(dir=self.drains, prefix=".drain.")
        with os.fdopen(fd, "w") as f:
            json.dump(drain, f)
        os.replace(temporary, self.drain_path(name))

    def end_drain(self, name, why):
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.drain_path(name))
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
                if name not in self.listed() or self.others_listed(name) or self.desired["allowEmpty"]:
                    self.hold(name, self.read_drain(name))
                    self.write([n for n in self.listed() if n not in self.members(name)])
                    break
            if not others:
                fail(f"draining {name} would leave role {role} with no endpoint in the front door ({host} is its only server); add a replica, or set rollout.allowEmptyFrontDoor: true to accept the outage")
            if not awaited:
                new = ", ".join(sorted({e["host"] for e in others}))
                fail(f"draining {name} would leave role {role} with no endpoint in the front door ({new} never served and changes only after {host}); deploy {new} first with role {role} unchanged, or set rollout.allowEmptyFrontDoor: true to accept the outage")
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
            group = self.members(name)
            if name not in self.listed() and all(self.read_drain(m) is None and self.serves(self.endpoints[m]) for m in group):
                self.write(self.listed() + group)
        log(f"{name}: back in the endpoints as soon as it serves")


def main(argv):
    if len(argv) < 2 or argv[0] not in ("agent", "ssh", *STEP_COMMANDS):
        fail(f"usage: front-door.py agent|ssh|{'|'.join(STEP_COMMANDS)} DIR [NAME]")
    command, directory, rest = argv[0], argv[1], argv[2:]
    if command == "ssh":
        words = os.environ.get("SSH_ORIGINAL_COMMAND", "").split()
        if len(words) != 2 or words[0] not in STEP_COMMANDS:
            fail("this key runs `drain NAME`, `renew NAME` or `rejoin NAME` only")
        command, rest = words[0], words[1:]
    door = FrontDoor(directory)
    if command == "agent":
        log(f"keeping {door.file} for {len(door.endpoints)} endpoints")
        while True:
            door.tick(door.probe_all())
            time.sleep(door.desired["intervalSeconds"])
            door = FrontDoor(directory)
    name = rest[0] if len(rest) == 1 else ""
    if not set(name) <= NAME_CHARS or name not in door.endpoints:
        fail(f"{name!r} is no endpoint of this front door; endpoints: {', '.join(door.endpoints)}")
    getattr(door, command)(name)


if __name__ == "__main__":
    main(sys.argv[1:])
