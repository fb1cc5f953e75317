import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { TestNetwork } from "./hostNetwork";
import { freePort, runOverSsh, waitForPort, writeSshdFiles, type CommandResult } from "./sshd";

/**
 * Fake NPU hosts on this machine: each is a pid + mount + cgroup + UTS namespace running the real systemd as
 * PID 1 and a real OpenSSH server on its own loopback address (127.A.B.2, .3, ..., A.B drawn per call, so test
 * files running side by side, each with ranks on port 8000, never share an address). The network and the root
 * filesystem are shared with this machine (with `network`, each host has a network namespace of its own instead:
 * test/helpers/hostNetwork.ts); the namespace gets private /run, /tmp, /var/tmp, /dev/shm,
 * /etc/systemd/system, /var/lib/systemd and the caller's `privatePaths`. /etc/passwd is shared, so users the
 * scripts add with useradd appear on this machine too.
 *
 * systemd boots `rbln-test.target` only (journald + sshd): the .wants directories of sysinit/sockets/timers/
 * local-fs.target and the generators are hidden, so units with default dependencies pull in empty targets
 * instead of tmpfiles, sysctl, module loading or fstab mounts that would act on this machine.
 */
export interface TestHost {
  name: string;
  address: string;
  port: number;
  /** The SSH host public key line ("ssh-ed25519 AAAA..."), for known_hosts or host-key checks. */
  hostPublicKey: string;
  clientPrivateKey: string;
  /** Path of the client private key, for tools that take a key file. */
  clientKeyPath: string;
  /** Milliseconds from spawning the namespace until its sshd accepted connections. */
  bootMs: number;
  /** One SSH session as root, like @pulumi/command's remote.Command. */
  run(command: string, stdin?: string): Promise<CommandResult>;
  /**
   * Runs a shell command in the host's namespaces without the network (nsenter, as on its console): for a
   * host that is cut off, or to look at a host without an SSH session of its own in the picture.
   */
  console(command: string, stdin?: string): Promise<CommandResult>;
  /** Power loss: every process of the host SIGKILLed at once (and its veth gone); its private state stays for reboot(). */
  kill(): Promise<void>;
  /**
   * Boots the host again with the same disk: private paths, /etc/systemd/system and /var/lib/systemd kept, /run and
   * /tmp empty, and what is enabled (multi-user.target's wants) started as on a real boot. A running host is powered
   * off first (kill()), or with `graceful`, shut down by `systemctl reboot`: units stopped in order, as an operator's
   * reboot does. Same address, port, host key and MAC. `whileDown` runs while it is off, given where a path under
   * one of its private paths is on this machine's disk: to change what the host finds when it boots.
   */
  reboot(options?: { graceful?: boolean; whileDown?: (onDisk: (target: string) => string) => void | Promise<void> }): Promise<void>;
  /** SIGKILLs the unit's main process only (systemctl kill --kill-whom=main); throws if it has none. */
  killUnit(unit: string): Promise<void>;
  /**
   * Hosts on a `network` only: the host's network dies while its processes run on. By default the host still sees its
   * link up and nothing reaches it or leaves it (its port taken off the bridge: a partition); with `linkDown`, its
   * eth0 loses carrier too (the cable pulled). restore() puts it back.
   */
  cutOff(options?: { linkDown?: boolean }): Promise<void>;
  restore(): Promise<void>;
  stop(): Promise<void>;
}

export interface HostOptions {
  /** Absolute paths each host gets its own empty directory at (e.g. the install and cache roots). */
  privatePaths?: string[];
  /**
   * Python programs on the host bind to its own address where they name all interfaces or loopback,
   * and connect there where they name loopback (test/fixtures/fake-host/sitecustomize.py), as if the
   * host had a network of its own: for servers on one port on several hosts, each probed on 127.0.0.1.
   */
  loopbackIsHostAddress?: boolean;
  /**
   * A network of the test's own (startNetwork() in test/helpers/hostNetwork.ts): each host in a network namespace of
   * its own, its eth0 on that network's bridge with the next address of it, sshd on port 22. Other hosts and this
   * process reach it by address only; 127.0.0.1 is the host's own loopback.
   */
  network?: TestNetwork;
}

