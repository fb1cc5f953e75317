import type { LaunchPlan } from "../core/plan/types";
import { rolloutWaves, type MaxUnavailable } from "../core/rollout/waves";

/**
 * A deploy-time model: a dependency graph of stages (install, hub download, LAN copy, compile,
 * load) with stage durations, evaluated as earliest finish times. `simulateDeploy` takes any such
 * graph, so the program's registered graph can be fed to it; `deployGraph` builds one from a
 * plan and the rollout waves, today's layout or the compile-once/download-once one.
 */

export type StageKind = "install" | "hubDownload" | "lanCopy" | "compile" | "load";

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
  loadSeconds: 900,
};

export type Layout = "today" | "cached";
/** `first`: nothing on the hosts yet. `recompile`: installed, weights present, a change alters every compile key. */
export type Scenario = "first" | "recompile";

export interface DeployShape {
  /** Per role its compile key (roles of one replica run on their own node). */
  roles: readonly { role: string; compileKey: string }[];
  replicas: number;
  maxUnavailable: MaxUnavailable;
}

export function shapeOf(plan: LaunchPlan, replicas: number, maxUnavailable: MaxUnavailable): DeployShape {
  return { roles: plan.roles.map((r) => ({ role: r.role, compileKey: r.compileKey })), replicas, maxUnavailable };
}

/**
 * The graph of a deploy. Both layouts roll units out in waves (a unit of wave k+1 starts after
 * every unit of wave k serves). Today every node downloads from the hub and compiles. Cached: the
 * first node of the first wave downloads, the others copy from it; the first unit of each compile
 * key compiles, the others copy its cache and load.
 */
export function deployGraph(shape: DeployShape, layout: Layout, scenario: Scenario, durations: StageDurations = DEFAULT_DURATIONS): DeployStep[] {
  const steps: DeployStep[] = [];
  const waves = rolloutWaves(shape.replicas, shape.maxUnavailable);
  const compiledBy = new Map<string, string>();
  let previousWave: string[] = [];
  for (const wave of waves) {
    const units: string[] = [];
    for (const replica of wave) {
      for (const { role, compileKey } of shape.roles) {
        const node = `${role}-${replica}`;
        const ready: string[] = [];
        if (scenario === "first") {
          steps.push({ id: `install ${node}`, kind: "install", deps: [] });
          const seed = `weights ${shape.roles[0]!.role}-0`;
          const weights = `weights ${node}`;
          if (layout === "today" || weights === seed) steps.push({ id: weights, kind: "hubDownload", deps: [], bytes: durations.weightsBytes });
          else steps.push({ id: weights, kind: "lanCopy", deps: [seed], bytes: durations.weightsBytes });
          ready.push(`install ${node}`, weights);
        }
        const unit = `unit ${node}`;
        const compiler = compiledBy.get(compileKey);
        if (layout === "today" || !compiler) {
          steps.push({ id: unit, kind: "compile", deps: [...ready, ...previousWave], serves: true });
          compiledBy.set(compileKey, unit);
        } else {
          steps.push({ id: `compiled cache ${node}`, kind: "lanCopy", deps: [compiler], bytes: durations.compiledCacheBytes });
          steps.push({ id: unit, kind: "load", deps: [...ready, `compiled cache ${node}`, ...previousWave], serves: true });
        }
        units.push(unit);
      }
    }
    previousWave = units;
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

/** Today's layout against the cached one, for each replica count. */
export function compareDeployLayouts(plan: LaunchPlan, replicaCounts: readonly number[], maxUnavailable: MaxUnavailable, durations: StageDurations = DEFAULT_DURATIONS): LayoutComparison[] {
  return replicaCounts.flatMap((replicas) => {
    const shape = shapeOf(plan, replicas, maxUnavailable);
    const keyOf = (unitId: string) => shape.roles.find((r) => unitId.startsWith(`unit ${r.role}-`))!.compileKey;
    return (["today", "cached"] as const).map((layout) => ({
      replicas,
      layout,
      first: simulateDeploy(deployGraph(shape, layout, "first", durations), durations, keyOf),
      recompile: simulateDeploy(deployGraph(shape, layout, "recompile", durations), durations, keyOf),
    }));
  });
}
