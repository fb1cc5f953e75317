import { describe, expect, it } from "vitest";
import { compareCompileKeys, compileKey, recompileLines, UNKEYED_ENV, UNKEYED_FLAGS } from "../core/plan/compileKey";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { diffPlans } from "../core/plan/diff";
import { allSelections, resolvePlan } from "../core/plan/resolve";
import type { LaunchPlan, Selection } from "../core/plan/types";
import { compareDeployLayouts, DEFAULT_DURATIONS, programDeployGraph, simulateDeploy, type Registered } from "../bench/deployModel";
import { runProgram } from "../program";
import { runUnderMocks } from "./helpers/pulumiHarness";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { shippedCatalog } from "./helpers/recipes";
import { runCommand } from "../cli/commands";

const minimax = shippedCatalog.get("MiniMaxAI/MiniMax-M2.7");
const pd = (axes: Record<string, string>, target = "Throughput", versions?: Record<string, string>) =>
  resolvePlan(minimax, { model: minimax.model, strategy: "prefill-decode-disaggregated", target, axes, versions });
const REVISION = "0123456789abcdef0123456789abcdef01234567";

describe("compile keys", () => {
  it("name the keyed change as a warning, and note when a change does not recompile", () => {
    const lines = (a: LaunchPlan, b: LaunchPlan) => recompileLines(compareCompileKeys(a, b)).map((m) => `${m.level}: ${m.text}`);
    expect(lines(pd({}, "Latency"), pd({}))).toEqual(['warning: recompiles decode: --max-num-seqs "1" -> "4" (hours on first start)']);
    expect(lines(pd({ prefix_caching: "on" }), pd({ prefix_caching: "on_sub_block" }))).toEqual([
      "note: does not recompile prefill: env VLLM_RBLN_SUB_BLOCK_CACHE is not part of the compile key",
      "note: does not recompile decode: env VLLM_RBLN_SUB_BLOCK_CACHE is not part of the compile key",
    ]);
    expect(lines(pd({ reasoning_parser: "on" }), pd({ reasoning_parser: "off" }))).toEqual([
      "note: does not recompile prefill: --reasoning-parser is not part of the compile key",
      "note: does not recompile decode: --reasoning-parser is not part of the compile key",
    ]);
    expect(lines(pd({}), pd({}, "Throughput", { rebelCompiler: "0.12.1" }))).toEqual([
      'warning: recompiles prefill: rebel-compiler "0.12.0" -> "0.12.1" (hours on first start)',
      'warning: recompiles decode: rebel-compiler "0.12.0" -> "0.12.1" (hours on first start)',
    ]);
  });

  it("recompile exactly when a keyed setting of the role changes, over every verified combination", () => {
    const isKeyed = (item: string) => (item.startsWith("env ") ? !(item.slice(4) in UNKEYED_ENV) : !(item in UNKEYED_FLAGS) && item !== "command");
    const combos = [...allSelections(minimax)];
    const base = new Map<string, ReturnType<typeof resolvePlan>>();
    for (const selection of combos) {
      const key = `${selection.strategy}/${selection.target}`;
      const plan = resolvePlan(minimax, selection);
      if (!base.has(key)) base.set(key, plan);
      const first = base.get(key)!;
      const changed = diffPlans(first, plan).filter((c) => c.scope.includes(" rank ") && isKeyed(c.item));
      for (const role of compareCompileKeys(first, plan)) {
        expect(role.recompile, `${key} ${JSON.stringify(selection.axes)} ${role.role}`).toBe(changed.some((c) => c.scope.startsWith(`${role.role} rank `)));
      }
    }
  });

  it("are the same for every rank placement and ignore flag order, but follow the model and packages", () => {
    const plan = pd({});
    const decode = plan.roles.find((r) => r.role === "decode")!;
    expect(decode.compileKey).toMatch(/^[0-9a-f]{16}$/);
    const reordered = { ...decode, ranks: decode.ranks.map((rank) => ({ ...rank, flags: [...rank.flags].reverse() })) };
    expect(compileKey(plan, reordered)).toBe(decode.compileKey);
    expect(compileKey({ packages: [], nodes: plan.nodes }, decode)).not.toBe(decode.compileKey);
  });

  it("cover the target NPU and, on Kubernetes, the image: the rest of what issue 22 names (versions, model, revision, keyed flags) is in the rank settings", () => {
    const plan = pd({});
    const decode = plan.roles.find((r) => r.role === "decode")!;
    const otherSoc = plan.nodes.map((n) => ({ ...n, skus: ["RBLN-CA25"] }));
    expect(compileKey({ ...plan, nodes: otherSoc }, decode)).not.toBe(decode.compileKey);
    const image = `registry.example.com/ml/vllm-rbln@sha256:${"a".repeat(64)}`;
    expect(compileKey(plan, decode, image)).not.toBe(decode.compileKey);
    expect(compileKey(plan, decode, image)).not.toBe(compileKey(plan, decode, image.replace(/a{64}$/, "b".repeat(64))));
    const prod = { ...readStackFile("prod").raw, kubernetes: { ...(readStackFile("prod").raw.kubernetes as object), image } };
    const deployed = planDeployment(parseStackSettings(prod), shippedCatalog).plan;
    expect(deployed.roles.map((r) => r.compileKey)).toEqual(deployed.roles.map((r) => compileKey(deployed, r, image)));
  });
});

