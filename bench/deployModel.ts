import { REPLICA_LOAD_SECONDS } from "../core/config/defaults";
import type { Registration } from "../test/helpers/pulumiHarness";
import { unitStepRole } from "./rollout";

/** The compile key a unit step runs with, by its role. */
function compileKeyOf(compileKeyOfRole: Readonly<Record<string, string>>, unitStep: string): string {
  return compileKeyOfRole[unitStepRole(unitStep, Object.keys(compileKeyOfRole))!]!;
}

/**
 * A deploy-time model: the program's own dependency graph (what it registers under the mock
 * runtime), its steps taken as stages (install, hub download, LAN copy, compile, load) with stated
 * durations, evaluated as earliest finish times.
 */

/** `check`: a step that takes no time worth modelling (preflight, a grant, a step that does not run again). `compileAhead`: a compile on the compile host, off the NPUs. */
export type StageKind = "check" | "install" | "hubDownload" | "lanCopy" | "compile" | "compileAhead" | "load";

export interface DeployStep {
  id: string;
  kind: StageKind;
  deps: string[];
  /** Bytes moved (downloads and copies). */
  bytes?: number;
  /** Compile and load steps: the rank serves when this step ends. */
  serves?: boolean;
}

/** Stage durations. Each default is an assumption, stated here and in docs/measured.md; all can be overridden. */
export interface StageDurations {
  /** MiniMax-M2.7's weights: about 230 GB (issue 11). */
  weightsBytes: number;
  /** The site's internet uplink, shared by every download running at once. Assumed 1 Gbit/s. */
  internetGbitPerS: number;
  /** Host-to-host copies over the data-centre network: 10-25 Gbit/s; the low end by default, per copy. */
  lanGbitPerS: number;
  /** The compiled cache a peer copies instead of compiling. Unknown size; assumed 50 GB. */
  compiledCacheBytes: number;
  /** Virtualenv and pip install of the pinned stack. Assumed 5 min. */
  installSeconds: number;
  /** A cold compile: the recipe's 9,600 s budget (VLLM_ENGINE_READY_TIMEOUT_S), an upper bound. */
  compileSeconds: number;
  /** Start with a compile-cache hit: read the weights, load the graphs. Assumed 15 min. */
  loadSeconds: number;
}

export const DEFAULT_DURATIONS: StageDurations = {
  weightsBytes: 230e9,
  internetGbitPerS: 1,
  lanGbitPerS: 10,
  compiledCacheBytes: 50e9,
  installSeconds: 300,
  compileSeconds: 9600,
  loadSeconds: REPLICA_LOAD_SECONDS,
};

/** Where an input of the model comes from: a published fact, a bound (a fact used as the worst case), or a guess. */
export interface ModelInput {
  key: keyof StageDurations;
  /** As the tables print it, e.g. `compile 160 min`. */
  shown: (durations: StageDurations) => string;
  kind: "fact" | "bound" | "guess";
  /** The source of a fact or bound; for a guess, what it stands for. */
  source: string;
}

/**
 * The model's inputs: which are facts (with their sources) and which are guesses. None was measured
 * on RBLN hardware; every minute the model gives scales with them.
 */
export const MODEL_INPUTS: readonly ModelInput[] = [
  {
    key: "compileSeconds",
    shown: (d) => `compile ${d.compileSeconds / 60} min`,
    kind: "bound",
    source:
      "the recipe's VLLM_ENGINE_READY_TIMEOUT_S (recipes/minimaxai--minimax-m2.7.json): the budget a first start gets; the real compile time is not published",
  },
  {
    key: "loadSeconds",
    shown: (d) => `load ${d.loadSeconds / 60} min`,
    kind: "guess",
    source: "a start from a compiled cache (REPLICA_LOAD_SECONDS, core/config/defaults.ts)",
  },
  { key: "compiledCacheBytes", shown: (d) => `cache ${d.compiledCacheBytes / 1e9} GB`, kind: "guess", source: "the compiled cache's size is not published" },
  {
    key: "weightsBytes",
    shown: (d) => `weights ${d.weightsBytes / 1e9} GB`,
    kind: "fact",
    source: "MiniMax-M2.7 FP8, published size (MODEL_WEIGHTS_GB, core/plan/storage.ts; the seed page's 230B badge)",
  },
  {
    key: "internetGbitPerS",
    shown: (d) => `uplink ${d.internetGbitPerS} Gbit/s`,
    kind: "guess",
    source: "the site's internet uplink, shared by every download at once",
  },
  {
    key: "lanGbitPerS",
    shown: (d) => `LAN ${d.lanGbitPerS} Gbit/s`,
    kind: "guess",
    source: "host-to-host copies, per copy: the low end of 10-25 Gbit/s data-centre links",
  },
  { key: "installSeconds", shown: (d) => `install ${d.installSeconds / 60} min`, kind: "guess", source: "virtualenv and pip install of the pinned stack" },
];

