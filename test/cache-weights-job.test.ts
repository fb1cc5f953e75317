import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Job } from "kubernetes-models/batch/v1";
import { afterAll, describe, expect, it } from "vitest";
import { weightsMarker } from "../core/cache/markers";
import { waitForWeights, weightsJob } from "../core/render/kubernetes/weights";
import type { ModelRef } from "../core/plan/types";
import { parseProgressLine } from "../core/render/progress";
import { hubStubSource } from "./helpers/hubStub";

/** The Kubernetes weights Job: its object against the API schema, and its script under real bash with a stub hub. */
const MODELS: ModelRef[] = [
  { id: "MiniMaxAI/MiniMax-M2.7", use: "model", revision: null, roles: ["main"] },
  { id: "example/eagle3-draft", use: "draft", revision: "0123456789abcdef0123456789abcdef01234567", roles: ["main"] },
];
const input = {
  instance: "rbln-serving",
  namespace: "llm",
  labels: { "app.kubernetes.io/instance": "rbln-serving" },
  image: "registry.example.com/vllm-rbln:0.12.0",
  models: MODELS,
  hfHome: "/data/hf",
  weightsClaim: "rbln-serving-weights",
  activeDeadlineSeconds: 28_800,
};

const work = fs.mkdtempSync(path.join(os.tmpdir(), "weights-job-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** A stub huggingface_hub: writes a snapshot like the hub's cache layout, counts calls, fails on request. */
function stubHub(): string {
  const dir = path.join(work, "stub", "huggingface_hub");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, "__init__.py"),
    [
      "import os, pathlib",
      "def snapshot_download(repo_id, revision=None):",
      "    if os.environ.get('STUB_FAIL'): raise RuntimeError('hub unreachable')",
      "    assert os.environ.get('HF_HUB_OFFLINE') == '0'",
      "    commit = revision or 'f' * 40",
      "    snap = pathlib.Path(os.environ['HF_HOME']) / 'hub' / ('models--' + repo_id.replace('/', '--')) / 'snapshots' / commit",
      "    snap.mkdir(parents=True, exist_ok=True)",
      "    with open(os.path.join(os.environ['HF_HOME'], 'calls'), 'a') as calls: calls.write(repo_id + '\\n')",
      "    return str(snap)",
      "",
    ].join("\n"),
  );
  return path.dirname(dir);
}

function runJob(hfHome: string, extraEnv: Record<string, string> = {}) {
  const job = weightsJob({ ...input, hfHome });
  const container = job.spec!.template.spec!.containers[0]!;
  const [shell, flag, script] = container.command as string[];
  // stdin not a socket: bash reads ~/.bashrc when it thinks sshd started it.
  return spawnSync(shell!, [flag!, script!], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH, HF_HUB_OFFLINE: "1", HF_HOME: hfHome, PYTHONPATH: stubHub(), ...extraEnv },
  });
}

describe("the weights Job", () => {
  it("validates against the Kubernetes API schema, and its name follows the models and revisions only", () => {
    const job = weightsJob(input);
    expect(() => new Job(job as any).validate()).not.toThrow();
    expect(job.metadata.name).toMatch(/^rbln-serving-weights-[0-9a-f]{10}$/);
    expect(weightsJob({ ...input, image: "other:1" }).metadata.name).toBe(job.metadata.name);
    expect(weightsJob({ ...input, models: [MODELS[0]!] }).metadata.name).not.toBe(job.metadata.name);
    expect(job.spec!.template.spec!.restartPolicy).toBe("OnFailure");
  });

  it("downloads each model once at its revision, records the resolved commit, and skips what is complete", () => {
    const hfHome = path.join(work, "hf");
    const first = runJob(hfHome);
    expect(first.stderr).toBe("");
    expect(first.status).toBe(0);
    expect(fs.readFileSync(weightsMarker(hfHome, MODELS[0]!.id), "utf8")).toBe(`${"f".repeat(40)}\n`);
    expect(fs.readFileSync(weightsMarker(hfHome, MODELS[1]!.id), "utf8")).toBe(`${MODELS[1]!.revision}\n`);
    const second = runJob(hfHome);
    expect(second.status).toBe(0);
    expect(second.stdout).toContain("already complete");
    expect(fs.readFileSync(path.join(hfHome, "calls"), "utf8").trim().split("\n")).toEqual(MODELS.map((m) => m.id));
  });

  it("downloads a model again when its pinned revision changes, and pods wait until the marker holds that commit", () => {
    const hfHome = path.join(work, "hf-repinned");
    expect(runJob(hfHome).status).toBe(0);
    const repinned: ModelRef[] = [MODELS[0]!, { ...MODELS[1]!, revision: "a".repeat(40) }];
    const wait = waitForWeights(input.image, hfHome, repinned);
    const [shell, flag, script, ...args] = wait.command as string[];
    // The marker still holds the old commit: the wait goes on (cut off by the timeout).
    const waiting = spawnSync(shell!, [flag!, script!, ...args], { encoding: "utf8", timeout: 1500 });
    expect(waiting.stdout).toContain(`waiting for ${weightsMarker(hfHome, MODELS[1]!.id)} at ${"a".repeat(40)}`);
    const job = weightsJob({ ...input, hfHome, models: repinned });
    const [jobShell, jobFlag, jobScript] = job.spec!.template.spec!.containers[0]!.command as string[];
    const second = spawnSync(jobShell!, [jobFlag!, jobScript!], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: process.env.PATH, HF_HOME: hfHome, PYTHONPATH: stubHub() },
    });
    expect(second.status).toBe(0);
    expect(fs.readFileSync(weightsMarker(hfHome, MODELS[1]!.id), "utf8")).toBe(`${"a".repeat(40)}\n`);
    expect(spawnSync(shell!, [flag!, script!, ...args], { encoding: "utf8", timeout: 5000 }).status).toBe(0);
  });

  it("fails on a failed download and writes no marker", () => {
    const hfHome = path.join(work, "hf-failing");
    const result = runJob(hfHome, { STUB_FAIL: "1" });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain("hub unreachable");
    expect(fs.existsSync(weightsMarker(hfHome, MODELS[0]!.id))).toBe(false);
  });

  it("serving pods wait for every marker and mount the weights read-only", () => {
    const wait = waitForWeights(input.image, input.hfHome, MODELS);
    expect(wait.command!.slice(4)).toEqual(MODELS.flatMap((m) => [weightsMarker(input.hfHome, m.id), m.revision ?? ""]));
    expect(wait.volumeMounts).toEqual([{ name: "weights", mountPath: "/data/hf", readOnly: true }]);
    const hfHome = path.join(work, "hf");
    const [shell, flag, script, ...args] = wait.command as string[];
    expect(spawnSync(shell!, [flag!, script!, ...args.map((a) => a.replace("/data/hf", hfHome))], { encoding: "utf8" }).status).toBe(0);
  });
});

