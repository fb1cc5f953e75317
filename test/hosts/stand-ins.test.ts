import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { resolvePlan } from "../../core/plan/resolve";
import { endpointPickerConfig } from "../../core/render/pickerConfig";
import { apiKeyFilterConfig, modelsEnvoy } from "../../core/render/hosts/frontDoor/envoy";
import { eppClusterName, type ModelDoor, modelHeaderScript } from "../../core/render/hosts/frontDoor/modelRoutes";
import { type EnvoyRequest, routeThroughFrontDoor } from "../helpers/envoyModelRouting";
import { validateEnvoyBootstrap, validateEnvoyWithDiscovery, withDiscovered } from "../helpers/envoyBootstrap";
import { validateEndpointPickerConfig, validateEndpointsFile } from "../helpers/eppConfig";
import { bodyProblem, now, startLoad, startSampler, type RequestRecord } from "../helpers/frontDoorLoad";
import { minimax } from "../helpers/recipes";
import {
  aggregatedEppConfig,
  endpointsFile,
  EPP_ENDPOINTS_PATH,
  failoverBootstrap,
  frontDoorBootstrap,
  STAND_IN_IMAGES,
  writeRouterTls,
} from "../helpers/standIns";
import { freePort, waitForPort } from "../helpers/sshd";
import { copyStandInVllm } from "../helpers/vllmParser";

/**
 * The stand-ins of test/fixtures/stand-ins/ (container runtime, EPP, Envoy, routing sidecar) and the
 * stand-in vLLM's completions and shutdown, on loopback: each does what the fake-host tests of the
 * front door rely on the real program doing, and refuses what it does not implement.
 */

const STAND_INS = path.join(__dirname, "..", "fixtures", "stand-ins");
const RUNTIME = path.join(STAND_INS, "container-runtime-stand-in");
const { endpointPicker: EPP_IMAGE, proxy: ENVOY_IMAGE, sidecar: SIDECAR_IMAGE } = STAND_IN_IMAGES;
/** This file's own loopback address (apart from the other files' servers), standing for the host. */
const ADDRESS = `127.${50 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 250)}.${10 + Math.floor(Math.random() * 240)}`;

let work: string;
let state: string;
const started: ChildProcess[] = [];

beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "stand-ins-"));
});
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));
afterEach(() => {
  // Each started process leads its own process group: the runtime and the program it runs go together.
  for (const child of started.splice(0)) {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

function freshState(): string {
  state = fs.mkdtempSync(path.join(work, "state-"));
  return state;
}

const runtimeEnv = () => ({ ...process.env, CONTAINER_RUNTIME_STAND_IN_STATE: state, STAND_IN_HOST_ADDRESS: ADDRESS });

/** One runtime command to its end. */
function runtime(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(RUNTIME, args, { env: runtimeEnv(), encoding: "utf8" });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

interface Running {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function launch(command: string, args: string[], env: NodeJS.ProcessEnv = runtimeEnv()): Running {
  const child = spawn(command, args, { env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  started.push(child);
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exited };
}

/** `RUNTIME run --rm --name NAME --pull never OPTIONS... IMAGE ARGS...` in the foreground. */
function runContainer(name: string, options: string[], image: string, args: string[]): Running {
  return launch(RUNTIME, ["run", "--rm", "--name", name, "--pull", "never", ...options, image, ...args]);
}

async function untilListening(running: Running, port: number, address = ADDRESS): Promise<void> {
  await waitForPort(address, port, () => (running.child.exitCode !== null ? `exited ${running.child.exitCode}: ${running.output()}` : undefined));
}

async function untilOutput(running: Running, pattern: RegExp, count = 1): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((running.output().match(new RegExp(pattern, "g")) ?? []).length >= count) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no ${pattern} in: ${running.output()}`);
}

function isListening(port: number, address = ADDRESS): Promise<boolean> {
  return fetch(`http://${address}:${port}/`, { signal: AbortSignal.timeout(2000) }).then(
    () => true,
    () => false,
  );
}

interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** An upstream on loopback that records every request and answers with `answer`. */
async function upstream(answer: (request: Recorded, response: http.ServerResponse) => unknown, port = 0) {
  const requests: Recorded[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const recorded = { method: req.method!, url: req.url!, headers: req.headers, body };
      requests.push(recorded);
      void answer(recorded, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, ADDRESS, resolve));
  const actual = (server.address() as { port: number }).port;
  return { port: actual, requests, close: () => new Promise<void>((r) => server.close(() => r()).closeAllConnections()) };
}

/** "answered" once a request's whole answer came, "failed" when it broke off (handled at once, so never unhandled). */
function outcome(request: Promise<Response>): Promise<"answered" | "failed"> {
  return request
    .then((r) => r.text())
    .then(
      () => "answered" as const,
      () => "failed" as const,
    );
}

const json = (status: number, value: unknown) => (_: Recorded, res: http.ServerResponse) => {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
};

// --- EPP configs and files ---------------------------------------------------------------------------

/** The recipe's prefill/decode router intent plus file discovery. */
function disaggregatedEppConfig(): string {
  const plan = resolvePlan(minimax, { model: minimax.model, strategy: "prefill-decode-disaggregated", target: "Throughput" });
  const config = parseYaml(endpointPickerConfig(plan.router!.values));
  config.plugins.push({ type: "file-discovery", parameters: { path: EPP_ENDPOINTS_PATH, watchFile: true } });
  config.dataLayer = { discovery: { pluginRef: "file-discovery" } };
  return stringifyYaml(config);
}

/** Writes the file whole beside the target and renames it over: the update the EPP's watcher is meant for. */
function replaceFile(file: string, text: string): void {
  fs.writeFileSync(`${file}.tmp`, text);
  fs.renameSync(`${file}.tmp`, file);
}

interface Epp {
  running: Running;
  dir: string;
  pick: number;
  health: number;
  metrics: number;
  picks(n: number): Promise<{ status: number; destination: string | null; prefiller: string | null }[]>;
  readyEndpoints(): Promise<number>;
}

/** The EPP stand-in as the units run it: published ports, its config folder as a volume. */
async function startEpp(config: string, endpoints: string, extraArgs: string[] = [], again?: Epp): Promise<Epp> {
  const dir = again?.dir ?? fs.mkdtempSync(path.join(work, "epp-"));
  fs.writeFileSync(path.join(dir, "epp.yaml"), config);
  fs.writeFileSync(path.join(dir, "endpoints.yaml"), endpoints);
  // Started again (`again`): on the same ports, as a unit's restart does.
  const [pick, health, metrics] = again
    ? [again.pick, again.health, again.metrics]
    : [await freePort(ADDRESS), await freePort(ADDRESS), await freePort(ADDRESS)];
  const running = runContainer(
    `epp-${path.basename(dir)}`,
    [
      "--publish",
      `127.0.0.1:${pick}:9002`,
      "--publish",
      `127.0.0.1:${health}:9003`,
      "--publish",
      `${ADDRESS}:${metrics}:9090`,
      "--volume",
      `${dir}:/etc/epp:ro,z`,
    ],
    EPP_IMAGE,
    [
      "--config-file=/etc/epp/epp.yaml",
      "--pool-name=test-pool",
      "--pool-namespace=test",
      "--secure-serving=false",
      "--tracing=false",
      "--grpc-port=9002",
      "--grpc-health-port=9003",
      "--metrics-port=9090",
      ...extraArgs,
    ],
  );
  return {
    running,
    dir,
    pick,
    health,
    metrics,
    async picks(n) {
      const out = [];
      for (let i = 0; i < n; i++) {
        const response = await fetch(`http://${ADDRESS}:${pick}/stand-in/pick`);
        await response.arrayBuffer();
        out.push({
          status: response.status,
          destination: response.headers.get("x-gateway-destination-endpoint"),
          prefiller: response.headers.get("x-prefiller-host-port"),
        });
      }
      return out;
    },
    async readyEndpoints() {
      const text = await (await fetch(`http://${ADDRESS}:${metrics}/metrics`)).text();
      return Number(/^llm_d_epp_ready_endpoints\{name="test-pool"\} (\d+)$/m.exec(text)![1]);
    },
  };
}

beforeAll(() => {
  freshState();
  for (const image of [EPP_IMAGE, ENVOY_IMAGE, SIDECAR_IMAGE]) expect(runtime("pull", image).status).toBe(0);
});

describe("container-runtime-stand-in", () => {
  it("pulls only images whose repository it knows, and inspects only what it pulled", () => {
    freshState();
    expect(runtime("image", "inspect", "--format", "{{.Id}}", ENVOY_IMAGE)).toMatchObject({ status: 1, stderr: expect.stringContaining("image not known") });
    const pulled = runtime("pull", "envoyproxy/envoy:v1.37.0");
    expect(pulled.status).toBe(0);
    // The same image under its full name, as podman and docker normalise a reference.
    const inspected = runtime("image", "inspect", "--format", "{{.Id}}", ENVOY_IMAGE);
    expect(inspected.status).toBe(0);
    expect(inspected.stdout.trim()).toMatch(/^[0-9a-f]{64}$/);
    expect(pulled.stdout).toContain(inspected.stdout.trim());
    expect(runtime("pull", "ghcr.io/llm-d/llm-d-inference-scheduler:v0.10.0")).toMatchObject({
      status: 1,
      stderr: expect.stringContaining("manifest unknown"),
    });
    expect(runtime("run", "--rm", "--name", "x", "--pull", "never", EPP_IMAGE, "--pool-name=p")).toMatchObject({
      status: 125,
      stderr: expect.stringContaining("image not known"),
    });
    for (const image of [EPP_IMAGE, ENVOY_IMAGE, SIDECAR_IMAGE]) expect(runtime("pull", image).status).toBe(0);
  });

  it.each([
    [["exec", "x", "true"]],
    [["pull", "--quiet", ENVOY_IMAGE]],
    [["image", "inspect", ENVOY_IMAGE]],
    [["image", "inspect", "--format={{.Id}}", ENVOY_IMAGE]],
    [["rm", "x"]],
    [["rm", "--force", "x"]],
    [["stop", "x"]],
    [["stop", "-t", "5", "x"]],
    [["run", "--name", "x", "--pull", "never", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "always", ENVOY_IMAGE]],
    [["run", "--rm", "--name=x", "--pull", "never", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "never", "--detach", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "never", "--network", "bridge", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "never", "-p", "127.0.0.1:1:1", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "never", "--publish", "9002:9002", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "never", "--network", "host", "--publish", "127.0.0.1:1:1", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "never", "--volume", "etc:/etc/envoy", ENVOY_IMAGE]],
    [["run", "--rm", "--name", "x", "--pull", "never", "--volume", "/etc:/etc/envoy:ro,noexec", ENVOY_IMAGE]],
  ])("refuses what it does not implement with status 2: %j", (args) => {
    const result = runtime(...args);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^container-runtime-stand-in: .+/);
  });

  it("runs the image's program in the foreground, keeps the name taken while it runs, and stops it", async () => {
    const port = await freePort(ADDRESS);
    const args = [`--port=${port}`, `--model-server-port=${port + 1}`, "--data-parallel-size=1", "--kv-connector=nixlv2", "--secure-proxy=false"];
    const sidecar = runContainer("sidecar", ["--network", "host"], SIDECAR_IMAGE, args);
    await untilListening(sidecar, port);
    expect(runtime("run", "--rm", "--name", "sidecar", "--pull", "never", "--network", "host", SIDECAR_IMAGE, ...args)).toMatchObject({
      status: 125,
      stderr: expect.stringContaining('the container name "sidecar" is already in use'),
    });
    expect(runtime("stop", "--time", "10", "sidecar").status).toBe(0);
    expect(await sidecar.exited).toEqual({ code: 0, signal: null });
    expect(await isListening(port)).toBe(false);
    expect(runtime("stop", "--time", "10", "sidecar")).toMatchObject({ status: 125, stderr: expect.stringContaining("no such container") });
    expect(runtime("rm", "-f", "sidecar").status).toBe(0);
  });

  it("passes SIGTERM to the program, as podman's and docker's signal proxying do", async () => {
    const port = await freePort(ADDRESS);
    const sidecar = runContainer("proxied", ["--network", "host"], SIDECAR_IMAGE, [`--port=${port}`, "--secure-proxy=false"]);
    await untilListening(sidecar, port);
    process.kill(sidecar.child.pid!, "SIGTERM");
    expect(await sidecar.exited).toEqual({ code: 0, signal: null });
    expect(await isListening(port)).toBe(false);
  });

  it("stop --time N kills with SIGKILL a program still there after N seconds; rm -f kills at once", async () => {
    const port = await freePort(ADDRESS);
    const sidecar = runContainer("stuck", ["--network", "host"], SIDECAR_IMAGE, [`--port=${port}`, "--secure-proxy=false"]);
    await untilListening(sidecar, port);
    // A stopped process takes no SIGTERM until it is continued: only the SIGKILL can end it.
    const program = JSON.parse(fs.readFileSync(path.join(state, "containers", "stuck.json"), "utf8")).pid as number;
    process.kill(program, "SIGSTOP");
    const stop = runtime("stop", "--time", "1", "stuck");
    expect(stop.status).toBe(0);
    expect(stop.stderr).toContain("resorting to SIGKILL");
    expect(await sidecar.exited).toEqual({ code: 137, signal: null });

    const again = runContainer("killed", ["--network", "host"], SIDECAR_IMAGE, [`--port=${port}`, "--secure-proxy=false"]);
    await untilListening(again, port);
    expect(runtime("rm", "-f", "killed")).toMatchObject({ status: 0, stdout: "killed\n" });
    expect(await again.exited).toEqual({ code: 137, signal: null });
    expect(runtime("rm", "-f", "killed")).toMatchObject({ status: 0, stdout: "" });
  });

  it("keeps the name of a container whose runtime was killed outright until rm -f, as podman does", async () => {
    const port = await freePort(ADDRESS);
    const args = [`--port=${port}`, "--secure-proxy=false"];
    const first = runContainer("orphan", ["--network", "host"], SIDECAR_IMAGE, args);
    await untilListening(first, port);
    process.kill(-first.child.pid!, "SIGKILL"); // the unit's cgroup killed: runtime and program
    await first.exited;
    expect(runtime("run", "--rm", "--name", "orphan", "--pull", "never", "--network", "host", SIDECAR_IMAGE, ...args).status).toBe(125);
    expect(runtime("rm", "-f", "orphan").status).toBe(0);
    const second = runContainer("orphan", ["--network", "host"], SIDECAR_IMAGE, args);
    await untilListening(second, port);
  });

  it("reaches a private-network program only on its published address and port, and names volume paths on the host", async () => {
    const epp = await startEpp(aggregatedEppConfig(), endpointsFile(ADDRESS, [{ name: "a", port: "8000" }]));
    await untilListening(epp.running, epp.pick);
    // 127.0.0.1 stands for this host's loopback, which is ADDRESS here; 9002 itself is not published.
    expect((await epp.picks(1))[0]!.status).toBe(200);
    expect(await isListening(9002)).toBe(false);
    expect(epp.running.output()).toContain('"path": "/etc/epp/endpoints.yaml"');
  });
});

describe("epp-stand-in", () => {
  it("takes the fixtures' configs as the real EPP would (checked by the validator)", () => {
    expect(validateEndpointPickerConfig(aggregatedEppConfig())).toEqual([]);
    expect(validateEndpointPickerConfig(disaggregatedEppConfig())).toEqual([]);
  });

  it.each([
    ["a port given as a number (a type error: nothing loads)", "endpoints:\n- {name: a, address: 10.0.0.1, port: 8000}\n"],
    [
      "one bad entry among good ones",
      endpointsFile(ADDRESS, [
        { name: "a", port: "8000" },
        { name: "b", address: "node-1.example", port: "8000" },
      ]),
    ],
    ["a port out of range", endpointsFile(ADDRESS, [{ name: "a", port: "65536" }])],
    ["a top-level list", "- {name: a, address: 10.0.0.1, port: '8000'}\n"],
    ["invalid YAML", "endpoints: [\n"],
  ])("exits 1 at the first load on %s, serving nothing", async (_, text) => {
    expect(validateEndpointsFile(text)).not.toEqual([]);
    const epp = await startEpp(aggregatedEppConfig(), text);
    expect((await epp.running.exited).code).toBe(1);
    expect(epp.running.output()).toContain("initial load failed");
    expect(await isListening(epp.pick)).toBe(false);
  });

  it.each([
    ["missing in its folder", "/etc/epp/missing.yaml"],
    ["outside every volume", "/etc/other/endpoints.yaml"],
  ])("exits 1 when the endpoints file is %s", async (_, where) => {
    const epp = await startEpp(aggregatedEppConfig(where), endpointsFile(ADDRESS, [{ name: "a", port: "8000" }]));
    expect((await epp.running.exited).code).toBe(1);
    expect(epp.running.output()).toContain(`initial load failed: reading ${where}`);
  });

  it("routes round robin to the listed endpoints only, and answers 503 when none is listed", async () => {
    const epp = await startEpp(
      aggregatedEppConfig(),
      endpointsFile(ADDRESS, [
        { name: "a", port: "8000" },
        { name: "b", port: "8001" },
        { name: "b", port: "8002" },
        { name: "c", port: "+8003" },
      ]),
    );
    await untilListening(epp.running, epp.pick);
    const picks = await epp.picks(6);
    // Entries of one (namespace, name) collapse to the last; the port is kept as written.
    expect(picks.map((p) => p.destination)).toEqual([
      `${ADDRESS}:8000`,
      `${ADDRESS}:8002`,
      `${ADDRESS}:+8003`,
      `${ADDRESS}:8000`,
      `${ADDRESS}:8002`,
      `${ADDRESS}:+8003`,
    ]);
    expect(picks.every((p) => p.status === 200 && p.prefiller === null)).toBe(true);
    expect(await epp.readyEndpoints()).toBe(3);
    expect((await fetch(`http://${ADDRESS}:${epp.health}/`)).status).toBe(200);

    replaceFile(path.join(epp.dir, "endpoints.yaml"), "endpoints: []\n");
    await untilOutput(epp.running, /endpoints file changed, reloading/);
    expect((await epp.picks(1))[0]!.status).toBe(503);
    expect(await epp.readyEndpoints()).toBe(0);
  });

  it("reloads on a write-then-rename, keeps the previous set on a bad file, drops a bad entry", async () => {
    const epp = await startEpp(aggregatedEppConfig(), endpointsFile(ADDRESS, [{ name: "a", port: "8000" }]));
    await untilListening(epp.running, epp.pick);
    expect(epp.running.output()).toContain("watching endpoints file for changes");
    const file = path.join(epp.dir, "endpoints.yaml");
    const destinations = async () => new Set((await epp.picks(4)).map((p) => p.destination));

    replaceFile(
      file,
      endpointsFile(ADDRESS, [
        { name: "b", port: "8001" },
        { name: "c", port: "8002" },
      ]),
    );
    await untilOutput(epp.running, /endpoints file changed, reloading/, 1);
    expect(await destinations()).toEqual(new Set([`${ADDRESS}:8001`, `${ADDRESS}:8002`]));

    replaceFile(file, "endpoints:\n- {name: d, address: 10.0.0.1, port: 8003}\n");
    await untilOutput(epp.running, /failed to reload endpoints file/, 1);
    expect(await destinations()).toEqual(new Set([`${ADDRESS}:8001`, `${ADDRESS}:8002`]));

    replaceFile(
      file,
      endpointsFile(ADDRESS, [
        { name: "b", port: "8001" },
        { name: "e", address: "::1", port: "8004" },
      ]),
    );
    await untilOutput(epp.running, /failed to reload endpoints file/, 2);
    expect(await destinations()).toEqual(new Set([`${ADDRESS}:8001`]));
    expect(await epp.readyEndpoints()).toBe(1);
  });

  it("misses no rename that comes right after another: after each burst it holds the last file's endpoints", async () => {
    const epp = await startEpp(aggregatedEppConfig(), endpointsFile(ADDRESS, [{ name: "a", port: "8000" }]));
    await untilListening(epp.running, epp.pick);
    const file = path.join(epp.dir, "endpoints.yaml");
    const set = (n: number) =>
      endpointsFile(
        ADDRESS,
        Array.from({ length: n }, (_, i) => ({ name: `e${i}`, port: String(8000 + i) })),
      );
    for (let burst = 0; burst < 20; burst++) {
      // Back to back, as drains of several ranks and the agent's own writes may come.
      for (let i = 0; i < 10; i++) replaceFile(file, set(1 + ((burst + i) % 4)));
      const last = 1 + ((burst + 9) % 4);
      const deadline = Date.now() + 3000;
      while ((await epp.readyEndpoints()) !== last) {
        if (Date.now() > deadline) throw new Error(`burst ${burst}: ${await epp.readyEndpoints()} endpoints, not the last file's ${last}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });

  it("with a disagg-profile-handler, picks a decode endpoint and names a prefill one in x-prefiller-host-port", async () => {
    const file = endpointsFile(ADDRESS, [
      { name: "prefill-0", port: "8000", role: "prefill" },
      { name: "decode-0", port: "8100", role: "decode" },
      { name: "decode-1", port: "8101", role: "decode" },
    ]);
    const epp = await startEpp(disaggregatedEppConfig(), file);
    await untilListening(epp.running, epp.pick);
    const picks = await epp.picks(4);
    expect(picks.map((p) => p.destination)).toEqual([`${ADDRESS}:8100`, `${ADDRESS}:8101`, `${ADDRESS}:8100`, `${ADDRESS}:8101`]);
    expect(new Set(picks.map((p) => p.prefiller))).toEqual(new Set([`${ADDRESS}:8000`]));

    replaceFile(path.join(epp.dir, "endpoints.yaml"), endpointsFile(ADDRESS, [{ name: "prefill-0", port: "8000", role: "prefill" }]));
    await untilOutput(epp.running, /endpoints file changed, reloading/);
    expect((await epp.picks(1))[0]!.status).toBe(503);
  });

  it("holds a ?stream pick open until the caller closes it; on SIGTERM closes its listeners at once, lets the open stream end, then exits", async () => {
    const epp = await startEpp(aggregatedEppConfig(), endpointsFile(ADDRESS, [{ name: "a", port: "8000" }]));
    await untilListening(epp.running, epp.pick);
    const stream = await fetch(`http://${ADDRESS}:${epp.pick}/stand-in/pick?stream`);
    expect(stream.headers.get("x-gateway-destination-endpoint")).toBe(`${ADDRESS}:8000`);
    const reader = stream.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes(".")) text += decoder.decode((await reader.read()).value);
    expect(JSON.parse(text.slice(0, text.indexOf("\n")))).toEqual({ "x-gateway-destination-endpoint": `${ADDRESS}:8000` });
    process.kill(epp.running.child.pid!, "SIGTERM");
    await untilOutput(epp.running, /stopping: listeners closed; waiting for the open streams/);
    expect(await isListening(epp.pick)).toBe(false);
    expect(await isListening(epp.health)).toBe(false);
    // Still open: the stream goes on until its caller ends it.
    expect((await reader.read()).done).toBe(false);
    expect(epp.running.child.exitCode).toBeNull();
    await reader.cancel();
    expect(await epp.running.exited).toEqual({ code: 0, signal: null });
  });

  it("refuses an unknown flag (2), TLS serving it cannot do (2), a start without --pool-name (1); ends at once on SIGTERM without streams", async () => {
    const unknown = await startEpp(aggregatedEppConfig(), "", ["--drain-period=5s"]);
    expect((await unknown.running.exited).code).toBe(2);
    const tls = await startEpp(aggregatedEppConfig(), "", ["--secure-serving=true"]);
    expect((await tls.running.exited).code).toBe(2);
    expect(tls.running.output()).toContain("not implemented by this stand-in");
    const noPool = await startEpp(aggregatedEppConfig(), "", ["--pool-name="]);
    expect((await noPool.running.exited).code).toBe(1);

    const epp = await startEpp(aggregatedEppConfig(), "");
    await untilListening(epp.running, epp.pick);
    process.kill(epp.running.child.pid!, "SIGTERM");
    expect(await epp.running.exited).toEqual({ code: 0, signal: null });
  });
});

// --- Envoy -------------------------------------------------------------------------------------------

interface FrontDoor {
  epp: Epp;
  envoy: Running;
  url: string;
  admin: number;
}

/** The EPP and Envoy stand-ins as the router host runs them, in front of `endpoints`; with `apiKey`, its filter config beside the bootstrap. */
async function startFrontDoor(endpoints: string, requestTimeoutSeconds?: number, apiKey?: string): Promise<FrontDoor & { dir: string }> {
  const epp = await startEpp(aggregatedEppConfig(), endpoints);
  await untilListening(epp.running, epp.pick);
  const dir = fs.mkdtempSync(path.join(work, "envoy-"));
  const [listen, admin] = [await freePort(ADDRESS), await freePort(ADDRESS)];
  const text = frontDoorBootstrap({ listen, admin, pick: epp.pick }, requestTimeoutSeconds, apiKey === undefined ? undefined : "/etc/envoy/api-key.json");
  expect(validateEnvoyBootstrap(text)).toEqual([]);
  fs.writeFileSync(path.join(dir, "envoy.yaml"), text);
  if (apiKey !== undefined) fs.writeFileSync(path.join(dir, "api-key.json"), apiKeyFilterConfig(apiKey));
  const envoy = runContainer(`envoy-${path.basename(dir)}`, ["--network", "host", "--volume", `${dir}:/etc/envoy:ro,z`], ENVOY_IMAGE, [
    "-c",
    "/etc/envoy/envoy.yaml",
    "--log-level",
    "info",
  ]);
  await untilListening(envoy, listen);
  return { epp, envoy, url: `http://${ADDRESS}:${listen}`, admin, dir };
}

describe("envoy-stand-in", () => {
  it("proxies each request, whole, to the endpoint the picker names, with the picker's headers, and passes the answer back", async () => {
    const answer = (port: () => number) => (_: Recorded, res: http.ServerResponse) =>
      res.writeHead(201, { "content-type": "application/json", "x-upstream": String(port()) }).end(JSON.stringify({ from: port() }));
    const a = await upstream(answer(() => a.port));
    const b = await upstream(answer(() => b.port));
    const door = await startFrontDoor(
      endpointsFile(
        ADDRESS,
        [
          { name: "a", port: a.port },
          { name: "b", port: b.port },
        ].map((e) => ({ ...e, port: String(e.port) })),
      ),
    );
    const froms = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${door.url}/v1/completions?n=${i}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-test": "yes" },
        body: JSON.stringify({ prompt: "p", i }),
      });
      expect(response.status).toBe(201);
      const body = (await response.json()) as { from: number };
      expect(response.headers.get("x-upstream")).toBe(String(body.from));
      froms.push(body.from);
    }
    expect(froms).toEqual([a.port, b.port, a.port, b.port]);
    for (const server of [a, b]) {
      expect(server.requests).toHaveLength(2);
      for (const request of server.requests) {
        expect(request.method).toBe("POST");
        expect(request.url).toMatch(/^\/v1\/completions\?n=\d$/);
        expect(JSON.parse(request.body).prompt).toBe("p");
        expect(request.headers["x-test"]).toBe("yes");
        expect(request.headers["x-gateway-destination-endpoint"]).toBe(`${ADDRESS}:${server.port}`);
      }
    }
    expect(await (await fetch(`http://${ADDRESS}:${door.admin}/ready`)).text()).toBe("LIVE\n");
    await Promise.all([a.close(), b.close()]);
  });

  it("removes a client's own x-prefiller-host-port and destination header before the picker's are added", async () => {
    const a = await upstream((_, res) => res.writeHead(200).end("a"));
    const elsewhere = await upstream((_, res) => res.writeHead(200).end("elsewhere"));
    const door = await startFrontDoor(endpointsFile(ADDRESS, [{ name: "a", port: String(a.port) }]));
    const response = await fetch(`${door.url}/v1/completions`, {
      method: "POST",
      headers: { "x-prefiller-host-port": `${ADDRESS}:${elsewhere.port}`, "x-gateway-destination-endpoint": `${ADDRESS}:${elsewhere.port}` },
      body: "{}",
    });
    expect(await response.text()).toBe("a");
    expect(a.requests[0]!.headers["x-prefiller-host-port"]).toBeUndefined();
    expect(a.requests[0]!.headers["x-gateway-destination-endpoint"]).toBe(`${ADDRESS}:${a.port}`);
    expect(elsewhere.requests).toEqual([]);
    await Promise.all([a.close(), elsewhere.close()]);
  });

  it("with the API key filter read from its file: 401 without the key on every path, the request passed on with it; 500 while the file cannot be used", async () => {
    const KEY = 'k3y with spaces, quotes " and $igns';
    const a = await upstream((_, res) => res.writeHead(200).end("a"));
    const door = await startFrontDoor(endpointsFile(ADDRESS, [{ name: "a", port: String(a.port) }]), undefined, KEY);
    const ask = (pathname: string, authorization?: string) =>
      fetch(`${door.url}${pathname}`, {
        method: pathname === "/v1/models" ? "GET" : "POST",
        headers: authorization ? { authorization } : {},
        body: pathname === "/v1/models" ? undefined : "{}",
      });
    for (const pathname of ["/v1/models", "/invocations", "/health", "/anything"]) {
      for (const authorization of [undefined, "Bearer wrong", `bearer ${KEY}`, KEY.slice(0, -1)]) {
        const refused = await ask(pathname, authorization);
        expect(refused.status, `${pathname} ${authorization}`).toBe(401);
        expect(await refused.text()).toBe("Client authentication failed.");
      }
      expect((await ask(pathname, `Bearer ${KEY}`)).status, pathname).toBe(200);
    }
    expect(a.requests.map((r) => [r.url, r.headers.authorization])).toEqual(
      ["/v1/models", "/invocations", "/health", "/anything"].map((p) => [p, `Bearer ${KEY}`]),
    );
    // Read as Envoy reloads it: a new key holds at once; a file it cannot use leaves the filter without config.
    fs.writeFileSync(path.join(door.dir, "api-key.json"), apiKeyFilterConfig("new"));
    expect((await ask("/v1/models", `Bearer ${KEY}`)).status).toBe(401);
    expect((await ask("/v1/models", "Bearer new")).status).toBe(200);
    fs.writeFileSync(path.join(door.dir, "api-key.json"), "{");
    expect((await ask("/v1/models", "Bearer new")).status).toBe(500);
    fs.rmSync(path.join(door.dir, "api-key.json"));
    expect((await ask("/v1/models", "Bearer new")).status).toBe(500);
    await a.close();
  });

  it("passes a streamed answer through piece by piece", async () => {
    let proceed!: () => void;
    const firstRead = new Promise<void>((resolve) => (proceed = resolve));
    const server = await upstream(async (_, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
      await firstRead; // the client must have the first event before the second is written
      res.end("data: [DONE]\n\n");
    });
    const door = await startFrontDoor(endpointsFile(ADDRESS, [{ name: "a", port: String(server.port) }]));
    const response = await fetch(`${door.url}/v1/completions`, { method: "POST", body: "{}", signal: AbortSignal.timeout(10_000) });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value);
    expect(text).toBe("data: first\n\n");
    proceed();
    for (let part = await reader.read(); !part.done; part = await reader.read()) text += decoder.decode(part.value);
    expect(text).toBe("data: first\n\ndata: [DONE]\n\n");
    await server.close();
  });

  it("answers 503 when the picker has no endpoint or the endpoint refuses (no retry), status_on_error when the picker is gone", async () => {
    const alive = await upstream(json(200, { ok: true }));
    const deadPort = await freePort(ADDRESS);
    const door = await startFrontDoor(
      endpointsFile(ADDRESS, [
        { name: "alive", port: String(alive.port) },
        { name: "dead", port: String(deadPort) },
      ]),
    );
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${door.url}/v1/models`);
      statuses.push([response.status, (await response.text()).slice(0, 40)]);
    }
    expect(statuses).toEqual([
      [200, '{"ok":true}'],
      [503, "upstream connect error or disconnect/res"],
      [200, '{"ok":true}'],
      [503, "upstream connect error or disconnect/res"],
    ]);
    expect(alive.requests).toHaveLength(2);

    replaceFile(path.join(door.epp.dir, "endpoints.yaml"), "endpoints: []\n");
    await untilOutput(door.epp.running, /endpoints file changed, reloading/);
    expect((await fetch(`${door.url}/v1/models`)).status).toBe(503);

    process.kill(door.epp.running.child.pid!, "SIGTERM");
    await door.epp.running.exited;
    expect((await fetch(`${door.url}/v1/models`)).status).toBe(500);
    await alive.close();
  });

  it("answers 504 when the route timeout passes before the answer, cuts an answer the timeout interrupts, and ends at once on SIGTERM", async () => {
    const silent = await upstream(() => undefined);
    const stalls = await upstream((_, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
    });
    const door = await startFrontDoor(
      endpointsFile(ADDRESS, [
        { name: "silent", port: String(silent.port) },
        { name: "stalls", port: String(stalls.port) },
      ]),
      1,
    );
    const timedOut = await fetch(`${door.url}/v1/completions`, { method: "POST", body: "{}" });
    expect([timedOut.status, await timedOut.text()]).toEqual([504, "upstream request timeout"]);
    const cut = await fetch(`${door.url}/v1/completions`, { method: "POST", body: "{}" });
    expect(cut.status).toBe(200);
    await expect(cut.text()).rejects.toThrow();

    const inFlight = outcome(fetch(`${door.url}/v1/completions`, { method: "POST", body: "{}" }));
    await new Promise((r) => setTimeout(r, 200));
    process.kill(door.envoy.child.pid!, "SIGTERM");
    expect(await door.envoy.exited).toEqual({ code: 0, signal: null });
    expect(await inFlight).toBe("failed");
    await Promise.all([silent.close(), stalls.close()]);
  });

  it("refuses flags it does not implement", () => {
    expect(
      runtime("run", "--rm", "--name", "envoy-flags", "--pull", "never", "--network", "host", ENVOY_IMAGE, "-c", "/nonexistent.yaml", "--concurrency", "8"),
    ).toMatchObject({
      status: 2,
      stderr: expect.stringContaining("not implemented by this stand-in"),
    });
  });

  it("refuses an HTTP filter it does not implement, and an api_key_auth option it does not, rather than pass requests it would not", async () => {
    const dir = fs.mkdtempSync(path.join(work, "envoy-filters-"));
    const text = frontDoorBootstrap({ listen: await freePort(ADDRESS), admin: await freePort(ADDRESS), pick: 1 });
    const start = (bootstrap: string) => {
      fs.writeFileSync(path.join(dir, "envoy.yaml"), bootstrap);
      return runtime(
        "run",
        "--rm",
        "--name",
        `envoy-filters-${Date.now()}`,
        "--pull",
        "never",
        "--network",
        "host",
        "--volume",
        `${dir}:/etc/envoy:ro`,
        ENVOY_IMAGE,
        "-c",
        "/etc/envoy/envoy.yaml",
      );
    };
    const withFilter = (filter: Record<string, unknown>) => {
      const bootstrap = parseYaml(text);
      bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters.unshift(filter);
      return stringifyYaml(bootstrap);
    };
    expect(
      start(withFilter({ name: "envoy.filters.http.cors", typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors" } })),
    ).toMatchObject({
      status: 2,
      stderr: expect.stringContaining("the filter envoy.extensions.filters.http.cors.v3.Cors"),
    });
    // A Lua filter whose header change would not reach the route (no clear_route_cache), or a script of another shape.
    const lua = (config: Record<string, unknown>) => ({
      name: "envoy.filters.http.lua",
      typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua", ...config },
    });
    expect(start(withFilter(lua({ default_source_code: { inline_string: modelHeaderScript() } })))).toMatchObject({
      status: 2,
      stderr: expect.stringContaining("a Lua filter without clear_route_cache"),
    });
    expect(start(withFilter(lua({ default_source_code: { inline_string: "function envoy_on_request(h) end" }, clear_route_cache: true })))).toMatchObject({
      status: 2,
      stderr: expect.stringContaining("a Lua script other than one that reads `local NAMESPACE` and sets `local HEADER`"),
    });
    const withKey = frontDoorBootstrap({ listen: await freePort(ADDRESS), admin: await freePort(ADDRESS), pick: 1 }, 3600, "/etc/envoy/api-key.json");
    const config = JSON.parse(apiKeyFilterConfig("k"));
    config.resources[0].typed_config.forwarding = { header: "x-client" };
    fs.writeFileSync(path.join(dir, "api-key.json"), JSON.stringify(config));
    expect(start(withKey)).toMatchObject({ status: 2, stderr: expect.stringContaining("api_key_auth other than credentials and key_sources") });
  });
});

// --- a front door of several models --------------------------------------------------------------------

/** Two models' upstreams (each answering with its name) and an EPP of each, picking it, listening. */
async function startModelPickers() {
  const chat = await upstream(json(200, { from: "chat" }));
  const tiny = await upstream(json(200, { from: "tiny" }));
  const epps = [await startEpp(aggregatedEppConfig(), endpointsFile(ADDRESS, [{ name: "c", port: String(chat.port) }]))];
  epps.push(await startEpp(aggregatedEppConfig(), endpointsFile(ADDRESS, [{ name: "t", port: String(tiny.port) }])));
  for (const epp of epps) await untilListening(epp.running, epp.pick);
  return { chat, tiny, epps };
}

/** An Envoy stand-in with a stack of models' files as core renders them (modelsEnvoy): the bootstrap, its routes and its clusters. */
async function startModelsEnvoy(doors: readonly ModelDoor[], listen: number, admin: number) {
  const dir = fs.mkdtempSync(path.join(work, "envoy-models-"));
  const files = modelsEnvoy({
    listenAddress: "0.0.0.0",
    port: listen,
    adminPort: admin,
    requestTimeoutSeconds: 60,
    models: doors,
    routesPath: "/etc/envoy/routes.yaml",
    clustersPath: "/etc/envoy/clusters.yaml",
  });
  expect(validateEnvoyWithDiscovery(files)).toEqual([]);
  fs.writeFileSync(path.join(dir, "envoy.yaml"), files.bootstrap);
  fs.writeFileSync(path.join(dir, "routes.yaml"), files.routes);
  fs.writeFileSync(path.join(dir, "clusters.yaml"), files.clusters);
  const envoy = runContainer(`envoy-${path.basename(dir)}`, ["--network", "host", "--volume", `${dir}:/etc/envoy:ro,z`], ENVOY_IMAGE, [
    "-c",
    "/etc/envoy/envoy.yaml",
  ]);
  await untilListening(envoy, listen);
  return { envoy, dir, files };
}

/** The listener and admin of a rendered bootstrap of models, to render the same Envoy with other models. */
function parseEnvoyInput(bootstrap: string) {
  const parsed = parseYaml(bootstrap);
  const manager = parsed.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  return {
    listenAddress: parsed.static_resources.listeners[0].address.socket_address.address as string,
    port: parsed.static_resources.listeners[0].address.socket_address.port_value as number,
    adminPort: parsed.admin.address.socket_address.port_value as number,
    requestTimeoutSeconds: Number.parseInt(manager.stream_idle_timeout, 10),
    routesPath: manager.rds.config_source.path_config_source.path as string,
    clustersPath: parsed.dynamic_resources.cds_config.path_config_source.path as string,
  };
}

/** Puts a file as the apply step does: written beside, then moved into place (the move is what Envoy watches). */
function moveIntoPlace(file: string, text: string): void {
  fs.writeFileSync(`${file}.new`, text);
  fs.renameSync(`${file}.new`, file);
}

describe("envoy-stand-in in a front door of several models", () => {
  it("routes every request as the rendered config says, by the rules test/helpers/envoyModelRouting.ts reads from Envoy v1.37", async () => {
    const { chat, tiny, epps } = await startModelPickers();
    const doors: ModelDoor[] = [
      {
        name: "chat",
        servedNames: ["MiniMaxAI/MiniMax-M2.7", "minimax"],
        eppCluster: eppClusterName("chat"),
        eppGrpcPort: epps[0]!.pick,
        eppHealthPort: epps[0]!.health,
      },
      { name: "tiny", servedNames: ["tiny-chat"], eppCluster: eppClusterName("tiny"), eppGrpcPort: epps[1]!.pick, eppHealthPort: epps[1]!.health },
    ];
    const [listen, admin] = [await freePort(ADDRESS), await freePort(ADDRESS)];
    const { files } = await startModelsEnvoy(doors, listen, admin);
    const text = withDiscovered(files);
    const post = (body: string, headers: Record<string, string> = { "content-type": "application/json" }, pathname = "/v1/chat/completions") =>
      ({ method: "POST", path: pathname, headers, body }) as EnvoyRequest;
    const requests: EnvoyRequest[] = [
      post(JSON.stringify({ model: "MiniMaxAI/MiniMax-M2.7", messages: [] })),
      post(JSON.stringify({ model: "minimax", prompt: "p" }), { "content-type": "application/json; charset=utf-8" }, "/v1/completions"),
      post(JSON.stringify({ model: "tiny-chat", messages: [{ role: "user", content: '{"model": "minimax"}' }] })),
      post(JSON.stringify({ model: "tiny-chat" }), {}),
      post(JSON.stringify({ model: "tiny-chat" }), { "content-type": "application/json", "x-gateway-base-model-name": "minimax" }),
      post(JSON.stringify({ messages: [] }), { "content-type": "application/json", "x-gateway-base-model-name": "minimax" }),
      post(JSON.stringify({ model: "unknown" })),
      post(JSON.stringify({ model: 7 })),
      post(JSON.stringify({ model: "tiny chat" })),
      post(JSON.stringify({ tools: [{ model: "minimax" }] })),
      post("not json"),
      post(JSON.stringify({ model: "minimax" }), { "content-type": "text/plain" }),
      post(JSON.stringify([{ model: "minimax" }])),
      { method: "GET", path: "/v1/models", headers: {} },
      { method: "GET", path: "/v1/models?x=1", headers: {} },
      post(JSON.stringify({ model: "minimax" }), { "content-type": "application/json" }, "/v1/models"),
      { method: "GET", path: "/health", headers: {} },
    ];
    const expected = routeThroughFrontDoor(text, requests);
    for (const [i, request] of requests.entries()) {
      // Bytes, not text: fetch gives text a content type of its own, and a request without one is a case here.
      const bytes = request.body === undefined ? undefined : new TextEncoder().encode(request.body);
      const response = await fetch(`http://${ADDRESS}:${listen}${request.path}`, { method: request.method, headers: request.headers, body: bytes });
      const body = await response.text();
      const want = expected[i]!;
      if ("status" in want) {
        expect([response.status, body], `request ${i}`).toEqual([want.status, want.body]);
        if (want.body) expect(response.headers.get("content-type"), `request ${i}`).toBe("application/json");
      } else expect([response.status, JSON.parse(body).from], `request ${i}`).toEqual([200, want.eppCluster === "epp-chat" ? "chat" : "tiny"]);
    }
    // Every route of the rules was taken: each model's EPP, the list of names, the 404.
    expect(new Set(expected.map((o) => ("status" in o ? o.status : o.eppCluster)))).toEqual(new Set(["epp-chat", "epp-tiny", 200, 404]));
    await Promise.all([chat.close(), tiny.close()]);
  });
});

