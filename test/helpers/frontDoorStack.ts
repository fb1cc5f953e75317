import type { ModelServingArgs } from "../../components/modelServing";
import { parseStackSettings } from "../../core/config/stackConfig";
import { planDeployment } from "../../core/plan/deployment";
import { DEFAULT_INSTANCE, deploymentId } from "../../core/render/hosts/names";
import type { UnitTimings } from "../../core/render/hosts/rank";
import type { FakeEngine, UpResult } from "./engine";
import { now, startLoad, startSampler, type LoadReport, type SampleReport } from "./frontDoorLoad";
import { startHosts, type TestHost } from "./hostNamespace";
import { fakeHostsEngine, fakeHostsSettings, servingUnderMocks } from "./hostStack";
import { outputValue, type Registration } from "./pulumiHarness";
import { shippedCatalog } from "./recipes";
import { installStandIns, nftCheckOnly } from "./standIns";
import { prepareStandInServer } from "./standInServer";

/**
 * A hosts stack behind the front door, for real: N fake NPU hosts and a router host (real systemd
 * and sshd each, test/helpers/hostNamespace.ts), the program's commands run over SSH in graph order
 * (test/helpers/engine.ts). Stand-ins replace only what cannot run here: vLLM on the NPU hosts, and
 * the container runtime with the EPP and Envoy on the router host and the routing sidecar on decode
 * hosts (test/fixtures/stand-ins). The endpoints agent, the drains, the unit steps and systemd are
 * the real ones.
 */
const INSTALL_ROOT = "/opt/rbln-front-door-test";
const CACHE_ROOT = "/var/lib/rbln-front-door-test";
const STAND_INS = "/opt/rbln-front-door-stand-ins";
const VENV = `${INSTALL_ROOT}/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`;
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
/** The front door's port on the router host. */
export const FRONT_DOOR_PORT = 18080;
/** How long a stand-in takes per token (a generation step): a short request (4 tokens) 0.4 s, a stream of STREAM_TOKENS 20 s. */
const STEP_SECONDS = "0.1";
/** A stream's tokens: it lasts longer than a drain's settle (3 s) and less than the stack's shutdown timeout (30 s). */
const STREAM_TOKENS = 200;

type Settings = ModelServingArgs["settings"];
/** Flags and variables a change gives one role's ranks, on top of the stack's. */
export interface RoleChange {
  extraArgs?: string[];
  extraEnv?: Record<string, string>;
}

export interface FrontDoorStackOptions {
  /**
   * The stack over the aggregated defaults of fakeHostsSettings (a replica on each NPU host):
   * another strategy, and the hosts it runs on.
   */
  stack?: (npuHosts: readonly TestHost[]) => Record<string, unknown>;
  /** Each host as if on a network of its own (HostOptions.loopbackIsHostAddress): ranks on all interfaces, decode hosts with their sidecars. */
  loopbackIsHostAddress?: boolean;
  /** The stack's secrets besides the SSH key (apiKey): every deploy's, unless `up` is given others. */
  secrets?: ModelServingArgs["secrets"];
}

export interface FrontDoorStack {
  npuHosts: TestHost[];
  router: TestHost;
  url: string;
  /** The stack's settings with each role's changes, and top-level settings over the stack's. */
  settings(changes?: Record<string, RoleChange>, more?: Record<string, unknown>): Settings;
  /** A deploy, and the stack's `endpoints` output for the config it ran; `secrets` over the stack's. */
  up(settings: Settings, secrets?: ModelServingArgs["secrets"]): Promise<UpResult & { endpoints: string[] }>;
  /** The registered commands of a config, for running one step by hand (a cut-off step); `timings` over the stack's. */
  register(settings: Settings, timings?: Partial<UnitTimings>): Promise<Registration[]>;
  /** The endpoints file the EPP reads on the router host. */
  endpointsFile(): Promise<string>;
  stop(): Promise<void>;
}

