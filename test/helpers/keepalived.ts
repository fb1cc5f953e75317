import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { startHosts, type TestHost, type TestHosts } from "./hostNamespace";
import type { TestNetwork } from "./hostNetwork";
import type { CommandResult } from "./sshd";

/**
 * keepalived 2.2.7 (Debian's) on fake hosts on a network of their own: a hand-written VRRP pair that
 * shows the harness can move a virtual address between hosts, and measures how long that takes. The
 * product renders its own config and units (issue 28); `checkKeepalivedConfig` is how it checks them.
 */

export interface VrrpConfig {
  routerId: string;
  interface: string;
  /** This host's address: the adverts' source in unicast. */
  address: string;
  /** Unicast peers; omitted, the adverts go to VRRP's multicast group 224.0.0.18. */
  unicastPeers?: string[];
  virtualAddress: string;
  prefixLength: number;
  priority: number;
  /** Tracked by a vrrp_script: not 2xx twice in a row (1 s apart) and the instance goes to FAULT, giving the address up. */
  readyUrl: string;
  /** Run with TYPE NAME STATE PRIORITY at each state change. */
  notify: string;
}

/** The test pair's config: the keys that worked, explained in docs/testing.md and /work/research/keepalived.md. */
export function vrrpConfig(c: VrrpConfig): string {
  const unicast = c.unicastPeers ? [`  unicast_src_ip ${c.address}`, "  unicast_peer {", ...c.unicastPeers.map((p) => `    ${p}`), "  }"] : [];
  return [
    "global_defs {",
    `  router_id ${c.routerId}`,
    // Scripts run as root, and only scripts no other user can change (keepalived refuses the rest).
    "  enable_script_security",
    "  script_user root",
    "}",
    "vrrp_script front_door_ready {",
    `  script "/usr/bin/curl -fsS -o /dev/null --max-time 1 ${c.readyUrl}"`,
    "  interval 1",
    "  timeout 1",
    "  fall 2",
    "  rise 2",
    "}",
    "vrrp_instance front_door {",
    // Both start as BACKUP with nopreempt: a host coming back does not take the address back.
    "  state BACKUP",
    "  nopreempt",
    `  interface ${c.interface}`,
    "  virtual_router_id 51",
    `  priority ${c.priority}`,
    "  advert_int 1",
    ...unicast,
    "  virtual_ipaddress {",
    `    ${c.virtualAddress}/${c.prefixLength} dev ${c.interface}`,
    "  }",
    "  track_script {",
    "    front_door_ready",
    "  }",
    `  notify ${c.notify}`,
    "}",
    "",
  ].join("\n");
}

/**
 * keepalived under systemd as Debian's own unit runs it (Type=notify with --dont-fork; its syslog lines reach the
 * journal), on a config path and pid files of its own: a second keepalived with the default pid files says "daemon
 * is already running" and exits. NotifyAccess=all: the VRRP child sends notifications too, which systemd otherwise
 * logs as refused. Restart: a SIGKILLed main process fails the unit (systemd stops the VRRP child, which gives the
 * address up), and nothing would start it again.
 */
export const KEEPALIVED_UNIT = `[Unit]
Description=keepalived (VRRP) for the harness's test pair
After=network-online.target front-door-test.service
[Service]
Type=notify
NotifyAccess=all
ExecStart=/usr/sbin/keepalived --dont-fork --use-file=/etc/keepalived/front-door.conf --pid=/run/keepalived-test.pid --vrrp_pid=/run/keepalived-test-vrrp.pid
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=1
[Install]
WantedBy=multi-user.target
`;

/** A stand-in for the front door: answers its host's name on /, and 200 on /ready while /srv/front-door/ready exists. */
const FRONT_DOOR_UNIT = `[Service]
ExecStart=/usr/bin/python3 -m http.server 8080 --bind 0.0.0.0 --directory /srv/front-door
[Install]
WantedBy=multi-user.target
`;

const NOTIFY_SCRIPT = `#!/bin/sh
# TYPE NAME STATE PRIORITY, with the time, for the tests to read.
echo "$(date +%s.%N) $*" >> /srv/front-door/vrrp-states
`;

export const FRONT_DOOR_PORT = 8080;

/**
 * Checks a keepalived config with `keepalived -t` in a scratch network namespace holding the interfaces it names
 * (as bridges): -t refuses interfaces that do not exist where it runs. Exit 0 when the config is good; otherwise
 * keepalived's lines name the line and the key. Note: a missing config file is not an error without -e (2.2.7).
 */
