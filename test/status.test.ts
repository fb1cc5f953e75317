import { spawn } from "node:child_process";
import type * as http from "node:http";
import * as path from "node:path";
import { Counter, Histogram, Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { histogramQuantile, parseExposition, sumOf } from "../core/monitoring/exposition";
import { planDeployment } from "../core/plan/deployment";
import { CLEAR_SCREEN, frontDoorStatus, MAX_BODY_BYTES, probeRanks, ranksOfDeployment, statusCommand } from "../cli/status";
import { startFakeVllm, writeBody, type FakeVllm } from "./helpers/fakeVllm";
import { shippedCatalog } from "./helpers/recipes";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";

const ROOT = path.resolve(__dirname, "..");
const MODEL = "MiniMaxAI/MiniMax-M2.7";
const servers: FakeVllm[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function fake(options: Parameters<typeof startFakeVllm>[0]) {
  const server = await startFakeVllm(options);
  servers.push(server);
  return server;
}

/** `npm run --silent status -- ...`, asynchronously so the fake servers in this process keep answering. */
function statusCli(args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", "status", "--", ...args], { cwd: ROOT, env: { ...process.env, VLLM_API_KEY: "", ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

describe("the exposition format", () => {
  it("reads what a Prometheus client writes: labels with escapes, counters, histograms, special values, timestamps", async () => {
    const registry = new Registry();
    const counter = new Counter({ name: "vllm:generation_tokens_total", help: "h", labelNames: ["model_name", "engine"], registers: [registry] });
    counter.inc({ model_name: 'we"ird\\name\nx', engine: "0" }, 7);
    counter.inc({ model_name: "m", engine: "1" }, 5);
    const histogram = new Histogram({ name: "vllm:time_to_first_token_seconds", help: "h", buckets: [0.25, 0.5, 0.75, 5], registers: [registry] });
    for (const v of [0.2, 0.3, 0.7, 3]) histogram.observe(v);
    const samples = parseExposition(`${await registry.metrics()}\nnan_metric NaN\ninf_metric{le="+Inf"} +Inf 1700000000000\n`);
    expect(samples.find((s) => s.labels.engine === "0")).toEqual({
      name: "vllm:generation_tokens_total",
      labels: { model_name: 'we"ird\\name\nx', engine: "0" },
      value: 7,
    });
    expect(sumOf(samples, "vllm:generation_tokens_total")).toBe(12);
    expect(sumOf(samples, "vllm:time_to_first_token_seconds_count")).toBe(4);
    expect(samples.find((s) => s.name === "nan_metric")!.value).toBeNaN();
    expect(samples.find((s) => s.name === "inf_metric")!.value).toBe(Infinity);
    expect(sumOf(samples, "absent")).toBeUndefined();
    // p50: the 2nd of 4 observations falls in (0.25, 0.5], which holds 1 of them: 0.25 + 0.25 * (2 - 1) / 1.
    expect(histogramQuantile(samples, "vllm:time_to_first_token_seconds", 0.5)).toBeCloseTo(0.5);
    // p25 in the first bucket, from 0: 0.25 * 1 / 1.
    expect(histogramQuantile(samples, "vllm:time_to_first_token_seconds", 0.25)).toBeCloseTo(0.25);
    // p90 lands in (0.75, 5]: 0.75 + 4.25 * (3.6 - 3) / 1.
    expect(histogramQuantile(samples, "vllm:time_to_first_token_seconds", 0.9)).toBeCloseTo(3.3);
    expect(histogramQuantile(parseExposition('h_bucket{le="+Inf"} 0\n'), "h", 0.5)).toBeUndefined();
  });

  it("keeps only the samples asked for, and still refuses a bad line of any other", () => {
    const keep = new Set(["b"]);
    expect(parseExposition('a 1\nb{x="y"} 2\r\nc 3', keep)).toEqual([{ name: "b", labels: { x: "y" }, value: 2 }]);
    expect(() => parseExposition("a one\nb 2\n", keep)).toThrow(/^bad sample value in: a one$/);
  });

  it("refuses lines that are not the format", () => {
    expect(() => parseExposition("1abc 3")).toThrow(/bad metric name/);
    expect(() => parseExposition('m{a="x} 1')).toThrow(/unterminated/);
    expect(() => parseExposition("m{a=x} 1")).toThrow(/bad label a/);
    expect(() => parseExposition("m one")).toThrow(/bad sample value/);
  });
});

describe("status against fake vLLM ranks on loopback", () => {
  it("reports every rank of a hosts stack: a live one with its load, a dead one as down", async () => {
    // Each host of the stack is its own loopback address; the ranks listen on the plan's port 8000.
    const base = `127.${50 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 250)}`;
    const deployment = planDeployment(
      parseStackSettings({
        strategy: "aggregated-data-expert-parallel",
        target: "Latency",
        replicas: 2,
        hosts: [
          { name: "npu-live", address: `${base}.1`, hostKey: EXAMPLE_HOST_KEY },
          { name: "npu-dead", address: `${base}.2`, hostKey: EXAMPLE_HOST_KEY },
        ],
      }),
      shippedCatalog,
    );
    await fake({
      host: `${base}.1`,
      port: 8000,
      model: MODEL,
      engines: 4,
      running: 3,
      waiting: 2,
      kvUsage: 0.25,
      tokensPerSecond: 400,
      ttftSeconds: [0.2, 0.3, 0.7, 3],
    });
    const [live, dead] = await probeRanks(ranksOfDeployment(deployment), MODEL, 0.5);
    expect(live).toMatchObject({
      url: `http://${base}.1:8000`,
      labels: { host: "npu-live", role: "main", rank: "0" },
      up: true,
      model: MODEL,
      running: 3,
      waiting: 2,
      problem: null,
    });
    expect(live!.kvCachePercent).toBeCloseTo(25);
    expect(live!.ttftP50Seconds).toBeCloseTo(0.5);
    // Tokens come from the server's clock, the interval from ours: close, not equal.
    expect(live!.generationTokensPerSecond).toBeGreaterThan(250);
    expect(live!.generationTokensPerSecond).toBeLessThan(550);
    expect(dead).toMatchObject({
      url: `http://${base}.2:8000`,
      labels: { host: "npu-dead" },
      up: false,
      model: null,
      running: null,
      problem: expect.stringMatching(/ECONNREFUSED/),
    });
  });

  it("reports the front door beside the ranks: the model through Envoy, and the picker's ready endpoints", async () => {
    const base = `127.${50 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 250)}`;
    const deployment = planDeployment(
      parseStackSettings({
        strategy: "aggregated-data-expert-parallel",
        target: "Latency",
        hosts: [{ name: "npu-0", address: `${base}.1`, hostKey: EXAMPLE_HOST_KEY }],
        router: { host: { name: "door", address: `${base}.10`, hostKey: EXAMPLE_HOST_KEY }, port: 18080 },
      }),
      shippedCatalog,
    );
    expect(ranksOfDeployment(deployment).map((r) => r.url)).toEqual([`http://${base}.1:8000`]);
    const down = await frontDoorStatus({ address: deployment.frontDoor!.routers[0]!.address, port: deployment.frontDoor!.port }, MODEL, undefined);
    expect(down).toMatchObject({ url: `http://${base}.10:18080`, up: false, picker: { url: `http://${base}.10:9090`, up: false } });
    expect(down.problem).toMatch(/^picker http:\/\/[0-9.]+:9090: .*ECONNREFUSED.*; .*ECONNREFUSED/);
    await fake({ host: `${base}.10`, port: 18080, model: MODEL });
    const picker = await import("node:http").then((h) =>
      h.createServer((_, response) => response.writeHead(200).end('# TYPE llm_d_epp_ready_endpoints gauge\nllm_d_epp_ready_endpoints{name="x"} 3\n')),
    );
    await new Promise<void>((resolve) => picker.listen(9090, `${base}.10`, resolve));
    try {
      expect(await frontDoorStatus({ address: deployment.frontDoor!.routers[0]!.address, port: deployment.frontDoor!.port }, MODEL, undefined)).toEqual({
        url: `http://${base}.10:18080`,
        up: true,
        model: MODEL,
        picker: { url: `http://${base}.10:9090`, up: true, readyEndpoints: 3 },
        problem: null,
      });
    } finally {
      await new Promise((resolve) => picker.close(resolve));
    }
  });

  it("finds a model of several in the front door's model list, and asks that model's own picker", async () => {
    const http = await import("node:http");
    const door = http.createServer((_, response) =>
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data: [{ id: "chat" }, { id: "tiny-chat" }] })),
    );
    const picker = http.createServer((_, response) => response.writeHead(200).end('llm_d_epp_ready_endpoints{name="tiny"} 2\n'));
    const listen = (server: import("node:http").Server) =>
      new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as import("node:net").AddressInfo).port)));
    const [doorPort, pickerPort] = [await listen(door), await listen(picker)];
    try {
      const read = (model: string) => frontDoorStatus({ address: "127.0.0.1", port: doorPort }, model, undefined, pickerPort);
      expect(await read("tiny-chat")).toMatchObject({ up: true, model: "tiny-chat", picker: { up: true, readyEndpoints: 2 }, problem: null });
      expect((await read("batch")).problem).toBe('serves "chat", planned "batch"');
    } finally {
      await Promise.all([door, picker].map((server) => new Promise((resolve) => server.close(resolve))));
    }
  });

  it("flags a rank that serves another model than planned", async () => {
    const server = await fake({ model: "Qwen/Qwen3-0.6B" });
    const [status] = await probeRanks([{ url: server.url, labels: {} }], MODEL, 0.05);
    expect(status).toMatchObject({ up: true, model: "Qwen/Qwen3-0.6B", problem: `serves "Qwen/Qwen3-0.6B", planned "${MODEL}"` });
  });

  it("the CLI prints a table, or JSON, and exits non-zero when a rank is down", async () => {
    const a = await fake({ model: MODEL, running: 1, tokensPerSecond: 50, ttftSeconds: [1.2] });
    const b = await fake({ model: MODEL, waiting: 4, kvUsage: 0.9 });
    const healthy = await statusCli(["--endpoint", a.url, "--endpoint", b.url, "--interval", "0.2"]);
    expect(healthy.status, healthy.stderr).toBe(0);
    const lines = healthy.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ENDPOINT +HOST +ROLE +RANK +STATE +AGE +MODEL +RUNNING +WAITING +KV% +GEN_TOK\/S +TTFT_P50$/);
    expect(lines[2]).toMatch(new RegExp(`^${b.url} +- +- +- +READY +- +${MODEL} +0 +4 +90\\.0 +0\\.0 +-$`));
    expect(lines).toHaveLength(3);

    const closed = await fake({ model: MODEL });
    await closed.close();
    const broken = await statusCli(["--endpoint", a.url, "--endpoint", closed.url, "--interval", "0.1", "--format", "json"]);
    // A rank that does not answer is DOWN, which exits 3 (1 is for ranks on their way).
    expect(broken.status).toBe(3);
    const report = JSON.parse(broken.stdout);
    expect(report.plannedModel).toBe(MODEL);
    expect(report.ranks.map((r: { up: boolean; state: string }) => [r.up, r.state])).toEqual([
      [true, "READY"],
      [false, "DOWN"],
    ]);
    // One observation of 1.2 s in the (1, 2.5] bucket: the midpoint, as histogram_quantile answers.
    expect(report.ranks[0].ttftP50Seconds).toBeCloseTo(1.75);
  });

  it("reads /v1/models with VLLM_API_KEY when vLLM has a key; /health and /metrics need none", async () => {
    const server = await fake({ model: MODEL, apiKey: "s3cret" });
    const without = await statusCli(["--endpoint", server.url, "--interval", "0.1"]);
    expect(without.status).toBe(3);
    expect(without.stdout).toContain("/v1/models answered 401 (set VLLM_API_KEY)");
    const withKey = await statusCli(["--endpoint", server.url, "--interval", "0.1", "--format", "json"], { VLLM_API_KEY: "s3cret" });
    expect(withKey.status, withKey.stdout).toBe(0);
    expect(JSON.parse(withKey.stdout).ranks[0]).toMatchObject({ up: true, model: MODEL });
  });

  it("--watch reads again every --interval seconds, each reading over the last, and exits as the last reading on SIGINT", async () => {
    const rank = await fake({ model: MODEL });
    const child = spawn(
      path.join(ROOT, "node_modules/.bin/tsx"),
      [path.join(ROOT, "cli/main.ts"), "status", "--endpoint", rank.url, "--watch", "--interval", "0.2"],
      {
        cwd: ROOT,
        env: { ...process.env, VLLM_API_KEY: "" },
      },
    );
    let stdout = "";
    child.stdout.on("data", (d) => (stdout += d));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    // Three readings, then the rank goes away: the readings after say DOWN, and the exit status is theirs.
    await expect.poll(() => stdout.split(CLEAR_SCREEN).length - 1, { timeout: 30_000, interval: 100 }).toBeGreaterThanOrEqual(3);
    await rank.close();
    await expect.poll(() => stdout.split(CLEAR_SCREEN).at(-1), { timeout: 30_000, interval: 100 }).toMatch(/ DOWN /);
    child.kill("SIGINT");
    expect(await exited).toBe(3);
    const readings = stdout.split(CLEAR_SCREEN).slice(1);
    expect(readings[0]).toMatch(/^rbln-serving status, every 0\.2s: \S+ \(exit 0; Ctrl-C ends\)\n\nENDPOINT /);
    expect(readings[0]).toMatch(new RegExp(`^${rank.url} +- +- +- +READY `, "m"));
  }, 60_000);

  it("refuses bad flags with one line naming the flag", async () => {
    const run = await statusCli(["--endpoint", "localhost:8000"]);
    expect([run.status, run.stderr]).toEqual([2, 'error: --endpoint: "localhost:8000" is not a base URL such as http://10.0.0.5:8000\n']);
    const catalog = shippedCatalog;
    await expect(statusCommand({ endpoint: ["http://127.0.0.1:9"], interval: "soon" }, catalog)).rejects.toThrow(
      /^--interval: "soon" is not a number of seconds/,
    );
    // A Kubernetes stack is read with kubectl (test/status-kubernetes.test.ts); without it on PATH, one line.
    const path = process.env.PATH;
    process.env.PATH = "/nonexistent";
    try {
      await expect(statusCommand({ stack: "prod" }, catalog)).rejects.toThrow(/^--stack: a Kubernetes stack is read with kubectl, which is not on PATH/);
    } finally {
      process.env.PATH = path;
    }
    await expect(statusCommand({}, catalog)).rejects.toThrow(/^--stack: required without --endpoint/);
  });

  it("refuses an --endpoint with user:password@ without printing it, and one that is no URL, before asking any rank", async () => {
    for (const url of ["http://me:hunter2@127.0.0.1:9", "https://hunter2@127.0.0.1:9/"]) {
      await expect(statusCommand({ endpoint: [url], interval: "0.05" }, shippedCatalog)).rejects.toThrow(
        /^--endpoint: "https?:\/\/\*\*\*@127\.0\.0\.1:9\/?" holds user:password@; give a base URL such as http:\/\/10\.0\.0\.5:8000 \(an API key goes in VLLM_API_KEY\)$/,
      );
    }
    for (const url of ["http://127.0.0.1:9\u001b[2J", "http://127.0.0.1:99999", "http://[::1"]) {
      await expect(statusCommand({ endpoint: [url], interval: "0.05" }, shippedCatalog), url).rejects.toThrow(
        /^--endpoint: ".*" is not a base URL such as http:\/\/10\.0\.0\.5:8000$/,
      );
    }
  });

  it("refuses options it does not read rather than ignoring them", async () => {
    for (const options of [{ out: "x" }, { diff: "dev" }]) {
      await expect(statusCommand({ endpoint: ["http://127.0.0.1:9"], interval: "0.05", ...options }, shippedCatalog)).rejects.toThrow(
        new RegExp(`^--${Object.keys(options)[0]}: not an option of status; status takes --stack, `),
      );
    }
  });
});

