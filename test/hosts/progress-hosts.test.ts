import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseProgressLine, type ParsedProgressLine } from "../../core/render/progress";
import * as path from "node:path";
import { STAND_IN_MODULES, knownFlagsJson } from "../helpers/vllmParser";
import type { FakeEngine, UpResult } from "../helpers/engine";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { hubStubSource } from "../helpers/hubStub";
import { startPackageIndex, type PackageIndex } from "../helpers/packageIndex";

/**
 * Issue 29: a first deploy on a fake NPU host (real systemd and sshd), as `pulumi up` shows it: the
 * install (pip against a slow loopback index whose stub vllm-rbln wheel carries the stand-in vllm),
 * the download (the hub stub writes its files in parts), the rank's compile and, on the next ups,
 * its load each last several progress intervals (shortened to 1 s), and every step prints progress
 * lines in the one format (docs/progress.md) with its amounts, while pipPassword, hfToken and apiKey
 * are set, and none of them appears in anything a step prints, although the hub stub prints the
 * token it gets.
 */
const INSTALL_ROOT = "/opt/rbln-progress-test";
const CACHE_ROOT = "/var/lib/rbln-progress-test";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const COMMIT = "c0ffee0000000000000000000000000000000029";
const LOGS = fs.mkdtempSync("/var/lib/rbln-progress-test-logs-");
const MODEL = "MiniMaxAI/MiniMax-M2.7";
// Characters a URL encodes, so a leak in either form would show.
const SECRETS = { pipPassword: "pip pass/word+29", hfToken: "hf_token/29 secret", apiKey: "api-key-29 secret" };
const FAKE_VLLM = fs.readFileSync(`${__dirname}/../fixtures/fake-vllm/vllm`, "utf8");

let host: TestHost;
let index: PackageIndex;
let engine: FakeEngine;

const settings = (readyAfter: string) =>
  fakeHostsSettings(
    [host],
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    { pip: { indexUrl: index.url, extraIndexUrls: [], username: "deployer" }, extraEnv: { main: { FAKE_VLLM_READY_AFTER: readyAfter } } },
  );

const up = async (readyAfter: string): Promise<UpResult> =>
  engine.up(
    await registerServing(settings(readyAfter), {
      hostOptions: { readinessIntervalSeconds: 1, progressSeconds: 1, restartSeconds: 1, pipRetries: 0, pipTimeoutSeconds: 30, devRoot: FAKE_DEV },
      secrets: SECRETS,
    }),
  );

/** The progress lines a step printed, by its name's end. */
function progressOf(result: UpResult, step: string): ParsedProgressLine[] {
  const run = result.runs.find((r) => r.name.endsWith(`-${step}`));
  if (!run) throw new Error(`no step ${step} ran: ${result.runs.map((r) => r.name).join(", ")}`);
  return run.stdout
    .split("\n")
    .map(parseProgressLine)
    .filter((p): p is ParsedProgressLine => p !== null);
}

/** Everything every step printed. */
const printed = (result: UpResult) => result.runs.map((r) => `${r.stdout}\n${r.stderr}`).join("\n");

function expectNoSecret(text: string): void {
  for (const secret of Object.values(SECRETS))
    for (const form of [secret, encodeURIComponent(secret), encodeURIComponent(secret).replaceAll("%20", "+")]) expect(text).not.toContain(form);
}

/** "22.0 kB" and the like as bytes, to the tenth of its unit. */
function bytesOf(text: string): number {
  const [, value, unit] = /^([\d.]+) (B|kB|MB|GB)/.exec(text)!;
  return Number(value) * 1000 ** ["B", "kB", "MB", "GB"].indexOf(unit!);
}

