import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { diffPlans } from "../core/plan/diff";
import { runProgram } from "../program";
import { runUnderMocks, type Registration } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";

/** The unit step names its compile key's marker: a keyed change changes that line too. */
const COMPILE_MARKER_LINE = expect.stringMatching(/^compile_marker=\/var\/lib\/rbln-serving\/vllm\/rbln-serving-complete\/compile-[0-9a-f]{16}$/);

/**
 * What `pulumi preview` would show between two configs: resources added, removed and changed (by
 * URN, comparing inputs), and for changed string inputs the lines that differ.
 */
interface PreviewDiff {
  added: string[];
  removed: string[];
  changed: Record<string, string[]>;
  inputs: { before: Map<string, Registration>; after: Map<string, Registration> };
}

const SECRETS = { sshPrivateKey: "k", pipPassword: "p", hfToken: "t" };

async function preview(configA: Record<string, unknown>, configB: Record<string, unknown>): Promise<PreviewDiff> {
  const run = async (config: Record<string, unknown>) => {
    const { registrations, error } = await runUnderMocks(runProgram, config, SECRETS);
    if (error) throw error;
    return new Map(registrations.map((r) => [r.urn, r]));
  };
  const before = await run(configA);
  const after = await run(configB);
  const short = (urn: string) => urn.split("::").pop()!;
  const changed: Record<string, string[]> = {};
  for (const [urn, b] of after) {
    const a = before.get(urn);
    if (!a) continue;
    const keys = [...new Set([...Object.keys(a.inputs), ...Object.keys(b.inputs)])].filter((k) => JSON.stringify(a.inputs[k]) !== JSON.stringify(b.inputs[k]));
    if (keys.length > 0) changed[short(urn)] = keys;
  }
  return {
    added: [...after.keys()].filter((u) => !before.has(u)).map(short),
    removed: [...before.keys()].filter((u) => !after.has(u)).map(short),
    changed,
    inputs: { before, after },
  };
}

/** Lines of a string input that the change adds. */
function addedLines(diff: PreviewDiff, name: string, key: string): string[] {
  const find = (map: Map<string, Registration>) => [...map.values()].find((r) => r.name === name)!;
  const text = (r: Registration) => (typeof r.inputs[key] === "string" ? r.inputs[key] : JSON.stringify(r.inputs[key], null, 1)).split("\n");
  const before = new Set(text(find(diff.inputs.before)));
  return text(find(diff.inputs.after)).filter((line) => !before.has(line));
}

const dev = readStackFile("dev").raw;
const pd = { ...readStackFile("prod").raw, preset: undefined } as Record<string, unknown>;
delete pd.preset;

/** Roles whose ranks the plan changes between two configs: the only launch units that may change. */
function rolesChanged(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog).plan;
  return [
    ...new Set(
      diffPlans(plan(a), plan(b))
        .filter((c) => / rank \d+$/.test(c.scope))
        .map((c) => c.scope.split(" ")[0]!),
    ),
  ].sort();
}

