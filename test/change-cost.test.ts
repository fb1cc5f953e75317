import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { stringify } from "yaml";
import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { type ChangeCost, changeCost, renderChangeCost, type StepChange } from "../core/render/changeCost";
import { renderDeployment } from "../core/render/deployment";
import { planStack } from "../core/plan/stack";
import { runCommand } from "../cli/commands";
import { renderStack } from "../core/render/stack";
import { renderStackChangeCost, stackChangeCost } from "../core/render/stackChangeCost";
import { runProgram } from "../program";
import { runUnderMocks } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";

const ROOT = path.resolve(__dirname, "..");
const dev = readStackFile("dev").raw as Record<string, any>;
const edge = readStackFile("edge").raw as Record<string, any>;
const prod = readStackFile("prod").raw as Record<string, any>;
const REVISION = "0123456789abcdef0123456789abcdef01234567";
const host = (name: string, address: string) => ({ ...dev.hosts[0], name, address });
/** Two aggregated replicas seeded by a compile host that pushes to a registry. */
const compiled = {
  ...dev,
  replicas: 2,
  hosts: [host("npu-dev-0", "10.20.0.11"), host("npu-dev-1", "10.20.0.12")],
  revision: REVISION,
  compile: { host: host("cpu-0", "10.20.0.50"), registry: { repository: "registry.example.com/ml/cc" } },
};
/** Four aggregated replicas behind a front door. */
const fronted = {
  ...dev,
  replicas: 4,
  hosts: [0, 1, 2, 3].map((i) => host(`npu-${i}`, `10.20.0.${11 + i}`)),
  router: { host: host("door", "10.20.0.10") },
};

const render = (raw: Record<string, unknown>) =>
  renderDeployment(planDeployment(parseStackSettings(raw), shippedCatalog), { stack: "s", instance: "rbln-serving", secrets: [] });
const costOf = (a: Record<string, unknown>, b: Record<string, unknown>) => changeCost(render(a), render(b));
const outage = (cost: ChangeCost, role: string) => cost.outages.find((o) => o.role === role)?.text;
/** Each step as one line, compile keys and Job hashes as `<key>`, `<hash>`: sorted, the list reads the same whatever the keys. */
const stepIds = (steps: readonly StepChange[]) =>
  steps
    .map((s) => `${s.change} ${s.kind}${s.what ? ` ${s.what}` : ""} @${s.where}`.replace(/\b[0-9a-f]{16}\b/g, "<key>").replace(/-[0-9a-f]{10}\b/g, "-<hash>"))
    .sort();

