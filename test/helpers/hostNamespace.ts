import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { freePort, runOverSsh, waitForPort, writeSshdFiles, type CommandResult } from "./sshd";

/**
 * Fake NPU hosts on this machine: each is a pid + mount + cgroup + UTS namespace running the real systemd as
 * PID 1 and a real OpenSSH server on its own loopback address (127.A.B.2, .3, ..., A.B drawn per call, so test
 * files running side by side, each with ranks on port 8000, never share an address). The network and the root
 * filesystem are shared with this machine; the namespace gets private /run, /tmp, /var/tmp, /dev/shm,
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
}

const SYSTEMD_LIB = "/usr/lib/systemd";
const HIDDEN_WANTS = ["sysinit", "sockets", "timers", "local-fs"].map((t) => `${SYSTEMD_LIB}/system/${t}.target.wants`);
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
};

/** Runs inside the new namespaces: private mounts first, then systemd. $1 is the host directory, then source/target pairs. */
const BOOT_SCRIPT = `set -eu
host=$1; shift
mount --make-rprivate /
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
exec /lib/systemd/systemd --system --unit=rbln-test.target --log-target=journal
`;

interface Booted {
  launcher: ChildProcess;
  dir: string;
  cgroup: string;
}

const running = new Set<Booted>();
process.on("exit", () => {
  for (const host of running) {
    killNamespace(host);
    fs.rmSync(host.dir, { recursive: true, force: true });
  }
});

/** The namespace's PID 1 is the child unshare forked. */
function namespaceInit(launcher: ChildProcess): number | undefined {
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
    else host.launcher.kill("SIGKILL");
  } catch {
    // already gone
  }
  running.delete(host);
}

/** Removes the host's cgroup subtrees, deepest first, once the dying processes have left them. */
async function removeCgroups(name: string): Promise<void> {
  const trees = CGROUP_HIERARCHIES.map((hierarchy) => path.join(hierarchy, name));
  for (let attempt = 0; attempt < 50 && trees.some((tree) => fs.existsSync(tree)); attempt++) {
    spawnSync("sh", ["-c", 'for tree; do [ -d "$tree" ] && find "$tree" -depth -type d -exec rmdir {} + 2>/dev/null; done; true', "sh", ...trees]);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stopBooted(host: Booted): Promise<void> {
  const exited = host.launcher.exitCode !== null ? Promise.resolve() : new Promise((r) => host.launcher.once("exit", r));
  killNamespace(host);
  await exited;
  fs.rmSync(host.dir, { recursive: true, force: true });
  await removeCgroups(host.cgroup);
}

async function startHost(index: number, network: string, { privatePaths = [], loopbackIsHostAddress = false }: HostOptions): Promise<TestHost> {
  const name = `host-${index}`;
  const address = `${network}.${index + 2}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rbln-host-${index}-`));
  for (const sub of ["etc-systemd-system", "var-lib-systemd", "empty", "units", "ssh", "private"]) fs.mkdirSync(path.join(dir, sub));
  for (const [unit, text] of Object.entries(UNITS)) fs.writeFileSync(path.join(dir, "units", unit), text);
  const sitecustomize = loopbackIsHostAddress ? systemSitecustomize() : "";
  const port = await freePort(address);
  writeSshdFiles(path.join(dir, "ssh"), address, port, "/run/rbln-host/ssh");
  const binds = privatePaths.flatMap((target, i) => {
    const source = path.join(dir, "private", String(i));
    fs.mkdirSync(source);
    return [source, target];
  });
  // The namespace's cgroup root is the cgroup unshare starts in, so each host's systemd owns only its subtree.
  // If this process dies, unshare gets SIGKILL (setpriv) and so does the namespace's PID 1 (--kill-child).
  const cgroup = `rbln-test-${path.basename(dir)}`;
  for (const hierarchy of CGROUP_HIERARCHIES) fs.mkdirSync(path.join(hierarchy, cgroup));
  const enterCgroup = CGROUP_HIERARCHIES.map((h) => `echo $$ > ${h}/${cgroup}/cgroup.procs`).join("; ");
  const started = Date.now();
  const launcher = spawn(
    "sh",
    [
      "-c",
      `${enterCgroup}; exec setpriv --pdeathsig KILL unshare --cgroup --pid --fork --mount --uts --propagation private --mount-proc --kill-child=SIGKILL bash -c "$0" rbln-boot "$@"`,
      BOOT_SCRIPT,
      dir,
      ...binds,
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, RBLN_HOST_ADDRESS: address, RBLN_HOST_SITECUSTOMIZE: sitecustomize } },
  );
  let log = "";
  const append = (chunk: Buffer) => (log = (log + chunk.toString()).slice(-20_000));
  launcher.stdout!.on("data", append);
  launcher.stderr!.on("data", append);
  const booted: Booted = { launcher, dir, cgroup };
  running.add(booted);
  try {
    await waitForPort(address, port, () => (launcher.exitCode !== null ? `${name} exited (${launcher.exitCode}): ${log}` : undefined));
  } catch (error) {
    await stopBooted(booted);
    throw error;
  }
  const bootMs = Date.now() - started;
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
    bootMs,
    run: (command, stdin) => runOverSsh(clientKeyPath, address, port, command, stdin),
    stop: () => stopBooted(booted),
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
