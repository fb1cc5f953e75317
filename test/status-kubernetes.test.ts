import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classifyPods, JobObject, PodObject } from "../core/status/pods";
import { kubectlList } from "./helpers/kubeStatusObjects";

/**
 * `status` on Kubernetes: the states of a stack's serving pods, from `kubectl get pods,jobs -o json`
 * (core/status/pods.ts). The recorded List (test/fixtures/status/kubectl-get-pods-jobs.json) holds a
 * pod in each state and the compile Jobs, built and validated with kubernetes-models
 * (test/helpers/kubeStatusObjects.ts); `UPDATE_FIXTURES=1` writes it again. The CLI reads it through
 * a kubectl stand-in on PATH, as there is no cluster here.
 */
const ROOT = path.resolve(__dirname, "..");
const FIXTURE = path.join(__dirname, "fixtures", "status", "kubectl-get-pods-jobs.json");
if (process.env.UPDATE_FIXTURES) fs.writeFileSync(FIXTURE, `${JSON.stringify(kubectlList(), null, 2)}\n`);
const recorded = JSON.parse(fs.readFileSync(FIXTURE, "utf8")) as { items: { kind: string }[] };
const pods = recorded.items.filter((i) => i.kind === "Pod").map((i) => PodObject.parse(i));
const jobs = recorded.items.filter((i) => i.kind === "Job").map((i) => JobObject.parse(i));

let standIn: string;
beforeAll(() => {
  // A stand-in for kubectl (no cluster here): prints the recorded List, and its arguments on stderr when asked.
  standIn = fs.mkdtempSync(path.join(os.tmpdir(), "kubectl-stand-in-"));
  fs.writeFileSync(
    path.join(standIn, "kubectl"),
    // `logs POD ...`: two lines of that pod's log, as `--tail 1` is asked for; the last names the pod.
    `#!/bin/sh\nif [ "$1" = logs ]; then echo "earlier line"; echo "$2: Compiling layer 31/62"; exit 0; fi\n` +
      `[ -z "$KUBECTL_ARGS_FILE" ] || echo "$@" >> "$KUBECTL_ARGS_FILE"\ncat ${JSON.stringify(FIXTURE)}\n`,
    { mode: 0o755 },
  );
});
afterAll(() => fs.rmSync(standIn, { recursive: true, force: true }));