describe("the cost of a change", () => {
  it("eagle3 on edge: the draft model's download and copy, the steps that rerun, every unit restarting, the compiles, and each one-server role", () => {
    const cost = costOf(edge, { ...edge, axes: { spec_decode: "eagle3" } });
    expect(cost.downloads).toEqual([
      "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k (the draft model of prefill, decode, size not listed in core/plan/storage.ts) from the hub by npu-edge-0, copied to npu-edge-1",
    ]);
    expect(stepIds(cost.steps)).toEqual([
      "reruns copy weights from npu-edge-0 @npu-edge-1",
      "reruns preflight @npu-edge-0",
      "reruns preflight @npu-edge-1",
      "reruns unit decode rank 0 @npu-edge-1",
      "reruns unit decode rank 1 @npu-edge-1",
      "reruns unit decode rank 2 @npu-edge-1",
      "reruns unit decode rank 3 @npu-edge-1",
      "reruns unit prefill rank 0 @npu-edge-0",
      "reruns weights @npu-edge-0",
      "runs compile key <key> (decode) on the NPUs of its first unit, in its start @npu-edge-1",
      "runs compile key <key> (prefill) on the NPUs of its first unit, in its start @npu-edge-0",
    ]);
    expect(cost.restarts.map((r) => `${r.change} ${r.what} @${r.where}`)).toEqual([
      "restarts rbln-serving-s.prefill-0.service @npu-edge-0",
      ...[0, 1, 2, 3].map((r) => `restarts rbln-serving-s.decode-${r}.service @npu-edge-1`),
    ]);
    expect(outage(cost, "prefill")).toBe(
      "refused once it serves: npu-edge-0 is its only server behind the front door, so its unit steps refuse the restart; add a server of the role in a deploy of its own, or set rollout.allowEmptyFrontDoor: true to take the outage: up to 160 min (a compile on its NPUs, the recipe's budget), then a load",
    );
    const allowed = { ...edge, rollout: { allowEmptyFrontDoor: true } };
    expect(outage(costOf(allowed, { ...allowed, axes: { spec_decode: "eagle3" } }), "decode")).toBe(
      "out of service while its only server npu-edge-1 restarts: up to 160 min (a compile on its NPUs, the recipe's budget), then a load",
    );
  });

  it("a change outside the compile key costs a load; one server without a front door is out while it restarts", () => {
    const cost = costOf(dev, { ...dev, axes: { reasoning_parser: "off" } });
    expect([cost.downloads, stepIds(cost.steps)]).toEqual([[], ["reruns unit main rank 0 @npu-dev-0"]]);
    expect(outage(cost, "main")).toBe("out of service while its only server npu-dev-0 restarts: about 15 min (a load from the compiled cache)");
    // Nothing changes: no cost at all, and no lines.
    const none = costOf(dev, dev);
    expect([none.steps, none.restarts, renderChangeCost(none, render(dev).deployment)]).toEqual([[], [], []]);
  });

  it("replicas behind a front door: no outage, the waves' size, the first compiles and the others copy; compile ahead leaves a load", () => {
    const cost = costOf(fronted, { ...fronted, target: "Throughput", strategy: "aggregated-pipeline-parallel" });
    expect(outage(cost, "main")).toBe(
      "no outage: at most 1 of its 4 servers restart at once (rollout.maxUnavailable 25%); the front door drains each first, and the others serve; the first out up to 160 min (a compile on its NPUs, the recipe's budget), then a load, the others about 15 min (a load from the compiled cache) after they copy its cache",
    );
    const ahead = { ...compiled, compile: { host: compiled.compile.host } };
    const aheadCost = costOf(ahead, { ...ahead, target: "Throughput", strategy: "aggregated-pipeline-parallel" });
    expect(outage(aheadCost, "main")).toMatch(/; each out about 15 min \(a load from the compiled cache\)$/);
    expect(stepIds(aheadCost.steps)).toEqual(expect.arrayContaining(["runs compile key <key> (main) @cpu-0", "removed compile key <key> (main) @cpu-0"]));
  });

  it("a change of the environment alone restarts the unit: the env file is the unit's too", () => {
    const cost = costOf(dev, { ...dev, extraEnv: { main: { VLLM_LOGGING_LEVEL: "DEBUG" } } });
    expect(cost.restarts.map((r) => `${r.change} ${r.what}`)).toEqual(["restarts rbln-serving-s.main-0.service"]);
    expect(outage(cost, "main")).toBe("out of service while its only server npu-dev-0 restarts: about 15 min (a load from the compiled cache)");
  });

  it("new package versions: pip into a new venv on every host, the install reruns everywhere", () => {
    const cost = costOf(dev, { ...dev, versions: { vllmRbln: "0.12.1" } });
    expect(cost.downloads).toEqual(["the packages vllm-rbln 0.12.0 -> 0.12.1 (pip, into a new venv on every host)"]);
    expect(stepIds(cost.steps)).toEqual(expect.arrayContaining(["reruns install @npu-dev-0", "reruns unit main rank 0 @npu-dev-0"]));
  });

  it("on Kubernetes: Deployments that roll, replaced Jobs, and Recreate against rolling", () => {
    const three = { ...prod, replicas: 3 };
    const cost = costOf(three, { ...three, axes: { spec_decode: "off" } });
    expect(cost.restarts.map((r) => r.what)).toEqual(["the pods of Deployment rbln-serving-prefill", "the pods of Deployment rbln-serving-decode"]);
    expect(stepIds(cost.steps)).toEqual([
      "removed weights Job rbln-serving-weights-<hash> @the cluster",
      "runs compile key <key> (decode) on the NPUs of the first pod of rbln-serving-decode @the cluster",
      "runs compile key <key> (prefill) on the NPUs of the first pod of rbln-serving-prefill @the cluster",
      "runs weights Job rbln-serving-weights-<hash> @the cluster",
    ]);
    expect(outage(cost, "decode")).toBe(
      "no outage: 1 of its 3 pods at a time (maxSurge 0) while the others serve; the first pod up to 160 min (a compile on its NPUs, the recipe's budget), then a load, the others about 15 min (a load from the compiled cache)",
    );
    expect(outage(costOf(prod, { ...prod, axes: { reasoning_parser: "off" } }), "prefill")).toBe(
      "out of service while its Deployment replaces its one pod (Recreate): about 15 min (a load from the compiled cache), and the pod's scheduling and image pull",
    );
  });
});