const SYSTEMD_LIB = "/usr/lib/systemd";
const HIDDEN_WANTS = ["sysinit", "sockets", "timers", "local-fs", "multi-user"].map((t) => `${SYSTEMD_LIB}/system/${t}.target.wants`);
const CGROUP_HIERARCHIES = ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"];
const OWN_NETWORK_SITECUSTOMIZE = path.join(__dirname, "..", "fixtures", "fake-host", "sitecustomize.py");

/** The system python's sitecustomize module (Debian's, under /etc), which a host with loopbackIsHostAddress replaces with its own. */
function systemSitecustomize(): string {
  const found = spawnSync("/usr/bin/python3", ["-c", "import os, sitecustomize; print(os.path.realpath(sitecustomize.__file__))"], { encoding: "utf8" });
  if (found.status !== 0) throw new Error(`loopbackIsHostAddress: /usr/bin/python3 has no sitecustomize module to replace: ${found.stderr}`);
  return found.stdout.trim();
}

const UNITS: Record<string, string> = {
  "rbln-test.target": `[Unit]
Description=Fake NPU host for tests
DefaultDependencies=no
Wants=systemd-journald.socket systemd-journald-dev-log.socket systemd-journald.service rbln-test-sshd.service
`,
  "rbln-test-sshd.service": `[Unit]
DefaultDependencies=no
[Service]
ExecStart=/usr/sbin/sshd -D -e -f /run/rbln-host/ssh/sshd_config
RuntimeDirectory=sshd
`,
  // Booted after reboot(): what the tests enabled starts as on a real boot; the machine's own wants of multi-user.target are hidden.
  "rbln-test-reboot.target": `[Unit]
Description=Fake NPU host for tests, booted again
DefaultDependencies=no
Wants=rbln-test.target multi-user.target
`,
};

/** Runs inside the new namespaces: private mounts first, then systemd. $1 is the host directory, then source/target pairs. */
const BOOT_SCRIPT = `set -eu
host=$1; shift
mount --make-rprivate /
target=\${RBLN_HOST_TARGET:-rbln-test.target}; unset RBLN_HOST_TARGET
if [ -n "\${RBLN_HOST_NETWORK:-}" ]; then
  # A network namespace of its own: a sysfs that shows its links, loopback up, and eth0 (the harness moves it in) with its address.
  mount -t sysfs sysfs /sys
  ip link set lo up
  for i in $(seq 1000); do [ -e /sys/class/net/eth0 ] && break; sleep 0.01; done
  ip address add "$RBLN_HOST_NETWORK" dev eth0
  ip link set eth0 up
  # Its own name too: systemd sets the hostname from /etc/hostname at boot.
  printf '%s\n' "$RBLN_HOST_NAME" > "$host/hostname"
  mount --bind "$host/hostname" /etc/hostname
  unset RBLN_HOST_NETWORK
fi
unset RBLN_HOST_NAME
mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
mount --bind "$host/etc-systemd-system" /etc/systemd/system
mount --bind "$host/var-lib-systemd" /var/lib/systemd
for hidden in ${[...HIDDEN_WANTS, `${SYSTEMD_LIB}/system-generators`].join(" ")}; do mount --bind "$host/empty" "$hidden"; done
while [ $# -gt 0 ]; do mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; done
if [ -n "\${RBLN_HOST_SITECUSTOMIZE:-}" ]; then mount --bind "${OWN_NETWORK_SITECUSTOMIZE}" "$RBLN_HOST_SITECUSTOMIZE"; unset RBLN_HOST_SITECUSTOMIZE; fi
mount -t tmpfs -o mode=755 tmpfs /run
# For every user of the host (its own folder, below, is root's only).
printf '%s\n' "$RBLN_HOST_ADDRESS" > /run/rbln-host-address; unset RBLN_HOST_ADDRESS
mkdir -p /run/rbln-host /run/systemd/system /run/systemd/journald.conf.d
mount --bind "$host" /run/rbln-host
cp "$host"/units/* /run/systemd/system/
printf '[Journal]\\nStorage=volatile\\n' > /run/systemd/journald.conf.d/rbln-test.conf
for scratch in /tmp /var/tmp /dev/shm; do mount -t tmpfs -o mode=1777 tmpfs "$scratch"; done
export container=rbln-test
exec /lib/systemd/systemd --system --unit="$target" --log-target=journal
`;

