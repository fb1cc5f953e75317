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

/** `check`: a step that takes no time worth modelling (preflight, a grant, a step that does not run again). */
export type StageKind = "check" | "install" | "hubDownload" | "lanCopy" | "compile" | "load";

export interface DeployStep {
  id: string;
  kind: StageKind;
  deps: string[];
  /** Bytes moved (downloads and copies). */
  bytes?: number;
  /** Compile and load steps: the rank serves when this step ends. */
  serves?: boolean;
}

/** Stage durations. Each default is an assumption, stated here and in the README; all can be overridden. */
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

/** `today`: every host downloads and compiles (the layout before issue 11). `copies`: the seed downloads, the others copy. `shared`: `cache.shared`. */
export type Layout = "today" | "copies" | "shared";
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
    // Today nothing is copied: a copy neither takes time nor waits for its source.
    if (/-copy-compile-/.test(id)) return layout === "today" ? { id, kind: "check", deps: [] } : { id, kind: "lanCopy", deps, bytes: durations.compiledCacheBytes };
    if (/-copy-/.test(id)) {
      if (!first) return { id, kind: "check", deps };
      return layout === "today" ? { id, kind: "hubDownload", deps: deps.filter((d) => d.endsWith("-preflight")), bytes: durations.weightsBytes } : { id, kind: "lanCopy", deps, bytes: durations.weightsBytes };
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
    const cached = layout === "copies" ? above.some((d) => /-copy-compile-/.test(d)) : above.some((d) => unitStepRole(d, roles) !== undefined && keyOf(d) === keyOf(unit.id));
    const compiler = compilers.get(keyOf(unit.id));
    if (cached) unit.kind = "load";
    else if (layout === "shared" && compiler) Object.assign(unit, { kind: "load", deps: [...unit.deps, compiler] });
    else compilers.set(keyOf(unit.id), unit.id);
  }
  return steps;
}

export interface DeployEstimate {
  hubDownloads: number;
  /** Compiles per compile key, e.g. `{ "1e8c…": 8 }`. */
  compilesPerKey: Record<string, number>;
  compiles: number;
  internetBytes: number;
  /** When the last unit serves. */
  minutesToFullCapacity: number;
}

/**
 * Earliest finish times over the graph. Hub downloads have no dependencies, so all of them run at
 * once and share the uplink: each takes (downloads running) × its own time.
 */
export function simulateDeploy(steps: readonly DeployStep[], durations: StageDurations = DEFAULT_DURATIONS, keyOf: (unitId: string) => string = () => "all"): DeployEstimate {
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
  for (const step of steps) if (step.kind === "compile") compilesPerKey[keyOf(step.id)] = (compilesPerKey[keyOf(step.id)] ?? 0) + 1;
  return {
    hubDownloads: hubDownloads.length,
    compilesPerKey,
    compiles: steps.filter((s) => s.kind === "compile").length,
    internetBytes: hubDownloads.reduce((n, s) => n + (s.bytes ?? 0), 0),
    minutesToFullCapacity: Math.max(0, ...steps.filter((s) => s.serves).map((s) => finishOf(s.id))) / 60,
  };
}

export interface LayoutComparison {
  replicas: number;
  layout: Layout;
  first: DeployEstimate;
  recompile: DeployEstimate;
}

/** The three layouts for each replica count, from the program registered with copies and with `cache.shared`. */
export async function compareDeployLayouts(
  replicaCounts: readonly number[],
  register: (replicas: number, shared: boolean) => Promise<readonly Registration[]>,
  compileKeyOfRole: Readonly<Record<string, string>>,
  durations: StageDurations = DEFAULT_DURATIONS,
): Promise<LayoutComparison[]> {
  const keyOf = (id: string) => compileKeyOf(compileKeyOfRole, id);
  const comparisons: LayoutComparison[] = [];
  for (const replicas of replicaCounts) {
    const withCopies = await register(replicas, false);
    const withShared = await register(replicas, true);
    for (const layout of ["today", "copies", "shared"] as const) {
      const registrations = layout === "shared" ? withShared : withCopies;
      const estimate = (scenario: Scenario) => simulateDeploy(programDeployGraph(registrations, compileKeyOfRole, layout, scenario, durations), durations, keyOf);
      comparisons.push({ replicas, layout, first: estimate("first"), recompile: estimate("recompile") });
    }
  }
  return comparisons;
}