export function checkKeepalivedConfig(config: string, interfaces: string[]): CommandResult {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keepalived-check-"));
  try {
    fs.writeFileSync(path.join(dir, "keepalived.conf"), config);
    const script = 'for i in "$@"; do ip link add "$i" type bridge || exit 3; done; exec keepalived -t -e -f "$0"';
    const run = spawnSync("unshare", ["--net", "sh", "-c", script, path.join(dir, "keepalived.conf"), ...interfaces], { encoding: "utf8" });
    return { status: run.status, stdout: run.stdout, stderr: run.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface VrrpPair {
  hosts: TestHosts<2>;
  virtualAddress: string;
  /** The names of the hosts holding the virtual address on their eth0, read on their consoles. */
  holders(): Promise<string[]>;
  /** Waits until exactly one host holds the address, and returns it. */
  untilOneHolder(timeoutMs?: number): Promise<TestHost>;
  setReady(host: TestHost, ready: boolean): Promise<void>;
  /** The name the front door at the virtual address answers with, on a new connection; undefined if none in `timeoutMs`. */
  servedBy(timeoutMs?: number): Promise<string | undefined>;
  stop(): Promise<void>;
}

async function sh(host: TestHost, script: string): Promise<string> {
  const result = await host.run(script);
  if (result.status !== 0) throw new Error(`${host.name}: ${script}\n${result.stderr}`);
  return result.stdout;
}

/** Two hosts on `network`, each with the front door's stand-in and keepalived enabled under its systemd; one of them holds the address when this returns. */
export async function startVrrpPair(network: TestNetwork, { unicast = true } = {}): Promise<VrrpPair> {
  const hosts = await startHosts(2, { network, privatePaths: ["/etc/keepalived", "/srv/front-door"] });
  const virtualAddress = network.spareAddress(0);
  const pair: VrrpPair = {
    hosts,
    virtualAddress,
    async holders() {
      const held = await Promise.all(hosts.map(async (h) => (await h.console("ip -o -4 address show dev eth0")).stdout.includes(` ${virtualAddress}/`)));
      return hosts.filter((_, i) => held[i]).map((h) => h.name);
    },
    async untilOneHolder(timeoutMs = 20_000) {
      for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
        const held = await pair.holders();
        if (held.length === 1) return hosts.find((h) => h.name === held[0])!;
      }
      throw new Error(`not exactly one holder of ${virtualAddress} after ${timeoutMs} ms: ${await pair.holders()}`);
    },
    async setReady(host, ready) {
      await sh(host, ready ? "touch /srv/front-door/ready" : "rm -f /srv/front-door/ready");
    },
    servedBy: (timeoutMs = 250) => answer(virtualAddress, timeoutMs),
    stop: async () => void (await Promise.all(hosts.map((h) => h.stop()))),
  };
  try {
    await Promise.all(
      hosts.map((host, i) => {
        const peer = hosts[1 - i]!;
        const config = vrrpConfig({
          routerId: host.name,
          interface: "eth0",
          address: host.address,
          unicastPeers: unicast ? [peer.address] : undefined,
          virtualAddress,
          prefixLength: network.prefixLength,
          priority: i === 0 ? 150 : 100,
          readyUrl: `http://127.0.0.1:${FRONT_DOOR_PORT}/ready`,
          notify: "/etc/keepalived/notify.sh",
        });
        return sh(
          host,
          `set -e
echo ${host.name} > /srv/front-door/index.html; touch /srv/front-door/ready
cat > /etc/keepalived/front-door.conf <<'CONF'
${config}CONF
cat > /etc/keepalived/notify.sh <<'SH'
${NOTIFY_SCRIPT}SH
chmod 755 /etc/keepalived/notify.sh
cat > /etc/systemd/system/front-door-test.service <<'UNIT'
${FRONT_DOOR_UNIT}UNIT
cat > /etc/systemd/system/keepalived-test.service <<'UNIT'
${KEEPALIVED_UNIT}UNIT
systemctl daemon-reload
systemctl enable --quiet --now front-door-test.service keepalived-test.service`,
        );
      }),
    );
    await pair.untilOneHolder();
  } catch (error) {
    await pair.stop();
    throw error;
  }
  return pair;
}

/** GET / on a new connection (no pool: a kept-alive socket to the old holder would hide the move). */
function answer(address: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const request = http.get({ host: address, port: FRONT_DOOR_PORT, path: "/", agent: false, timeout: timeoutMs }, (response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve(response.statusCode === 200 ? body.trim() : undefined));
      response.on("error", () => resolve(undefined));
    });
    request.on("timeout", () => request.destroy());
    request.on("error", () => resolve(undefined));
  });
}

export type VrrpFault = "not ready" | "cut off" | "killed";