/** The inputs on one line, each with its kind: printed beside every modelled figure. */
export function modelInputsLine(durations: StageDurations = DEFAULT_DURATIONS): string {
  return `model inputs: ${MODEL_INPUTS.map((input) => `${input.shown(durations)} (${input.kind})`).join(", ")}`;
}

/**
 * `today`: every host downloads and compiles (the layout before issue 11). `copies`: the seed
 * downloads, the others copy. `shared`: `cache.shared`. `compileAhead`: `compile.host` compiles
 * every key off the NPUs first, and the first wave copies from it (issue 22). `registryHit`: the
 * same graph, the keys already in `compile.registry`: the compile host pulls instead of compiling.
 */
export type Layout = "today" | "copies" | "shared" | "compileAhead" | "registryHit";
/** What the program is registered with: copies between hosts, `cache.shared`, or `compile.host` with a registry. */
export type Registered = "copies" | "shared" | "ahead";
/** Which registration each layout reads. */
export const REGISTERED: Readonly<Record<Layout, Registered>> = {
  today: "copies",
  copies: "copies",
  shared: "shared",
  compileAhead: "ahead",
  registryHit: "ahead",
};
/** `first`: nothing on the hosts yet. `recompile`: installed, weights present, a change alters every compile key. */
export type Scenario = "first" | "recompile";

const COMMAND = "command:remote:Command";

/**
 * The deploy graph read from what the program registered: each command a step, its `dependsOn`
 * edges its dependencies, its kind from its name (`<host>-install`, `-weights`, `-copy-<src>`,
 * `-copy-compile-<src>`, `-allow-`/`-revoke-`, `-<role>-<rank>` unit steps). Registered with
 * copies, it is the `copies` layout, or `today` with each weights copy taken as a hub download and
 * every unit compiling; registered with `cache.shared`, the `shared` layout, where the leases add
 * what the graph does not show: one weights step downloads and the others wait for it, and of the
 * first units of a compile key one compiles and the others wait for it, then load.
 */