describe("envoy-stand-in's routes and clusters from files (RDS and CDS from a path_config_source)", () => {
  it("takes a file moved into place, not one written in place; keeps the last one when a file is unusable; /config_dump shows what it runs", async () => {
    const { chat, tiny, epps } = await startModelPickers();
    const door = (name: string, served: string, i: number): ModelDoor => ({
      name,
      servedNames: [served],
      eppCluster: eppClusterName(name),
      eppGrpcPort: epps[i]!.pick,
      eppHealthPort: epps[i]!.health,
    });
    const [listen, admin] = [await freePort(ADDRESS), await freePort(ADDRESS)];
    const { dir, files } = await startModelsEnvoy([door("chat", "minimax", 0)], listen, admin);
    const both = modelsEnvoy({ ...parseEnvoyInput(files.bootstrap), models: [door("chat", "minimax", 0), door("tiny", "tiny-chat", 1)] });
    const ask = async (model: string) => {
      const response = await fetch(`http://${ADDRESS}:${listen}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model }),
      });
      return `${response.status} ${response.status === 200 ? JSON.parse(await response.text()).from : ""}`;
    };
    const dump = async (resource: string) =>
      ((await (await fetch(`http://${ADDRESS}:${admin}/config_dump?resource=${resource}`)).json()) as { configs: any[] }).configs;
    const version = (text: string) => parseYaml(text).version_info as string;
    expect(await ask("tiny-chat")).toBe("404 ");
    expect((await dump("dynamic_route_configs")).map((c) => c.version_info)).toEqual([version(files.routes)]);

    // Written in place: Envoy watches moves only, and runs what it ran.
    fs.writeFileSync(path.join(dir, "clusters.yaml"), both.clusters);
    fs.writeFileSync(path.join(dir, "routes.yaml"), both.routes);
    await new Promise((r) => setTimeout(r, 500));
    expect(await ask("tiny-chat")).toBe("404 ");

    // Moved into place: the clusters, then the routes; chat's requests go on between.
    moveIntoPlace(path.join(dir, "clusters.yaml"), both.clusters);
    await expect.poll(async () => (await dump("dynamic_active_clusters")).map((c) => c.cluster.name), { timeout: 5000 }).toEqual(["epp-chat", "epp-tiny"]);
    expect(await ask("minimax")).toBe("200 chat");
    moveIntoPlace(path.join(dir, "routes.yaml"), both.routes);
    await expect.poll(async () => (await dump("dynamic_route_configs")).map((c) => c.version_info), { timeout: 5000 }).toEqual([version(both.routes)]);
    expect([await ask("tiny-chat"), await ask("minimax")]).toEqual(["200 tiny", "200 chat"]);
    // A cluster whose config did not change keeps the version of the file that brought it.
    expect((await dump("dynamic_active_clusters")).map((c) => c.version_info)).toEqual([version(files.clusters), version(both.clusters)]);

    // An unusable file is rejected: the last routes stay.
    moveIntoPlace(path.join(dir, "routes.yaml"), "version_info: broken\nresources: [{name: front-door}]\n");
    await new Promise((r) => setTimeout(r, 500));
    expect((await dump("dynamic_route_configs")).map((c) => c.version_info)).toEqual([version(both.routes)]);
    expect(await ask("tiny-chat")).toBe("200 tiny");

    // Routes to a cluster CDS took away: ext_proc finds no cluster for the stream, and answers status_on_error.
    moveIntoPlace(path.join(dir, "routes.yaml"), both.routes.replace("broken", "x"));
    moveIntoPlace(path.join(dir, "clusters.yaml"), files.clusters);
    await expect.poll(async () => (await dump("dynamic_active_clusters")).map((c) => c.cluster.name), { timeout: 5000 }).toEqual(["epp-chat"]);
    expect([await ask("tiny-chat"), await ask("minimax")]).toEqual(["500 ", "200 chat"]);
    await Promise.all([chat.close(), tiny.close()]);
  });
});

describe("envoy-stand-in in a front door of two router hosts carrying two models", () => {
  it("asks each model's own EPP, and once one is killed that model's EPP on the peer (by its authority), the other model's staying home", async () => {
    const names = ["door-a", "door-b"] as const;
    const models = ["chat", "tiny"] as const;
    // An upstream per router host and model, naming both in its answer; an EPP per router host and model, picking it.
    const upstreams = await Promise.all(names.flatMap((door) => models.map((model) => namedUpstream(`${model}@${door}`))));
    const epps: Epp[] = [];
    for (const [i] of upstreams.entries())
      epps.push(await startEpp(aggregatedEppConfig(), endpointsFile(ADDRESS, [{ name: "u", port: String(upstreams[i]!.port) }])));
    for (const epp of epps) await untilListening(epp.running, epp.pick);
    const ports = await Promise.all(
      names.map(async () => ({ listen: await freePort(ADDRESS), admin: await freePort(ADDRESS), peer: await freePort(ADDRESS) })),
    );
    const dirs = names.map(() => fs.mkdtempSync(path.join(work, "router-models-")));
    writeRouterTls(fs.mkdtempSync(path.join(work, "issuer-")), { [names[0]]: dirs[0]!, [names[1]]: dirs[1]! });
    const doors = names.map((name, i) => {
      const peer = (k: number) => ({ name: names[k]!, address: ADDRESS, port: ports[k]!.peer });
      const files = modelsEnvoy({
        listenAddress: ADDRESS,
        port: ports[i]!.listen,
        adminPort: ports[i]!.admin,
        requestTimeoutSeconds: 60,
        models: models.map((model, m) => ({
          name: model,
          servedNames: [model],
          eppCluster: eppClusterName(model),
          eppGrpcPort: epps[2 * i + m]!.pick,
          eppHealthPort: epps[2 * i + m]!.health,
        })),
        routesPath: "/etc/envoy/routes.yaml",
        clustersPath: "/etc/envoy/clusters.yaml",
        failover: { self: peer(i), peers: [peer(1 - i)], tlsDir: "/etc/envoy/tls", peerRoutesPath: "/etc/envoy/peer-routes.yaml" },
      });
      expect(validateEnvoyWithDiscovery(files)).toEqual([]);
      // The health checks every second, not every 5 s, so the test is short.
      const clusters = files.clusters.replaceAll("interval: 5s", "interval: 1s");
      for (const [file, text] of Object.entries({
        "envoy.yaml": files.bootstrap,
        "routes.yaml": files.routes,
        "clusters.yaml": clusters,
        "peer-routes.yaml": files.peerRoutes!,
      }))
        fs.writeFileSync(path.join(dirs[i]!, file), text);
      const envoy = runContainer(`envoy-${name}-${path.basename(dirs[i]!)}`, ["--network", "host", "--volume", `${dirs[i]}:/etc/envoy:ro,z`], ENVOY_IMAGE, [
        "-c",
        "/etc/envoy/envoy.yaml",
      ]);
      return { envoy, url: `http://${ADDRESS}:${ports[i]!.listen}`, admin: ports[i]!.admin };
    });
    for (const door of doors) await untilListening(door.envoy, Number(new URL(door.url).port));
    const healthy = async (door: (typeof doors)[number]) =>
      (await (await fetch(`http://${ADDRESS}:${door.admin}/clusters`)).text()).split("\n").filter((l) => /^epp-(chat|tiny)::.*::health_flags::healthy$/.test(l))
        .length;
    for (const door of doors) await expect.poll(() => healthy(door), { timeout: 15_000 }).toBe(4);
    const ask = async (model: string) => {
      const response = await fetch(`${doors[0]!.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model }),
      });
      return `${response.status} ${await response.text()}`;
    };
    expect([await ask("chat"), await ask("tiny")]).toEqual(["200 chat@door-a", "200 tiny@door-a"]);
    // door-a's EPP of tiny dies: tiny's requests go to door-b's EPP of tiny (and so its endpoint), chat's stay home.
    process.kill(programPid(epps[1]!), "SIGKILL");
    await expect.poll(() => ask("tiny"), { timeout: 15_000 }).toBe("200 tiny@door-b");
    const after = await Promise.all(Array.from({ length: 10 }, (_, k) => ask(k % 2 ? "tiny" : "chat")));
    expect(after).toEqual(Array.from({ length: 10 }, (_, k) => (k % 2 ? "200 tiny@door-b" : "200 chat@door-a")));
    await Promise.all(upstreams.map((u) => u.close()));
  });
});

// --- a front door of two router hosts ------------------------------------------------------------------

interface RouterDoor {
  name: string;
  epp: Epp;
  envoy: Running;
  url: string;
  admin: number;
  peer: number;
  dir: string;
}

/**
 * Two router hosts as core renders them (failoverBootstrap): each Envoy with its own EPP at priority 0
 * and the other's at priority 1 through the other's Envoy over mutual TLS (the stack's certificates,
 * made by front-door-tls.sh), health checks every `interval` seconds. Returns once each Envoy sees both
 * EPPs healthy.
 */
async function startRouterPair(endpoints: [string, string], interval = 1, drainSeconds = 1): Promise<[RouterDoor, RouterDoor]> {
  const names = ["door-a", "door-b"];
  const epps = await Promise.all(endpoints.map((file) => startEpp(aggregatedEppConfig(), file)));
  for (const epp of epps) await untilListening(epp.running, epp.pick);
  const ports = await Promise.all(names.map(async () => ({ listen: await freePort(ADDRESS), admin: await freePort(ADDRESS), peer: await freePort(ADDRESS) })));
  const dirs = names.map(() => fs.mkdtempSync(path.join(work, "router-")));
  writeRouterTls(fs.mkdtempSync(path.join(work, "issuer-")), { [names[0]!]: dirs[0]!, [names[1]!]: dirs[1]! });
  const doors = names.map((name, i) => {
    const other = 1 - i;
    const text = failoverBootstrap(
      { listen: ports[i]!.listen, admin: ports[i]!.admin, pick: epps[i]!.pick, health: epps[i]!.health },
      { name, address: ADDRESS, port: ports[i]!.peer },
      { name: names[other]!, address: ADDRESS, port: ports[other]!.peer },
      interval,
    );
    expect(validateEnvoyBootstrap(text)).toEqual([]);
    fs.writeFileSync(path.join(dirs[i]!, "envoy.yaml"), text);
    const envoy = runContainer(`envoy-${name}-${path.basename(dirs[i]!)}`, ["--network", "host", "--volume", `${dirs[i]}:/etc/envoy:ro,z`], ENVOY_IMAGE, [
      "-c",
      "/etc/envoy/envoy.yaml",
      "--drain-time-s",
      String(drainSeconds),
      "--drain-strategy",
      "immediate",
    ]);
    return { name, epp: epps[i]!, envoy, url: `http://${ADDRESS}:${ports[i]!.listen}`, admin: ports[i]!.admin, peer: ports[i]!.peer, dir: dirs[i]! };
  });
  for (const door of doors) await untilListening(door.envoy, Number(new URL(door.url).port));
  for (const door of doors) await untilClusters(door, (lines) => lines.filter((l) => l.endsWith("::health_flags::healthy")).length === 2);
  return doors as [RouterDoor, RouterDoor];
}

/** The admin's /clusters lines of the EPP cluster. */
async function eppClusters(door: RouterDoor): Promise<string[]> {
  return (await (await fetch(`http://${ADDRESS}:${door.admin}/clusters`)).text()).split("\n").filter((l) => l.startsWith("epp::"));
}

async function untilClusters(door: RouterDoor, done: (lines: string[]) => boolean, seconds = 30): Promise<string[]> {
  for (const deadline = Date.now() + seconds * 1000; ; await new Promise((r) => setTimeout(r, 100))) {
    const lines = await eppClusters(door).catch(() => []);
    if (done(lines)) return lines;
    if (Date.now() > deadline) throw new Error(`${door.name}'s EPP cluster: ${lines.join(", ")}`);
  }
}

/** An upstream that names itself in every answer, after `delay` ms on /slow. */
async function namedUpstream(name: string) {
  return upstream(async (request, res) => {
    if (request.url === "/slow") await new Promise((r) => setTimeout(r, 1500));
    res.writeHead(200, { "content-type": "text/plain" }).end(name);
  });
}

const programPid = (epp: Epp) => JSON.parse(fs.readFileSync(path.join(state, "containers", `epp-${path.basename(epp.dir)}.json`), "utf8")).pid as number;

describe("envoy-stand-in in a front door of two router hosts", () => {
  it("asks its own EPP (priority 0) while it serves, and once it is killed the peer's, through the peer's Envoy over mutual TLS: only the request in flight on it fails", async () => {
    const [a, b] = [await namedUpstream("a"), await namedUpstream("b")];
    const [doorA, doorB] = await startRouterPair([
      endpointsFile(ADDRESS, [{ name: "a", port: String(a.port) }]),
      endpointsFile(ADDRESS, [{ name: "b", port: String(b.port) }]),
    ]);
    const served = async (n: number) => Promise.all(Array.from({ length: n }, async () => await (await fetch(`${doorA.url}/x`)).text()));
    expect(await served(4)).toEqual(["a", "a", "a", "a"]);
    expect(await eppClusters(doorA)).toEqual([
      `epp::127.0.0.1:${doorA.epp.pick}::health_flags::healthy`,
      `epp::127.0.0.1:${doorA.epp.pick}::priority::0`,
      `epp::${ADDRESS}:${doorB.peer}::health_flags::healthy`,
      `epp::${ADDRESS}:${doorB.peer}::priority::1`,
    ]);
    const inFlight = fetch(`${doorA.url}/slow`).then(
      (r) => r.status,
      () => "cut",
    );
    await new Promise((r) => setTimeout(r, 300));
    process.kill(programPid(doorA.epp), "SIGKILL");
    await doorA.epp.running.exited;
    // Its ext_proc stream broke before the answer's headers: status_on_error.
    expect(await inFlight).toBe(500);
    // No wait for a health check: the refused stream is ejected and tried once more, on the peer's EPP.
    expect(await served(4)).toEqual(["b", "b", "b", "b"]);
    expect(doorA.envoy.output()).toMatch(/outlier detection: ejected.*"endpoint": "127\.0\.0\.1:\d+"/);
    expect((await eppClusters(doorA))[0]).toMatch(/::health_flags::.*\/failed_outlier_check/);
    await Promise.all([a.close(), b.close()]);
  });

  it("takes its own EPP back once that passes healthy_threshold checks in a row", async () => {
    const [a, b] = [await namedUpstream("a"), await namedUpstream("b")];
    const files: [string, string] = [
      endpointsFile(ADDRESS, [{ name: "a", port: String(a.port) }]),
      endpointsFile(ADDRESS, [{ name: "b", port: String(b.port) }]),
    ];
    const [doorA] = await startRouterPair(files);
    process.kill(programPid(doorA.epp), "SIGKILL");
    await doorA.epp.running.exited;
    await untilClusters(doorA, (lines) => lines[0]!.includes("/failed_active_hc"));
    expect(await (await fetch(`${doorA.url}/x`)).text()).toBe("b");
    const before = doorA.envoy.output().length;
    const again = await startEpp(aggregatedEppConfig(), files[0], [], doorA.epp);
    await untilListening(again.running, again.pick);
    await untilClusters(doorA, (lines) => lines[0]!.endsWith("::health_flags::healthy"));
    // healthy_threshold 3: the third passing check in a row, not the first.
    const local = `"endpoint": "127.0.0.1:${doorA.epp.pick}"`;
    const recovery = doorA.envoy
      .output()
      .slice(before)
      .split("\n")
      .filter((line) => line.includes(local) && line.includes("health check:"))
      .map((line) => /health check: ([^\t]*)/.exec(line)![1]);
    expect(recovery).toEqual(["passed, 1 of 3 to healthy", "passed, 2 of 3 to healthy", "healthy"]);
    expect(await (await fetch(`${doorA.url}/x`)).text()).toBe("a");
    await Promise.all([a.close(), b.close()]);
  });

  it("loses no request when its EPP stops (SIGTERM): the stream in flight runs to its end, the next ones go to the peer's", async () => {
    const [a, b] = [await namedUpstream("a"), await namedUpstream("b")];
    const [doorA] = await startRouterPair([
      endpointsFile(ADDRESS, [{ name: "a", port: String(a.port) }]),
      endpointsFile(ADDRESS, [{ name: "b", port: String(b.port) }]),
    ]);
    const inFlight = fetch(`${doorA.url}/slow`).then((r) => r.text());
    await new Promise((r) => setTimeout(r, 300));
    process.kill(programPid(doorA.epp), "SIGTERM");
    await untilOutput(doorA.epp.running, /stopping: listeners closed/);
    const after = await Promise.all(Array.from({ length: 4 }, async () => await (await fetch(`${doorA.url}/x`)).text()));
    expect(after).toEqual(["b", "b", "b", "b"]);
    expect(await inFlight).toBe("a");
    expect(await doorA.epp.running.exited).toEqual({ code: 0, signal: null });
    await Promise.all([a.close(), b.close()]);
  });

  it("serves its EPP to the peers only over TLS with a certificate of the stack's CA that names a peer", async () => {
    const a = await namedUpstream("a");
    const [doorA, doorB] = await startRouterPair([endpointsFile(ADDRESS, [{ name: "a", port: String(a.port) }]), endpointsFile(ADDRESS, [])]);
    const https = await import("node:https");
    const tls = (file: string) => fs.readFileSync(path.join(doorB.dir, "tls", file));
    const ask = (options: Record<string, unknown>) =>
      new Promise<string>((resolve) => {
        const request = https.request(
          {
            host: ADDRESS,
            port: doorA.peer,
            path: "/grpc.health.v1.Health/Check",
            ca: tls("ca.crt"),
            servername: "door-a",
            checkServerIdentity: () => undefined,
            ...options,
          },
          (response) => resolve(`answered ${response.statusCode}`),
        );
        request.on("error", (error) => resolve(`refused: ${error.message}`));
        request.end();
      });
    expect(await ask({ cert: tls("tls.crt"), key: tls("tls.key") })).toBe("answered 200");
    expect(await ask({})).toMatch(/^refused: /);
    // A certificate of the stack's CA for a name that is no peer of door-a's.
    const other = fs.mkdtempSync(path.join(work, "other-"));
    writeRouterTls(path.join(doorB.dir, "..", fs.readdirSync(path.join(doorB.dir, "..")).find((d) => d.startsWith("issuer-"))!), { "door-c": other });
    const c = (file: string) => fs.readFileSync(path.join(other, "tls", file));
    expect(await ask({ cert: c("tls.crt"), key: c("tls.key") })).toMatch(/^refused: /);
    await a.close();
  });

  it("drains as Envoy's admin says: /healthcheck/fail makes it not ready and asks clients to close; /drain_listeners?graceful&skip_exit closes its listeners after --drain-time-s, the request in flight runs on", async () => {
    const a = await namedUpstream("a");
    const [doorA] = await startRouterPair([endpointsFile(ADDRESS, [{ name: "a", port: String(a.port) }]), endpointsFile(ADDRESS, [])]);
    const admin = (method: string, at: string) => fetch(`http://${ADDRESS}:${doorA.admin}${at}`, { method });
    const active = async () => (await (await admin("GET", "/stats?filter=^http\\.front_door\\.downstream_rq_active$")).text()).trim();
    expect(await active()).toBe("http.front_door.downstream_rq_active: 0");
    expect((await fetch(`${doorA.url}/x`)).headers.get("connection")).not.toBe("close");
    expect((await admin("POST", "/healthcheck/fail")).status).toBe(200);
    expect([(await admin("GET", "/ready")).status, await (await admin("GET", "/ready")).text()]).toEqual([503, "DRAINING\n"]);
    expect((await fetch(`${doorA.url}/x`)).headers.get("connection")).toBe("close");
    const inFlight = fetch(`${doorA.url}/slow`).then((r) => r.text());
    await expect.poll(active, { timeout: 2000 }).toBe("http.front_door.downstream_rq_active: 1");
    expect((await admin("POST", "/drain_listeners?graceful&skip_exit")).status).toBe(200);
    expect((await admin("POST", "/drain_listeners")).status).toBe(501);
    await new Promise((r) => setTimeout(r, 1200));
    expect(await isListening(Number(new URL(doorA.url).port))).toBe(false);
    expect(await inFlight).toBe("a");
    // The stream ends on Envoy's side a moment after the client has read the whole response.
    await expect.poll(active, { timeout: 2000 }).toBe("http.front_door.downstream_rq_active: 0");
    await a.close();
  });
});

// --- the routing sidecar -----------------------------------------------------------------------------

/** `count` consecutive ports free on ADDRESS. */
async function freePorts(count: number): Promise<number> {
  for (;;) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    const free = await Promise.all(Array.from({ length: count }, (_, i) => isBindable(base + i)));
    if (free.every(Boolean)) return base;
  }
}

function isBindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = http.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, ADDRESS, () => server.close(() => resolve(true)));
  });
}

