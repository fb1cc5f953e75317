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
 * the caches alone; the locks; taking over a unit of the names before deployment ids.
 */
const UNIT = "rbln-serving-test.main-0.service";
const LEGACY = "rbln-serving-main-0.service";
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
  // The rank's log, as journalctl -o cat prints it: what the test wrote to $STATE/journal.
  fs.writeFileSync(path.join(dir, "bin", "journalctl"), `#!/usr/bin/env bash\ncat "$STATE/journal" 2>/dev/null || true\n`, { mode: 0o755 });
  server = http.createServer((_, response) => response.writeHead(200).end("{}"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as { port: number }).port;
});

afterAll(() => {
  server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const hostLock = () => path.join(dir, "units.lock");
const envFile = (name: string) => path.join(dir, "env", name);

interface ApplyOptions {
  unitText?: string;
  hostLockWaitSeconds?: number;
  minFreeDiskGbToRestart?: number;
  compileMarker?: string;
  onStdout?: (stdout: string) => void;
}

function apply(stdin: string, { unitText = "[Service]\nExecStart=/bin/true\n", hostLockWaitSeconds = 60, minFreeDiskGbToRestart = 0, compileMarker = path.join(dir, "no-such-marker"), onStdout }: ApplyOptions = {}): Promise<Run> {
  const script = unitApplyScript({
    hostName: "test-host",
    unitDir: path.join(dir, "units"),
    unitName: UNIT,
    unitText,
    envPath: envFile("test.main-0.env"),
    envText: "VLLM_ENGINE_READY_TIMEOUT_S='9600'\n",
    stateDir: path.join(dir, "rollout"),
    cacheRoot: path.join(dir, "cache"),
    minFreeDiskGbToRestart,
    legacy: { unitName: LEGACY, envPath: envFile("main-0.env") },
    hostLock: hostLock(),
    hostLockWaitSeconds,
    rank: { unitName: UNIT, label: "main rank 0", port },
    wait: { probeHost: "127.0.0.1", timeoutSeconds: 30, intervalSeconds: 1, startLimitBurst: 3 },
    compileMarker,
  });
  return runBash(script, stdin, onStdout);
}

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  calls: string[];
}

function runBash(script: string, stdin: string, onStdout?: (stdout: string) => void): Promise<Run> {
  fs.rmSync(path.join(dir, "calls"), { force: true });
  const child = spawn("bash", ["-c", script], { env: { PATH: `${dir}/bin:${process.env.PATH}`, STATE: dir } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
    onStdout?.(stdout);
  });
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  child.stdin.end(stdin);
  return new Promise((resolve) =>
    child.on("close", (status) => {
      const calls = fs.existsSync(path.join(dir, "calls")) ? fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n") : [];
      resolve({ status, stdout, stderr, calls });
    }),
  );
}

/** Holds `lock` as another deploy would (one process, so killing it lets go); resolves once it holds it. */
async function holdLock(lock: string): Promise<{ release: () => void }> {
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  const holder = spawn("bash", ["-c", 'exec 9>"$1"; flock 9; echo held; exec sleep 60', "holder", lock]);
  await new Promise<void>((resolve) => holder.stdout.once("data", () => resolve()));
  return { release: () => holder.kill() };
}

describe("the unit step", () => {
  const secrets = "HF_TOKEN='hf_1'\nVLLM_API_KEY='key-1'\n";

  it("writes the env file (0600, secrets from stdin) and unit, enables and starts, then waits until the rank serves", async () => {
    const run = await apply(secrets);
    expect(run.status).toBe(0);
    expect(run.calls).toEqual(["daemon-reload", `enable --quiet ${UNIT}`, `reset-failed ${UNIT}`, `restart ${UNIT}`]);
    expect(fs.readFileSync(envFile("test.main-0.env"), "utf8")).toBe(`VLLM_ENGINE_READY_TIMEOUT_S='9600'\n${secrets}`);
    expect(fs.statSync(envFile("test.main-0.env")).mode & 0o777).toBe(0o600);
    expect(run.stdout).toMatch(/ready test-host: main rank 0 serves on port \d+/);
  });

  it("restarts nothing when run again with the same content", async () => {
    const run = await apply(secrets);
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([`is-active --quiet ${UNIT}`, `enable --quiet ${UNIT}`]);
    expect(run.stdout).toContain("unchanged and running");
  });

  it("restarts when a secret or the unit changes", async () => {
    expect((await apply("HF_TOKEN='hf_2'\n")).calls).toContain(`restart ${UNIT}`);
    expect((await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n" })).calls).toContain(`restart ${UNIT}`);
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
    const change = await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/sleep 2\n", minFreeDiskGbToRestart: 10 ** 9 });
    expect(change).toMatchObject({ status: 1, calls: [] });
    expect(lastLine(change)).toMatch(tooLittle);
    expect(files()).toEqual(before);
    // Unchanged and running: nothing restarts, so nothing is checked.
    expect(await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n", minFreeDiskGbToRestart: 10 ** 9 })).toMatchObject({ status: 0, calls: [`is-active --quiet ${UNIT}`, `enable --quiet ${UNIT}`] });
    // Unchanged but stopped: the start is refused.
    fs.rmSync(path.join(dir, "active"));
    const start = await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n", minFreeDiskGbToRestart: 10 ** 9 });
    expect(start).toMatchObject({ status: 1, calls: [`is-active --quiet ${UNIT}`] });
    expect(lastLine(start)).toMatch(tooLittle);
    // With the room there, the same start goes ahead.
    expect((await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n", minFreeDiskGbToRestart: 1 })).calls).toContain(`restart ${UNIT}`);
  });

  it("with its key's compiled cache placed ahead, a rank that compiles instead of loading fails the change and is rolled back; one that loads passes", async () => {
    const marker = path.join(dir, "cache", "vllm", "rbln-serving-complete", "compile-k1");
    fs.mkdirSync(path.dirname(marker), { recursive: true });
    fs.writeFileSync(marker, "sha256:00\n");
    const journal = path.join(dir, "journal");
    const loads = "Loaded rbln mega-cache bundle from /c/rbln/m/sig/rank0/mega_cache.bin\nrbln_backend [warm-up] model: inputs=1\n";
    try {
      fs.writeFileSync(journal, "rbln_backend [warm-up] model: inputs=1\nrbln_backend done: 12.50s\n");
      const miss = await apply(secrets, { unitText: "[Service]\nExecStart=/bin/true\n# compiled ahead\n", compileMarker: marker });
      expect(miss.status).toBe(1);
      expect(miss.stderr.trim().split("\n").pop()).toBe(
        `test-host main rank 0: the new config failed (compiled cache miss: the compiled cache of its key is here (${marker}), but the rank compiles instead of loading it); the previous config is restored and serving`,
      );
      fs.writeFileSync(journal, loads);
      const hit = await apply(secrets, { unitText: "[Service]\nExecStart=/bin/true\n# compiled ahead\n", compileMarker: marker });
      expect(hit.status).toBe(0);
      // Serving without a load line is a miss too (a compile that finished between two looks).
      fs.writeFileSync(journal, "fake vllm started\n");
      const silent = await apply(secrets, { unitText: "[Service]\nExecStart=/bin/true\n# compiled ahead, again\n", compileMarker: marker });
      expect(silent.status).toBe(1);
      expect(silent.stderr).toContain("compiled cache miss");
      // Without the marker nothing is expected: a rank that compiles its own key is waited for.
      const own = await apply(secrets, { unitText: "[Service]\nExecStart=/bin/true\n# compiled here\n" });
      expect(own.status).toBe(0);
    } finally {
      fs.rmSync(journal, { force: true });
      fs.rmSync(marker, { force: true });
    }
  });

  it("refuses to change a unit another deploy is changing, and touches nothing", async () => {
    const holder = await holdLock(path.join(dir, "rollout", `${UNIT}.lock`));
    try {
      const before = fs.readFileSync(path.join(dir, "units", UNIT), "utf8");
      const run = await apply("HF_TOKEN='hf_3'\n", { unitText: "[Service]\nExecStart=/bin/sleep 1\n" });
      expect(run.status).toBe(1);
      expect(run.calls).toEqual([]);
      expect(fs.readFileSync(path.join(dir, "units", UNIT), "utf8")).toBe(before);
    } finally {
      holder.release();
    }
  });

  it("waits while another deploy switches units on the host, then goes on", async () => {
    const other = await holdLock(hostLock());
    let released = false;
    const run = await apply("HF_TOKEN='hf_4'\n", {
      onStdout: (stdout) => {
        if (!released && stdout.includes("waiting up to 60s for another rbln-serving deploy to finish switching units on this host")) {
          released = true;
          other.release();
        }
      },
    });
    expect(released).toBe(true);
    expect(run.status).toBe(0);
    expect(run.calls).toContain(`restart ${UNIT}`);
  });

  it("fails with one line when the host lock stays taken past its bound, and touches nothing", async () => {
    const other = await holdLock(hostLock());
    try {
      const before = fs.readFileSync(path.join(dir, "units", UNIT), "utf8");
      const run = await apply("HF_TOKEN='hf_5'\n", { unitText: "[Service]\nExecStart=/bin/sleep 2\n", hostLockWaitSeconds: 1 });
      expect(run.status).toBe(1);
      expect(run.stderr.trim().split("\n").pop()).toBe(`test-host main rank 0: another rbln-serving deploy held ${hostLock()} for 1s; run again when it ends`);
      expect(run.calls).toEqual([]);
      expect(fs.readFileSync(path.join(dir, "units", UNIT), "utf8")).toBe(before);
    } finally {
      other.release();
    }
  });

  it("takes over the rank's unit of the names before deployment ids: stopped before the restart, removed once the new unit serves", async () => {
    const legacyState = ["previous", "previous-env", "pending"].map((suffix) => path.join(dir, "rollout", `${LEGACY}.${suffix}`));
    fs.writeFileSync(path.join(dir, "units", LEGACY), "# Managed by rbln-serving (Pulumi); local edits are overwritten.\n[Service]\nExecStart=/bin/true\n");
    fs.writeFileSync(envFile("main-0.env"), "HF_TOKEN='hf_old'\n");
    for (const file of legacyState) fs.writeFileSync(file, "");
    const run = await apply("HF_TOKEN='hf_6'\n");
    expect(run.status).toBe(0);
    expect(run.calls.slice(run.calls.indexOf(`disable --now --quiet ${LEGACY}`))).toEqual([`disable --now --quiet ${LEGACY}`, `reset-failed ${UNIT}`, `restart ${UNIT}`, "daemon-reload"]);
    expect(run.stdout).toContain(`unit test-host: removed ${LEGACY}, which ${UNIT} replaced`);
    for (const file of [path.join(dir, "units", LEGACY), envFile("main-0.env"), ...legacyState]) expect(fs.existsSync(file), file).toBe(false);
  });

  it("leaves it alone when it listens on another address: it belongs to another deployment on the host", async () => {
    fs.writeFileSync(path.join(dir, "units", LEGACY), "# Managed by rbln-serving (Pulumi); local edits are overwritten.\n[Service]\nExecStart=/bin/true \\\n    --host 10.0.0.2\n");
    const run = await apply("HF_TOKEN='hf_7'\n", { unitText: "[Service]\nExecStart=/bin/true \\\n    --host 10.0.0.1 \\\n    --port 8000\n" });
    expect(run.status).toBe(0);
    expect(run.calls.filter((call) => call.includes(LEGACY))).toEqual([]);
    expect(fs.existsSync(path.join(dir, "units", LEGACY))).toBe(true);
    // The same address, or all interfaces on either side, is in the way.
    for (const [ours, theirs] of [["10.0.0.2", "10.0.0.2"], ["0.0.0.0", "10.0.0.2"], [null, "10.0.0.2"], ["10.0.0.1", null]]) {
      const host = (address: string | null) => (address ? ` \\\n    --host ${address}` : "");
      fs.writeFileSync(path.join(dir, "units", LEGACY), `# Managed by rbln-serving (Pulumi); local edits are overwritten.\n[Service]\nExecStart=/bin/true${host(theirs)}\n`);
      const takeover = await apply(`HF_TOKEN='hf_${ours}_${theirs}'\n`, { unitText: `[Service]\nExecStart=/bin/true${host(ours)}\n` });
      expect(takeover.calls, `${ours} ${theirs}`).toContain(`disable --now --quiet ${LEGACY}`);
      expect(fs.existsSync(path.join(dir, "units", LEGACY))).toBe(false);
    }
  });

  it("leaves a unit of that name alone when rbln-serving did not write it", async () => {
    fs.writeFileSync(path.join(dir, "units", LEGACY), "[Service]\nExecStart=/bin/true\n");
    const run = await apply("HF_TOKEN='hf_8'\n");
    expect(run.status).toBe(0);
    expect(run.calls.filter((call) => call.includes(LEGACY))).toEqual([]);
    expect(fs.existsSync(path.join(dir, "units", LEGACY))).toBe(true);
  });

  it("on removal stops, disables and deletes the unit and env file, and touches nothing else", async () => {
    fs.mkdirSync(path.join(dir, "cache", "huggingface"), { recursive: true });
    const script = unitRemoveScript({ hostName: "test-host", unitDir: path.join(dir, "units"), unitName: UNIT, envPath: envFile("test.main-0.env"), stateDir: path.join(dir, "rollout") });
    const run = await runBash(script, "");
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([`disable --now --quiet ${UNIT}`, "daemon-reload"]);
    expect(fs.existsSync(path.join(dir, "units", UNIT))).toBe(false);
    expect(fs.existsSync(envFile("test.main-0.env"))).toBe(false);
    expect(fs.existsSync(path.join(dir, "cache", "huggingface"))).toBe(true);
  });
});
