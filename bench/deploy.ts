import { resolvePlan } from "../core/plan/resolve";
import { runProgram } from "../program";
import { EXAMPLE_HOST_KEY } from "../test/helpers/hostKeys";
import { runUnderMocks, type Registration } from "../test/helpers/pulumiHarness";
import {
  compareDeployLayouts,
  DEFAULT_DURATIONS,
  MODEL_INPUTS,
  modelInputsLine,
  type Layout,
  type LayoutComparison,
  type Registered,
  type StageDurations,
} from "./deployModel";
import type { BenchPart, Target } from "./part";
import { configFor, recipe, secrets } from "./stacks";

/**
 * The deploy model (issues 11 and 22): the program's own graph, registered with copies, with
 * cache.shared and with compile.host and a registry, against today's layout, evaluated with stated
 * durations. A model, not a measurement: every minute is arithmetic on its inputs.
 */

const REPLICAS = [1, 4, 8, 64];
const compileAhead = {
  revision: "0123456789abcdef0123456789abcdef01234567",
  compile: {
    host: { name: "cpu-0", address: "10.255.0.5", hostKey: EXAMPLE_HOST_KEY },
    registry: { repository: "registry.example.com/ml/rbln-compile-cache", username: "bench" },
  },
};

/** The program registered for a layout, once per replica count and registration. */
function registrations(): (replicas: number, registered: Registered) => Promise<readonly Registration[]> {
  const memo = new Map<string, Promise<readonly Registration[]>>();
  const register = async (replicas: number, registered: Registered) => {
    const more = registered === "shared" ? { cache: { shared: "/mnt/rbln-cache" } } : registered === "ahead" ? compileAhead : {};
    const run = await runUnderMocks(
      runProgram,
      { ...configFor("hosts", replicas), ...more },
      registered === "ahead" ? { ...secrets, registryPassword: "bench-registry-pw" } : secrets,
    );
    if (run.error) throw run.error;
    return run.registrations;
  };
  return (replicas, registered) => {
    const key = `${replicas} ${registered}`;
    if (!memo.has(key)) memo.set(key, register(replicas, registered));
    return memo.get(key)!;
  };
}

/**
 * Only what the registered graph decides: with copies, one hub download and one compile per key
 * (each other unit has a copy of its key's cache upstream); with compile ahead, no unit compiles, so
 * each replica is out for one load. With cache.shared the single download and compile are the
 * model's own reading of the leases (they hold by construction here; test/hosts/shared-cache-hosts
 * shows them for real), and a registry hit's compile host pulls by the model's assumption: neither
 * is a target.
 */
function deployTargets(deploy: readonly LayoutComparison[]): Target[] {
  const targets: Target[] = [];
  const eight = deploy.find((d) => d.replicas === 8 && d.layout === "copies")!.first;
  targets.push({
    target: "8 replicas, copies: 1 hub download and 1 compile per compile key (the registered graph)",
    value: Math.max(eight.hubDownloads, ...Object.values(eight.compilesPerKey)),
    met: eight.hubDownloads === 1 && Object.values(eight.compilesPerKey).every((n) => n === 1),
  });
  for (const replicas of [4, 64]) {
    const change = (layout: Layout) => deploy.find((d) => d.replicas === replicas && d.layout === layout)!.recompile;
    const ahead = change("compileAhead");
    const loads = (replicas * DEFAULT_DURATIONS.loadSeconds) / 60;
    targets.push({
      target: `${replicas} replicas, compile ahead: no NPU compiles, replica-minutes out of service = replicas x load (${loads} min, model)`,
      value: ahead.replicaMinutesOutOfService,
      met: Math.abs(ahead.replicaMinutesOutOfService - loads) < 1e-6 && ahead.npuCompiles === 0,
    });
    targets.push({
      target: `${replicas} replicas, compile ahead: lowest share serving at least 75% (model)`,
      value: ahead.lowestServingShare,
      met: ahead.lowestServingShare >= 0.75,
    });
  }
  return targets;
}