export interface Failover {
  fault: VrrpFault;
  from: string;
  to: string;
  /** Seconds from the fault until the peer had the address on its eth0. */
  movedSeconds: number;
  /** Seconds from the fault until a new connection from this process to the address reached the peer. */
  servedSeconds: number;
}

/**
 * Injects `fault` on the holder and times the move to its peer; `recover` then puts the old holder back as a
 * backup (ready again, restored, or rebooted: keepalived is enabled, so it starts at boot).
 */
export async function measureFailover(pair: VrrpPair, fault: VrrpFault, timeoutMs = 30_000): Promise<Failover> {
  const holder = await pair.untilOneHolder();
  const peer = pair.hosts.find((h) => h !== holder)!;
  const polls = Math.ceil(timeoutMs / 20);
  const moved = peer.console(
    `for i in $(seq ${polls}); do ip -o -4 address show dev eth0 | grep -qF ' ${pair.virtualAddress}/' && exec date +%s%3N; sleep 0.02; done; exit 1`,
  );
  const started = Date.now();
  if (fault === "not ready") await pair.setReady(holder, false);
  else if (fault === "cut off") await holder.cutOff();
  else await holder.kill();
  let served: number | undefined;
  while (served === undefined && Date.now() - started < timeoutMs) {
    if ((await pair.servedBy()) === peer.name) served = Date.now();
    else await new Promise((r) => setTimeout(r, 20));
  }
  const movedAt = await moved;
  if (movedAt.status !== 0 || served === undefined) throw new Error(`${fault}: the address did not move to ${peer.name} in ${timeoutMs} ms`);
  return { fault, from: holder.name, to: peer.name, movedSeconds: (Number(movedAt.stdout) - started) / 1000, servedSeconds: (served - started) / 1000 };
}

/** The VRRP state the host's notify script last wrote (MASTER, BACKUP, FAULT, STOP). */
export async function lastState(host: TestHost): Promise<string | undefined> {
  const line = (await host.console("tail -n 1 /srv/front-door/vrrp-states 2>/dev/null")).stdout.trim();
  return line.split(" ")[3];
}

/** keepalived's own view of its instance, as its JSON dump (`keepalived --signum=JSON`, written to /tmp/keepalived.json) has it. */
export interface VrrpStatus {
  /** 1 BACKUP, 2 MASTER, 3 FAULT (keepalived's numbers). */
  state: number;
  effectivePriority: number;
  advertsSent: number;
}

export async function vrrpStatus(host: TestHost): Promise<VrrpStatus> {
  const dump = await host.console(
    "rm -f /tmp/keepalived.json; systemctl kill -s $(keepalived --signum=JSON) --kill-whom=main keepalived-test || exit 1; " +
      "for i in $(seq 250); do [ -s /tmp/keepalived.json ] && sleep 0.05 && exec cat /tmp/keepalived.json; sleep 0.02; done; exit 1",
  );
  if (dump.status !== 0) throw new Error(`${host.name}: no JSON dump from keepalived: ${dump.stderr}`);
  const [instance] = JSON.parse(dump.stdout) as { data: { state: number; effective_priority: number }; stats: { advert_sent: number } }[];
  return { state: instance!.data.state, effectivePriority: instance!.data.effective_priority, advertsSent: instance!.stats.advert_sent };
}

/**
 * Puts the host a failover left behind back in the pair; returns once one host holds the address, the other is its
 * BACKUP, and the holder has sent 5 adverts since: longer than the master-down interval (3 adverts and the skew),
 * after which a BACKUP that preempts takes over (2.2.7 discards a lower priority's adverts and lets that timer run out).
 */
export async function recover(pair: VrrpPair, failover: Failover, timeoutMs = 30_000): Promise<void> {
  const host = pair.hosts.find((h) => h.name === failover.from)!;
  if (failover.fault === "not ready") await pair.setReady(host, true);
  else if (failover.fault === "cut off") await host.restore();
  else await host.reboot();
  const deadline = Date.now() + timeoutMs;
  const pause = () => new Promise((r) => setTimeout(r, 100));
  for (; Date.now() < deadline; await pause()) {
    const holder = await pair.untilOneHolder(timeoutMs);
    const backup = pair.hosts.find((h) => h !== holder)!;
    if ((await lastState(backup)) !== "BACKUP") continue;
    const sent = (await vrrpStatus(holder)).advertsSent;
    while ((await vrrpStatus(holder)).advertsSent < sent + 5 && Date.now() < deadline) await pause();
    return;
  }
  throw new Error(`after ${failover.fault}, the pair did not settle to one MASTER and one BACKUP in ${timeoutMs} ms`);
}