/** Where a host on a `network` joins its bridge: `port` is its veth's end there. */
interface Attachment {
  network: TestNetwork;
  port: string;
  mac: string;
}

interface Booted {
  name: string;
  address: string;
  port: number;
  dir: string;
  cgroup: string;
  /** Source/target pairs bound at each boot (the private paths). */
  binds: string[];
  sitecustomize: string;
  attachment?: Attachment;
  /** The running namespace's unshare; none before the first boot. */
  launcher?: ChildProcess;
  bootMs: number;
}

const running = new Set<Booted>();
process.on("exit", () => {
  for (const host of running) {
    killNamespace(host);
    fs.rmSync(host.dir, { recursive: true, force: true });
  }
});

const isRunning = (launcher: ChildProcess | undefined) => launcher?.exitCode === null && launcher.signalCode === null;
const launcherExit = (launcher: ChildProcess | undefined) =>
  launcher && isRunning(launcher) ? new Promise((r) => launcher.once("exit", r)) : Promise.resolve();

/** The namespace's PID 1 is the child unshare forked. */
function namespaceInit(launcher: ChildProcess | undefined): number | undefined {
  if (!launcher || !isRunning(launcher)) return undefined;
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, "utf8");
      if (new RegExp(`^PPid:\\s+${launcher.pid}$`, "m").test(status)) return Number(entry);
    } catch {
      // the process exited while we looked
    }
  }
  return undefined;
}

/** SIGKILL of a pid namespace's PID 1 makes the kernel kill everything in it; unshare then reaps it and exits. */
function killNamespace(host: Booted): void {
  const init = namespaceInit(host.launcher);
  try {
    if (init !== undefined) process.kill(init, "SIGKILL");
    else host.launcher?.kill("SIGKILL");
  } catch {
    // already gone
  }
}

