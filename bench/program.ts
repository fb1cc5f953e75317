import { Bench } from "tinybench";
import { allSelections, resolvePlan } from "../core/plan/resolve";
import { runProgram } from "../program";
import { runUnderMocks, type Registration } from "../test/helpers/pulumiHarness";
import type { BenchPart, Target } from "./part";
import { hostsRollout, kubernetesRollout } from "./rollout";
import { configFor, recipe, secrets } from "./stacks";

/** Measured: plan cost over every recipe combination, and the Pulumi program's cost under the mock runtime as replicas grow. */

const REPLICAS = [1, 8, 64, 256];
/** Replica counts the rollout shape is reported for. */
const ROLLOUT_REPLICAS = [1, 4, 8, 64];
const PLATFORMS = ["hosts", "kubernetes"] as const;

/** Longest chain of dependsOn edges in the registered graph. */
function dependencyDepth(registrations: readonly Registration[]): number {
  const deps = new Map(registrations.map((r) => [r.urn, r.dependencies]));
  const memo = new Map<string, number>();
  const depth = (urn: string): number => {
    if (memo.has(urn)) return memo.get(urn)!;
    const value = 1 + Math.max(0, ...(deps.get(urn) ?? []).map(depth));
    memo.set(urn, value);
    return value;
  };
  return Math.max(...registrations.map((r) => depth(r.urn)));
}

const collectGarbage = () => (globalThis as { gc?: () => void }).gc?.();

const median = (bench: Bench, name: string) => {
  const result = bench.tasks.find((t) => t.name === name)!.result as { latency?: { p50: number } };
  return result.latency!.p50;
};

async function registered(platform: "hosts" | "kubernetes", replicas: number): Promise<Registration[]> {
  const run = await runUnderMocks(runProgram, configFor(platform, replicas), secrets);
  if (run.error) throw run.error;
  return run.registrations;
}

export const planPart: BenchPart = {
  name: "plan",
  what: "plan every recipe combination in one process (measured)",
  async run() {
    const selections = [...allSelections(recipe)];
    const bench = new Bench({ iterations: 20, time: 0, warmupIterations: 2 });
    bench.add("plan all combinations", () => {
      for (const selection of selections) resolvePlan(recipe, selection);
    });
    await bench.run();
    const medianMs = median(bench, "plan all combinations");
    return {
      report: { combinations: selections.length, medianMs },
      lines: [`plan all ${selections.length} combinations: median ${medianMs.toFixed(1)} ms`],
      targets: [{ target: `all ${selections.length} plans under 1 s`, value: medianMs, met: medianMs < 1000 }],
    };
  },
};

interface ProgramShape {
  platform: (typeof PLATFORMS)[number];
  replicas: number;
  resources: number;
  depth: number;
  medianMs: number;
}

/** The program's targets per platform: time as replicas grow, resources per replica, dependency depth. */
function programTargets(programs: readonly ProgramShape[]): Target[] {
  return PLATFORMS.flatMap((platform) => {
    const at = (replicas: number) => programs.find((p) => p.platform === platform && p.replicas === replicas)!;
    const [p1, p64, p256] = [at(1), at(64), at(256)];
    const mine = programs.filter((p) => p.platform === platform);
    const perReplica = mine.map((p) => (p.resources - p1.resources) / Math.max(1, p.replicas - 1)).slice(1);
    return [
      { target: `${platform}: 64 replicas under 5 s`, value: p64.medianMs, met: p64.medianMs < 5000 },
      { target: `${platform}: 256 replicas at most 4.5 x the time of 64`, value: p256.medianMs / p64.medianMs, met: p256.medianMs <= 4.5 * p64.medianMs },
      platform === "hosts"
        ? // 5 steps per host, and per host that copies: 3 for the weights and 3 for a compiled cache.
          { target: "hosts: resources grow linearly, at most 11 per replica", value: Math.max(...perReplica), met: perReplica.every((n) => n <= 11) }
        : { target: `${platform}: resources per replica constant`, value: perReplica.at(-1)!, met: new Set(perReplica.map((n) => n.toFixed(6))).size <= 1 },
      platform === "hosts"
        ? // Depth follows the waves (4 at most with defaults, the first in two steps), not the replicas.
          {
            target: "hosts: dependency depth the same for 8, 64 and 256 replicas (it follows the waves, not the replicas)",
            value: p256.depth,
            met: new Set([8, 64, 256].map((n) => at(n).depth)).size === 1,
          }
        : { target: `${platform}: dependency depth constant in replicas`, value: p256.depth, met: new Set(mine.map((p) => p.depth)).size === 1 },
    ];
  });
}

