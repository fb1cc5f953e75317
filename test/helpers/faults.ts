import {
  listedEndpoints,
  now,
  requestsAroundFault,
  secondsAfterFault,
  startLoad,
  startSampler,
  type LoadReport,
  type RequestRecord,
  type SampleReport,
} from "./frontDoorLoad";
import { startFrontDoorStack, untilListed, type FrontDoorStack } from "./frontDoorStack";
import type { TestHost } from "./hostNamespace";
import { hostEntry } from "./hostStack";

/**
 * Unplanned faults under steady load (issue 28): each a case that injects one fault into a running
 * stack behind the front door, says which endpoints it takes down and when the stack has recovered.
 * `runFault` drives the load (short requests and long streams), the sampler of the endpoints file,
 * the fault and the recovery, and returns what a test asserts on and `npm run bench -- faults`
 * prints. Add a fault by adding a case: the test and the bench run the list.
 */
export interface FaultCase {
  /** One line: what dies. */
  name: string;
  /** The endpoints the fault takes down (their names in the endpoints file); none when no endpoint should leave. */
  down: string[];
  /** Injects the fault; resolves once it is done (a process killed, a host powered off). */
  inject(stack: FrontDoorStack): Promise<void>;
  /** Whether what the file lists is the recovered state (by default every endpoint of the stack). */
  recovered?(listed: string[], all: string[]): boolean;
  /** After the run: what puts the stack back for the next case (a dead host booted again). */
  restore?(stack: FrontDoorStack): Promise<void>;
  /** Issue 28's bound for this fault, in words, and whether a run stayed within it. */
  bound: string;
  withinBound(run: FaultRun): boolean;
}

/** Short requests and long streams, both through the front door. */
export const FAULT_LOADS = {
  short: { concurrency: 4, body: { model: "stand-in", prompt: "short", max_tokens: 4 } },
  long: { concurrency: 2, body: { model: "stand-in", prompt: "long", max_tokens: 60, stream: true } },
};

