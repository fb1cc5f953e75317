import * as fs from "node:fs";
import { AGENT_ROUND_SECONDS } from "./faults";
import { fromHostClock, listedEndpoints, now, requestsAroundFault, secondsAfterFault, startLoad, type RequestRecord } from "./frontDoorLoad";
import { HA_ENDPOINTS_FILE, haUnit, type HaStack } from "./frontDoorHaStack";
import type { TestHost } from "./hostNamespace";

/**
 * The router side's faults (issue 28) on a front door of two router hosts (frontDoorHaStack.ts), each
 * under steady load through the virtual address: short requests and streams. Each case injects its
 * fault and says when the stack has recovered; `runRouterFault` returns what a test asserts on and
 * `npm run bench -- faults` prints. Add a fault by adding a case: the test and the bench run
 * the list.
 */
export interface RouterFaultCase {
  /** One line: what dies, or what changes. */
  name: string;
  /** Injects it; resolves once it is done (a process killed, a host cut off, a deploy finished). */
  inject(stack: HaStack, run: RouterFaultProgress): Promise<void>;
  /** Every request on a connection of its own (`connection: close`), for a fault that moves the address: see docs/faults.md. */
  newConnections?: boolean;
  /** How long a client waits for a whole answer (30 s unless set). */
  requestTimeoutMs?: number;
  /** After the run: what puts the stack back for the next case. */
  restore?(stack: HaStack): Promise<void>;
  /** Issue 28's bound, in words, and whether a run stayed within it. */
  bound: string;
  withinBound(run: RouterFaultRun): boolean;
}

/** What a case records while it injects: the moment of the fault itself (after finding where to inject it), and when the address moved. */
export interface RouterFaultProgress {
  faultAt: number;
  movedAt: number | null;
  /** The holders of the virtual address seen while it was injected (a change that moves it), with when each was first seen. */
  holders: { at: number; holder: string | null }[];
  /** A router host rebooted: from its agent's start to its endpoints file listing every endpoint, and its keepalived's state then. */
  afterBoot?: { fileSeconds: number; keepalived: string };
}

export interface RouterFaultRun extends RouterFaultProgress {
  fault: string;
  requests: number;
  failed: number;
  /** Requests in flight through the front door at the fault. */
  inFlightAtFault: number;
  /** From the fault to the end of the first request started after it that succeeded (null: none did). */
  recoverSeconds: number | null;
  /** From the fault to the virtual address on the peer (faults that move it), else null. */
  movedSeconds: number | null;
  failures: RequestRecord[];
  records: RequestRecord[];
}

