import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../core/errors";
import { allSelections, findOption, gridAxes, resolvePlan, versionKeyOf } from "../core/plan/resolve";
import type { LaunchPlan, Selection } from "../core/plan/types";
import type { Recipe } from "../core/recipe/schema";
import { splitShellWords } from "../core/shell";
import { minimax } from "./helpers/recipes";

const combos = [...allSelections(minimax)];

/**
 * The oracle: what the recipe says a rank's flags and env are, computed as sets from the grid's
 * own structure (base, then every selected delta, then the rank's overrides), independently of the
 * resolver's ordered maps.
 */
function expectedRank(recipe: Recipe, selection: Selection, role: string, rank: number) {
  const grid = findOption(recipe, selection.strategy, selection.target).grid;
  const base = grid.base.find((r) => r.role === role)!;
  const override = base.ranks?.[rank] ?? { args: {}, envs: {} };
  const deltas = Object.entries(selection.axes!).flatMap(([axis, value]) => grid.deltas[`${axis}=${value}`]?.[role] ?? []);
  const deleted = (key: string, kind: "args" | "envs") => deltas.some((d) => (kind === "args" ? d.del_args : d.del_envs).includes(key));
  const added = (kind: "args" | "envs") => Object.assign({}, ...deltas.map((d) => (kind === "args" ? d.add_args : d.add_envs)));
  const texts = (kind: "args" | "envs") => {
    const kept = Object.fromEntries(Object.entries(base[kind]).filter(([key]) => !deleted(key, kind)));
    return { ...kept, ...added(kind), ...override[kind] } as Record<string, string>;
  };
  const flags = Object.fromEntries(Object.entries(texts("args")).map(([key, text]) => [key, splitShellWords(text).slice(1)]));
  const env = Object.fromEntries(Object.entries(texts("envs")).map(([key, text]) => [key, splitShellWords(text)[0]!.slice(key.length + 1)]));
  return { flags, env, launcher: splitShellWords(base.launcher), ranks: base.ranks?.length ?? 1 };
}

describe("every combination the recipe verifies", () => {
  it("counts 540: 3 strategies, 5 targets, 108 axis combinations each", () => {
    expect(combos.length).toBe(540);
    expect(new Set(combos.map((c) => JSON.stringify(c))).size).toBe(540);
  });

  it("plans exactly as the grid's base, deltas and rank overrides say", () => {
    for (const selection of combos) {
      const plan = resolvePlan(minimax, selection);
      const grid = findOption(minimax, selection.strategy, selection.target).grid;
      expect(plan.roles.map((r) => r.role)).toEqual(grid.base.map((b) => b.role));
      for (const role of plan.roles) {
        for (const rank of role.ranks) {
          const expected = expectedRank(minimax, selection, role.role, rank.rank);
          expect(role.ranks.length).toBe(expected.ranks);
          expect(rank.argv.slice(0, expected.launcher.length + 1)).toEqual([...expected.launcher, grid.model]);
          expect(Object.fromEntries(rank.flags.map((f) => [f.name, f.values]))).toEqual(expected.flags);
          expect(rank.argv.slice(expected.launcher.length + 1)).toEqual(rank.flags.flatMap((f) => [f.name, ...f.values]));
          // Serving never reaches the hub: every rank runs offline on top of the recipe's variables.
          expect(rank.env).toEqual({ ...expected.env, HF_HUB_OFFLINE: "1" });
          const port = expected.flags["--port"]?.[0];
          expect(rank.ports).toEqual([port ? Number(port) : 8000]);
          const visible = expected.env.RBLN_VISIBLE_DEVICES;
          expect(rank.devices).toEqual(visible ? visible.split(",").map(Number) : [0, 1, 2, 3]);
          const text = JSON.stringify([rank.argv, rank.env]);
          for (const name of ["POD_IP", "EPP_HOST"]) expect(rank.placeholders.includes(name)).toBe(text.includes(`<${name}>`));
        }
      }
    }
  });

  it("installs arctic-inference exactly when spec_decode is suffix, and the pinned RBLN stack always", () => {
    for (const selection of combos) {
      const names = resolvePlan(minimax, selection).packages.map((p) => p.requirement);
      expect(names.slice(0, 2)).toEqual(["rebel-compiler==0.12.0", "vllm-rbln[kv_connectors]==0.12.0"]);
      expect(names.includes("arctic-inference==0.1.1")).toBe(selection.axes!.spec_decode === "suffix");
    }
  });

  it("places aggregated strategies on one node and prefill/decode on two", () => {
    for (const selection of combos) {
      const plan = resolvePlan(minimax, selection);
      if (selection.strategy === "prefill-decode-disaggregated") {
        expect(plan.nodes.map((n) => n.roles)).toEqual([["prefill"], ["decode"]]);
        expect(plan.roles.map((r) => [r.role, r.node, r.ranks.map((k) => k.ports[0])])).toEqual([
          ["prefill", 0, [8000]],
          ["decode", 1, [8200, 8201, 8202, 8203]],
        ]);
        expect(plan.router).not.toBeNull();
      } else {
        expect(plan.nodes.map((n) => n.roles)).toEqual([["main"]]);
        expect(plan.router).toBeNull();
      }
    }
  });
});