export async function startFrontDoorStack(npuHostCount: number, options: FrontDoorStackOptions = {}): Promise<FrontDoorStack> {
  const hosts = await startHosts(npuHostCount + 1, {
    privatePaths: [INSTALL_ROOT, CACHE_ROOT, STAND_INS],
    loopbackIsHostAddress: options.loopbackIsHostAddress,
  });
  const npuHosts = hosts.slice(0, npuHostCount);
  const router = hosts[npuHostCount]!;
  // The router's units, and a decode host's sidecar, run under the container runtime (at one path on every host).
  const runtime = (await Promise.all(hosts.map((host) => installStandIns(host, STAND_INS))))[0]!;
  const stack = {
    ...fakeHostsSettings(npuHosts, { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT }),
    router: {
      host: { name: "door", address: router.address, port: router.port, hostKey: router.hostPublicKey, listenAddress: router.address },
      port: FRONT_DOOR_PORT,
    },
    // In-flight streams (20 s) finish well within it; the stop need not wait an hour.
    rollout: { shutdownTimeoutSeconds: 30 },
    ...options.stack?.(npuHosts),
  };
  const roles = [...new Set(planDeployment(parseStackSettings(stack), shippedCatalog).plan.roles.map((r) => r.role))];
  const settings = (changes: Record<string, RoleChange> = {}, more: Record<string, unknown> = {}): Settings => ({
    ...stack,
    extraArgs: Object.fromEntries(roles.flatMap((role) => (changes[role]?.extraArgs ? [[role, changes[role].extraArgs]] : []))),
    extraEnv: Object.fromEntries(roles.map((role) => [role, { FAKE_VLLM_READY_AFTER: "2", FAKE_VLLM_STEP_SECONDS: STEP_SECONDS, ...changes[role]?.extraEnv }])),
    ...more,
  });
  const marker = `${CACHE_ROOT}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7`;
  for (const host of npuHosts) {
    await prepareStandInServer(host, { venv: VENV, devRoot: FAKE_DEV });
    const weights = await host.run(`install -d $(dirname ${marker}) && touch ${marker}`);
    if (weights.status !== 0) throw new Error(`${host.name}: ${weights.stderr}`);
  }
  const engine: FakeEngine = fakeHostsEngine(hosts);
  const underMocks = (config: Settings, timings: Partial<UnitTimings> = {}, secrets = options.secrets) =>
    servingUnderMocks(config, { secrets, ...frontDoorServingOptions(runtime, FAKE_DEV, timings) });
  const id = deploymentId("test", DEFAULT_INSTANCE);
  return {
    npuHosts,
    router,
    url: `http://${router.address}:${FRONT_DOOR_PORT}`,
    settings,
    register: async (config, timings) => (await underMocks(config, timings)).registrations,
    up: async (config, secrets) => {
      const { registrations, serving } = await underMocks(config, {}, secrets ?? options.secrets);
      const endpoints = await outputValue(serving.endpoints);
      return { ...(await engine.up(registrations)), endpoints };
    },
    endpointsFile: async () => {
      const read = await router.run(`cat ${INSTALL_ROOT}/router/${id}/epp/endpoints.yaml`);
      if (read.status !== 0) throw new Error(read.stderr);
      return read.stdout;
    },
    stop: async () => {
      await Promise.all(hosts.map((h) => h.stop()));
    },
  };
}

export interface UnderLoadOptions {
  /** Clients sending short completions, each its next as the last ends (default 6). */
  concurrency?: number;
  /**
   * Clients streaming long generations (STREAM_TOKENS tokens, one every STEP_SECONDS: longer than a
   * drain's settle, so a rank that stops has streams in flight), default none. They start first,
   * one pick each, so the round robin spreads them over the endpoints listed then.
   */
  streams?: number;
  /** The least load for a result to count: "no request failed" means nothing when none was made (defaults 50 requests, 10 samples). */
  minRequests?: number;
  minSamples?: number;
}

export interface UnderLoadResult<T> {
  result: T;
  /** Every request, short and streamed. */
  load: LoadReport;
  /** The streamed ones alone. */
  streams: LoadReport;
  samples: SampleReport;
  /** Per stop of a stand-in vLLM on an NPU host while the load ran: the completions it had in flight at the signal. */
  inFlightAtStops: number[];
}

/** A long streamed generation: STREAM_TOKENS tokens, one every STEP_SECONDS. */
const STREAM_BODY = { model: "stand-in", prompt: "Tell a long story", max_tokens: STREAM_TOKENS, stream: true };

function together(a: LoadReport, b: LoadReport): LoadReport {
  const records = [...a.records, ...b.records];
  const failures = records.filter((r) => r.error !== undefined);
  return { records, total: records.length, failed: failures.length, failures, stoppedBy: a.stoppedBy };
}