describe("the CLI", () => {
  it("gives roles[].compileKey in the JSON plan, recompile per role in the JSON diff, and a warning line in the text diff", () => {
    const plan = JSON.parse(runCommand("plan", { stack: "dev", format: "json" }, shippedCatalog));
    expect(plan.roles[0].compileKey).toMatch(/^[0-9a-f]{16}$/);
    expect(plan.revision).toBeNull();
    const json = JSON.parse(runCommand("diff", { stack: "dev", diff: "staging", format: "json" }, shippedCatalog));
    expect(json.filter((c: { item: string }) => c.item === "compileKey")).toEqual([
      { scope: "main", kind: "changed", item: "compileKey", before: plan.roles[0].compileKey, after: expect.stringMatching(/^[0-9a-f]{16}$/), recompile: true },
    ]);
    const text = runCommand("diff", { stack: "dev", diff: "staging" }, shippedCatalog);
    expect(text).toMatch(/^warning: recompiles main: .*--max-num-seqs "1" -> "4".* \(hours on first start\)$/m);
    expect(runCommand("plan", { stack: "dev" }, shippedCatalog)).toContain("\nrevision  resolved at first download (stack output modelRevision)\n");
  });
});

describe("revision and offline serving", () => {
  const dev = readStackFile("dev").raw;
  it("pins vLLM to the revision, lists the draft model, and serves offline", () => {
    const { plan } = planDeployment(parseStackSettings({ ...dev, revision: REVISION, axes: { spec_decode: "eagle3" } }), shippedCatalog);
    const rank = plan.roles[0]!.ranks[0]!;
    expect(rank.argv.slice(-4)).toEqual(["--revision", REVISION, "--tokenizer-revision", REVISION]);
    expect(rank.env.HF_HUB_OFFLINE).toBe("1");
    expect(plan.revision).toBe(REVISION);
    expect(plan.models).toEqual([
      { id: "MiniMaxAI/MiniMax-M2.7", use: "model", revision: REVISION, roles: ["main"] },
      { id: "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k", use: "draft", revision: null, roles: ["main"] },
    ]);
    const unpinned = planDeployment(parseStackSettings(dev), shippedCatalog).plan;
    expect(unpinned.revision).toBeNull();
    expect(unpinned.models).toEqual([{ id: "MiniMaxAI/MiniMax-M2.7", use: "model", revision: null, roles: ["main"] }]);
    expect(plan.roles[0]!.compileKey).not.toBe(unpinned.roles[0]!.compileKey);
  });

  it("refuses a revision that is not a commit hash, and --revision in extraArgs", () => {
    for (const bad of ["main", REVISION.slice(0, 39), REVISION.toUpperCase(), `${REVISION}0`]) {
      expect(() => parseStackSettings({ ...dev, revision: bad })).toThrow(/^revision: a 40-hex commit hash/);
    }
    expect(() => planDeployment(parseStackSettings({ ...dev, extraArgs: { main: ["--revision", REVISION] } }), shippedCatalog)).toThrow(
      /^extraArgs\.main: "--revision" comes from the revision setting/,
    );
  });
});

