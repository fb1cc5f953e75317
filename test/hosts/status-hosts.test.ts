import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_INSTANCE, deploymentId, envPath, unitName } from "../../core/render/hosts/names";
import type { FakeEngine, UpResult } from "../helpers/engine";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { hubStubSource } from "../helpers/hubStub";
import { startPackageIndex, type PackageIndex } from "../helpers/packageIndex";
import { knownFlagsJson, STAND_IN_MODULES } from "../helpers/vllmParser";

/**
 * `status` reads each state of a rank from a fake host (real systemd and sshd), over SSH as a user
 * runs it (`status --stack test --identity KEY`, the stack file in a project folder of its own),
 * during a first deploy and after it: before anything (DOWN), the install (INSTALLING), the
 * download (DOWNLOADING), the first start (COMPILING), serving (READY), a restart that loads the
 * compiled cache (LOADING), a stop while a request runs (DRAINING), stopped (DOWN), and a rank that
 * crashes at start until systemd gives up (FAILED); each with its exit status (0, 1 or 3).
 *
 * The install and the download are the program's own steps, slow on purpose: the stub `rebel`
 * package (from a package index on loopback) takes INSTALL_SECONDS to import, as the install step
 * checks each import; the stub huggingface_hub takes DOWNLOAD_SECONDS to download
 * (test/helpers/hubStub.ts). The stub `vllm_rbln` puts the stand-in vllm (test/fixtures/fake-vllm)
 * into the venv's bin, where the real package's console script goes.
 */
const ROOT = path.resolve(__dirname, "../..");
const INSTALL_ROOT = "/opt/rbln-status-test";
const CACHE_ROOT = "/var/lib/rbln-status-test";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const INSTALL_SECONDS = 15;
const DOWNLOAD_SECONDS = 45;
const READY_AFTER_SECONDS = 20;
const STACK = "test";
const ID = deploymentId(STACK, DEFAULT_INSTANCE);
const UNIT = unitName(ID, "main", 0);
// On this machine's disk, which the hosts share outside their private paths.
const STAGE = fs.mkdtempSync("/var/lib/rbln-status-test-stage-");
const FAKE_VLLM = path.join(ROOT, "test", "fixtures", "fake-vllm", "vllm");
/** What the stand-in needs beside it in the venv's bin, as prepareStandInServer places it (test/helpers/standInServer.ts). */
const STAND_IN_FILES = ["vllm", "known-flags.json", ...STAND_IN_MODULES.map((module) => path.basename(module))];

const STUBS = [
  { name: "rebel-compiler", version: "0.12.0", module: "rebel", source: `import time\ntime.sleep(${INSTALL_SECONDS})\n` },
  {
    name: "vllm-rbln",
    version: "0.12.0",
    module: "vllm_rbln",
    extras: ["kv_connectors"],
    source: [
      "import os, shutil, sys",
      `for name in ${JSON.stringify(STAND_IN_FILES)}: shutil.copy(os.path.join(${JSON.stringify(STAGE)}, name), os.path.join(sys.prefix, "bin", name))`,
      'os.chmod(os.path.join(sys.prefix, "bin", "vllm"), 0o755)',
      "",
    ].join("\n"),
  },
  {
    name: "huggingface_hub",
    version: "0.35.3",
    module: "huggingface_hub",
    source: hubStubSource({ commit: "c0ffee".padEnd(40, "0"), log: `${STAGE}/hub.log`, seconds: DOWNLOAD_SECONDS }),
  },
];

let host: TestHost;
let index: PackageIndex;
let engine: FakeEngine;
let project: string;

function settings() {
  return fakeHostsSettings(
    [host],
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    {
      pip: { indexUrl: index.url, extraIndexUrls: [] },
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: String(READY_AFTER_SECONDS), FAKE_VLLM_STEP_SECONDS: "0.5" } },
      rollout: { shutdownTimeoutSeconds: 120 },
    },
  );
}