describe("preview on platform hosts: each single change touches exactly what carries it", () => {
  it("changes nothing when nothing changes", async () => {
    const diff = await preview(dev, dev);
    expect({ added: diff.added, removed: diff.removed, changed: diff.changed }).toEqual({ added: [], removed: [], changed: {} });
  });

  it("spec_decode off → eagle3 changes the main unit in place and downloads the draft model, installing nothing", async () => {
    const diff = await preview(dev, { ...dev, axes: { spec_decode: "eagle3" } });
    expect([diff.added, diff.removed]).toEqual([[], []]);
    // Units run offline (HF_HUB_OFFLINE=1): the weights step fetches the draft model beforehand.
    // Preflight reads the weights markers (to skip its disk check once they exist): one more marker.
    expect(diff.changed).toEqual({
      "rbln-serving-npu-dev-0-preflight": ["create"],
      "rbln-serving-npu-dev-0-weights": ["create"],
      "rbln-serving-npu-dev-0-main-0": ["create"],
    });
    expect(addedLines(diff, "rbln-serving-npu-dev-0-weights", "create")).toContainEqual(
      "models=(MiniMaxAI/MiniMax-M2.7 asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k)",
    );
    // One added line: the flag goes before the stack's own last flag (--shutdown-timeout), so no other line changes.
    // And the step's marker of the new compile key (a rank whose cache was placed ahead must load it).
    expect(addedLines(diff, "rbln-serving-npu-dev-0-main-0", "create")).toEqual([
      COMPILE_MARKER_LINE,
      expect.stringMatching(/^ {4}--speculative-config "\{\\n {6}\\"method\\": \\"eagle3\\",/),
    ]);
  });

  it("spec_decode off → suffix also installs arctic-inference on that host", async () => {
    const diff = await preview(dev, { ...dev, axes: { spec_decode: "suffix" } });
    expect(diff.changed).toEqual({ "rbln-serving-npu-dev-0-install": ["create"], "rbln-serving-npu-dev-0-main-0": ["create"] });
    expect(addedLines(diff, "rbln-serving-npu-dev-0-install", "create")).toContainEqual(expect.stringContaining("arctic-inference==0.1.1"));
  });

  it("target Latency → Throughput changes only the unit whose --max-num-seqs changes", async () => {
    const diff = await preview(dev, { ...dev, target: "Throughput" });
    expect(diff.changed).toEqual({ "rbln-serving-npu-dev-0-main-0": ["create"] });
    expect(addedLines(diff, "rbln-serving-npu-dev-0-main-0", "create")).toEqual([COMPILE_MARKER_LINE, "    --max-num-seqs 4 \\"]);
  });

  it("a versions.vllmRbln bump reinstalls and restarts every unit of the host", async () => {
    const diff = await preview(dev, { ...dev, versions: { vllmRbln: "0.12.1" } });
    expect(diff.changed).toEqual({ "rbln-serving-npu-dev-0-install": ["create"], "rbln-serving-npu-dev-0-main-0": ["create"] });
    expect(addedLines(diff, "rbln-serving-npu-dev-0-install", "create")).toContainEqual(
      expect.stringMatching(/^requirements=\(.*'vllm-rbln\[kv_connectors\]==0\.12\.1'\)$/),
    );
  });
});

describe("preview on Kubernetes, prefill/decode disaggregated", () => {
  const launchResources = (roles: string[]) =>
    Object.fromEntries(
      roles.flatMap((role) => [
        [`rbln-serving-workloads-${role}-launch`, ["data", "metadata"]],
        [`rbln-serving-workloads-${role}`, ["spec"]],
      ]),
    );

  it("changes nothing when nothing changes", async () => {
    const diff = await preview(pd, pd);
    expect({ added: diff.added, removed: diff.removed, changed: diff.changed }).toEqual({ added: [], removed: [], changed: {} });
  });

  // eagle3 brings a draft model: the weights Job (named after the models) fetches it before the roles roll.
  const draftDownload = { "rbln-serving-workloads-weights-download": ["metadata", "spec"] };
  for (const [what, change, roles, others] of [
    ["spec_decode off → eagle3", { axes: { spec_decode: "eagle3" } }, ["decode", "prefill"], draftDownload],
    ["target Throughput → Latency (decode only)", { target: "Latency" }, ["decode"], {}],
    ["lmcache off → cpu (prefill only)", { axes: { lmcache: "cpu" } }, ["prefill"], {}],
  ] as const) {
    it(`${what} changes only the launch ConfigMap and Deployment of the roles it touches`, async () => {
      const after = { ...pd, ...change };
      expect(rolesChanged(pd, after)).toEqual([...roles].sort());
      const diff = await preview(pd, after);
      expect([diff.added, diff.removed]).toEqual([[], []]);
      expect(diff.changed).toEqual({ ...launchResources([...roles]), ...others });
    });
  }

  it("never changes or removes the namespace or the cache volumes, whatever the serving change", async () => {
    for (const change of [
      { axes: { spec_decode: "suffix", lmcache: "rds" } },
      { target: "Latency" },
      { preset: "recommended" },
      { decodeReplicas: 4 },
      { extraEnv: { decode: { X: "1" } } },
    ]) {
      const diff = await preview(pd, { ...pd, ...change });
      const touched = [...Object.keys(diff.changed), ...diff.removed];
      expect(
        touched.filter((name) => /-(namespace|weights|compile-cache)$/.test(name)),
        JSON.stringify(change),
      ).toEqual([]);
    }
  });

  it("shows the changed flag as a changed line of the launch script", async () => {
    const diff = await preview(pd, { ...pd, target: "Latency" });
    expect(addedLines(diff, "rbln-serving-workloads-decode-launch", "data").filter((l) => l.includes("max-num-seqs"))).toEqual([
      expect.stringContaining("--max-num-seqs 1 \\\\"),
    ]);
  });
});