function startSidecar(port: number, modelServerPort: number, extra: string[] = [], ranks = 2): Running {
  return runContainer(`sidecar-${port}`, ["--network", "host"], SIDECAR_IMAGE, [
    `--port=${port}`,
    `--model-server-port=${modelServerPort}`,
    `--data-parallel-size=${ranks}`,
    "--kv-connector=nixlv2",
    "--secure-proxy=false",
    ...extra,
  ]);
}

describe("sidecar-stand-in", () => {
  it("forwards port+r to the model server's port+r on this host and answers /health itself", async () => {
    const [port, model] = [await freePorts(2), await freePorts(2)];
    const ranks = [await upstream(json(200, { rank: 0 }), model), await upstream(json(200, { rank: 1 }), model + 1)];
    const sidecar = startSidecar(port, model);
    await untilListening(sidecar, port + 1);
    expect(await (await fetch(`http://${ADDRESS}:${port}/v1/models`)).json()).toEqual({ rank: 0 });
    expect(await (await fetch(`http://${ADDRESS}:${port + 1}/metrics`)).json()).toEqual({ rank: 1 });
    expect((await fetch(`http://${ADDRESS}:${port}/health`)).status).toBe(200);
    expect(ranks.map((r) => r.requests.map((q) => q.url))).toEqual([["/v1/models"], ["/metrics"]]);
    await Promise.all(ranks.map((r) => r.close()));
  });

  it("sends the prefill request to x-prefiller-host-port first, then the decode request with its kv_transfer_params", async () => {
    const [port, model] = [await freePorts(1), await freePorts(1)];
    const prefill = await upstream(json(200, { kv_transfer_params: { remote_engine_id: "prefill-0", remote_block_ids: [1] } }));
    const decode = await upstream(json(200, { choices: [{ text: "done", finish_reason: "length" }] }), model);
    const sidecar = startSidecar(port, model, [], 1);
    await untilListening(sidecar, port);
    const ask = (prefiller: string) =>
      fetch(`http://${ADDRESS}:${port}/v1/completions`, {
        method: "POST",
        headers: { "x-prefiller-host-port": prefiller },
        body: JSON.stringify({ prompt: "p", max_tokens: 8, stream: true }),
      });
    expect((await ask(`${ADDRESS}:${prefill.port}`)).status).toBe(200);
    const sent = JSON.parse(prefill.requests[0]!.body);
    expect(sent).toMatchObject({ prompt: "p", max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false } });
    expect(JSON.parse(decode.requests[0]!.body)).toEqual({
      prompt: "p",
      max_tokens: 8,
      stream: true,
      kv_transfer_params: { remote_engine_id: "prefill-0", remote_block_ids: [1] },
    });

    const failing = await upstream(json(500, { error: "boom" }));
    expect((await ask(`${ADDRESS}:${failing.port}`)).status).toBe(500);
    expect(decode.requests).toHaveLength(1);
    await Promise.all([prefill.close(), decode.close(), failing.close()]);
  });

  it("exits at once on SIGTERM, its in-flight requests cut", async () => {
    const [port, model] = [await freePorts(1), await freePorts(1)];
    const stalls = await upstream(() => undefined, model);
    const sidecar = startSidecar(port, model, [], 1);
    await untilListening(sidecar, port);
    const inFlight = outcome(fetch(`http://${ADDRESS}:${port}/v1/completions`, { method: "POST", body: "{}" }));
    await new Promise((r) => setTimeout(r, 200));
    process.kill(sidecar.child.pid!, "SIGTERM");
    expect(await sidecar.exited).toEqual({ code: 0, signal: null });
    expect(await inFlight).toBe("failed");
    await stalls.close();
  });

  it("refuses an unknown flag (2) and HTTPS it cannot serve (2); logs a bad value and exits 0, as the real one's main returns", async () => {
    const port = await freePorts(1);
    expect((await startSidecar(port, port + 10, ["--connector=nixlv2"]).exited).code).toBe(2);
    expect((await launch(RUNTIME, ["run", "--rm", "--name", "tls", "--pull", "never", "--network", "host", SIDECAR_IMAGE, `--port=${port}`]).exited).code).toBe(
      2,
    );
    const bad = startSidecar(port, port + 10, ["--kv-connector=lmcache"]);
    expect((await bad.exited).code).toBe(0);
    expect(bad.output()).toContain("--kv-connector must be one of nixlv2, shared-storage, sglang, mooncake, offloading");
  });
});