describe("defaults and presets", () => {
  const base = { model: minimax.model, strategy: "aggregated-data-expert-parallel", target: "Throughput" };

  it("defaults mode axes to off and option axes to option_base", () => {
    expect(resolvePlan(minimax, base).selection).toEqual({
      lmcache: "off",
      prefix_caching: "off",
      spec_decode: "off",
      reasoning_parser: "on",
      tool_calling: "on",
    });
  });

  it("takes the recommended preset, and explicit axes over it", () => {
    const plan = resolvePlan(minimax, { ...base, preset: "recommended", axes: { spec_decode: "suffix" } });
    expect(plan.selection).toEqual({ lmcache: "rds", prefix_caching: "on_sub_block", spec_decode: "suffix", reasoning_parser: "on", tool_calling: "on" });
  });

  it("overrides package versions by their camelCase key", () => {
    const plan = resolvePlan(minimax, { ...base, axes: { spec_decode: "suffix" }, versions: { vllmRbln: "0.12.1", arcticInference: "0.1.2" } });
    expect(plan.packages.map((p) => p.requirement)).toEqual(["rebel-compiler==0.12.0", "vllm-rbln[kv_connectors]==0.12.1", "arctic-inference==0.1.2"]);
    expect(minimax.installs.map((i) => versionKeyOf(i.package))).toEqual(["rebelCompiler", "vllmRbln", "arcticInference"]);
  });
});