describe("the weights Job's progress lines", () => {
  const token = "hf_token/29 k8s secret";
  const hfHome = path.join(work, "hf-progress");
  /** The hub stub of the hosts' tests as the image's huggingface_hub: writes its files in parts over 4 s, and prints the token it got. */
  function leakyHub(): string {
    const dir = path.join(work, "leaky-stub", "huggingface_hub");
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(
      path.join(dir, "__init__.py"),
      hubStubSource({ commit: "c".repeat(40), log: path.join(work, "leaky-hub.log"), seconds: 4, chunks: 8, leak: true }),
    );
    return path.dirname(dir);
  }
  const job = weightsJob({ ...input, hfHome, models: [MODELS[0]!], progressSeconds: 1 });
  const script = (job.spec!.template.spec!.containers[0]!.command as string[])[2]!;

  it("prints the download's bytes of the hub's size, growing, with rate and ETA, as the pod and against the Job's deadline, the token masked", () => {
    const run = spawnSync("bash", ["-c", script], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: process.env.PATH, HF_HOME: hfHome, HF_TOKEN: token, HOSTNAME: "rbln-serving-weights-abc12-x7k2p", PYTHONPATH: leakyHub() },
    });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    const lines = run.stdout
      .split("\n")
      .map(parseProgressLine)
      .filter((l) => l !== null);
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) {
      expect(line).toMatchObject({ host: "rbln-serving-weights-abc12-x7k2p", who: MODELS[0]!.id, phase: "download", budget: "8 h 0 min" });
      // The stub's files: 22,011 bytes of weights and a config of 2.
      expect(line.amount).toMatch(/^\d+(\.\d)? k?B of 22\.0 kB(, \d+(\.\d)? k?B\/s(, ETA \d+ s)?)?$/);
    }
    const done = lines.map((l) => {
      const [, count, kilo] = /^([\d.]+) (k?)B/.exec(l.amount!)!;
      return Number(count) * (kilo ? 1000 : 1);
    });
    expect(done.at(-1)!).toBeGreaterThan(done[0]!);
    expect(lines.slice(1).some((l) => /\/s, ETA \d+ s$/.test(l.amount!))).toBe(true);
    // The stub printed the token, as written and URL-encoded: the mask caught both.
    expect(run.stdout).toContain("hub stub: token *** in a URL: https://hub.example/x?t=***");
    for (const form of [token, encodeURIComponent(token), token.replace(/ /g, "+")]) expect(run.stdout + run.stderr).not.toContain(form);
    expect(fs.readFileSync(weightsMarker(hfHome, MODELS[0]!.id), "utf8")).toBe(`${"c".repeat(40)}\n`);
  });

  it("is a script shellcheck accepts, rendered as the Job runs it", () => {
    const file = path.join(work, "fetch-weights.sh");
    fs.writeFileSync(file, script);
    const check = spawnSync("shellcheck", ["--severity=style", "--shell=bash", file], { encoding: "utf8" });
    expect(check.stdout).toBe("");
    expect(check.status).toBe(0);
  });
});