export function programDeployGraph(
  registrations: readonly Registration[],
  compileKeyOfRole: Readonly<Record<string, string>>,
  layout: Layout,
  scenario: Scenario,
  durations: StageDurations = DEFAULT_DURATIONS,
): DeployStep[] {
  const commands = registrations.filter((r) => r.type === COMMAND);
  const nameOf = new Map(commands.map((r) => [r.urn, r.name]));
  const roles = Object.keys(compileKeyOfRole);
  const first = scenario === "first";
  const steps: DeployStep[] = commands.map((r) => {
    const id = r.name;
    const deps = r.dependencies.filter((d) => nameOf.has(d)).map((d) => nameOf.get(d)!);
    if (/-preflight$|-(allow|revoke)-/.test(id)) return { id, kind: "check", deps };
    if (id.endsWith("-install")) return { id, kind: first ? "install" : "check", deps };
    if (id.endsWith("-weights")) return { id, kind: first ? "hubDownload" : "check", deps, bytes: durations.weightsBytes };
    // The compile host's step per key: a compile off the NPUs, or a pull of what the registry has (at LAN speed, like a copy).
    if (/-compile-[0-9a-f]{16}$/.test(id) && !/-(copy|pull)-compile-/.test(id))
      return layout === "registryHit" ? { id, kind: "lanCopy", deps, bytes: durations.compiledCacheBytes } : { id, kind: "compileAhead", deps };
    // Today nothing is copied: a copy neither takes time nor waits for its source.
    if (/-copy-compile-/.test(id))
      return layout === "today" ? { id, kind: "check", deps: [] } : { id, kind: "lanCopy", deps, bytes: durations.compiledCacheBytes };
    if (/-copy-/.test(id)) {
      if (!first) return { id, kind: "check", deps };
      return layout === "today"
        ? { id, kind: "hubDownload", deps: deps.filter((d) => d.endsWith("-preflight")), bytes: durations.weightsBytes }
        : { id, kind: "lanCopy", deps, bytes: durations.weightsBytes };
    }
    if (unitStepRole(id, roles)) return { id, kind: "compile", deps, serves: true };
    throw new Error(`deploy graph: no stage for command ${id}`);
  });
  const byId = new Map(steps.map((s) => [s.id, s]));
  const upstreamMemo = new Map<string, Set<string>>();
  const upstream = (id: string): Set<string> => {
    let all = upstreamMemo.get(id);
    if (!all) {
      all = new Set(byId.get(id)!.deps.flatMap((d) => [d, ...upstream(d)]));
      upstreamMemo.set(id, all);
    }
    return all;
  };
  const keyOf = (id: string) => compileKeyOf(compileKeyOfRole, id);
  if (layout === "shared") {
    // The download's lease: the first weights step downloads, the others wait for its marker.
    const [downloader, ...waiters] = steps.filter((s) => s.id.endsWith("-weights"));
    for (const waiter of first ? waiters : []) Object.assign(waiter, { kind: "check", deps: [...waiter.deps, downloader!.id] });
  }
  const compilers = new Map<string, string>();
  for (const unit of steps.filter((s) => s.kind === "compile")) {
    if (layout === "today") continue;
    const above = [...upstream(unit.id)];
    // Copies: a unit that got a compiled cache loads it. Shared: a unit after one of its key loads.
    const cached =
      layout !== "shared"
        ? above.some((d) => /-copy-compile-/.test(d))
        : above.some((d) => unitStepRole(d, roles) !== undefined && keyOf(d) === keyOf(unit.id));
    const compiler = compilers.get(keyOf(unit.id));
    if (cached) unit.kind = "load";
    else if (layout === "shared" && compiler) Object.assign(unit, { kind: "load", deps: [...unit.deps, compiler] });
    else compilers.set(keyOf(unit.id), unit.id);
  }
  return steps;
}

export interface DeployEstimate {
  hubDownloads: number;
  /** Compiles per compile key, e.g. `{ "1e8c…": 8 }`, wherever they run. */
  compilesPerKey: Record<string, number>;
  compiles: number;
  /** Compiles in a unit step: an NPU replica out of service while it compiles. */
  npuCompiles: number;
  internetBytes: number;
  /** When the last unit serves. */
  minutesToFullCapacity: number;
  /** Summed over the replicas: how long each is out of service (its unit step's compile or load). */
  replicaMinutesOutOfService: number;
  /** The lowest share of replicas serving at any moment (for a change: they all served before). */
  lowestServingShare: number;
}

/** The replica of a unit step `<instance>-npu-<i>-<role>-<rank>`: the bench's hosts are named `npu-<i>`, one per replica. */
export function replicaOfUnit(id: string): number {
  return Number(/-npu-(\d+)-[a-z]+-\d+$/.exec(id)![1]);
}

/**
 * Earliest finish times over the graph. Hub downloads have no dependencies, so all of them run at
 * once and share the uplink: each takes (downloads running) × its own time.
 */
