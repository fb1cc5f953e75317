import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelServingArgs } from "../../components/modelServing";
import { DEFAULT_INSTANCE, deploymentId } from "../../core/render/hosts/names";
import { UNKNOWN_MODEL_BODY } from "../../core/render/modelAnswers";
import type { CommandRun, FakeEngine, UpResult } from "../helpers/engine";
import { bodyProblem, startLoad } from "../helpers/frontDoorLoad";
import { frontDoorServingOptions } from "../helpers/frontDoorStack";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { fakeHostsEngine, hostEntry, servingUnderMocks } from "../helpers/hostStack";
import { catalogWithSecondModel, SECOND_MODEL } from "../helpers/recipes";
import { installStandIns } from "../helpers/standIns";
import { prepareStandInServer } from "../helpers/standInServer";

/**
 * Two models behind one front door, for real (issue 30): three fake NPU hosts (chat, the catalog's
 * MiniMax, on npu-0; tiny, the tests' Tiny-Chat recipe imported with `recipe import`, on npu-1 and
 * npu-2) and a router host, each with real systemd and sshd; the program's commands run over SSH in
 * graph order (test/helpers/engine.ts). The router host runs one Envoy and an EPP and endpoints agent
 * per model; Envoy, the EPPs and vLLM are the stand-ins (the Envoy stand-in reads the body's model with
 * json_to_metadata's rules and runs the shipped Lua under LuaJIT). Each model's requests must reach
 * that model's ranks only: the answer names the rank's model, and each rank's own token counter
 * (vllm:generation_tokens_total) must have grown by exactly its model's requests.
 */
const INSTALL_ROOT = "/opt/rbln-models-test";
const CACHE_ROOT = "/var/lib/rbln-models-test";
const STAND_INS = "/opt/rbln-models-stand-ins";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const PORT = 18090;
/** Requests per model, and clients at once: each model's requests ask a token count of their own, so the ranks' counters tell them apart. */
const REQUESTS = 1000;
const CLIENTS = 8;
const catalog = catalogWithSecondModel();
const fast = { FAKE_VLLM_READY_AFTER: "1", FAKE_VLLM_STEP_SECONDS: "0.002" };

interface Model {
  name: string;
  id: string;
  served: string[];
  tokens: number;
  /** Its ranks' metrics: host index and port. */
  ranks: [number, number][];
}
const MODELS: Model[] = [
  { name: "chat", id: "MiniMaxAI/MiniMax-M2.7", served: ["MiniMaxAI/MiniMax-M2.7", "minimax"], tokens: 2, ranks: [[0, 8000]] },
  {
    name: "tiny",
    id: SECOND_MODEL,
    served: ["tiny-chat", SECOND_MODEL],
    tokens: 3,
    ranks: [
      [1, 9000],
      [2, 9100],
      [2, 9101],
    ],
  },
];

let hosts: TestHost[];
let npu: TestHost[];
let router: TestHost;
let first: UpResult;
/** The engine of the first deploy, whose state later changes start from (a re-run starts from none: every step runs again). */
let engine: FakeEngine;
const url = () => `http://${router.address}:${PORT}`;

function settings(names: readonly string[] = ["chat", "tiny"]): Record<string, unknown> {
  return {
    platform: "hosts",
    hosts: npu.map((h, i) => hostEntry(h, i)),
    installRoot: INSTALL_ROOT,
    cacheRoot: CACHE_ROOT,
    minFreeDiskGbToRestart: 0,
    router: {
      host: { name: "door", address: router.address, port: router.port, hostKey: router.hostPublicKey, listenAddress: router.address },
      port: PORT,
    },
    rollout: { shutdownTimeoutSeconds: 30 },
    models: [
      {
        name: "chat",
        strategy: "aggregated-data-expert-parallel",
        target: "Latency",
        servedNames: MODELS[0]!.served,
        hosts: ["npu-0"],
        extraEnv: { main: fast },
      },
      {
        name: "tiny",
        model: SECOND_MODEL,
        strategy: "two-role",
        target: "Latency",
        servedNames: MODELS[1]!.served,
        hosts: ["npu-1", "npu-2"],
        extraEnv: { front: fast, back: fast },
      },
    ].filter((m) => names.includes(m.name)),
  };
}

async function up(names?: readonly string[], on: FakeEngine = fakeHostsEngine(hosts)): Promise<UpResult> {
  const runtime = `${STAND_INS}/stand-ins/container-runtime-stand-in`;
  const { registrations } = await servingUnderMocks(settings(names) as ModelServingArgs["settings"], {
    catalog,
    ...frontDoorServingOptions(runtime, FAKE_DEV),
  });
  return on.up(registrations);
}

/** The endpoint names of a model's EPP file on the router host. */
async function listed(model: string): Promise<string[]> {
  const read = await router.run(`cat ${INSTALL_ROOT}/router/${deploymentId("test", `${DEFAULT_INSTANCE}-${model}`)}/epp/endpoints.yaml`);
  return [...read.stdout.matchAll(/^- name: "([^"]+)"$/gm)].map((m) => m[1]!);
}