/** `rbln-serving status --stack test` in the stack's project folder, signing in with the host's client key. */
function status(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      path.join(ROOT, "node_modules/.bin/tsx"),
      [path.join(ROOT, "cli/main.ts"), "status", "--stack", STACK, "--identity", host.clientKeyPath, "--interval", "0.2", ...args],
      {
        cwd: project,
        env: { ...process.env, VLLM_API_KEY: "" },
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** The rank's row, its note (why it does not serve, its last log line) and the role's line. */
async function rankStatus(): Promise<{ code: number | null; row: string; note: string | undefined; role: string | undefined; stdout: string }> {
  const run = await status();
  expect(run.stderr.split("\n").filter((l) => l && !l.startsWith("warning: "))).toEqual([]);
  const lines = run.stdout.trimEnd().split("\n");
  return {
    code: run.code,
    row: lines[1]!,
    note: lines.find((l) => l.startsWith("http://") && l.includes(": ")),
    role: lines.find((l) => l.startsWith("main: ")),
    stdout: run.stdout,
  };
}

/** Polls `status` until the rank's state is `state`, and returns that reading. */
async function until(state: string, seconds = 90) {
  const deadline = Date.now() + seconds * 1000;
  let last: Awaited<ReturnType<typeof rankStatus>> | undefined;
  while (Date.now() < deadline) {
    last = await rankStatus();
    if (last.row.split(/ +/)[4] === state) return last;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`no ${state} within ${seconds}s; last:\n${last?.stdout}`);
}

const columnsOf = (row: string) => row.split(/ {2,}/);

beforeAll(async () => {
  fs.copyFileSync(FAKE_VLLM, `${STAGE}/vllm`);
  for (const module of STAND_IN_MODULES) fs.copyFileSync(module, `${STAGE}/${path.basename(module)}`);
  fs.writeFileSync(`${STAGE}/known-flags.json`, knownFlagsJson());
  fs.chmodSync(STAGE, 0o755);
  [[host], index] = await Promise.all([startHosts(1, { privatePaths: [INSTALL_ROOT, CACHE_ROOT] }), startPackageIndex(STUBS)]);
  expect((await host.run(`install -d ${FAKE_DEV} && touch ${FAKE_DEV}/rbln0 ${FAKE_DEV}/rbln1 ${FAKE_DEV}/rbln2 ${FAKE_DEV}/rbln3`)).status).toBe(0);
  engine = fakeHostsEngine([host]);
  // The stack's project folder: Pulumi.yaml and the stack file, as a user's project has them.
  project = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-status-project-"));
  fs.writeFileSync(path.join(project, "Pulumi.yaml"), "name: rbln-serving\nruntime: nodejs\n");
  const config = Object.fromEntries(Object.entries(settings()).map(([key, value]) => [`rbln-serving:${key}`, value]));
  fs.writeFileSync(path.join(project, `Pulumi.${STACK}.yaml`), stringify({ config }));
}, 180_000);

afterAll(async () => {
  await host?.stop();
  index?.stop();
  fs.rmSync(STAGE, { recursive: true, force: true });
  if (project) fs.rmSync(project, { recursive: true, force: true });
});

describe.sequential("status reads each state of a rank on a fake host over SSH", { timeout: 420_000 }, () => {
  it("during a first deploy: DOWN, INSTALLING, DOWNLOADING, COMPILING, then READY; exit 3, 1, 1, 1, 0", async () => {
    const before = await rankStatus();
    expect(before.code).toBe(3);
    expect(columnsOf(before.row).slice(1, 5)).toEqual(["npu-0", "main", "0", "DOWN"]);
    expect(before.note).toMatch(/not installed: its venv is incomplete and nothing installs it$/);

    const registrations = await registerServing(settings(), {
      hostOptions: {
        readinessIntervalSeconds: 1,
        restartSeconds: 1,
        startLimitBurst: 3,
        startLimitIntervalSeconds: 120,
        pipRetries: 0,
        pipTimeoutSeconds: 30,
        devRoot: FAKE_DEV,
      },
    });
    const deploy: Promise<UpResult> = engine.up(registrations);

    const installing = await until("INSTALLING");
    expect(installing.code).toBe(1);
    expect(installing.note).toMatch(/installing the packages/);
    expect(installing.role).toBe("main: 0 of 1 ranks ready (1 INSTALLING)");

    const downloading = await until("DOWNLOADING");
    expect(downloading.code).toBe(1);
    expect(downloading.note).toMatch(/downloading the weights/);

    const compiling = await until("COMPILING");
    expect(compiling.code).toBe(1);
    // With the last line of the rank's journal (systemd's own line, or the stand-in's, by then).
    expect(compiling.note).toMatch(/: no compiled cache of its model here: compiling \| last log line: .+/);
    expect(columnsOf(compiling.row)[5]).toMatch(/^\d+s$/);

    const result = await deploy;
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const ready = await until("READY");
    expect(ready.code).toBe(0);
    expect(ready.note).toBeUndefined();
    expect(ready.role).toBe("main: 1 of 1 ranks ready");
  });

  it("a restart that finds its compiled cache is LOADING, exit 1; then READY again", async () => {
    expect((await host.run(`systemctl restart ${UNIT}`)).status).toBe(0);
    const loading = await until("LOADING");
    expect(loading.code).toBe(1);
    expect(loading.note).toMatch(/: loading.* \| last log line: .+/);
    expect((await until("READY")).code).toBe(0);
  });

  it("a stop while a request runs is DRAINING, exit 1; once stopped, DOWN, exit 3", async () => {
    // A stream of 60 tokens at 0.5 s each: the stop waits for it (vLLM's --shutdown-timeout, 120 s here).
    const request = fetch(`http://${host.address}:8000/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "MiniMaxAI/MiniMax-M2.7", prompt: "hi", max_tokens: 60, stream: true }),
    }).then((r) => r.text());
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await host.run(`systemctl stop --no-block ${UNIT}`)).status).toBe(0);
    const draining = await until("DRAINING", 20);
    expect(draining.code).toBe(1);
    expect(draining.note).toMatch(/stopping: its requests finish/);
    await request;
    const down = await until("DOWN");
    expect(down.code).toBe(3);
    expect(down.note).toMatch(/unit inactive\/dead/);
  });

  it("a rank that crashes at start until systemd stops restarting it is FAILED, exit 3", async () => {
    const env = envPath(INSTALL_ROOT, ID, "main", 0);
    expect(
      (
        await host.run(
          `echo "FAKE_VLLM_MODE='crash'" >> ${env} && sed -i "s/^FAKE_VLLM_READY_AFTER=.*/FAKE_VLLM_READY_AFTER='0'/" ${env} && systemctl start ${UNIT}`,
        )
      ).status,
    ).toBe(0);
    // Failed for good once its restarts pass the start limit (3 here); in between it is restarting.
    await expect
      .poll(async () => (await host.run(`systemctl show -p ActiveState --value ${UNIT}`)).stdout.trim(), { timeout: 60_000, interval: 500 })
      .toBe("failed");
    const failed = await rankStatus();
    expect(failed.code).toBe(3);
    expect(columnsOf(failed.row)[4]).toBe("FAILED");
    expect(failed.note).toMatch(/unit failed \((exit-code|start-limit-hit)\) \| last log line: /);
    expect(failed.role).toBe("main: 0 of 1 ranks ready (1 FAILED)");
  });
});