// --- the load harness ----------------------------------------------------------------------------------

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; !condition(); i++) {
    if (i > 400) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 25));
  }
}

const errors = (records: RequestRecord[]) => [...new Set(records.map((r) => r.error ?? "ok"))];

describe("frontDoorLoad", () => {
  it.each([
    ["text/event-stream", "data: {}\n\ndata: [DONE]\n\n", undefined],
    ["text/event-stream", 'data: {"choices":[{"finish_reason":null}]}\n\n', "stream cut before [DONE]"],
    ["text/event-stream", 'data: {"choices":[{"finish_reason":"abort"}]}\n\ndata: [DONE]\n\n', 'finish_reason "abort"'],
    ["application/json", '{"choices":[{"finish_reason":"length"}]}', undefined],
    ["application/json", '{"choices":[{"finish_reason":"abort"}]}', 'finish_reason "abort"'],
    ["application/json", '{"choices":[{"fin', 'a body that is not JSON: "{\\"choices\\":[{\\"fin"'],
  ])("bodyProblem(%s, %j) is %s", (type, text, problem) => {
    expect(bodyProblem(type, text)).toBe(problem);
  });

  it("records refused connections and non-2xx answers as failures, stops at its bound, and goes to loopback only", async () => {
    const refused = startLoad(`http://${ADDRESS}:${await freePort(ADDRESS)}`, { concurrency: 1, maxRequests: 3 });
    await until(() => refused.records.length === 3);
    const report = await refused.stop();
    expect(report).toMatchObject({ total: 3, failed: 3, stoppedBy: "maxRequests" });
    expect(errors(report.records)).toEqual(["ECONNREFUSED"]);

    const server = await upstream(json(429, { error: "busy" }));
    const rejected = startLoad(`http://${ADDRESS}:${server.port}`, {
      concurrency: 2,
      maxRequests: 4,
      path: "/v1/chat/completions",
      headers: { authorization: "Bearer k" },
    });
    await until(() => rejected.records.length === 4);
    expect((await rejected.stop()).failures.map((f) => f.status)).toEqual([429, 429, 429, 429]);
    expect(server.requests[0]).toMatchObject({ method: "POST", url: "/v1/chat/completions", headers: { authorization: "Bearer k" } });
    await server.close();

    expect(() => startLoad("http://10.0.0.1:8000", { concurrency: 1 })).toThrow(/loopback addresses only/);
  });

  it("samples: reads the endpoints file, probes each listed endpoint, and records which did not serve", async () => {
    const serving = await upstream(json(200, { object: "list", data: [] }));
    const deadPort = await freePort(ADDRESS);
    let file = endpointsFile(ADDRESS, [
      { name: "up", port: String(serving.port) },
      { name: "down", port: String(deadPort) },
    ]);
    const sampler = startSampler({ every: 50, read: async () => file, maxSamples: 100 });
    await until(() => sampler.samples.length >= 2);
    file = "endpoints:\n- {name: typed, address: 10.0.0.1, port: 8000}\n";
    await until(() => sampler.samples.some((s) => s.problems.length > 0));
    const report = await sampler.stop();
    const first = report.samples[0]!;
    expect(first.listed.map((e) => e.name)).toEqual(["up", "down"]);
    expect(first.notServing).toEqual([{ endpoint: { name: "down", address: ADDRESS, port: String(deadPort), labels: {} }, reason: "ECONNREFUSED" }]);
    expect(report.bad).toHaveLength(report.samples.length);
    expect(report.samples.at(-1)!.problems.join()).toContain("endpoints[0].port: json: cannot unmarshal");
    expect(serving.requests.every((r) => r.url === "/v1/models")).toBe(true);
    await serving.close();
  });
});