export function simulateDeploy(
  steps: readonly DeployStep[],
  durations: StageDurations = DEFAULT_DURATIONS,
  keyOf: (unitId: string) => string = () => "all",
): DeployEstimate {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const hubDownloads = steps.filter((s) => s.kind === "hubDownload");
  const seconds = (step: DeployStep): number => {
    switch (step.kind) {
      case "check":
        return 0;
      case "install":
        return durations.installSeconds;
      case "hubDownload":
        return ((step.bytes ?? 0) * 8 * hubDownloads.length) / (durations.internetGbitPerS * 1e9);
      case "lanCopy":
        return ((step.bytes ?? 0) * 8) / (durations.lanGbitPerS * 1e9);
      case "compile":
      case "compileAhead":
        return durations.compileSeconds;
      case "load":
        return durations.loadSeconds;
    }
  };
  const finish = new Map<string, number>();
  const finishOf = (id: string, path: string[] = []): number => {
    const known = finish.get(id);
    if (known !== undefined) return known;
    const step = byId.get(id);
    if (!step) throw new Error(`deploy graph: ${path.at(-1) ?? "?"} depends on unknown step ${id}`);
    if (path.includes(id)) throw new Error(`deploy graph: cycle through ${id}`);
    const start = Math.max(0, ...step.deps.map((d) => finishOf(d, [...path, id])));
    const end = start + seconds(step);
    finish.set(id, end);
    return end;
  };
  const compilesPerKey: Record<string, number> = {};
  const compileKeyOf = (step: DeployStep) => (step.kind === "compileAhead" ? /-compile-([0-9a-f]{16})$/.exec(step.id)![1]! : keyOf(step.id));
  for (const step of steps)
    if (step.kind === "compile" || step.kind === "compileAhead") compilesPerKey[compileKeyOf(step)] = (compilesPerKey[compileKeyOf(step)] ?? 0) + 1;
  // A replica is out of service while one of its unit steps restarts it: from the step's start to its end.
  const outages = steps.filter((s) => s.serves).map((s) => ({ end: finishOf(s.id), start: finishOf(s.id) - seconds(s), replica: replicaOfUnit(s.id) }));
  const replicas = new Set(outages.map((o) => o.replica)).size;
  const mostDown = Math.max(0, ...outages.map((o) => new Set(outages.filter((p) => p.start <= o.start && o.start < p.end).map((p) => p.replica)).size));
  return {
    hubDownloads: hubDownloads.length,
    compilesPerKey,
    compiles: Object.values(compilesPerKey).reduce((n, c) => n + c, 0),
    npuCompiles: steps.filter((s) => s.kind === "compile").length,
    internetBytes: hubDownloads.reduce((n, s) => n + (s.bytes ?? 0), 0),
    minutesToFullCapacity: Math.max(0, ...steps.filter((s) => s.serves).map((s) => finishOf(s.id))) / 60,
    replicaMinutesOutOfService: outages.reduce((n, o) => n + (o.end - o.start), 0) / 60,
    lowestServingShare: replicas === 0 ? 1 : (replicas - mostDown) / replicas,
  };
}

export interface LayoutComparison {
  replicas: number;
  layout: Layout;
  first: DeployEstimate;
  recompile: DeployEstimate;
}

/** The layouts for each replica count, from the program registered with copies, with `cache.shared` and with `compile.host` (and a registry). */
export async function compareDeployLayouts(
  replicaCounts: readonly number[],
  register: (replicas: number, registered: Registered) => Promise<readonly Registration[]>,
  compileKeyOfRole: Readonly<Record<string, string>>,
  durations: StageDurations = DEFAULT_DURATIONS,
  layouts: readonly Layout[] = ["today", "copies", "shared", "compileAhead", "registryHit"],
): Promise<LayoutComparison[]> {
  const keyOf = (id: string) => compileKeyOf(compileKeyOfRole, id);
  const comparisons: LayoutComparison[] = [];
  for (const replicas of replicaCounts) {
    const registered = new Map<Registered, readonly Registration[]>();
    for (const layout of layouts) {
      const kind = REGISTERED[layout];
      if (!registered.has(kind)) registered.set(kind, await register(replicas, kind));
      const estimate = (scenario: Scenario) =>
        simulateDeploy(programDeployGraph(registered.get(kind)!, compileKeyOfRole, layout, scenario, durations), durations, keyOf);
      comparisons.push({ replicas, layout, first: estimate("first"), recompile: estimate("recompile") });
    }
  }
  return comparisons;
}