/**
 * A step reruns when `pulumi up` would run its command again: the program's own registrations
 * under the mock runtime, compared input by input, mapped to the cost's steps by their names.
 */
const SECRETS = { sshPrivateKey: "k", pipPassword: "p" };
async function commands(raw: Record<string, unknown>): Promise<Map<string, string>> {
  const { registrations, error } = await runUnderMocks(runProgram, raw, SECRETS);
  if (error) throw error;
  return new Map(registrations.filter((r) => r.type.startsWith("command:")).map((r) => [r.name, JSON.stringify(r.inputs)]));
}
/** A program command's name as the cost names its step: `npu-0 install`, `npu-1 copy weights from npu-0`; a model's commands start with its name. */
function stepOf(name: string, hosts: readonly string[], models: readonly string[] = []): string {
  const own = name.replace(/^rbln-serving-/, "");
  const model = models.find((m) => own.startsWith(`${m}-`) && !hosts.some((h) => own.startsWith(`${h}-`)));
  const rest = model ? own.slice(model.length + 1) : own;
  const at = [...hosts].sort((a, b) => b.length - a.length).find((h) => rest.startsWith(`${h}-`))!;
  const step = rest.slice(at.length + 1);
  const copy = /^(allow|copy|revoke)-(compile-)?(.+)$/.exec(step);
  if (copy) {
    const [dest, source] = copy[1] === "copy" ? [at, copy[3]!] : [copy[3]!, at];
    return `${dest} copy ${copy[2] ? "compiled cache" : "weights"} from ${source}`;
  }
  const group = /^([a-z]+)-group$/.exec(step);
  if (group) return `${at} group ${group[1]}`;
  const unit = /^([a-z]+)-(\d+)$/.exec(step);
  if (unit && !["front-door"].includes(unit[1]!)) return `${at} unit ${unit[1]} rank ${unit[2]}`;
  const compile = /^(pull-)?compile-([0-9a-f]{16})$/.exec(step);
  if (compile) return `${at} ${compile[1] ? "pull compiled cache" : "compile key"} ${compile[2]}`;
  const access = /^front-door-access-(.+)$/.exec(step);
  if (access) return `${at} front door access ${access[1]}`;
  return `${at} ${step === "front-door-apply" ? "front door" : step.replace(/-/g, " ")}`;
}
const costStep = (s: StepChange) => `${s.where} ${s.kind}${s.what ? ` ${s.what.replace(/ \(.*\)$/, "")}` : ""}`;
/** The program's commands that change from `a` to `b` (inputs or new) and that go, as the cost names their steps. */
async function programSteps(a: Record<string, any>, b: Record<string, any>, hosts: readonly string[], models: readonly string[] = []) {
  const [before, after] = [await commands(a), await commands(b)];
  const changed = [...after].filter(([name, inputs]) => before.get(name) !== inputs).map(([name]) => stepOf(name, hosts, models));
  const removed = [...before.keys()].filter((name) => !after.has(name)).map((name) => stepOf(name, hosts, models));
  return { changed: [...new Set(changed)].sort(), removed: [...new Set(removed)].sort() };
}
/** The cost's steps as programSteps names them; compiles in a unit's start are no step of their own (the unit's step carries them). */
function costSteps(steps: readonly StepChange[]) {
  const own = steps.filter((s) => !s.what.includes("in its start"));
  const names = (kept: readonly StepChange[]) => [...new Set(kept.map(costStep))].sort();
  return { changed: names(own.filter((s) => s.change !== "removed")), removed: names(own.filter((s) => s.change === "removed")) };
}