describe("deploy model", () => {
  const plan = resolvePlan(minimax, { model: minimax.model, strategy: "aggregated-data-expert-parallel", target: "Throughput" } satisfies Selection);
  const keys = { main: plan.roles[0]!.compileKey };
  const register = async (replicas: number, registered: Registered) => {
    const hosts = Array.from({ length: replicas }, (_, i) => ({ name: `npu-${i}`, address: `10.0.0.${i + 1}`, hostKey: EXAMPLE_HOST_KEY }));
    const more =
      registered === "shared"
        ? { cache: { shared: "/mnt/rbln-cache" } }
        : registered === "ahead"
          ? {
              revision: REVISION,
              compile: { host: { name: "cpu-0", address: "10.0.1.1", hostKey: EXAMPLE_HOST_KEY }, registry: { repository: "registry.example.com/cache" } },
            }
          : {};
    const run = await runUnderMocks(
      runProgram,
      { strategy: "aggregated-data-expert-parallel", target: "Throughput", replicas, hosts, ...more },
      { sshPrivateKey: "k" },
    );
    if (run.error) throw run.error;
    return run.registrations;
  };

  it("8 replicas, from the program's graph: today 8 downloads and 8 compiles; copies and shared 1 and 1 per compile key", async () => {
    const [today, copies, shared] = await compareDeployLayouts([8], register, keys);
    expect([today!.first.hubDownloads, today!.first.compiles, today!.first.internetBytes]).toEqual([8, 8, 8 * 230e9]);
    for (const cached of [copies!, shared!]) {
      expect([cached.layout, cached.first.hubDownloads, cached.first.compilesPerKey, cached.first.internetBytes]).toEqual([
        cached.layout,
        1,
        { [keys.main]: 1 },
        230e9,
      ]);
      expect(cached.first.minutesToFullCapacity).toBeLessThan(today!.first.minutesToFullCapacity);
      expect(cached.recompile.compiles).toBe(1);
    }
    // Shared: no LAN copies, so the later waves start sooner than with copies.
    expect(shared!.first.minutesToFullCapacity).toBeLessThan(copies!.first.minutesToFullCapacity);
  });

  it("a recompiling change with compile ahead: no NPU compiles, each replica out for one load; a registry hit compiles nothing", async () => {
    const d = DEFAULT_DURATIONS;
    for (const replicas of [4, 64]) {
      const layouts = await compareDeployLayouts([replicas], register, keys);
      const change = (layout: string) => layouts.find((l) => l.layout === layout)!.recompile;
      expect(change("compileAhead")).toMatchObject({ npuCompiles: 0, compiles: 1, replicaMinutesOutOfService: (replicas * d.loadSeconds) / 60 });
      expect(change("registryHit")).toMatchObject({ npuCompiles: 0, compiles: 0, replicaMinutesOutOfService: (replicas * d.loadSeconds) / 60 });
      // Today's layouts take the first wave's replica out for a whole compile.
      expect(change("copies").npuCompiles).toBe(1);
      expect(change("copies").replicaMinutesOutOfService).toBeGreaterThanOrEqual(d.compileSeconds / 60);
      for (const layout of ["copies", "compileAhead", "registryHit"]) expect(change(layout).lowestServingShare, layout).toBeGreaterThanOrEqual(0.75);
      expect(change("registryHit").minutesToFullCapacity).toBeLessThan(change("compileAhead").minutesToFullCapacity);
    }
  });

  it("evaluates earliest finish times: one replica is install/download, then compile", async () => {
    const steps = programDeployGraph(await register(1, "copies"), keys, "copies", "first");
    expect(steps.map((s) => `${s.id} ${s.kind}`).sort()).toEqual([
      "rbln-serving-npu-0-install install",
      "rbln-serving-npu-0-main-0 compile",
      "rbln-serving-npu-0-preflight check",
      "rbln-serving-npu-0-weights hubDownload",
    ]);
    const d = DEFAULT_DURATIONS;
    const download = (d.weightsBytes * 8) / (d.internetGbitPerS * 1e9);
    expect(simulateDeploy(steps).minutesToFullCapacity).toBeCloseTo((Math.max(download, d.installSeconds) + d.compileSeconds) / 60, 6);
    expect(() => simulateDeploy([{ id: "a", kind: "load", deps: ["b"], serves: true }])).toThrow(/unknown step b/);
  });
});