// --- the stand-in vLLM: completions and --shutdown-timeout, under steady load --------------------------

interface Vllm {
  running: Running;
  url: string;
}

/** The stand-in vllm as a unit starts it, from a copy beside its parser and the fixture's options. */
async function startVllm(shutdownTimeout: number | undefined, requestSeconds: string): Promise<Vllm> {
  const dir = fs.mkdtempSync(path.join(work, "vllm-"));
  copyStandInVllm(dir);
  const port = await freePort(ADDRESS);
  const flags = shutdownTimeout === undefined ? [] : ["--shutdown-timeout", String(shutdownTimeout)];
  const running = launch(path.join(dir, "vllm"), ["serve", "stand-in", "--host", ADDRESS, "--port", String(port), ...flags], {
    ...process.env,
    FAKE_VLLM_READY_AFTER: "0",
    FAKE_VLLM_REQUEST_SECONDS: requestSeconds,
  });
  const url = `http://${ADDRESS}:${port}`;
  for (
    let i = 0;
    !(await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    ));
    i++
  ) {
    if (i > 100) throw new Error(`not ready: ${running.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { running, url };
}

/**
 * SIGTERM to the stand-in vllm while `concurrency` requests of `requestSeconds` are in flight: each
 * worker's second request, half a second into it. Returns the records split by when they started.
 */
async function sigtermUnderLoad(shutdownTimeout: number | undefined, requestSeconds: string, body: unknown) {
  const concurrency = 4;
  const vllm = await startVllm(shutdownTimeout, requestSeconds);
  const load = startLoad(vllm.url, { concurrency, body, maxSeconds: 60 });
  await until(() => load.records.length >= concurrency);
  await new Promise((r) => setTimeout(r, 500));
  const sigtermAt = now();
  process.kill(vllm.running.child.pid!, "SIGTERM");
  // What a probe sees of the stopping server, while its in-flight requests run on.
  await new Promise((r) => setTimeout(r, 100));
  const status = (r: Response) => r.arrayBuffer().then(() => r.status);
  const healthWhileStopping = await fetch(`${vllm.url}/health`).then(status, (e) => String(e?.cause?.code ?? e));
  const completionWhileStopping = await fetch(`${vllm.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "p", max_tokens: 1 }) }).then(
    status,
    (e) => String(e?.cause?.code ?? e),
  );
  const exit = await vllm.running.exited;
  await new Promise((r) => setTimeout(r, 200)); // requests sent after the exit are refused too
  const report = await load.stop();
  const inFlight = report.records.filter((r) => r.startedAt < sigtermAt && r.endedAt > sigtermAt);
  // Started well after the signal: rejected while it stopped, refused once it had exited.
  const after = report.records.filter((r) => r.startedAt > sigtermAt + 100);
  return { exit, report, inFlight, after, concurrency, healthWhileStopping, completionWhileStopping, output: vllm.running.output() };
}