export const programPart: BenchPart = {
  name: "program",
  what: "the Pulumi program under the mock runtime as replicas grow: time, resources, dependency depth (measured)",
  async run() {
    const bench = new Bench({ iterations: 7, time: 0, warmupIterations: 2 });
    const shapes: Omit<ProgramShape, "medianMs">[] = [];
    for (const platform of PLATFORMS) {
      for (const replicas of REPLICAS) {
        const registrations = await registered(platform, replicas);
        shapes.push({ platform, replicas, resources: registrations.length, depth: dependencyDepth(registrations) });
        // Start each run from a collected heap, so one run's garbage is not billed to the next.
        bench.add(`${platform} x${replicas}`, () => registered(platform, replicas).then(() => undefined), { beforeEach: collectGarbage });
      }
    }
    await bench.run();
    const programs = shapes.map((s) => ({ ...s, medianMs: median(bench, `${s.platform} x${s.replicas}`) }));
    const lines = [
      "platform    replicas  resources  depth  median ms",
      ...programs.map(
        (p) =>
          `${p.platform.padEnd(10)}  ${String(p.replicas).padStart(8)}  ${String(p.resources).padStart(9)}  ${String(p.depth).padStart(5)}  ${p.medianMs.toFixed(1).padStart(9)}`,
      ),
    ];
    return { report: programs, lines, targets: programTargets(programs) };
  },
};

export const rolloutsPart: BenchPart = {
  name: "rollouts",
  what: "update waves and the lowest share serving during a change, read from the program's graph (hosts) and each Deployment's strategy (Kubernetes)",
  async run() {
    const rollouts = [];
    for (const platform of PLATFORMS) {
      for (const replicas of ROLLOUT_REPLICAS) {
        const registrations = await registered(platform, replicas);
        // Hosts are named npu-<i> and the strategy has one node: host i is replica i.
        const shape =
          platform === "hosts"
            ? hostsRollout(registrations, ["main"], (parent) => Number(/npu-(\d+)$/.exec(parent)![1]), replicas)
            : kubernetesRollout(registrations);
        rollouts.push({ platform, replicas, ...shape });
      }
    }
    const four = rollouts.find((r) => r.platform === "hosts" && r.replicas === 4)!;
    return {
      report: rollouts,
      lines: [
        "platform    replicas  update waves  lowest share serving during a change",
        ...rollouts.map(
          (r) =>
            `${r.platform.padEnd(10)}  ${String(r.replicas).padStart(8)}  ${String(r.waves).padStart(12)}  ${(r.lowestServingShare * 100).toFixed(0).padStart(5)}%`,
        ),
        "(Kubernetes: maxUnavailable's rounding of the rendered strategy, checked in test/kubernetes-render.test.ts; not a target)",
      ],
      // Hosts only: the share follows the dependency graph the program wires. On Kubernetes it is the
      // rendered maxUnavailable (25 %) read back, which cannot come out otherwise.
      targets: [
        {
          target: "hosts: 4 replicas, defaults: at least 3 of 4 serve throughout a change",
          value: four.lowestServingShare,
          met: four.lowestServingShare >= 0.75,
        },
      ],
    };
  },
};