/** The in-flight counts the stand-in vLLM printed at each SIGTERM on the NPU hosts since `since` (epoch ms). */
async function inFlightAtStops(stack: FrontDoorStack, since: number): Promise<number[]> {
  const per = await Promise.all(
    stack.npuHosts.map((host) =>
      host.run(
        `journalctl --since @${Math.floor(since / 1000) - 1} -o cat --no-pager | grep -o 'fake vllm: [0-9]* completion(s) in flight at the signal' || true`,
      ),
    ),
  );
  return per.flatMap((r) => [...r.stdout.matchAll(/fake vllm: (\d+) completion/g)].map((m) => Number(m[1])));
}

/**
 * Steady requests through the front door (short ones, and long streams if asked), and samples of its
 * endpoints file, while `during` runs. A load smaller than the options' bounds is an error.
 */
export async function underLoad<T>(stack: FrontDoorStack, during: () => Promise<T>, options: UnderLoadOptions = {}): Promise<UnderLoadResult<T>> {
  const { concurrency = 6, streams = 0, minRequests = 50, minSamples = 10 } = options;
  const since = now();
  const streaming = startLoad(stack.url, { concurrency: streams, body: STREAM_BODY, maxSeconds: 900 });
  for (let i = 0; streaming.answered < streams; i++) {
    if (i > 600) {
      await streaming.stop();
      throw new Error(`only ${streaming.answered} of ${streams} streams answered in 60 s`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const load = startLoad(stack.url, { concurrency, maxSeconds: 900 });
  const sampler = startSampler({ every: 250, read: () => stack.endpointsFile(), maxSeconds: 900 });
  let result: T;
  try {
    result = await during();
  } catch (error) {
    await Promise.all([load.stop(), streaming.stop(), sampler.stop()]);
    throw error;
  }
  // The sampler runs on while the last streams end: a listed endpoint must serve until the load is over.
  const [short, streamed] = await Promise.all([load.stop(), streaming.stop()]);
  const samples = await sampler.stop();
  const tooLittle = [
    short.total < minRequests ? `${short.total} requests (fewer than ${minRequests})` : "",
    samples.samples.length < minSamples ? `${samples.samples.length} samples (fewer than ${minSamples})` : "",
    streamed.total < streams ? `${streamed.total} streams (fewer than the ${streams} clients)` : "",
  ].filter(Boolean);
  if (tooLittle.length > 0) throw new Error(`the load ran too little to count: ${tooLittle.join(", ")}`);
  return { result, load: together(short, streamed), streams: streamed, samples, inFlightAtStops: await inFlightAtStops(stack, since) };
}

/** Until the front door lists `count` endpoints (after a first deploy, its agent lists the ranks as they serve). */
export async function untilListed(stack: FrontDoorStack, count: number, seconds = 30): Promise<string> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const text = await stack.endpointsFile().catch(() => "");
    if ((text.match(/^- name: /gm) ?? []).length === count) return text;
    if (Date.now() > deadline) throw new Error(`the front door lists ${text || "nothing"}, not ${count} endpoints, after ${seconds}s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * What a stack behind a front door on the fake hosts is rendered with: short unit timings, the fake
 * NPU devices under `devRoot`, the container runtime stand-in at `runtime`, the sidecar's guard
 * checked (not loaded), and the fake hosts' own authorized_keys.
 */
export function frontDoorServingOptions(runtime: string, devRoot: string, timings: Partial<UnitTimings> = {}) {
  return {
    hostOptions: {
      readinessIntervalSeconds: 1,
      restartSeconds: 1,
      startLimitBurst: 3,
      startLimitIntervalSeconds: 120,
      // A data-parallel group's hung peers: SIGKILL after 3 s, not 10.
      groupStopGraceSeconds: 3,
      devRoot,
      containerRuntime: runtime,
      // The hosts share this machine's network namespace: the sidecar's guard is checked, not loaded.
      firewall: nftCheckOnly(runtime),
      ...timings,
    },
    // The fake hosts' sshd reads its own authorized_keys, not this machine's /root.
    copyOptions: { authorizedKeysFile: "/run/rbln-host/ssh/authorized_keys" },
  };
}