describe("the stand-in vllm", () => {
  it("answers completions and chat completions in vLLM's shape, streamed as server-sent events ending in [DONE]", async () => {
    const vllm = await startVllm(undefined, "0.1");
    const completion = (await (
      await fetch(`${vllm.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "p", max_tokens: 3 }) })
    ).json()) as any;
    expect(completion).toMatchObject({
      object: "text_completion",
      model: "stand-in",
      choices: [{ index: 0, text: "tok tok tok ", finish_reason: "length" }],
      usage: { completion_tokens: 3 },
    });
    const streamed = await fetch(`${vllm.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: "p" }], max_tokens: 2, stream: true }),
    });
    expect(streamed.headers.get("content-type")).toBe("text/event-stream");
    const text = await streamed.text();
    const events = text
      .trim()
      .split("\n\n")
      .map((e) => e.replace(/^data: /, ""));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks.map((c) => c.choices[0].delta.content).join("")).toBe("tok tok ");
    expect(chunks.at(-1).choices[0].finish_reason).toBe("length");
    expect(bodyProblem("text/event-stream", text)).toBeUndefined();
  });

  it("--shutdown-timeout 5: on SIGTERM every in-flight request finishes; meanwhile /health answers 200 and new completions 500, then connections are refused", async () => {
    const run = await sigtermUnderLoad(5, "2", { prompt: "p", max_tokens: 8 });
    expect(run.exit).toEqual({ code: 0, signal: null });
    expect(run.inFlight).toHaveLength(run.concurrency);
    expect(errors(run.inFlight)).toEqual(["ok"]);
    expect([run.healthWhileStopping, run.completionWhileStopping]).toEqual([200, 500]);
    expect(run.after.length).toBeGreaterThan(0);
    // One taken as the listener closes is reset or closed; after that, refused.
    expect(errors(run.after)).toContain("ECONNREFUSED");
    for (const error of errors(run.after)) expect(error).toMatch(/^(ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET|status 500: )/);
    expect(run.output).toContain("stopping engine client mode=drain timeout=5s");
  });

  it.each([
    ["--shutdown-timeout 0 aborts the in-flight requests at once", 0, "2"],
    ["no --shutdown-timeout is 0", undefined, "2"],
    ["--shutdown-timeout 1 aborts the requests still running after 1 s", 1, "4"],
  ])("%s; new completions are rejected, then connections refused", async (_, timeout, seconds) => {
    const run = await sigtermUnderLoad(timeout, seconds, { prompt: "p", max_tokens: 8, stream: true });
    expect(run.exit).toEqual({ code: 0, signal: null });
    expect(run.inFlight).toHaveLength(run.concurrency);
    expect(errors(run.inFlight)).toEqual(['finish_reason "abort"']);
    expect(errors(run.after)).toContain("ECONNREFUSED");
    for (const error of errors(run.after)) expect(error).toMatch(/^(ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET|status 500: )/);
    expect(run.output).toContain(`stopping engine client mode=${timeout ? "drain" : "abort"} timeout=${timeout ?? 0}s`);
  });
});

