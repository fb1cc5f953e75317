import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unitApplyScript, unitRemoveScript } from "../core/render/hosts/scripts";

/**
 * The unit step's script under real bash with a stand-in systemctl that records its calls: a
 * second run with the same content restarts nothing, a changed secret restarts, removal leaves
 * the caches alone.
 */
let dir: string;
let server: http.Server;
let port: number;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "unit-apply-"));
  fs.mkdirSync(path.join(dir, "bin"));
  fs.mkdirSync(path.join(dir, "units"));
  fs.writeFileSync(
    path.join(dir, "bin", "systemctl"),
    `#!/usr/bin/env bash\necho "$*" >> "$STATE/calls"\ncase "$1" in\n  is-active) [ -f "$STATE/active" ] ;;\n  restart) touch "$STATE/active" ;;\n  disable) rm -f "$STATE/active" ;;\nesac\n`,
    { mode: 0o755 },
  );
  server = http.createServer((_, response) => response.writeHead(200).end("{}"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as { port: number }).port;
});

afterAll(() => {
  server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

type Run = { status: number | null; stdout: string; stderr: string; calls: string[] };

function apply(stdin: string, unitText = "[Service]\nExecStart=/bin/true\n", minFreeDiskGbToRestart = 0): Promise<Run> {
  const script = unitApplyScript({
    hostName: "test-host",
    unitDir: path.join(dir, "units"),
    unitName: "rbln-serving-main-0.service",
    unitText,
    envPath: path.join(dir, "env", "main-0.env"),
    envText: "VLLM_ENGINE_READY_TIMEOUT_S='9600'\n",
    stateDir: path.join(dir, "rollout"),
    cacheRoot: path.join(dir, "cache"),
    minFreeDiskGbToRestart,
    rank: { unitName: "rbln-serving-main-0.service", label: "main rank 0", port },
    wait: { probeHost: "127.0.0.1", timeoutSeconds: 30, intervalSeconds: 1, startLimitBurst: 3 },
  });
  return runBash(script, stdin);
}

function runBash(script: string, stdin: string): Promise<Run> {
  fs.rmSync(path.join(dir, "calls"), { force: true });
  const child = spawn("bash", ["-c", script], { env: { PATH: `${dir}/bin:${process.env.PATH}`, STATE: dir } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  child.stdin.end(stdin);
  return new Promise((resolve) =>
    child.on("close", (status) => {
      const calls = fs.existsSync(path.join(dir, "calls")) ? fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n") : [];
      resolve({ status, stdout, stderr, calls });
    }),
  );
}

describe("the unit step", () => {
  const secrets = "HF_TOKEN='hf_1'\nVLLM_API_KEY='key-1'\n";

  it("writes the env file (0600, secrets from stdin) and unit, enables and starts, then waits until the rank serves", async () => {
    const run = await apply(secrets);
    expect(run.status).toBe(0);
    expect(run.calls).toEqual(["daemon-reload", "enable --quiet rbln-serving-main-0.service", "reset-failed rbln-serving-main-0.service", "restart rbln-serving-main-0.service"]);
    expect(fs.readFileSync(path.join(dir, "env", "main-0.env"), "utf8")).toBe(`VLLM_ENGINE_READY_TIMEOUT_S='9600'\n${secrets}`);
    expect(fs.statSync(path.join(dir, "env", "main-0.env")).mode & 0o777).toBe(0o600);
    expect(run.stdout).toMatch(/ready test-host: main rank 0 serves on port \d+/);
  });

  it("restarts nothing when run again with the same content", async () => {
    const run = await apply(secrets);
    expect(run.status).toBe(0);
    expect(run.calls).toEqual(["is-active --quiet rbln-serving-main-0.service", "enable --quiet rbln-serving-main-0.service"]);
    expect(run.stdout).toContain("unchanged and running");
  });

  it("restarts when a secret or the unit changes", async () => {
    expect((await apply("HF_TOKEN='hf_2'\n")).calls).toContain("restart rbln-serving-main-0.service");
    expect((await apply("HF_TOKEN='hf_2'\n", "[Service]\nExecStart=/bin/false\n")).calls).toContain("restart rbln-serving-main-0.service");
  });

  it("checks free disk under the cache root before a (re)start, and on too little changes nothing", async () => {
    fs.mkdirSync(path.join(dir, "cache"), { recursive: true });
    // Every file of the fake host but the harness's record of systemctl calls, with its content.
    const files = () =>
      fs.readdirSync(dir, { recursive: true }).map(String).filter((f) => f !== "calls").sort().map((f) => [f, fs.statSync(path.join(dir, f)).isFile() ? fs.readFileSync(path.join(dir, f), "utf8") : ""]);
    const tooLittle = new RegExp(`^test-host main rank 0: only \\d+ GiB free under ${dir}/cache, need 1000000000 GiB to restart \\(the compile cache grows on a start\\); nothing changed$`);
    // The step's own line is the last (bash may print the machine's ~/.bashrc noise before it).
    const lastLine = (run: Run) => run.stderr.trim().split("\n").pop();
    const before = files();
    // A changed unit: refused before its files are moved into place; the running rank is not touched.
    const change = await apply("HF_TOKEN='hf_2'\n", "[Service]\nExecStart=/bin/sleep 2\n", 10 ** 9);
    expect(change).toMatchObject({ status: 1, calls: [] });
    expect(lastLine(change)).toMatch(tooLittle);
    expect(files()).toEqual(before);
    // Unchanged and running: nothing restarts, so nothing is checked.
    expect(await apply("HF_TOKEN='hf_2'\n", "[Service]\nExecStart=/bin/false\n", 10 ** 9)).toMatchObject({ status: 0, calls: ["is-active --quiet rbln-serving-main-0.service", "enable --quiet rbln-serving-main-0.service"] });
    // Unchanged but stopped: the start is refused.
    fs.rmSync(path.join(dir, "active"));
    const start = await apply("HF_TOKEN='hf_2'\n", "[Service]\nExecStart=/bin/false\n", 10 ** 9);
    expect(start).toMatchObject({ status: 1, calls: ["is-active --quiet rbln-serving-main-0.service"] });
    expect(lastLine(start)).toMatch(tooLittle);
    // With the room there, the same start goes ahead.
    expect((await apply("HF_TOKEN='hf_2'\n", "[Service]\nExecStart=/bin/false\n", 1)).calls).toContain("restart rbln-serving-main-0.service");
  });

  it("refuses to change a unit another deploy is changing, and touches nothing", async () => {
    const lock = path.join(dir, "rollout", "rbln-serving-main-0.service.lock");
    const holder = spawn("flock", [lock, "sleep", "30"]);
    try {
      for (let i = 0; i < 50 && !fs.existsSync(lock); i++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 200));
      const before = fs.readFileSync(path.join(dir, "units", "rbln-serving-main-0.service"), "utf8");
      const run = await apply("HF_TOKEN='hf_3'\n", "[Service]\nExecStart=/bin/sleep 1\n");
      expect(run.status).toBe(1);
      expect(run.calls).toEqual([]);
      expect(fs.readFileSync(path.join(dir, "units", "rbln-serving-main-0.service"), "utf8")).toBe(before);
    } finally {
      holder.kill();
    }
  });

  it("on removal stops, disables and deletes the unit and env file, and touches nothing else", async () => {
    fs.mkdirSync(path.join(dir, "cache", "huggingface"), { recursive: true });
    const script = unitRemoveScript({ hostName: "test-host", unitDir: path.join(dir, "units"), unitName: "rbln-serving-main-0.service", envPath: path.join(dir, "env", "main-0.env"), stateDir: path.join(dir, "rollout") });
    const run = await runBash(script, "");
    expect(run.status).toBe(0);
    expect(run.calls).toEqual(["disable --now --quiet rbln-serving-main-0.service", "daemon-reload"]);
    expect(fs.existsSync(path.join(dir, "units", "rbln-serving-main-0.service"))).toBe(false);
    expect(fs.existsSync(path.join(dir, "env", "main-0.env"))).toBe(false);
    expect(fs.existsSync(path.join(dir, "cache", "huggingface"))).toBe(true);
  });
});