function deployLines(deploy: readonly LayoutComparison[], durations: StageDurations): string[] {
  const inputs = modelInputsLine(durations);
  const first = deploy.map(
    (d) =>
      `${String(d.replicas).padStart(8)}  ${d.layout.padEnd(12)}  ${String(d.first.hubDownloads).padStart(13)}  ${String(d.first.compiles).padStart(8)}  ${(d.first.internetBytes / 1e9).toFixed(0).padStart(11)}  ${d.first.minutesToFullCapacity.toFixed(0).padStart(16)}  ${d.recompile.minutesToFullCapacity.toFixed(0).padStart(22)}`,
  );
  const change = deploy
    .filter((x) => x.replicas === 4 || x.replicas === 64)
    .map((d) => {
      const r = d.recompile;
      return `${String(d.replicas).padStart(8)}  ${d.layout.padEnd(12)}  ${r.minutesToFullCapacity.toFixed(0).padStart(24)}  ${r.replicaMinutesOutOfService.toFixed(0).padStart(30)}  ${(r.lowestServingShare * 100).toFixed(0).padStart(19)}%  ${String(r.npuCompiles).padStart(16)}  ${String(r.compiles).padStart(17)}`;
    });
  return [
    "a MODEL, not a measurement: hosts, aggregated-data-expert-parallel, maxUnavailable 25%; every minute below is arithmetic on these inputs",
    ...MODEL_INPUTS.map((input) => `  ${input.kind.padEnd(5)}  ${input.shown(durations).padEnd(22)}  ${input.source}`),
    "",
    inputs,
    "replicas  layout        hub downloads  compiles  internet GB  first deploy min  recompiling change min",
    ...first,
    "",
    `a recompiling change; ${inputs}`,
    "replicas  layout        minutes to full capacity  replica-minutes out of service  lowest share serving  compiles on NPUs  compiles anywhere",
    ...change,
  ];
}

/** The recompiling change of 4 replicas again, with each guess that drives it moved: the figures follow the guesses. */
async function sensitivityLines(register: (replicas: number, registered: Registered) => Promise<readonly Registration[]>, keys: Record<string, string>) {
  const cases: [string, Partial<StageDurations>][] = [
    ["as above", {}],
    ["load 5 min", { loadSeconds: 300 }],
    ["load 45 min", { loadSeconds: 2700 }],
    ["compile 60 min", { compileSeconds: 3600 }],
    ["cache 200 GB, LAN 1 Gbit/s", { compiledCacheBytes: 200e9, lanGbitPerS: 1 }],
  ];
  const lines = ["", "the same recompiling change of 4 replicas (minutes to full capacity) with one input moved: copies / compile ahead / registry hit"];
  for (const [label, change] of cases) {
    const durations = { ...DEFAULT_DURATIONS, ...change };
    const rows = await compareDeployLayouts([4], register, keys, durations, ["copies", "compileAhead", "registryHit"]);
    lines.push(`  ${label.padEnd(28)}  ${rows.map((r) => r.recompile.minutesToFullCapacity.toFixed(0)).join(" / ")} min`);
  }
  return lines;
}

export const deployModelPart: BenchPart = {
  name: "deploy-model",
  what: "the deploy model: first deploy and a recompiling change per layout, from the program's graph and assumed durations (a model)",
  async run() {
    const plan = resolvePlan(recipe, { model: recipe.model, strategy: "aggregated-data-expert-parallel", target: "Throughput" });
    const keys = Object.fromEntries(plan.roles.map((r) => [r.role, r.compileKey]));
    const register = registrations();
    const deploy = await compareDeployLayouts(REPLICAS, register, keys);
    return {
      report: {
        model: true,
        durations: DEFAULT_DURATIONS,
        inputs: MODEL_INPUTS.map(({ shown, ...input }) => ({ ...input, value: DEFAULT_DURATIONS[input.key], shown: shown(DEFAULT_DURATIONS) })),
        layouts: deploy,
      },
      lines: [...deployLines(deploy, DEFAULT_DURATIONS), ...(await sensitivityLines(register, keys))],
      targets: deployTargets(deploy),
    };
  },
};