describe("the steps that rerun are the commands whose inputs change in the program", () => {
  it.each([
    ["edge, eagle3", edge, { ...edge, axes: { spec_decode: "eagle3" } }],
    ["edge, the front door's port", edge, { ...edge, router: { ...edge.router, port: 8081 } }],
    ["dev, another target", dev, { ...dev, target: "Throughput" }],
    ["dev, reasoning parser off", dev, { ...dev, axes: { reasoning_parser: "off" } }],
    ["dev, vllm-rbln 0.12.1", dev, { ...dev, versions: { vllmRbln: "0.12.1" } }],
    ["dev, another cacheRoot", dev, { ...dev, cacheRoot: "/data/rbln" }],
    ["compile host and registry, suffix decoding", compiled, { ...compiled, axes: { spec_decode: "suffix" } }],
    ["compile host and registry, nothing", compiled, compiled],
  ] as [string, Record<string, any>, Record<string, any>][])("%s", async (_, a, b) => {
    const hosts = [...new Set([...render(a).deployment.placements, ...render(b).deployment.placements].map((p) => p.host.name)).values()];
    const extra = [b.compile?.host?.name, a.compile?.host?.name, b.router?.host?.name].filter((h): h is string => typeof h === "string");
    expect(costSteps(costOf(a, b).steps)).toEqual(await programSteps(a, b, [...hosts, ...extra]));
  });
});

/** A stack of models: the shipped multi-hosts (chat on two servers, batch on one) and multi (Kubernetes), with changes. */
const multiHosts = readStackFile("multi-hosts").raw as Record<string, any>;
const multiK8s = readStackFile("multi").raw as Record<string, any>;
const withModels = (raw: Record<string, any>, change: (models: Record<string, any>[]) => Record<string, any>[]) => ({ ...raw, models: change(raw.models) });
const withoutBatch = (raw: Record<string, any>) => withModels(raw, (models) => models.filter((m) => m.name !== "batch"));
const batch = (raw: Record<string, any>, keys: Record<string, unknown>) =>
  withModels(raw, (models) => models.map((m) => (m.name === "batch" ? { ...m, ...keys } : m)));
const renderModels = (raw: Record<string, unknown>) =>
  renderStack(planStack(parseStackSettings(raw), shippedCatalog), { stack: "s", instance: "rbln-serving", secrets: [] });
const stackCostText = (a: Record<string, unknown>, b: Record<string, unknown>) =>
  renderStackChangeCost(renderModels(a), renderModels(b))
    .join("\n")
    .replace(/\b[0-9a-f]{16}\b/g, "<key>")
    .replace(/-[0-9a-f]{10}\b/g, "-<hash>");
const REFUSED_ONE_SERVER =
  "refused once it serves: npu-multi-2 is its only server behind the front door, so its unit steps refuse the restart; add a server of the role in a deploy of its own, or set rollout.allowEmptyFrontDoor: true to take the outage: about 15 min (a load from the compiled cache)";