async function untilListed(model: string, count: number): Promise<string[]> {
  for (let i = 0; i < 240; i++) {
    const names = await listed(model);
    if (names.length === count) return names;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${model}'s EPP lists ${await listed(model)}, not ${count} endpoints`);
}

/** A rank's tokens generated so far (the stand-in vLLM's vllm:generation_tokens_total). */
async function tokens([host, port]: [number, number]): Promise<number> {
  const text = await (await fetch(`http://${npu[host]!.address}:${port}/metrics`)).text();
  return Number(/^vllm:generation_tokens_total(?:\{[^}]*\})? ([\d.]+)$/m.exec(text)?.[1] ?? Number.NaN);
}

beforeAll(async () => {
  // loopbackIsHostAddress: the apply step reads Envoy's admin on 127.0.0.1, which is each host's own, as on a server.
  hosts = await startHosts(4, { privatePaths: [INSTALL_ROOT, CACHE_ROOT, STAND_INS], loopbackIsHostAddress: true });
  npu = hosts.slice(0, 3);
  router = hosts[3]!;
  await Promise.all(hosts.map((host) => installStandIns(host, STAND_INS)));
  const venvs = [
    `${INSTALL_ROOT}/venvs/test.rbln-serving-chat/rebel-compiler-0.12.0_vllm-rbln-0.12.0`,
    `${INSTALL_ROOT}/venvs/test.rbln-serving-tiny/vllm-rbln-0.12.0`,
    `${INSTALL_ROOT}/venvs/test.rbln-serving-tiny/vllm-rbln-0.12.0`,
  ];
  const weights = [MODELS[0]!.id, SECOND_MODEL, SECOND_MODEL].map((id) => `${CACHE_ROOT}/huggingface/rbln-serving-complete/${id.replace("/", "--")}`);
  for (const [i, host] of npu.entries()) {
    await prepareStandInServer(host, { venv: venvs[i]!, devRoot: FAKE_DEV });
    const marker = await host.run(`install -d $(dirname ${weights[i]}) && touch ${weights[i]}`);
    if (marker.status !== 0) throw new Error(`${host.name}: ${marker.stderr}`);
  }
  engine = fakeHostsEngine(hosts);
  first = await up(undefined, engine);
}, 300_000);
afterAll(async () => {
  await Promise.all((hosts ?? []).map((h) => h.stop()));
});