describe("the stand-in vllm's compiled cache and log, as vllm-rbln's", () => {
  /** One start of the stand-in with `env` on the cache root `root`, to its first answer; returns its output and the bundle's path and mtime. */
  async function startOnce(root: string, env: Record<string, string> = {}) {
    const dir = fs.mkdtempSync(path.join(work, "vllm-"));
    copyStandInVllm(dir);
    const port = await freePort(ADDRESS);
    const vllm = launch(path.join(dir, "vllm"), ["serve", "org/model", "--host", ADDRESS, "--port", String(port)], {
      PATH: process.env.PATH,
      VLLM_CACHE_ROOT: root,
      FAKE_VLLM_READY_AFTER: "0",
      ...env,
    });
    // Its whole output: "close" comes after the pipes' last data, "exit" may come before.
    const closed = new Promise((resolve) => vllm.child.once("close", resolve));
    for (
      let i = 0;
      !(await fetch(`http://${ADDRESS}:${port}/health`).then(
        (r) => r.ok,
        () => false,
      ));
      i++
    ) {
      if (i > 100 || vllm.child.exitCode !== null) throw new Error(`not ready: ${vllm.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    process.kill(vllm.child.pid!, "SIGTERM");
    await closed;
    const bundles = (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith("mega_cache.bin"));
    const leftovers = (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith(".tmp"));
    return { output: vllm.output(), bundles, leftovers, mtime: bundles.length ? fs.statSync(path.join(root, bundles[0]!)).mtimeMs : 0 };
  }

  it("saves the bundle after every warm-up, a load's too: renamed into place with a new mtime, no tmp file left", async () => {
    const root = fs.mkdtempSync(path.join(work, "cache-"));
    const compiled = await startOnce(root);
    expect(compiled.bundles).toEqual([expect.stringMatching(/^rbln\/org_model-[0-9a-f]{8}\/[0-9a-f]{16}\/rank0\/mega_cache\.bin$/)]);
    expect(compiled.output).not.toContain("Loaded rbln mega-cache bundle from");
    expect(compiled.output).toMatch(/Saved rbln mega-cache bundle to \S+mega_cache\.bin \(0\.0 MiB\)/);
    await new Promise((r) => setTimeout(r, 20));
    const loaded = await startOnce(root);
    expect(loaded.output).toContain("Loaded rbln mega-cache bundle from");
    expect(loaded.bundles).toEqual(compiled.bundles);
    expect(loaded.mtime).toBeGreaterThan(compiled.mtime);
    expect([...compiled.leftovers, ...loaded.leftovers]).toEqual([]);
  });

  it.each([
    ["VLLM_LOGGING_LEVEL=WARNING", { VLLM_LOGGING_LEVEL: "warning" }],
    ["VLLM_CONFIGURE_LOGGING=0", { VLLM_CONFIGURE_LOGGING: "0" }],
    ["a VLLM_LOGGING_CONFIG_PATH at ERROR", { VLLM_LOGGING_CONFIG_PATH: "CONFIG" }],
  ])("with %s logs none of the bundle's lines, and still saves it", async (_, env) => {
    const root = fs.mkdtempSync(path.join(work, "cache-"));
    const config = path.join(root, "..", `logging-${path.basename(root)}.json`);
    fs.writeFileSync(
      config,
      JSON.stringify({
        version: 1,
        handlers: { out: { class: "logging.StreamHandler", level: "ERROR" } },
        loggers: { vllm: { handlers: ["out"], level: "DEBUG" } },
      }),
    );
    const withConfig = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === "CONFIG" ? config : v]));
    for (const run of [await startOnce(root, withConfig), await startOnce(root, withConfig)]) {
      expect(run.output).not.toMatch(/mega-cache|rbln_backend|\[shutdown\]/);
      expect(run.bundles).toHaveLength(1);
    }
  });

  it("refuses VLLM_LOGGING_CONFIG_PATH with VLLM_CONFIGURE_LOGGING=0, or naming no file, as vllm-rbln's logger does at import", async () => {
    for (const env of [{ VLLM_CONFIGURE_LOGGING: "0", VLLM_LOGGING_CONFIG_PATH: "/etc/hosts" }, { VLLM_LOGGING_CONFIG_PATH: "/no/such/file.json" }]) {
      const dir = fs.mkdtempSync(path.join(work, "vllm-"));
      copyStandInVllm(dir);
      const run = spawnSync(path.join(dir, "vllm"), ["serve", "org/model"], { env: { PATH: process.env.PATH, ...env }, encoding: "utf8" });
      expect(run.status).toBe(1);
      expect(run.stderr).toMatch(/^RuntimeError: /);
    }
  });
});

describe("the stand-in vllm's data-parallel group (vLLM 0.30's coupling, shutdown.json dp.rankDeath)", () => {
  /** Ranks 0..3 of one group, launched one by one as the decode role's units do: one port each, one RPC address. */
  async function startGroup(dir: string, rpcPort: number) {
    const bin = copyStandInVllm(dir);
    const ports = await Promise.all([0, 1, 2, 3].map(() => freePort(ADDRESS)));
    const rank = (r: number) =>
      launch(
        bin,
        ["serve", "stand-in", "--host", ADDRESS, "--port", String(ports[r]), "--data-parallel-size", "4", "--data-parallel-rank", String(r)].concat([
          "--data-parallel-address",
          ADDRESS,
          "--data-parallel-rpc-port",
          String(rpcPort),
        ]),
        { ...process.env, FAKE_VLLM_READY_AFTER: "0", FAKE_VLLM_REQUEST_SECONDS: "0.1" },
      );
    return { ports, rank };
  }
  const health = (port: number) =>
    fetch(`http://${ADDRESS}:${port}/health`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.status,
      () => "refused",
    );
  /** A completion within `ms`: "ok", or "hangs" when it has no answer by then. */
  const completes = (port: number, ms = 1500) =>
    fetch(`http://${ADDRESS}:${port}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "p", max_tokens: 2 }), signal: AbortSignal.timeout(ms) })
      .then((r) => r.text().then(() => (r.ok ? "ok" : `status ${r.status}`)))
      .catch((e) => (e?.name === "TimeoutError" ? "hangs" : String(e?.cause?.code ?? e)));
  async function untilHealthy(ports: number[]) {
    for (let i = 0; (await Promise.all(ports.map(health))).some((s) => s !== 200); i++) {
      if (i > 100) throw new Error(`not all ready: ${await Promise.all(ports.map(health))}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it("serves only once all ranks joined; a rank killed leaves its peers answering /health while their completions hang, until every rank restarts", async () => {
    const dir = fs.mkdtempSync(path.join(work, "dp-"));
    const { ports, rank } = await startGroup(dir, await freePort(ADDRESS));
    const running = [1, 2, 3].map(rank);
    await untilListening(running[0]!, ports[1]!);
    // Three of four: not ready, as vLLM's API server comes up only after the group's handshake.
    expect(await health(ports[1]!)).toBe(503);
    running.unshift(rank(0));
    await untilHealthy(ports);
    expect(await Promise.all(ports.map((p) => completes(p)))).toEqual(["ok", "ok", "ok", "ok"]);

    process.kill(running[2]!.child.pid!, "SIGKILL");
    await running[2]!.exited;
    await untilOutput(running[0]!, /data-parallel rank 2 is gone/);
    const peers = [ports[0]!, ports[1]!, ports[3]!];
    expect(await Promise.all(peers.map(health))).toEqual([200, 200, 200]);
    expect(await Promise.all(peers.map((p) => completes(p)))).toEqual(["hangs", "hangs", "hangs"]);
    // The killed rank alone, restarted: rank 0 lets no one join a broken group, and nothing re-forms it.
    running[2] = rank(2);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await health(ports[2]!)).toBe(503);
    expect(await completes(ports[1]!)).toBe("hangs");

    // Every rank restarted: the group forms again and serves.
    for (const r of running) process.kill(r.child.pid!, "SIGKILL");
    const again = [0, 1, 2, 3].map(rank);
    await untilHealthy(ports);
    expect(await Promise.all(ports.map((p) => completes(p)))).toEqual(["ok", "ok", "ok", "ok"]);
    expect(again[1]!.output()).toContain("data-parallel group of 4 formed");
  });
});