const ESTIMATES = "  (a load is the deploy model's 15 min, REPLICA_LOAD_SECONDS; a compile the recipe's VLLM_ENGINE_READY_TIMEOUT_S, an upper bound)";

describe("the cost of a change between stacks of models", () => {
  it("on hosts, a change within one model costs that model alone, under its name; the front door is untouched", () => {
    expect(stackCostText(multiHosts, batch(multiHosts, { axes: { reasoning_parser: "off" } })).split("\n")).toEqual([
      "",
      "cost of the change (from the plans; times are estimates, none measured on NPUs):",
      "# model batch, served as minimax-batch",
      "  reruns    npu-multi-2: unit main rank 0",
      "  restarts  npu-multi-2: rbln-serving-s.rbln-serving-batch.main-0.service",
      `  out       main: ${REFUSED_ONE_SERVER}`,
      ESTIMATES,
    ]);
  });

  it("on hosts, another served name: the model's units restart, and Envoy takes its new routes without a restart; `diff` prints it", () => {
    const lines = [
      "",
      "cost of the change (from the plans; times are estimates, none measured on NPUs):",
      "# model batch, served as minimax-batch, mb",
      "  reruns    npu-multi-2: unit main rank 0",
      "  restarts  npu-multi-2: rbln-serving-s.rbln-serving-batch.main-0.service",
      `  out       main: ${REFUSED_ONE_SERVER}`,
      "# the front door on the router host, every model's",
      "  reruns    multi-router: front door",
      ESTIMATES,
    ];
    expect(stackCostText(multiHosts, batch(multiHosts, { servedNames: ["minimax-batch", "mb"] })).split("\n")).toEqual(lines);
    // The command: from a stack file to the shipped stack, named as the program's instance on it.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "models-diff-"));
    try {
      const file = path.join(dir, "before.yaml");
      fs.writeFileSync(
        file,
        stringify({
          config: Object.fromEntries(Object.entries(batch(multiHosts, { servedNames: ["minimax-batch", "mb"] })).map(([k, v]) => [`rbln-serving:${k}`, v])),
        }),
      );
      const out = runCommand("diff", { stack: "multi-hosts", against: file }, shippedCatalog);
      expect(out).toMatch(/^batch: main rank 0:\n {2}~ --served-model-name "minimax-batch" "mb" → "minimax-batch"\n/);
      expect(out).toContain("\n# model batch, served as minimax-batch\n  reruns    npu-multi-2: unit main rank 0\n");
      expect(out).toContain("\n  reruns    multi-router: front door\n");
      expect(out).not.toContain("front-door-proxy.service");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("on hosts, an added model: its downloads, steps and units, and the front door's step, which starts its EPP and restarts no Envoy", () => {
    expect(stackCostText(withoutBatch(multiHosts), multiHosts).split("\n")).toEqual([
      "",
      "cost of the change (from the plans; times are estimates, none measured on NPUs):",
      "# model batch, served as minimax-batch (added)",
      "  download  MiniMaxAI/MiniMax-M2.7 (the model, about 230 GB) from the hub by npu-multi-2",
      "  download  the packages rebel-compiler (new) -> 0.12.0, vllm-rbln (new) -> 0.12.0 (pip, into a new venv on every host)",
      "  runs      npu-multi-2: preflight, install, weights, unit main rank 0, compile key <key> (main) on the NPUs of its first unit, in its start",
      "  starts    npu-multi-2: rbln-serving-s.rbln-serving-batch.main-0.service",
      "# the front door on the router host, every model's",
      "  reruns    multi-router: front door",
      "  runs      multi-router: front door access npu-multi-2",
      "  starts    multi-router: rbln-serving-s.rbln-serving-batch.front-door-epp.service, rbln-serving-s.rbln-serving-batch.front-door-agent.service",
    ]);
  });

  it("on hosts, a change of Envoy's own settings (router.requestTimeout) restarts Envoy, under every model's requests", () => {
    const text = stackCostText(multiHosts, { ...multiHosts, router: { ...multiHosts.router, requestTimeout: "30m" } });
    expect(text).toContain("\n  restarts  multi-router: rbln-serving-s.front-door-proxy.service\n");
    expect(text).toContain("\n  out       front door: Envoy restarts on multi-router: the requests in flight there fail, every model's");
  });

  it("on hosts, a removed model: its steps go and its units stop, and the front door's step reruns and stops its EPP and agent", () => {
    expect(stackCostText(multiHosts, withoutBatch(multiHosts)).split("\n")).toEqual([
      "",
      "cost of the change (from the plans; times are estimates, none measured on NPUs):",
      "# model batch, served as minimax-batch (removed)",
      "  removes   npu-multi-2: preflight, install, weights, unit main rank 0",
      "  stops     npu-multi-2: rbln-serving-s.rbln-serving-batch.main-0.service",
      "# the front door on the router host, every model's",
      "  reruns    multi-router: front door",
      "  removes   multi-router: front door access npu-multi-2",
      "  stops     multi-router: rbln-serving-s.rbln-serving-batch.front-door-epp.service, rbln-serving-s.rbln-serving-batch.front-door-agent.service",
    ]);
  });

  it("on Kubernetes, an added or removed model's Jobs, router chart and pods, and the answers' pods, which list the served names", () => {
    const added = stackCostText(withoutBatch(multiK8s), multiK8s);
    expect(added).toContain(
      "\n# model batch, served as minimax-batch (added)\n  download  MiniMaxAI/MiniMax-M2.7 (the model, about 230 GB) from the hub by the weights Job\n",
    );
    expect(added).toContain(
      "\n  runs      the cluster: weights Job rbln-serving-batch-weights-<hash>, router chart router-batch, compile key <key> (main) on the NPUs of the first pod of rbln-serving-batch-main\n",
    );
    expect(added).toContain("\n  starts    the cluster: the pods of Deployment rbln-serving-batch-main\n");
    expect(added).not.toContain("# model chat");
    expect(stackCostText(multiK8s, withoutBatch(multiK8s)).split("\n")).toEqual([
      "",
      "cost of the change (from the plans; times are estimates, none measured on NPUs):",
      "# model batch, served as minimax-batch (removed)",
      "  removes   the cluster: weights Job rbln-serving-batch-weights-<hash>, router chart router-batch",
      "  stops     the cluster: the pods of Deployment rbln-serving-batch-main",
      "# the routing in the cluster, every model's",
      "  restarts  the cluster: the pods of Deployment rbln-serving-answers",
    ]);
  });

  // The program under the mock runtime: the steps the cost names for a stack of models are its commands that change.
  it.each([
    ["batch's axes", multiHosts, batch(multiHosts, { axes: { reasoning_parser: "off" } })],
    ["batch's served names", multiHosts, batch(multiHosts, { servedNames: ["minimax-batch", "mb"] })],
    ["batch added", withoutBatch(multiHosts), multiHosts],
    ["batch removed", multiHosts, withoutBatch(multiHosts)],
  ] as [string, Record<string, any>, Record<string, any>][])("on hosts, %s: the steps it names are the program's commands that change", async (_, a, b) => {
    const steps = stackChangeCost(renderModels(a), renderModels(b)).flatMap((section) => section.cost.steps);
    const hosts = ["npu-multi-0", "npu-multi-1", "npu-multi-2", "multi-router"];
    expect(costSteps(steps)).toEqual(await programSteps(a, b, hosts, ["chat", "batch"]));
  });
});

describe("diff --against FILE|GIT-REF", () => {
  const tsx = path.join(ROOT, "node_modules/.bin/tsx");
  const cliMain = path.join(ROOT, "cli/main.ts");
  const GIT = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"];
  function project(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "against-"));
    fs.mkdirSync(path.join(dir, "stacks"));
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), "name: t\nruntime: nodejs\nstackConfigDir: stacks\n");
    return dir;
  }
  const stackText = (raw: Record<string, unknown>) => stringify({ config: Object.fromEntries(Object.entries(raw).map(([k, v]) => [`rbln-serving:${k}`, v])) });
  const run = (cwd: string, ...args: string[]) => {
    const result = spawnSync(tsx, [cliMain, "diff", ...args], { cwd, encoding: "utf8" });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr.replace(/^warning: .*\n/gm, "") };
  };
  const git = (cwd: string, ...args: string[]) => expect(spawnSync("git", [...GIT, ...args], { cwd, encoding: "utf8" }).status).toBe(0);

  it("previews an edit against the committed file (HEAD) and against a file, with its cost; refuses what is neither, in one line", () => {
    const dir = project();
    try {
      const file = path.join(dir, "stacks/Pulumi.t.yaml");
      fs.writeFileSync(file, stackText(edge));
      // Not yet a git repository: a ref is refused, a file is read.
      expect(run(dir, "--stack", "t", "--against", "HEAD")).toEqual({
        status: 2,
        stdout: "",
        stderr:
          'error: --against: "HEAD" is no file, and stacks is not in a git repository, so it is no git ref either; allowed: a stack file, or a git commit that has the stack\'s file\n',
      });
      git(dir, "init", "-q");
      git(dir, "add", "Pulumi.yaml");
      git(dir, "commit", "-q", "-m", "project");
      expect(run(dir, "--stack", "t", "--against", "HEAD").stderr).toBe(
        'error: --against: "HEAD" has no stacks/Pulumi.t.yaml (git show HEAD:stacks/Pulumi.t.yaml); allowed: a stack file, or a git commit that has the stack\'s file\n',
      );
      git(dir, "add", "stacks");
      git(dir, "commit", "-q", "-m", "stack");
      expect(run(dir, "--stack", "t", "--against", "nope").stderr).toBe(
        'error: --against: "nope" is no file and no commit of this git repository; allowed: a stack file, or a git commit that has the stack\'s file\n',
      );
      expect(run(dir, "--stack", "t", "--against", "--all").status).toBe(2);
      expect(run(dir, "--stack", "t", "--against", "HEAD")).toEqual({ status: 0, stdout: "no changes\n", stderr: "" });
      // The user's edit, uncommitted: against HEAD, and against a copy of the old file.
      fs.copyFileSync(file, path.join(dir, "old.yaml"));
      fs.writeFileSync(file, stackText({ ...edge, axes: { spec_decode: "eagle3" } }));
      for (const against of ["HEAD", "old.yaml"]) {
        const diff = run(dir, "--stack", "t", "--against", against);
        expect([diff.status, diff.stderr], against).toEqual([0, ""]);
        expect(diff.stdout).toContain('selection:\n  ~ spec_decode "off" → "eagle3"\n');
        expect(diff.stdout).toMatch(/^warning: recompiles prefill: --speculative-config added \(hours on first start\)$/m);
        expect(diff.stdout).toContain("\ncost of the change (from the plans; times are estimates, none measured on NPUs):\n");
        expect(diff.stdout).toMatch(/^ {2}download {2}asherszhang\/MiniMax-M2\.7-EAGLE3-draft-vocab200k \(the draft model of prefill, decode, /m);
        expect(diff.stdout).toContain("  reruns    npu-edge-1: preflight, units decode ranks 0, 1, 2, 3, copy weights from npu-edge-0\n");
        expect(diff.stdout).toContain(
          "  restarts  npu-edge-1: rbln-serving-t.decode-0.service, rbln-serving-t.decode-1.service, rbln-serving-t.decode-2.service, rbln-serving-t.decode-3.service\n",
        );
        expect(diff.stdout).toMatch(/^ {2}out {7}decode: refused once it serves: /m);
      }
      expect(run(dir, "--stack", "t", "--against", "HEAD", "--diff", "t").stderr).toMatch(/^error: --against: compares two configs: /);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