describe("two models behind one front door on fake hosts", { timeout: 180_000 }, () => {
  it("first deploy: one front door on the router host, an EPP per model listing that model's ranks only", async () => {
    expect(first.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const applies = first.runs.filter((r) => r.name.endsWith("-front-door-apply"));
    expect(applies.map((r) => r.name)).toEqual(["rbln-serving-door-front-door-apply"]);
    expect(applies[0]!.stdout).toContain("front door door: serving");
    expect(await untilListed("chat", 1)).toEqual(["npu-0-main-0"]);
    expect(await untilListed("tiny", 2)).toEqual(["npu-1-front-0", "npu-2-back-0"]);
  });

  it(`lands ${REQUESTS} requests per model, by every served name, 100 % on that model's ranks`, async () => {
    const before = await Promise.all(MODELS.map((m) => Promise.all(m.ranks.map(tokens))));
    const jobs = MODELS.flatMap((model) => Array.from({ length: REQUESTS }, (_, i) => ({ model, name: model.served[i % model.served.length]! })));
    const answers: { model: Model; status: number; answeredBy: string }[] = [];
    let next = 0;
    const client = async () => {
      for (let job = jobs[next++]; job; job = jobs[next++]) {
        const response = await fetch(`${url()}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: job.name, prompt: "hi", max_tokens: job.model.tokens }),
        });
        const body = (await response.json().catch(() => ({}))) as { model?: string };
        answers.push({ model: job.model, status: response.status, answeredBy: body.model ?? "" });
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, client));
    for (const model of MODELS) {
      const own = answers.filter((a) => a.model === model);
      expect(own, model.name).toHaveLength(REQUESTS);
      const astray = own.filter((a) => a.status !== 200 || a.answeredBy !== model.id);
      expect(astray.map((a) => `${a.status}, answered by ${a.answeredBy || "no rank"}`).slice(0, 5), `${model.name}: ${astray.length} astray`).toEqual([]);
    }
    const after = await Promise.all(MODELS.map((m) => Promise.all(m.ranks.map(tokens))));
    // Every token each model's ranks made since is its own requests': none of another model's reached them.
    MODELS.forEach((model, i) => {
      const grown = after[i]!.reduce((sum, t, r) => sum + t - before[i]![r]!, 0);
      expect(grown, `${model.name}'s ranks' tokens`).toBe(REQUESTS * model.tokens);
    });
  });

  it("a re-run restarts nothing on the router host", async () => {
    const again = await up();
    expect(again.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const apply = again.runs.find((r) => r.name === "rbln-serving-door-front-door-apply");
    expect(apply?.stdout ?? "").not.toContain("(re)started");
  });

  it("answers an unknown model with 404 JSON, and GET /v1/models with every served name", async () => {
    for (const model of ["unknown", "MiniMaxAI/MiniMax-M2.5", ""]) {
      const response = await fetch(`${url()}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-gateway-base-model-name": "tiny-chat" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
      });
      expect([response.status, response.headers.get("content-type"), await response.text()], model).toEqual([404, "application/json", UNKNOWN_MODEL_BODY]);
    }
    const list = await fetch(`${url()}/v1/models`);
    expect(list.status).toBe(200);
    expect(((await list.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(MODELS.flatMap((m) => m.served));
  });

  it("taking model tiny out loses no request on chat, and lets tiny's streams in flight end: Envoy takes its new routes and clusters without a restart, and tiny's EPP leaves", async () => {
    const loads = chatLoads();
    await loadsRunning(loads);
    // Two of tiny's streams under way as it is taken out: its routes go first, the step waits for them, then its EPP.
    const tinyStreams = [0, 1].map(() => stream("tiny-chat"));
    await new Promise((r) => setTimeout(r, 500));
    const removed = await up(["chat"], engine);
    const reports = await Promise.all(loads.map((load) => load.stop()));
    expect(await Promise.all(tinyStreams)).toEqual(["200", "200"]);
    expect(removed.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const step = removed.runs.find((r) => r.name === "rbln-serving-door-front-door-apply");
    const apply = step?.stdout ?? "";
    expect(apply).toContain("Envoy runs the new routes.yaml");
    expect(apply).toContain("Envoy runs the new clusters.yaml");
    expect(apply).toMatch(/removed \S+tiny\S*\.front-door-epp and \S+tiny\S*\.front-door-agent/);
    expect(apply).not.toContain("(re)started");
    expectNoLoss(reports, step!);
    expect(await ask("tiny-chat")).toBe(404);
    expect(await ask("minimax")).toBe(200);
    const units = await router.run("systemctl list-unit-files --no-legend 'rbln-serving-*' | cut -d' ' -f1");
    expect(units.stdout.split("\n").filter((u) => u.includes("tiny"))).toEqual([]);
  });

  it("putting model tiny back loses no request on chat, and tiny's requests land on tiny's ranks again", async () => {
    const loads = chatLoads();
    await loadsRunning(loads);
    const added = await up(["chat", "tiny"], engine);
    const reports = await Promise.all(loads.map((load) => load.stop()));
    expect(added.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const step = added.runs.find((r) => r.name === "rbln-serving-door-front-door-apply");
    expect(step?.stdout).toContain("Envoy runs the new clusters.yaml");
    expect(step?.stdout).toContain("Envoy runs the new routes.yaml");
    expect(step?.stdout).not.toContain("front-door-proxy");
    expectNoLoss(reports, step!);
    expect(await untilListed("tiny", 2)).toEqual(["npu-1-front-0", "npu-2-back-0"]);
    expect(await ask("tiny-chat")).toBe(200);
  });
});

/** Chat's load during a change: short completions, and streams of several seconds (in flight through the front door's apply step). */
function chatLoads() {
  return [
    startLoad(url(), { concurrency: 4, body: { model: "minimax", prompt: "hi", max_tokens: 2 }, maxSeconds: 300 }),
    startLoad(url(), { concurrency: 3, body: { model: "MiniMaxAI/MiniMax-M2.7", prompt: "hi", max_tokens: 3000, stream: true }, maxSeconds: 300 }),
  ];
}

/** Until every worker of every load has had an answer: the streams are under way. */
async function loadsRunning(loads: ReturnType<typeof chatLoads>) {
  await expect.poll(() => Math.min(loads[0]!.answered, loads[1]!.answered), { timeout: 30_000 }).toBeGreaterThanOrEqual(3);
}

/** No request of chat's loads failed, they ran, and streams were in flight when the front door's apply step started. */
function expectNoLoss(reports: Awaited<ReturnType<ReturnType<typeof startLoad>["stop"]>>[], step: CommandRun) {
  const [short, streams] = reports as [(typeof reports)[number], (typeof reports)[number]];
  expect(short.total, "short requests").toBeGreaterThanOrEqual(20);
  expect(streams.total, "streams").toBeGreaterThanOrEqual(3);
  for (const report of [short, streams])
    expect(
      report.failures.slice(0, 5).map((f) => f.error),
      `${report.failed} of ${report.total} failed`,
    ).toEqual([]);
  const across = streams.records.filter((r) => r.startedAt < step.startedAt && r.endedAt > step.startedAt);
  expect(across.length, "streams in flight as the apply step started").toBeGreaterThanOrEqual(1);
}

/** One 6-second stream of `model` through the front door, read to its end: its status, or what is wrong with its body. */
async function stream(model: string): Promise<string> {
  const response = await fetch(`${url()}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "hi", max_tokens: 3000, stream: true }),
  });
  const text = await response.text().catch((error: Error) => `cut: ${error.message}`);
  return bodyProblem(response.headers.get("content-type") ?? "", text) ?? String(response.status);
}

/** The status of one completion for `model` through the front door. */
async function ask(model: string): Promise<number> {
  const response = await fetch(`${url()}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "hi", max_tokens: 1 }),
  });
  await response.text();
  return response.status;
}