export interface FaultRun {
  fault: string;
  requests: number;
  failed: number;
  /** Requests in flight anywhere in the stack at the fault (a bound above those on what died). */
  inFlightAtFault: number;
  /** From the fault to the first sample without any of `down` listed (null: it never left, or nothing should). */
  outSeconds: number | null;
  /** From the fault to the first sample of the recovered state after it left (or after the fault, when nothing should leave). */
  recoverSeconds: number | null;
  /** The records, for the bounds a test asserts. */
  failures: RequestRecord[];
  records: RequestRecord[];
  samples: SampleReport;
  faultAt: number;
  outAt: number | null;
  backAt: number | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs one fault case under load: steady load first, the fault, then load until it has recovered (at most `maxSeconds`) and a little more. */
export async function runFault(stack: FrontDoorStack, fault: FaultCase, { settleMs = 2000, afterMs = 2000, maxSeconds = 120 } = {}): Promise<FaultRun> {
  const all = listedEndpoints(await stack.endpointsFile()).map((e) => e.name);
  const recovered = fault.recovered ?? ((listed: string[]) => all.every((n) => listed.includes(n)));
  const loads = Object.values(FAULT_LOADS).map((load) => startLoad(stack.url, { ...load, maxSeconds: maxSeconds + 60 }));
  const sampler = startSampler({ every: 200, read: () => stack.endpointsFile(), maxSeconds: maxSeconds + 60 });
  const listedAt = (i: number) => sampler.samples[i]!.listed.map((e) => e.name);
  let reports: LoadReport[];
  let samples: SampleReport;
  let faultAt = 0;
  let outAt: number | null = null;
  let backAt: number | null = null;
  try {
    await sleep(settleMs);
    faultAt = now();
    await fault.inject(stack);
    const deadline = faultAt + maxSeconds * 1000;
    for (let seen = 0; backAt === null && now() < deadline; await sleep(100)) {
      for (; seen < sampler.samples.length; seen++) {
        const sample = sampler.samples[seen]!;
        if (sample.at < faultAt) continue;
        const listed = listedAt(seen);
        if (outAt === null && fault.down.length > 0 && fault.down.every((n) => !listed.includes(n))) outAt = sample.at;
        if ((outAt !== null || fault.down.length === 0) && recovered(listed, all)) backAt = sample.at;
      }
    }
    await sleep(afterMs);
  } finally {
    reports = await Promise.all(loads.map((l) => l.stop()));
    samples = await sampler.stop();
  }
  const seconds = secondsAfterFault(faultAt);
  return {
    fault: fault.name,
    ...requestsAroundFault(
      reports.flatMap((r) => r.records),
      faultAt,
    ),
    outSeconds: seconds(outAt),
    recoverSeconds: seconds(backAt),
    samples,
    faultAt,
    outAt,
    backAt,
  };
}

/** The line `npm run bench -- faults` prints for a run; a failure out of bound is named by its error and its start and end after the fault, in seconds. */
export function faultLine(run: FaultRun): Record<string, unknown> {
  const after = (at: number) => Math.round((at - run.faultAt) / 100) / 10;
  const outOfBound = failuresOutOfBound(run).map((f) => `${f.error} (${after(f.startedAt)} s to ${after(f.endedAt)} s)`);
  return {
    fault: run.fault,
    requests: run.requests,
    failed: run.failed,
    inFlightAtFault: run.inFlightAtFault,
    outSeconds: run.outSeconds,
    recoverSeconds: run.recoverSeconds,
    ...(outOfBound.length > 0 ? { outOfBound } : {}),
  };
}

/** How long after the file changes a request may still be routed by the EPP's previous set: its reload on the file's rename (inotify), on a loaded machine. */
export const EPP_RELOAD_MARGIN_MS = 1000;

/**
 * The failures a run may have: requests in flight on what died at the fault, or sent to it before the
 * front door took it out (the agent's probe finds it; without retries at Envoy, a request sent there
 * meanwhile fails). None that ended before the fault, and none sent once the EPP had reloaded the
 * file without it, or with it back.
 */
export function failuresOutOfBound(run: FaultRun): RequestRecord[] {
  const settled = run.outAt ?? run.backAt;
  return run.failures.filter((f) => f.endedAt < run.faultAt || (settled !== null && f.startedAt >= settled + EPP_RELOAD_MARGIN_MS));
}

/** Out of the front door, then back with every endpoint, with no failure but those `failuresOutOfBound` allows. */
const outAndBack = (run: FaultRun) => run.outAt !== null && run.backAt !== null && failuresOutOfBound(run).length === 0;

/** The agent's round: a probe (at most its timeout, 2 s) and its interval (1 s) (HOST_DEFAULTS.frontDoor). */
export const AGENT_ROUND_SECONDS = 3;

const DECODE_RANKS = [0, 1, 2, 3];
const decodeEndpoints = (host: string) => DECODE_RANKS.map((r) => `${host}-decode-${r}`);

/**
 * The NPU side's faults on a prefill/decode stack of a prefill server (npu-0), two decode servers
 * (npu-1, npu-2) and a router host, as test/hosts/faults-hosts.test.ts deploys it. The router
 * side's (the EPP, Envoy, a router host) come with the HA front door.
 */
export function npuFaults(unit: (name: string) => string): FaultCase[] {
  return [
    {
      name: "a decode rank process killed (SIGKILL)",
      down: decodeEndpoints("npu-1"),
      inject: (stack) => stack.npuHosts[1]!.killUnit(unit("decode-2")),
      bound: "at most the requests in flight on its group fail; the group is listed again once it restarted, without a deploy",
      withinBound: outAndBack,
    },
    {
      name: "a decode host's routing sidecar killed (SIGKILL)",
      down: decodeEndpoints("npu-1"),
      inject: (stack) => stack.npuHosts[1]!.killUnit(unit("sidecar")),
      bound: "at most the requests in flight on that host fail; its endpoints are back once the sidecar restarted",
      withinBound: outAndBack,
    },
    {
      name: "a whole decode host dies (power loss)",
      down: decodeEndpoints("npu-2"),
      inject: (stack) => stack.npuHosts[2]!.kill(),
      // The rest serve: recovered once the dead host is out.
      recovered: (listed, all) => all.filter((n) => !n.startsWith("npu-2-")).every((n) => listed.includes(n)),
      restore: (stack) => stack.npuHosts[2]!.reboot(),
      bound: `at most the requests in flight on it fail; the front door stops listing it within 2 probe rounds (${2 * AGENT_ROUND_SECONDS} s); the rest serve`,
      withinBound: (run) => outAndBack(run) && run.outSeconds! <= 2 * AGENT_ROUND_SECONDS,
    },
    {
      name: "the endpoints agent killed (SIGKILL)",
      down: [],
      inject: (stack) => stack.router.killUnit(unit("front-door-agent")),
      bound: "no request fails; the agent restarts and the file lists every endpoint",
      withinBound: (run) => run.failed === 0 && run.backAt !== null && run.samples.bad.length === 0,
    },
  ];
}

/** The unit of a fault stack's deployment (id `test`): `rbln-serving-test.<name>.service`. */
export const faultStackUnit = (name: string) => `rbln-serving-test.${name}.service`;
/** Every endpoint of the fault stack, in the file's order. */
export const FAULT_STACK_ENDPOINTS = ["npu-0-prefill-0", ...[1, 2].flatMap((h) => DECODE_RANKS.map((r) => `npu-${h}-decode-${r}`))];

/**
 * The stack the NPU faults run on, deployed and listed: prefill/decode with a prefill server (npu-0),
 * two decode servers (npu-1, npu-2) and a router host, each fake host as if on a network of its own;
 * decode tokens take 50 ms each, so a stream of 60 tokens is a long one.
 */
export async function startFaultStack(): Promise<FrontDoorStack> {
  const servers = (npuHosts: readonly TestHost[]) => npuHosts.map((h, i) => hostEntry(h, i, { allInterfaces: true }));
  const stack = await startFrontDoorStack(3, {
    loopbackIsHostAddress: true,
    stack: (npuHosts) => ({ strategy: "prefill-decode-disaggregated", target: "Throughput", replicas: 1, decodeReplicas: 2, hosts: servers(npuHosts) }),
  });
  try {
    const result = await stack.up(stack.settings({ decode: { extraEnv: { FAKE_VLLM_STEP_SECONDS: "0.05" } } }));
    if (result.failed.length > 0) throw new Error(`the fault stack's deploy failed: ${result.failed.map((f) => `${f.name}: ${f.stderr}`).join("\n")}`);
    await untilListed(stack, FAULT_STACK_ENDPOINTS.length, 60);
    return stack;
  } catch (error) {
    await stack.stop();
    throw error;
  }
}
