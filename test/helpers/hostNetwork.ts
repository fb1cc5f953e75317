import { execFile, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

/**
 * A network of its own for fake hosts (HostOptions.network): a bridge `br0` in a network namespace this
 * process creates, a /24 drawn from 198.18.0.0/15 (RFC 2544's range for benchmarking, routed nowhere),
 * and a veth from this process's namespace into the bridge, so tests (ssh, fetch, the load clients)
 * reach the hosts by address without running inside a namespace. Each host joins by a veth of its own
 * (`eth0` inside, `host-N` on the bridge). The bridge floods multicast (snooping off), as a plain
 * switch does, so VRRP works multicast or unicast. Nothing has a default route: the hosts reach each
 * other and this process, never the machine's own networks.
 *
 * A process holds the bridge's namespace (a `sleep` that dies with this process: setpriv --pdeathsig),
 * and each host's namespace lives as long as its processes: when they are gone, the kernel deletes
 * their veths, the one in this process's namespace included, so a killed test run leaves nothing.
 */
export interface TestNetwork {
  /** "198.18.A.0/24". */
  subnet: string;
  prefixLength: number;
  /** This process's address on the network, the end of its veth (`.1`). */
  clientAddress: string;
  /** The interface of that veth in this process's namespace. */
  clientInterface: string;
  /** Hosts take .2 to .99; `.100 + n`, which no host takes, for virtual addresses (n from 0 to 154). */
  spareAddress(n: number): string;
  /** Runs a command (argv) in the bridge's namespace: `ip`, `bridge`, a packet capture. */
  exec(argv: string[]): Promise<string>;
  stop(): Promise<void>;
  /** For the harness (hostNamespace.ts): the next host's number, its address and its port's MAC. */
  claimHost(): { index: number; address: string; mac: string };
  /** For the harness: the path of the bridge namespace (for `nsenter --net=`). */
  namespacePath: string;
}

const FIRST_SPARE = 100;
const LAST_HOST = FIRST_SPARE - 1;

/** Runs argv; rejects with its stderr (and the command) on a non-zero exit. */
export async function run(argv: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(argv[0]!, argv.slice(1), { encoding: "utf8" });
    return stdout;
  } catch (error) {
    const { stderr } = error as { stderr?: string };
    throw new Error(`${argv.join(" ")}: ${stderr?.trim() || (error as Error).message}`);
  }
}

/** Starts the holder of a new network namespace and waits until the namespace is its own. */
async function holdNamespace(): Promise<ChildProcess> {
  const holder = spawn("setpriv", ["--pdeathsig", "KILL", "unshare", "--net", "sleep", "infinity"], { stdio: "ignore" });
  const ours = fs.readlinkSync("/proc/self/ns/net");
  for (let attempt = 0; attempt < 200; attempt++) {
    if (holder.exitCode !== null) throw new Error(`unshare --net exited (${holder.exitCode})`);
    try {
      if (fs.readFileSync(`/proc/${holder.pid}/comm`, "utf8").trim() === "sleep" && fs.readlinkSync(`/proc/${holder.pid}/ns/net`) !== ours) return holder;
    } catch {
      // not started yet
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  holder.kill("SIGKILL");
  throw new Error("the bridge namespace did not start");
}

/** Draws a free /24 of 198.18.0.0/15: the veth's name is the lock (creating it fails if another test holds that /24). */
async function claimSubnet(holderPid: number): Promise<{ prefix: string; clientInterface: string }> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const block = Math.floor(Math.random() * 512);
    const [second, third] = [18 + (block >> 8), block & 255];
    const prefix = `198.${second}.${third}`;
    const clientInterface = `rbln-${second}-${third}`;
    const routes = (await run(["ip", "-4", "route", "show", "match", `${prefix}.1`])).split("\n").filter((l) => l && !l.startsWith("default"));
    if (routes.length > 0) continue;
    try {
      await run(["ip", "link", "add", clientInterface, "type", "veth", "peer", "name", "client", "netns", String(holderPid)]);
    } catch (error) {
      if (/File exists/.test((error as Error).message)) continue;
      throw error;
    }
    return { prefix, clientInterface };
  }
  throw new Error("no free /24 in 198.18.0.0/15");
}

/** A bridge in a namespace of its own, reachable from this process; hosts join it through HostOptions.network. */
export async function startNetwork(): Promise<TestNetwork> {
  const holder = await holdNamespace();
  const namespacePath = `/proc/${holder.pid}/ns/net`;
  const exec = (argv: string[]) => run(["nsenter", `--net=${namespacePath}`, ...argv]);
  try {
    const { prefix, clientInterface } = await claimSubnet(holder.pid!);
    await exec(["ip", "link", "set", "lo", "up"]);
    await exec(["ip", "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"]);
    await exec(["ip", "link", "set", "br0", "up"]);
    await exec(["ip", "link", "set", "client", "master", "br0", "up"]);
    // This side answers for its own address only: no IPv6 autoconfiguration, no routes beyond the /24.
    fs.writeFileSync(`/proc/sys/net/ipv6/conf/${clientInterface}/disable_ipv6`, "1");
    await run(["ip", "address", "add", `${prefix}.1/24`, "dev", clientInterface]);
    await run(["ip", "link", "set", clientInterface, "up"]);
    const [second, third] = prefix.split(".").slice(1).map(Number) as [number, number];
    let hosts = 0;
    const hex = (n: number) => n.toString(16).padStart(2, "0");
    return {
      subnet: `${prefix}.0/24`,
      prefixLength: 24,
      clientAddress: `${prefix}.1`,
      clientInterface,
      spareAddress(n) {
        if (!Number.isInteger(n) || n < 0 || FIRST_SPARE + n > 254) throw new Error(`spareAddress(${n}): 0 to ${254 - FIRST_SPARE}`);
        return `${prefix}.${FIRST_SPARE + n}`;
      },
      exec,
      namespacePath,
      claimHost() {
        const index = hosts++;
        if (index + 2 > LAST_HOST) throw new Error(`a test network holds ${LAST_HOST - 1} hosts`);
        return { index, address: `${prefix}.${index + 2}`, mac: `02:72:62:${hex(second)}:${hex(third)}:${hex(index + 2)}` };
      },
      async stop() {
        const exited = holder.exitCode !== null ? Promise.resolve() : new Promise((r) => holder.once("exit", r));
        holder.kill("SIGKILL");
        await exited;
        // The kernel deletes the veth with the namespace, a moment later; deleting it here makes that now.
        await run(["ip", "link", "del", clientInterface]).catch(() => undefined);
      },
    };
  } catch (error) {
    holder.kill("SIGKILL");
    throw error;
  }
}