beforeAll(async () => {
  fs.chmodSync(LOGS, 0o1777);
  [[host], index] = await Promise.all([
    startHosts(1, { privatePaths: [INSTALL_ROOT, CACHE_ROOT] }),
    startPackageIndex(
      [
        { name: "rebel-compiler", version: "0.12.0", module: "rebel", source: "" },
        {
          name: "vllm-rbln",
          version: "0.12.0",
          module: "vllm_rbln",
          source: "",
          extras: ["kv_connectors"],
          // The stand-in vllm, and what it reads beside it, into the venv's bin.
          scripts: {
            vllm: FAKE_VLLM,
            ...Object.fromEntries(STAND_IN_MODULES.map((module) => [path.basename(module), fs.readFileSync(module, "utf8")])),
            "known-flags.json": knownFlagsJson(),
          },
        },
        {
          name: "huggingface_hub",
          version: "0.35.3",
          module: "huggingface_hub",
          source: hubStubSource({ commit: COMMIT, log: `${LOGS}/hub`, seconds: 5, chunks: 10, leak: true }),
        },
      ],
      { delaySeconds: 1.5 },
    ),
  ]);
  // The NPU device nodes the unit waits for, as plain files.
  const devices = await host!.run(`install -d ${FAKE_DEV} && touch ${[0, 1, 2, 3].map((i) => `${FAKE_DEV}/rbln${i}`).join(" ")}`);
  if (devices.status !== 0) throw new Error(devices.stderr);
  engine = fakeHostsEngine([host!]);
}, 120_000);

afterAll(async () => {
  await host?.stop();
  index?.stop();
  fs.rmSync(LOGS, { recursive: true, force: true });
});

describe("progress lines of a first deploy on a fake host, secrets set", { timeout: 300_000 }, () => {
  let first: UpResult;

  it("the first up installs, downloads, compiles and serves", async () => {
    first = await up("5");
    expect(first.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    expect(first.runs.map((r) => r.name.replace(/^rbln-serving-npu-0-/, "")).sort()).toEqual(["install", "main-0", "weights"]);
  });

  it("install: packages collected, then installed of the total pip names, against the install budget", () => {
    const lines = progressOf(first, "install").filter((p) => p.who === "packages");
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) {
      expect(line).toMatchObject({ host: "npu-0", phase: "install", budget: "2 h 0 min" });
      expect(line.amount).toMatch(/^packages (\d+ collected|\d+ of 2 installed)$/);
    }
  });

  it("download: bytes on disk of the hub's size, growing, with rate and ETA", () => {
    const lines = progressOf(first, "weights").filter((p) => p.phase === "download");
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) {
      expect(line).toMatchObject({ host: "npu-0", who: MODEL, budget: "8 h 0 min" });
      // The stub's files: 22,011 bytes of weights and a config of 2.
      expect(line.amount).toMatch(/^\d+(\.\d)? k?B of 22\.0 kB(, \d+(\.\d)? k?B\/s(, ETA \d+ s)?)?$/);
    }
    const done = lines.map((l) => bytesOf(l.amount!));
    expect(done.at(-1)!).toBeGreaterThan(done[0]!);
    // What is on disk is counted as files: never more than the total (directories have sizes too).
    for (const bytes of done) expect(bytes).toBeLessThanOrEqual(22_000);
    expect(lines.slice(1).some((l) => /\/s, ETA \d+ s$/.test(l.amount!))).toBe(true);
  });

  it("compile: the rank's phase, against the engine's ready timeout, and the last line of its log", () => {
    const lines = progressOf(first, "main-0");
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) {
      expect(line).toMatchObject({ host: "npu-0", who: "main/0", phase: "compile", budget: "2 h 40 min", amount: null });
    }
    // The rank's own log lines (the stand-in's start line, then its warm-up), not systemd's about it.
    expect(lines.at(-1)!.last).toMatch(/^(fake vllm|.*rbln_backend \[warm-up\]|.*mega-cache)/);
  });

  it("load: a restart finds the compiled bundle and loads it, first untimed, then against the last load", async () => {
    const second = await up("4");
    expect(second.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const lines = progressOf(second, "main-0");
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) expect(line).toMatchObject({ who: "main/0", phase: "load", amount: "expected: not timed here yet" });
    const third = await up("3");
    expect(third.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const timed = progressOf(third, "main-0");
    expect(timed.length).toBeGreaterThanOrEqual(2);
    for (const line of timed) expect(line.amount).toMatch(/^expected \d+ s \(the last load here\)$/);
    expectNoSecret(printed(second) + printed(third));
  });

  it("no secret appears in what any step printed, though the hub stub printed the token it got", () => {
    const text = printed(first);
    expect(text).toContain("hub stub: token *** in a URL: https://hub.example/x?t=***");
    expectNoSecret(text);
  });
});