/** Short requests and streams, both through the front door. */
const LOADS = {
  short: { concurrency: 4, body: { model: "stand-in", prompt: "short", max_tokens: 4 } },
  stream: { concurrency: 2, body: { model: "stand-in", prompt: "stream", max_tokens: 16, stream: true } },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runRouterFault(
  stack: HaStack,
  fault: RouterFaultCase,
  { settleMs = 2000, afterMs = 3000, maxSeconds = 300 } = {},
): Promise<RouterFaultRun> {
  const headers: Record<string, string> = fault.newConnections ? { connection: "close" } : {};
  const loads = Object.values(LOADS).map((load) =>
    startLoad(stack.url, { ...load, headers, maxSeconds: maxSeconds + 60, requestTimeoutMs: fault.requestTimeoutMs ?? 30_000 }),
  );
  const progress: RouterFaultProgress = { faultAt: 0, movedAt: null, holders: [] };
  let records: RequestRecord[];
  try {
    await sleep(settleMs);
    progress.faultAt = now();
    await fault.inject(stack, progress);
    await sleep(afterMs);
  } finally {
    records = (await Promise.all(loads.map((l) => l.stop()))).flatMap((r) => r.records);
  }
  const { faultAt } = progress;
  const firstSuccess = records
    .filter((r) => r.startedAt >= faultAt && r.error === undefined)
    .map((r) => r.endedAt)
    .sort((a, b) => a - b)[0];
  const seconds = secondsAfterFault(faultAt);
  return {
    fault: fault.name,
    ...requestsAroundFault(records, faultAt),
    recoverSeconds: seconds(firstSuccess),
    movedSeconds: seconds(progress.movedAt),
    movedAt: progress.movedAt,
    holders: progress.holders,
    ...(progress.afterBoot ? { afterBoot: progress.afterBoot } : {}),
    faultAt,
  };
}

/** The line `npm run bench -- faults` prints for a run. */
export function routerFaultLine(run: RouterFaultRun): Record<string, unknown> {
  return {
    fault: run.fault,
    requests: run.requests,
    failed: run.failed,
    inFlightAtFault: run.inFlightAtFault,
    recoverSeconds: run.recoverSeconds,
    ...(run.movedSeconds === null ? {} : { movedSeconds: run.movedSeconds }),
    ...(run.afterBoot ? { agentFileSeconds: run.afterBoot.fileSeconds } : {}),
  };
}

/** Failures that are not requests in flight at the fault: none may be. */
export const failedAfterFault = (run: RouterFaultRun) => run.failures.filter((f) => f.startedAt >= run.faultAt);

/** The EPP cluster's lines of a router host's Envoy (admin /clusters, on its loopback). */
export async function eppCluster(router: TestHost): Promise<string[]> {
  const answer = await router.console("curl -fsS --max-time 2 http://127.0.0.1:9901/clusters");
  return answer.stdout.split("\n").filter((line) => /^epp::.*::health_flags::/.test(line));
}

/** Until the router host's Envoy sees its own EPP and its peer's healthy (a restarted EPP passes healthy_threshold checks first). */
export async function untilEppsHealthy(router: TestHost, seconds = 90): Promise<void> {
  for (const deadline = Date.now() + seconds * 1000; ; await sleep(500)) {
    const lines = await eppCluster(router);
    if (lines.length === 2 && lines.every((l) => l.endsWith("::health_flags::healthy"))) return;
    if (Date.now() > deadline) throw new Error(`${router.name}'s Envoy: ${lines.join(", ") || "no answer"} after ${seconds}s`);
  }
}

/** When `host` holds `address` on its eth0, polled on its console every 20 ms (epoch ms), or null after `seconds`. */
function whenHolds(host: TestHost, address: string, seconds: number): Promise<number | null> {
  return host
    .console(`for i in $(seq ${seconds * 50}); do ip -o address show dev eth0 | grep -qF ' ${address}/' && exec date +%s%3N; sleep 0.02; done; exit 1`)
    .then((r) => (r.status === 0 ? fromHostClock(Number(r.stdout)) : null));
}

const peerOf = (stack: HaStack, host: TestHost) => stack.routers.find((r) => r !== host)!;

/** Until one router host holds the address and each Envoy sees both EPPs healthy: the state a case starts from. */
async function untilSettled(stack: HaStack, seconds = 90): Promise<void> {
  for (const deadline = Date.now() + seconds * 1000; ; await sleep(500)) {
    const held = await Promise.all(stack.routers.map((r) => r.console(`ip -o address show dev eth0 | grep -qF ' ${stack.virtualAddress}/'`)));
    if (held.filter((h) => h.status === 0).length === 1) break;
    if (Date.now() > deadline) throw new Error(`${held.filter((h) => h.status === 0).length} router hosts hold ${stack.virtualAddress} after ${seconds}s`);
  }
  for (const router of stack.routers) await untilEppsHealthy(router, seconds);
}

/** On a router host that has just booted: the seconds from its agent's start (systemd's monotonic timestamp) to its endpoints file listing `count` endpoints. */
async function agentFileSeconds(host: TestHost, count: number): Promise<number> {
  const script = `
import subprocess, sys, time
def started():
    out = subprocess.run(["systemctl", "show", "-p", "ExecMainStartTimestampMonotonic", "--value", "${haUnit("agent")}"], capture_output=True, text=True).stdout.strip()
    return int(out or 0) / 1e6
def listed():
    try:
        return sum(1 for line in open("${HA_ENDPOINTS_FILE}") if line.startswith("- name: "))
    except OSError:
        return -1
deadline = time.monotonic() + 120
while not started() and time.monotonic() < deadline: time.sleep(0.02)
while listed() != ${count} and time.monotonic() < deadline: time.sleep(0.02)
if listed() != ${count}: sys.exit("the file lists %d endpoints, not ${count}" % listed())
print(round(time.monotonic() - started(), 1))
`;
  const answer = await host.console("python3 -", script);
  if (answer.status !== 0) throw new Error(`${host.name} after its boot: ${answer.stderr}`);
  return Number(answer.stdout.trim());
}

/** keepalived's VRRP state on a router host, from its own JSON dump (BACKUP, MASTER or FAULT). */
async function vrrpState(host: TestHost): Promise<string> {
  const dump = await host.console(
    `rm -f /tmp/keepalived.json; systemctl kill -s $(keepalived --signum=JSON) --kill-whom=main ${haUnit("keepalived")} || exit 1; ` +
      "for i in $(seq 250); do [ -s /tmp/keepalived.json ] && sleep 0.05 && exec cat /tmp/keepalived.json; sleep 0.02; done; exit 1",
  );
  if (dump.status !== 0) return `no dump (${dump.stderr.trim()})`;
  const [instance] = JSON.parse(dump.stdout) as { data: { state: number } }[];
  return ["INIT", "BACKUP", "MASTER", "FAULT"][instance!.data.state] ?? String(instance!.data.state);
}

/** The router side's faults, in the order a test runs them on one stack (the cut-off last: healed, the address moves back). */
export const ROUTER_FAULTS: RouterFaultCase[] = [
  {
    name: "the EPP on the active router host killed (SIGKILL)",
    async inject(stack, progress) {
      const holder = (await stack.holder())!;
      const pid = await stack.eppPid(holder);
      // The fault's moment is the kill's, read on the host (its clock is this machine's).
      const killed = await holder.console(`kill -9 ${pid} && date +%s.%N`);
      if (killed.status !== 0) throw new Error(`kill: ${killed.stderr}`);
      progress.faultAt = fromHostClock(Number(killed.stdout) * 1000);
    },
    // systemd starts the EPP again (Restart=always); its Envoy takes it back after healthy_threshold checks.
    restore: async (stack) => untilEppsHealthy((await stack.holder())!),
    bound: "at most the requests in flight on that EPP's streams fail, none sent after; served by the standby EPP within 2 s",
    withinBound: (run) => failedAfterFault(run).length === 0 && run.failed <= run.inFlightAtFault && run.recoverSeconds !== null && run.recoverSeconds <= 2,
  },
  {
    name: "a planned change of the EPP, rolled one router host at a time",
    async inject(stack) {
      const result = await stack.up(stack.settings({ router: { ...stack.settings().router, images: { endpointPicker: EPP_MIRROR } } }));
      if (result.failed.length > 0) throw new Error(`the change failed: ${result.failed.map((f) => `${f.name}: ${f.stderr}`).join("\n")}`);
    },
    bound: "no request fails",
    withinBound: (run) => run.failed === 0 && run.requests > 0,
  },
  {
    name: "a planned change of Envoy (its bootstrap), rolled one router host at a time",
    newConnections: true,
    async inject(stack, progress) {
      // Envoy's route timeout; the EPP stays on the image the change before gave it.
      const change = stack.up(stack.settings({ router: { ...stack.settings().router, images: { endpointPicker: EPP_MIRROR }, requestTimeout: "50m" } }));
      let done = false;
      const watched = (async () => {
        while (!done) {
          const holder = (await stack.holder())?.name ?? null;
          if (progress.holders.at(-1)?.holder !== holder) progress.holders.push({ at: now(), holder });
          await sleep(100);
        }
      })();
      const result = await change.finally(() => (done = true));
      await watched;
      if (result.failed.length > 0) throw new Error(`the change failed: ${result.failed.map((f) => `${f.name}: ${f.stderr}`).join("\n")}`);
    },
    bound:
      "at most the requests in flight on the router host giving the address up fail (an L7 proxy's connections cannot move); one router host holds it after",
    // Each failure was in flight when the address moved (seen on the consoles every 100 ms or so, so up to half a second late).
    withinBound: (run) =>
      run.failures.every((f) => run.holders.some((h, i) => i > 0 && f.startedAt <= h.at && f.endedAt >= h.at - 500)) &&
      run.holders.length >= 2 &&
      run.holders.at(-1)?.holder !== null,
  },
  {
    name: "the active router host dies (its network cut off)",
    newConnections: true,
    async inject(stack, progress) {
      const holder = (await stack.holder())!;
      const moved = whenHolds(peerOf(stack, holder), stack.virtualAddress, 30);
      await holder.cutOff();
      // Once the link is off the bridge: a request started before may have reached the host.
      progress.faultAt = now();
      progress.movedAt = await moved;
      // New requests after the move: they must succeed.
      await sleep(3000);
    },
    restore: async (stack) => {
      for (const router of stack.routers) await router.restore();
      // A healed partition has two holders for a moment: the next case starts from one.
      await untilSettled(stack);
    },
    bound: "at most the requests in flight on it fail; the virtual address moves in 5 s; new requests succeed",
    withinBound: (run) => failedAfterFault(run).length === 0 && run.movedSeconds !== null && run.movedSeconds <= 5,
  },
  {
    name: "the active router host reboots (systemctl reboot)",
    newConnections: true,
    // Its in-flight requests hang rather than fail (docs/faults.md): the clients give up on them soon, and send on.
    requestTimeoutMs: 5000,
    async inject(stack, progress) {
      const holder = (await stack.holder())!;
      const peer = peerOf(stack, holder);
      const count = listedEndpoints(await stack.endpointsFile()).length;
      const moved = whenHolds(peer, stack.virtualAddress, 60);
      progress.holders.push({ at: now(), holder: holder.name });
      // Its units stop in order (keepalived before Envoy: it gives the address up first). While it is
      // off, what serves changes behind it: it boots with an endpoints file that lists none.
      await holder.reboot({ graceful: true, whileDown: (onDisk) => fs.writeFileSync(onDisk(HA_ENDPOINTS_FILE), "endpoints: []\n") });
      progress.movedAt = await moved;
      const fileSeconds = await agentFileSeconds(holder, count);
      // Back in its role: a backup whose Envoy sees both EPPs, while its peer keeps the address.
      await untilSettled(stack);
      // keepalived's check of Envoy's /ready rises after 2 passes: FAULT until then, BACKUP once it has.
      let keepalived = await vrrpState(holder);
      for (const deadline = Date.now() + 30_000; keepalived !== "BACKUP" && Date.now() < deadline; await sleep(500)) keepalived = await vrrpState(holder);
      progress.afterBoot = { fileSeconds, keepalived };
      progress.holders.push({ at: now(), holder: (await stack.holder())?.name ?? null });
    },
    bound: `at most the requests in flight on it fail; the address moves to the peer in 5 s; booted, its agent lists every endpoint within one agent round (${AGENT_ROUND_SECONDS} s) of its start, and it is a backup again without cutting a request`,
    // In flight on it: sent before the peer held the address (a request sent while none held it waits in its SYN retries).
    withinBound: (run) =>
      run.movedAt !== null &&
      run.failures.every((f) => f.startedAt <= run.movedAt! && f.endedAt >= run.faultAt) &&
      run.movedSeconds! <= 5 &&
      run.afterBoot!.fileSeconds <= AGENT_ROUND_SECONDS &&
      run.afterBoot!.keepalived === "BACKUP" &&
      // Requests sent after the move (across the boot and the return of its keepalived) succeed.
      run.records.filter((r) => r.startedAt > run.movedAt! && r.error === undefined).length >= 20 &&
      run.holders.at(-1)?.holder !== null &&
      run.holders.at(-1)?.holder !== run.holders[0]?.holder,
  },
];

/** The EPP's image from a mirror: the change a planned front-door change test makes (the stand-in runtime takes any registry of the repository). */
export const EPP_MIRROR = "registry.example.com/llm-d/llm-d-router-endpoint-picker:v0.10.0";