describe("bad selections are refused with the key, the value and what is allowed", () => {
  const pd = { model: minimax.model, strategy: "prefill-decode-disaggregated", target: "Latency" };
  const cases: [string, Selection, RegExp][] = [
    [
      "an unknown strategy",
      { ...pd, strategy: "tensor-parallel" },
      /^strategy: unknown strategy "tensor-parallel" .*allowed: "aggregated-data-expert-parallel", "aggregated-pipeline-parallel", "prefill-decode-disaggregated"$/,
    ],
    [
      "a target the strategy lacks",
      { ...pd, strategy: "aggregated-pipeline-parallel" },
      /^target: "Latency" is not offered by strategy "aggregated-pipeline-parallel"; allowed: "Throughput"$/,
    ],
    ["an unknown lmcache value", { ...pd, axes: { lmcache: "bogus" } }, /^axes\.lmcache: unknown value "bogus"; verified values: "off", "cpu", "rds"$/],
    [
      "spec_decode=mtp",
      { ...pd, axes: { spec_decode: "mtp" } },
      /^axes\.spec_decode: "mtp" is not verified for model "MiniMaxAI\/MiniMax-M2.7", strategy "prefill-decode-disaggregated".*verified values: "off", "eagle3", "suffix"$/,
    ],
    ["spec_decode=ngram", { ...pd, axes: { spec_decode: "ngram" } }, /^axes\.spec_decode: "ngram" is not verified/],
    [
      "the kv_connector axis",
      { ...pd, axes: { kv_connector: "lmcache_cpu" } },
      /^axes\.kv_connector: axis "kv_connector" is not verified for model .*; verified axes: "lmcache"/,
    ],
    ["the on_device_sampler axis", { ...pd, axes: { on_device_sampler: "on" } }, /^axes\.on_device_sampler: axis "on_device_sampler" is not verified/],
    ["the structured_output axis", { ...pd, axes: { structured_output: "on" } }, /^axes\.structured_output: axis "structured_output" is not verified/],
    ["an axis nobody lists", { ...pd, axes: { colour: "blue" } }, /^axes\.colour: unknown axis "colour"; allowed: "lmcache"/],
    [
      "a recommended preset where there is none",
      { ...pd, strategy: "aggregated-pipeline-parallel", target: "Throughput", preset: "recommended" },
      /^preset: "recommended" is not offered .*"aggregated-pipeline-parallel"/,
    ],
    [
      "an unknown versions key",
      { ...pd, versions: { vllm: "0.30.0" } },
      /^versions\.vllm: unknown package key; allowed: "rebelCompiler", "vllmRbln", "arcticInference"$/,
    ],
    ["a version with shell in it", { ...pd, versions: { vllmRbln: "0.12.0; rm -rf /" } }, /^versions\.vllmRbln: "0.12.0; rm -rf \/" is not a version number/],
  ];
  for (const [what, selection, message] of cases) {
    it(`refuses ${what}`, () => {
      let error: unknown;
      try {
        resolvePlan(minimax, selection);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain("\n");
    });
  }
});

describe("resolver properties", () => {
  const grids = minimax.strategies.flatMap((s) =>
    s.options.map((o) => ({ strategy: s.slug, target: o.target, axes: gridAxes(o.grid), recommended: o.grid.recommended })),
  );
  const arbitrarySelection = fc.constantFrom(...grids).chain((g) =>
    fc.record({
      grid: fc.constant(g),
      axes: fc.record(Object.fromEntries(g.axes.map((a) => [a.axis, fc.constantFrom(...a.values)])), { requiredKeys: [] }),
      preset: g.recommended ? fc.constantFrom(undefined, "recommended" as const) : fc.constant(undefined),
    }),
  );

  it("explicit axes win, then the preset, then the defaults; every grid axis is resolved", () => {
    fc.assert(
      fc.property(arbitrarySelection, ({ grid, axes, preset }) => {
        const plan = resolvePlan(minimax, { model: minimax.model, strategy: grid.strategy, target: grid.target, preset, axes: axes as Record<string, string> });
        for (const { axis, fallback } of grid.axes) {
          const want = (axes as Record<string, string>)[axis] ?? (preset ? grid.recommended![axis] : undefined) ?? fallback;
          expect(plan.selection[axis]).toBe(want);
        }
      }),
    );
  });

  it("is deterministic and does not share state between plans", () => {
    fc.assert(
      fc.property(arbitrarySelection, ({ grid, axes }) => {
        const selection = { model: minimax.model, strategy: grid.strategy, target: grid.target, axes: axes as Record<string, string> };
        const first: LaunchPlan = resolvePlan(minimax, selection);
        const snapshot = JSON.stringify(first);
        first.roles[0]!.ranks[0]!.argv.push("--mutated");
        first.roles[0]!.ranks[0]!.flags[0]!.values.push("mutated");
        expect(JSON.stringify(resolvePlan(minimax, selection))).toBe(snapshot);
      }),
    );
  });

  it("refuses every value outside the grid for every axis", () => {
    fc.assert(
      fc.property(fc.constantFrom(...grids), fc.string({ minLength: 1, maxLength: 12 }), (grid, value) => {
        const axis = grid.axes[0]!;
        fc.pre(!axis.values.includes(value));
        expect(() => resolvePlan(minimax, { model: minimax.model, strategy: grid.strategy, target: grid.target, axes: { [axis.axis]: value } })).toThrow(
          ConfigError,
        );
      }),
    );
  });
});