/** Removes the host's cgroup subtrees, deepest first, once the dying processes have left them. */
async function removeCgroups(name: string): Promise<void> {
  const trees = CGROUP_HIERARCHIES.map((hierarchy) => path.join(hierarchy, name));
  for (let attempt = 0; attempt < 50 && trees.some((tree) => fs.existsSync(tree)); attempt++) {
    spawnSync("sh", ["-c", 'for tree; do [ -d "$tree" ] && find "$tree" -depth -type d -exec rmdir {} + 2>/dev/null; done; true', "sh", ...trees]);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Deletes the host's veth (both ends) now, rather than when the kernel gets to its dead namespace. */
async function detach(host: Booted): Promise<void> {
  if (host.attachment) await host.attachment.network.exec(["ip", "link", "del", host.attachment.port]).catch(() => undefined);
}

/** Power loss: the namespace killed and its link gone at once, then the leftovers cleared for a next boot. */
async function powerOff(host: Booted): Promise<void> {
  const exited = launcherExit(host.launcher);
  killNamespace(host);
  await detach(host);
  await exited;
  await removeCgroups(host.cgroup);
}

async function stopBooted(host: Booted): Promise<void> {
  await powerOff(host);
  running.delete(host);
  fs.rmSync(host.dir, { recursive: true, force: true });
}

/** Gives the booting namespace its eth0: a veth from the bridge, moved into the namespace of its PID 1. */
async function attach(host: Booted, { network, port, mac }: Attachment, exited: () => string | undefined): Promise<void> {
  let init: number | undefined;
  for (let attempt = 0; attempt < 500 && init === undefined; attempt++) {
    const reason = exited();
    if (reason) throw new Error(reason);
    init = namespaceInit(host.launcher);
    if (init === undefined) await new Promise((r) => setTimeout(r, 10));
  }
  if (init === undefined) throw new Error(`${host.name}: its namespace did not start`);
  await network.exec(["ip", "link", "del", port]).catch(() => undefined);
  await network.exec(["ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "address", mac, "netns", String(init)]);
  await network.exec(["ip", "link", "set", port, "master", "br0", "up"]);
}

/** Starts the namespace on the host's directory and waits for its sshd; returns the milliseconds that took. */
async function boot(host: Booted, target: string): Promise<number> {
  // The namespace's cgroup root is the cgroup unshare starts in, so each host's systemd owns only its subtree.
  // If this process dies, unshare gets SIGKILL (setpriv) and so does the namespace's PID 1 (--kill-child).
  for (const hierarchy of CGROUP_HIERARCHIES) fs.mkdirSync(path.join(hierarchy, host.cgroup), { recursive: true });
  const enterCgroup = CGROUP_HIERARCHIES.map((h) => `echo $$ > ${h}/${host.cgroup}/cgroup.procs`).join("; ");
  const net = host.attachment ? " --net" : "";
  const started = Date.now();
  const launcher = spawn(
    "sh",
    [
      "-c",
      `${enterCgroup}; exec setpriv --pdeathsig KILL unshare --cgroup --pid --fork --mount --uts${net} --propagation private --mount-proc --kill-child=SIGKILL bash -c "$0" rbln-boot "$@"`,
      BOOT_SCRIPT,
      host.dir,
      ...host.binds,
    ],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        RBLN_HOST_ADDRESS: host.address,
        RBLN_HOST_SITECUSTOMIZE: host.sitecustomize,
        RBLN_HOST_TARGET: target,
        RBLN_HOST_NAME: host.name,
        RBLN_HOST_NETWORK: host.attachment ? `${host.address}/${host.attachment.network.prefixLength}` : "",
      },
    },
  );
  host.launcher = launcher;
  let log = "";
  const append = (chunk: Buffer) => (log = (log + chunk.toString()).slice(-20_000));
  launcher.stdout!.on("data", append);
  launcher.stderr!.on("data", append);
  const exited = () => (isRunning(launcher) ? undefined : `${host.name} exited (${launcher.exitCode ?? launcher.signalCode}): ${log}`);
  if (host.attachment) await attach(host, host.attachment, exited);
  await waitForPort(host.address, host.port, exited);
  return Date.now() - started;
}

/** A shell command in the host's namespaces, entered from outside (nsenter), with the environment of a clean session. */
function onConsole(host: Booted, command: string, stdin = ""): Promise<CommandResult> {
  const init = namespaceInit(host.launcher);
  if (init === undefined) return Promise.resolve({ status: null, stdout: "", stderr: `${host.name} is not running` });
  const session = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/run/rbln-host/ssh/home", "/bin/sh", "-c", command];
  const child = spawn("nsenter", ["--target", String(init), "--all", ...session]);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  // A command that does not read its stdin may exit before it is written.
  child.stdin.on("error", () => undefined);
  child.stdin.end(stdin);
  return new Promise((resolve) => child.on("close", (status) => resolve({ status, stdout, stderr })));
}

/** `systemctl reboot` inside: systemd stops the units, then its reboot() ends the pid namespace (PID 1 gets SIGHUP). */
async function shutDown(host: Booted): Promise<void> {
  const exited = launcherExit(host.launcher);
  const asked = await onConsole(host, "systemctl --no-block reboot");
  if (asked.status !== 0) throw new Error(`${host.name}: systemctl reboot: ${asked.stderr}`);
  await exited;
  await detach(host);
  await removeCgroups(host.cgroup);
}

/** Where `target` (under one of the host's private paths) is on this machine's disk. */
function onDisk(host: Booted, target: string): string {
  for (let i = 0; i < host.binds.length; i += 2) {
    const [source, mounted] = [host.binds[i]!, host.binds[i + 1]!];
    if (target === mounted || target.startsWith(`${mounted}/`)) return source + target.slice(mounted.length);
  }
  throw new Error(`${host.name}: ${target} is under none of its private paths`);
}

function attachmentOf(host: Booted, fault: string): Attachment {
  if (!host.attachment) throw new Error(`${fault}: ${host.name} shares this machine's network; start it with a network (HostOptions.network)`);
  return host.attachment;
}

function faults(host: Booted): Pick<TestHost, "console" | "kill" | "reboot" | "killUnit" | "cutOff" | "restore"> {
  return {
    console: (command, stdin) => onConsole(host, command, stdin),
    kill: () => powerOff(host),
    async reboot({ graceful = false, whileDown } = {}) {
      if (isRunning(host.launcher)) await (graceful ? shutDown(host) : powerOff(host));
      await whileDown?.((target) => onDisk(host, target));
      host.bootMs = await boot(host, "rbln-test-reboot.target");
    },
    async killUnit(unit) {
      if (!/^[\w@.:-]+$/.test(unit)) throw new Error(`killUnit: not a unit name: ${unit}`);
      const main = await onConsole(host, `systemctl show -p MainPID --value ${unit}`);
      if (main.status !== 0 || !/^[1-9]\d*$/.test(main.stdout.trim()))
        throw new Error(`killUnit: ${unit} on ${host.name} has no main process (${main.stdout.trim() || main.stderr.trim()})`);
      const killed = await onConsole(host, `systemctl kill --signal=SIGKILL --kill-whom=main ${unit}`);
      if (killed.status !== 0) throw new Error(`killUnit: ${unit} on ${host.name}: ${killed.stderr.trim()}`);
    },
    async cutOff({ linkDown = false } = {}) {
      const { network, port } = attachmentOf(host, "cutOff");
      await network.exec(["ip", "link", "set", port, ...(linkDown ? ["down"] : ["nomaster"])]);
    },
    async restore() {
      const { network, port } = attachmentOf(host, "restore");
      await network.exec(["ip", "link", "set", port, "master", "br0", "up"]);
    },
  };
}

async function startHost(index: number, network: string, { privatePaths = [], loopbackIsHostAddress = false, network: own }: HostOptions): Promise<TestHost> {
  if (own && loopbackIsHostAddress) throw new Error("loopbackIsHostAddress: a host on a network of its own has its own loopback already");
  const claimed = own?.claimHost();
  const name = `host-${claimed?.index ?? index}`;
  const address = claimed?.address ?? `${network}.${index + 2}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rbln-host-${claimed?.index ?? index}-`));
  for (const sub of ["etc-systemd-system", "var-lib-systemd", "empty", "units", "ssh", "private"]) fs.mkdirSync(path.join(dir, sub));
  for (const [unit, text] of Object.entries(UNITS)) fs.writeFileSync(path.join(dir, "units", unit), text);
  const sitecustomize = loopbackIsHostAddress ? systemSitecustomize() : "";
  const port = own ? 22 : await freePort(address);
  writeSshdFiles(path.join(dir, "ssh"), address, port, "/run/rbln-host/ssh");
  const binds = privatePaths.flatMap((target, i) => {
    const source = path.join(dir, "private", String(i));
    fs.mkdirSync(source);
    return [source, target];
  });
  const host: Booted = {
    name,
    address,
    port,
    dir,
    cgroup: `rbln-test-${path.basename(dir)}`,
    binds,
    sitecustomize,
    attachment: own && claimed ? { network: own, port: name, mac: claimed.mac } : undefined,
    bootMs: 0,
  };
  running.add(host);
  try {
    host.bootMs = await boot(host, "rbln-test.target");
  } catch (error) {
    await stopBooted(host);
    throw error;
  }
  const clientKeyPath = path.join(dir, "ssh", "client_key");
  const hostPublicKey = fs
    .readFileSync(path.join(dir, "ssh", "host_key.pub"), "utf8")
    .trim()
    .split(" ")
    .slice(0, 2)
    .join(" ");
  return {
    name,
    address,
    port,
    hostPublicKey,
    clientPrivateKey: fs.readFileSync(clientKeyPath, "utf8"),
    clientKeyPath,
    get bootMs() {
      return host.bootMs;
    },
    run: (command, stdin) => runOverSsh(clientKeyPath, address, port, command, stdin),
    ...faults(host),
    stop: () => stopBooted(host),
  };
}

/** `count` hosts: a tuple of that length when the count is a literal, so `hosts[1]` is a host. */
export type TestHosts<N extends number, Hosts extends TestHost[] = []> = number extends N
  ? TestHost[]
  : Hosts["length"] extends N
    ? Hosts
    : TestHosts<N, [...Hosts, TestHost]>;

/** Boots `count` fake hosts in parallel; stop() each (process exit also kills any left running). */
export async function startHosts<N extends number>(count: N, options: HostOptions = {}): Promise<TestHosts<N>> {
  // 127.200.0.0-127.249.255.255: a band apart from the other tests' loopback servers.
  const network = `127.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 256)}`;
  const results = await Promise.allSettled(Array.from({ length: count }, (_, i) => startHost(i, network, options)));
  const hosts = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failure) {
    await Promise.all(hosts.map((h) => h.stop()));
    throw failure.reason;
  }
  return hosts as TestHosts<N>;
}
