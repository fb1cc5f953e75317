import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { bindRank } from "../core/plan/bind";
import { planDeployment } from "../core/plan/deployment";
import { renderHost } from "../core/render/hosts/bundle";
import { envFileLine, isEnvFileValue, quoteExecWord, renderEnvFile } from "../core/render/hosts/systemd";
import { renderKubernetesWorkloads } from "../core/render/kubernetes/workloads";
import { hostileString } from "./helpers/arbitraries";
import { VLLM_SERVE_OPTIONS } from "../core/config/vllmFlags.generated";
import { TOPOLOGY_FLAGS } from "../core/config/vllmOptions";
import { shippedCatalog } from "./helpers/recipes";
import { systemdEnvFile, systemdExecArgv } from "./helpers/systemdOracle";

/**
 * Values from stack config (extraArgs, extraEnv) full of quotes, $, backticks, %, newlines and
 * JSON reach vLLM byte for byte: through systemd's ExecStart and EnvironmentFile parsers on hosts,
 * and through the launch script under real bash on Kubernetes.
 */
/** Every character class that breaks naive quoting, whatever the generator draws. */
const NASTY = [
  "$HOME",
  "${PATH}",
  "100%",
  "%n%%",
  "it's",
  'say "hi"',
  "back\\slash",
  "`id`",
  "$(id)",
  "line1\nline2",
  "tab\there",
  '{"a": [1, "$x"]}',
  " lead and trail ",
  "",
];
const argValues = [
  ...NASTY,
  ...fc.sample(
    hostileString.filter((v) => !v.startsWith("-") && !v.includes("\0")),
    { numRuns: 40, seed: 11 },
  ),
];
// The environment.d oracle drops empty values and expands $: those are covered by the bash path below.
const envValues = [
  ...NASTY.filter((v) => v !== "" && !v.includes("$")),
  ...fc.sample(
    hostileString.filter((v) => isEnvFileValue(v) && v !== "" && !v.includes("$")),
    { numRuns: 40, seed: 12 },
  ),
];
const k8sEnvValues = [
  ...NASTY,
  ...fc.sample(
    hostileString.filter((v) => !v.includes("\0")),
    { numRuns: 40, seed: 13 },
  ),
];

const stackOf = (platform: "hosts" | "kubernetes") => ({
  ...readStackFile(platform === "hosts" ? "dev" : "prod").raw,
  ...(platform === "hosts" ? {} : { strategy: "aggregated-data-expert-parallel", target: "Latency", preset: undefined }),
});
/** vLLM options of one value that neither recipe nor package sets: each carries one value to the end of the command line. */
const recipeFlags = new Set(
  (["hosts", "kubernetes"] as const).flatMap((platform) =>
    planDeployment(parseStackSettings(stackOf(platform)), shippedCatalog).plan.roles.flatMap((r) => r.ranks.flatMap((k) => k.flags.map((f) => f.name))),
  ),
);
const PROBES = VLLM_SERVE_OPTIONS.filter(
  (o) =>
    o.values === "one" &&
    !recipeFlags.has(o.name) &&
    !(TOPOLOGY_FLAGS as readonly string[]).includes(o.name) &&
    !/revision|tokenizer|^--model$|download-dir/.test(o.name),
).map((o) => o.name);
const probeWords = () => argValues.flatMap((v, i) => [PROBES[i]!, v]);

function config(platform: "hosts" | "kubernetes", env: string[]) {
  return parseStackSettings({
    ...stackOf(platform),
    extraArgs: { main: probeWords() },
    extraEnv: { main: Object.fromEntries(env.map((v, i) => [`PROBE_${i}`, v])) },
  });
}

describe("config values round-trip exactly", () => {
  it("into a unit's ExecStart and EnvironmentFile, as systemd parses them", () => {
    const deployment = planDeployment(config("hosts", envValues), shippedCatalog);
    const host = renderHost(deployment, deployment.placements[0]!, "test");
    const [rank] = host.ranks;
    const planRank = deployment.plan.roles[0]!.ranks[0]!;
    const bound = bindRank(planRank, { POD_IP: "10.20.0.11" }, "hosts");
    const argv = systemdExecArgv(rank!.unitText);
    expect(argv).toEqual([`${host.venv}/bin/vllm`, ...bound.argv.slice(1)]);
    expect(argv.slice(-argValues.length * 2)).toEqual(probeWords());
    const env = systemdEnvFile(rank!.envText);
    for (const [i, v] of envValues.entries()) expect(env[`PROBE_${i}`], JSON.stringify(v)).toBe(v);
  });

  it("into a Kubernetes launch script, as bash runs it", () => {
    const deployment = planDeployment(config("kubernetes", k8sEnvValues), shippedCatalog);
    const [role] = renderKubernetesWorkloads(deployment, { instance: "rbln-serving", namespace: "ns" }, []).roles;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "quote-"));
    fs.writeFileSync(path.join(dir, "vllm"), `#!/usr/bin/env bash\nprintf '%s\\0' "$@" > "$OUT/argv"\nenv -0 > "$OUT/env"\n`, { mode: 0o755 });
    const result = spawnSync("bash", ["-c", role!.launchScript], {
      env: { PATH: `${dir}:${process.env.PATH}`, POD_IP: "10.1.1.1", OUT: dir },
      encoding: "utf8",
    });
    expect(result.status, result.stderr).toBe(0);
    const argv = fs.readFileSync(path.join(dir, "argv"), "utf8").split("\0").slice(0, -1);
    expect(argv.slice(-argValues.length * 2)).toEqual(probeWords());
    const env = new Map(
      fs
        .readFileSync(path.join(dir, "env"), "utf8")
        .split("\0")
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
    );
    for (const [i, v] of k8sEnvValues.entries()) expect(env.get(`PROBE_${i}`), JSON.stringify(v)).toBe(v);
  });
});

describe("env files read by bash (the unit step sources them)", () => {
  it("keep $ literal in double-quoted values: no command substitution runs", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-env-"));
    const witness = path.join(dir, "ran");
    const value = `it's $(touch ${witness}) and \`touch ${witness}\` and $HOME`;
    const envFile = path.join(dir, "rank.env");
    fs.writeFileSync(envFile, renderEnvFile({ NOTE: value }));
    const run = spawnSync("bash", ["-c", `. "$1" && printf '%s' "$NOTE"`, "bash", envFile], { encoding: "utf8" });
    expect(run.stdout).toBe(value);
    expect(fs.existsSync(witness)).toBe(false);
  });
});

describe("systemd quoting refuses what it cannot carry", () => {
  it("escapes line breaks in ExecStart words, refuses NUL, bad names and control characters in env files", () => {
    expect(quoteExecWord("a\nb\tc\rd\u0001")).toBe('"a\\nb\\tc\\rd\\x01"');
    expect(() => quoteExecWord("a\u0000b")).toThrow(/contains a NUL byte/);
    expect(() => envFileLine("1BAD", "x")).toThrow(/"1BAD" is not an environment variable name/);
    expect(() => envFileLine("GOOD", "bell\u0007")).toThrow(/^GOOD: value has control characters/);
  });
});