function statusCli(args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", "status", "--", ...args], {
      cwd: ROOT,
      env: { ...process.env, PATH: `${standIn}:${process.env.PATH}`, ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

describe("a serving pod's state", () => {
  it("the recorded List is what the builder makes (kubernetes-models validated each object)", () => {
    expect(recorded).toEqual(JSON.parse(JSON.stringify(kubectlList())));
  });

  it("tells every state apart, from phase, conditions, containers and the role's compile Job", () => {
    const states = Object.fromEntries(classifyPods(pods, jobs, ["prefill", "decode"]).map((p) => [p.pod, [p.state, p.detail]]));
    expect(states).toEqual({
      "rbln-serving-prefill-a": ["READY", null],
      "rbln-serving-prefill-b": ["LOADING", "loading the cache its compile Job compiled"],
      "rbln-serving-prefill-c": ["DRAINING", "terminating: its requests finish"],
      "rbln-serving-decode-a": ["COMPILING", "its role's compile Job runs"],
      "rbln-serving-decode-b": ["DOWNLOADING", "waiting for the weights Job"],
      "rbln-serving-decode-c": ["INSTALLING", "ContainerCreating: pulling the image and creating the containers"],
      "rbln-serving-decode-d": ["FAILED", "vllm: CrashLoopBackOff: back-off 5m0s restarting failed container; last exit 1 (Error)"],
      "rbln-serving-decode-e": ["DOWN", "not scheduled: Unschedulable 0/3 nodes are available: 3 Insufficient rebellions.ai/ATOM."],
    });
  });

  it("without a compile Job, a started pod that is not ready is compiling (or loading what an earlier start saved)", () => {
    const [decode] = classifyPods(
      pods.filter((p) => p.metadata.name === "rbln-serving-decode-a"),
      [],
      ["decode"],
    );
    expect(decode).toMatchObject({ state: "COMPILING", detail: expect.stringMatching(/^not ready: compiling, or loading/) });
  });

  it("keeps only the roles' pods, in role order, with their restarts and node", () => {
    const listed = classifyPods(pods, jobs, ["decode"]);
    expect(listed.map((p) => p.role)).toEqual(Array(5).fill("decode"));
    expect(listed.find((p) => p.pod === "rbln-serving-decode-d")).toMatchObject({ restarts: 4, node: "npu-node-1" });
  });
});

describe("status --stack on a Kubernetes stack", () => {
  it("reads the instance's pods and Jobs with kubectl, prints a row per pod and a line per role, and exits 3 for the failed pod", async () => {
    const argsFile = path.join(standIn, "args");
    const run = await statusCli(["--stack", "prod"], { KUBECTL_ARGS_FILE: argsFile });
    expect(run.status, run.stderr).toBe(3);
    expect(fs.readFileSync(argsFile, "utf8").trim()).toBe(
      "get pods,jobs --namespace llm-serving --selector app.kubernetes.io/instance=rbln-serving --output json",
    );
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^POD +ROLE +STATE +AGE +RESTARTS +NODE$/);
    expect(lines[1]).toMatch(/^rbln-serving-prefill-a +prefill +READY +\d+h \d+m +0 +npu-node-1$/);
    expect(lines).toContain("JOB rbln-serving-compile-decode-9a8b7c6d5e  running");
    // A pod whose vLLM runs and does not serve yet shows its log's last line, as a host's rank shows its journal's.
    expect(lines).toContain("rbln-serving-decode-a: its role's compile Job runs | last log line: rbln-serving-decode-a: Compiling layer 31/62");
    expect(lines.filter((l) => l.includes("last log line")).map((l) => l.split(":")[0])).not.toContain("rbln-serving-decode-b");
    expect(lines.slice(-2)).toEqual([
      "prefill: 1 of 3 pods ready (1 LOADING, 1 DRAINING)",
      "decode: 0 of 5 pods ready (1 INSTALLING, 1 DOWNLOADING, 1 COMPILING, 1 FAILED, 1 DOWN)",
    ]);
    const json = await statusCli(["--stack", "prod", "--format", "json"]);
    const readPods = JSON.parse(json.stdout).kubernetes.pods as { pod: string; state: string; lastLine: string | null }[];
    expect(readPods.filter((p) => p.lastLine !== null).map((p) => p.state)).toEqual(["LOADING", "DRAINING", "COMPILING", "FAILED", "DOWN"]);
    expect(readPods.map((p) => p.state)).toEqual(["READY", "LOADING", "DRAINING", "COMPILING", "DOWNLOADING", "INSTALLING", "FAILED", "DOWN"]);
  });
  it("reads each model of a stack of several with its own instance's pods, under its name, and exits with the worst model's status", async () => {
    const argsFile = path.join(standIn, "args-multi");
    const run = await statusCli(["--stack", "multi"], { KUBECTL_ARGS_FILE: argsFile });
    expect(run.status, run.stderr).toBe(3);
    // One namespace, each model's own instance label (the render's modelInstance).
    expect(fs.readFileSync(argsFile, "utf8").trim().split("\n")).toEqual(
      ["chat", "batch"].map((name) => `get pods,jobs --namespace llm-multi --selector app.kubernetes.io/instance=rbln-serving-${name} --output json`),
    );
    const sections = run.stdout.split(/^# model /m).slice(1);
    expect(sections.map((s) => s.split("\n")[0])).toEqual(["chat, served as MiniMaxAI/MiniMax-M2.7", "batch, served as minimax-batch"]);
    // The stand-in answers every selector with the same pods: chat's roles (prefill, decode) find theirs, batch's (main) none.
    expect(sections[0]).toContain("decode: 0 of 5 pods ready");
    expect(sections[1]).toContain("no serving pod of rbln-serving-batch in namespace llm-multi");
    const json = JSON.parse((await statusCli(["--stack", "multi", "--format", "json"])).stdout);
    expect(json.models.map((m: { name: string; plannedModel: string }) => [m.name, m.plannedModel])).toEqual([
      ["chat", "MiniMaxAI/MiniMax-M2.7"],
      ["batch", "minimax-batch"],
    ]); // URLs alone do not say which model they serve.
    const refused = await statusCli(["--stack", "multi", "--endpoint", "http://127.0.0.1:1"]);
    expect([refused.status, refused.stderr.trim().split("\n").at(-1)]).toEqual([
      2,
      'error: --endpoint: "multi" serves 2 models, so URLs alone do not say which; give --stack alone, or --endpoint without --stack',
    ]);
  });
});