/** Answers that a misbehaving rank sends in place of vLLM's. */
const answer = {
  json: (body: unknown) => (response: http.ServerResponse) => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body)),
  text: (body: string) => (response: http.ServerResponse) => response.writeHead(200, { "content-type": "text/plain" }).end(body),
  redirect: (code: number, location: string) => (response: http.ServerResponse) => response.writeHead(code, { location }).end("moved"),
};
const ONE_MIB = 1024 * 1024;
/** What a terminal acts on or reorders by: C0 and C1 controls, DEL, line and paragraph separators, bidi overrides. */
const TERMINAL_CONTROLS = /[\p{Cc}\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

describe("status trusts nothing a rank sends", () => {
  it.each([
    { path: "/health", code: 301, location: (other: string) => `${other}/health`, shown: (other: string) => `${other}/health` },
    {
      path: "/v1/models",
      code: 302,
      location: (other: string) => `${other.replace("//", "//admin:s3cret@")}/v1/models?token=t0k&a=1#key=k3y`,
      shown: (other: string) => `${other.replace("//", "//***:***@")}/v1/models?token=***&a=***#***`,
    },
    {
      path: "/v1/models",
      code: 303,
      location: (other: string) => `${other.replace("//", "//t0ken@")}/v1/models`,
      shown: (other: string) => `${other.replace("//", "//***@")}/v1/models`,
    },
    { path: "/metrics", code: 307, location: () => "/elsewhere", shown: (_: string, self: string) => `${self}/elsewhere` },
    { path: "/metrics", code: 308, location: (other: string) => `${other}/metrics`, shown: (other: string) => `${other}/metrics` },
  ])(
    "does not follow a redirect of $path ($code): the rank is a problem that says where it pointed, credentials masked",
    async ({ path, code, location, shown }) => {
      const other = await fake({ model: MODEL, running: 7 });
      const rank = await fake({ model: MODEL, answers: { [path]: answer.redirect(code, location(other.url)) } });
      const [status] = await probeRanks([{ url: rank.url, labels: {} }], MODEL, 0.05);
      expect(status).toMatchObject({ up: false, model: null, running: null, problem: `${path} redirected (${code}) to ${shown(other.url, rank.url)}` });
      expect(status!.problem).not.toMatch(/s3cret|t0k|k3y/);
      expect(other.requests).toEqual([]);
    },
  );

  it("a Location that is not a URL is not shown; a 3xx without one is an answer like any other", async () => {
    const unparsable = await fake({ model: MODEL, answers: { "/health": answer.redirect(302, "http://admin:s3cret@[::1") } });
    const notModified = await fake({ model: MODEL, answers: { "/metrics": (response) => response.writeHead(304).end() } });
    const statuses = await probeRanks(
      [unparsable, notModified].map((s) => ({ url: s.url, labels: {} })),
      MODEL,
      0.05,
    );
    expect(statuses.map((s) => s.problem)).toEqual(["/health redirected (302) to a Location that is not a URL", "/metrics answered 304"]);
  });

  it.each([
    { path: "/health", body: { filler: " " } },
    { path: "/v1/models", body: { prefix: '{"data":[{"id":"', filler: "a", suffix: '"}]}' } },
    { path: "/metrics", body: { prefix: "vllm:num_requests_running 1\n", filler: `#${"-".repeat(1022)}\n` } },
  ])(
    "reads at most MAX_BODY_BYTES of $path: a body of exactly that many is read; one byte more, or an endless body, makes the rank a problem",
    async ({ path, body }) => {
      const exactly = await fake({ model: MODEL, answers: { [path]: (response) => writeBody(response, { ...body, bytes: MAX_BODY_BYTES }) } });
      const over = await fake({ model: MODEL, answers: { [path]: (response) => writeBody(response, { ...body, bytes: MAX_BODY_BYTES + 1 }) } });
      const endless = await fake({ model: MODEL, answers: { [path]: (response) => writeBody(response, body) } });
      const [read, ...refused] = await probeRanks(
        [exactly, over, endless].map((s) => ({ url: s.url, labels: {} })),
        MODEL,
        0.05,
      );
      // The exact /v1/models body names a model of 4 MiB of "a"s, which is not the planned one.
      expect(read).toMatchObject({ up: true, problem: path === "/v1/models" ? expect.stringMatching(/^serves "aaaa/) : null });
      expect(refused.map((s) => [s.up, s.problem])).toEqual([
        [false, `${path} sent more than ${MAX_BODY_BYTES / ONE_MIB} MiB`],
        [false, `${path} sent more than ${MAX_BODY_BYTES / ONE_MIB} MiB`],
      ]);
    },
  );

  it("an answer without a body (204) is an empty one", async () => {
    const rank = await fake({ model: MODEL, answers: { "/health": (response) => response.writeHead(204).end() } });
    expect((await probeRanks([{ url: rank.url, labels: {} }], MODEL, 0.05))[0]).toMatchObject({ up: true, problem: null });
  });

  it("the timeout covers the whole body: a rank that sends its body a byte at a time is a problem", async () => {
    const slow = await fake({
      model: MODEL,
      answers: {
        "/v1/models": (response) => {
          response.writeHead(200, { "content-type": "application/json" }).write('{"data":[{"id":"');
          const trickle = setInterval(() => response.write("a"), 100);
          response.on("close", () => clearInterval(trickle));
        },
      },
    });
    const [status] = await probeRanks([{ url: slow.url, labels: {} }], MODEL, 0.05);
    expect(status).toMatchObject({ up: false, problem: "The operation was aborted due to timeout" });
  });

  it.each([
    [{ data: [{ id: 42 }] }, "data[0].id"],
    [{ data: [{ id: { name: MODEL } }] }, "data[0].id"],
    [{ data: [{ object: "model" }] }, "data[0].id"],
    [{ data: "MiniMaxAI/MiniMax-M2.7" }, "data"],
    [{ models: [] }, "data"],
    [[MODEL], ""],
    [null, ""],
  ])("a /v1/models of another shape (%j) makes that rank a problem, and the table still prints every rank", async (body, where) => {
    const healthy = await fake({ model: MODEL, running: 2 });
    const odd = await fake({ model: MODEL, answers: { "/v1/models": answer.json(body) } });
    const { stdout, exitCode } = await statusCommand({ endpoint: [healthy.url, odd.url], interval: "0.05" }, shippedCatalog);
    expect(exitCode).toBe(3);
    const lines = stdout.trimEnd().split("\n");
    expect(lines[1]).toMatch(new RegExp(`^${healthy.url} +- +- +- +READY +- +${MODEL} +2 `));
    expect(lines[2]).toMatch(new RegExp(`^${odd.url} +- +- +- +DOWN +- +- `));
    expect(lines[3]).toMatch(new RegExp(`^${odd.url}: /v1/models: ${where.replace(/[[\]]/g, "\\$&")}${where ? ": " : ""}Invalid input`));
  });

  it("a /v1/models that is not JSON makes that rank a problem that names the path", async () => {
    const odd = await fake({ model: MODEL, answers: { "/v1/models": answer.text("<html>moved</html>") } });
    const [status] = await probeRanks([{ url: odd.url, labels: {} }], MODEL, 0.05);
    expect(status).toMatchObject({
      up: false,
      problem: expect.stringMatching(/^\/v1\/models: Unexpected token '<', "<html>moved<\/html>" is not valid JSON$/),
    });
  });

  it.each(["abc", "", "1e400", "Infinity", "NaN", "0.5.1"])(
    'a histogram bucket le="%s" makes that rank a problem, and the table still prints every rank',
    async (le) => {
      const healthy = await fake({ model: MODEL, ttftSeconds: [0.3] });
      const odd = await fake({
        model: MODEL,
        answers: { "/metrics": answer.text(`vllm:time_to_first_token_seconds_bucket{le="${le}"} 1\nvllm:time_to_first_token_seconds_bucket{le="+Inf"} 1\n`) },
      });
      const { stdout } = await statusCommand({ endpoint: [healthy.url, odd.url], interval: "0.05" }, shippedCatalog);
      const lines = stdout.trimEnd().split("\n");
      expect(lines[1]).toMatch(new RegExp(`^${healthy.url} .* READY .* 0\\.375s$`));
      expect(lines.slice(2)).toEqual([
        expect.stringMatching(new RegExp(`^${odd.url} +- +- +- +DOWN `)),
        `${odd.url}: second /metrics sample: bad bucket bound le="${le}" in vllm:time_to_first_token_seconds_bucket`,
      ]);
    },
  );

  it("NaN, infinities and values out of a field's range make that field unknown", async () => {
    const rank = await fake({
      model: MODEL,
      answers: {
        "/metrics": answer.text(
          [
            'vllm:num_requests_running{engine="0"} 1',
            'vllm:num_requests_running{engine="1"} NaN',
            "vllm:num_requests_waiting -2",
            'vllm:kv_cache_usage_perc{engine="0"} +Inf',
            "vllm:generation_tokens_total NaN",
            'vllm:time_to_first_token_seconds_bucket{le="0.5"} -Inf',
            'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 3',
          ].join("\n"),
        ),
      },
    });
    const over = await fake({
      model: MODEL,
      answers: { "/metrics": answer.text("vllm:num_requests_running +Inf\nvllm:num_requests_waiting 2\nvllm:kv_cache_usage_perc 1.5\n") },
    });
    const [odd, outOfRange] = await probeRanks(
      [rank, over].map((s) => ({ url: s.url, labels: {} })),
      MODEL,
      0.05,
    );
    expect(odd).toMatchObject({
      up: true,
      problem: null,
      running: null,
      waiting: null,
      kvCachePercent: null,
      generationTokensPerSecond: null,
      ttftP50Seconds: null,
    });
    expect(outOfRange).toMatchObject({ up: true, problem: null, running: null, waiting: 2, kvCachePercent: null });
    const { stdout } = await statusCommand({ endpoint: [rank.url], interval: "0.05" }, shippedCatalog);
    expect(stdout.split("\n")[1]).toMatch(new RegExp(`^${rank.url} +- +- +- +READY +- +${MODEL} +- +- +- +- +-$`));
  });

  it("a sample value past a double's range (1e400) is not the format: that rank is a problem", async () => {
    const rank = await fake({ model: MODEL, answers: { "/metrics": answer.text("vllm:num_requests_running 1e400\n") } });
    const [status] = await probeRanks([{ url: rank.url, labels: {} }], MODEL, 0.05);
    expect(status).toMatchObject({ up: false, problem: "bad sample value in: vllm:num_requests_running 1e400" });
  });

  it("escapes a rank's control characters in the table; JSON escapes them too, C1 and bidi controls included", async () => {
    const forged = `M\x1b[2J\r\n${`http://10.0.0.1:8000  -  -  -  up  ${MODEL}`}\u009b31m\u202e\x7f\u2028`;
    const evil = await fake({ model: forged, answers: { "/metrics": answer.text(`vllm:num_requests_running 1\n\x1b]0;title\x07 1\n`) } });
    const liar = await fake({ model: forged });
    const healthy = await fake({ model: MODEL });
    const endpoints = [evil.url, liar.url, healthy.url];
    const text = await statusCommand({ endpoint: endpoints, interval: "0.05" }, shippedCatalog);
    const lines = text.stdout.trimEnd().split("\n");
    // A header, three rows and two problems: nothing a rank sent starts a line or moves the cursor.
    expect(lines).toHaveLength(6);
    for (const line of lines) expect(line).not.toMatch(TERMINAL_CONTROLS);
    const escaped = `M\\u001b[2J\\u000d\\u000ahttp://10.0.0.1:8000  -  -  -  up  ${MODEL}\\u009b31m\\u202e\\u007f\\u2028`;
    expect(lines[2]).toContain(` FAILED  -    ${escaped}  `);
    expect(lines[4]).toBe(`${evil.url}: bad metric name in: \\u001b]0;title\\u0007 1`);
    expect(lines[5]).toBe(
      `${liar.url}: serves ${JSON.stringify(forged).replace(/[\u007f-\u009f\u2028\u202e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}, planned "${MODEL}"`,
    );

    const json = await statusCommand({ endpoint: endpoints, interval: "0.05", format: "json" }, shippedCatalog);
    // Its line breaks are its own layout; JSON.stringify escapes C0 controls but leaves C1 and bidi ones raw.
    expect(json.stdout.replace(/\n/g, "")).not.toMatch(TERMINAL_CONTROLS);
    expect(JSON.parse(json.stdout).ranks[1].model).toBe(forged);
  });

  it("quotes at most 80 characters of a line it cannot read", () => {
    expect(() => parseExposition(`${"x".repeat(200)}{a=1} 1`)).toThrow(new RegExp(`^bad label a in: ${"x".repeat(80)}…$`));
  });
});
