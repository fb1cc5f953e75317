import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { messagesAt } from "../core/plan/messages";
import { parseStackSettings, planStack, type StackPlan } from "../components";
import { readStackFile } from "../core/config/stackFile";
import { runProgram } from "../program";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { runUnderMocks, outputValue, type Registration } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";

/**
 * The public plan entry (`planDeployment`, exported by the package) is the plan `pulumi up` acts
 * on: for every shipped stack, as shipped and with compile ahead and a registry turned on, its
 * compile plan and warnings are what the program, run under the mock runtime, registers and reports.
 */
// The repository's stacks: other suites write stack files of their own into stacks/ while they run.
const STACKS = spawnSync("git", ["ls-files", "stacks"], { cwd: path.join(__dirname, ".."), encoding: "utf8" })
  .stdout.split("\n")
  .map((file) => /^stacks\/Pulumi\.(.+)\.yaml$/.exec(file)?.[1])
  .filter((name): name is string => name !== undefined)
  .sort();

const REVISION = "0123456789abcdef0123456789abcdef01234567";
const REGISTRY = { repository: "registry.example.com/ml/rbln-compile-cache", username: "ci" };
const COMPILE_HOST = { name: "cpu-0", address: "10.0.1.5", hostKey: EXAMPLE_HOST_KEY };
const PINNED_IMAGE = `registry.example.com/ml/vllm-rbln@sha256:${"a".repeat(64)}`;

/** The stack as shipped, and with each compile-ahead setting on top. */
function variants(raw: Record<string, unknown>): [string, Record<string, unknown>][] {
  const onHosts = raw.platform !== "kubernetes";
  const ahead = onHosts ? { host: COMPILE_HOST } : { enabled: true };
  // A registry needs a pinned revision, and on Kubernetes an image by digest.
  const image = onHosts ? {} : { kubernetes: { ...(raw.kubernetes as object), image: PINNED_IMAGE } };
  // A stack of models sets compile ahead and the revision in each model.
  const withKeys = (keys: Record<string, unknown>) =>
    Array.isArray(raw.models) ? { ...raw, models: raw.models.map((m) => ({ ...m, ...keys })) } : { ...raw, ...keys };
  return [
    ["as shipped", raw],
    ["compile ahead", withKeys({ compile: ahead })],
    ["compile ahead and a registry", { ...withKeys({ revision: REVISION, compile: { ...ahead, registry: REGISTRY } }), ...image }],
    ["a registry only", { ...withKeys({ revision: REVISION, compile: { registry: REGISTRY } }), ...image }],
  ];
}

/** The secrets the settings need: the SSH key on hosts, and each password whose user is set. */
function secretsFor(raw: Record<string, any>): Record<string, string> {
  return {
    ...(raw.platform !== "kubernetes" ? { sshPrivateKey: "MARKER-SSH-KEY" } : {}),
    ...(raw.pip?.username !== undefined ? { pipPassword: "MARKER-PIP-PW" } : {}),
    ...([raw, ...(raw.models ?? [])].some((m) => m.compile?.registry?.username !== undefined) ? { registryPassword: "MARKER-REGISTRY-PW" } : {}),
  };
}

/** One compile step's settings block, as rendered into a host command or a Job's ConfigMap. */
const setting = (script: string, name: string) => new RegExp(`^${name}=(.*)$`, "m").exec(script)?.[1]?.replace(/^'(.*)'$/, "$1");

/** What the program's resources do about compile ahead: the keys each compiles or pulls, and the registry they name. */
function actedOn(registrations: readonly Registration[]) {
  const scripts = registrations.flatMap((r) => {
    if (r.type === "command:remote:Command") return [{ on: "host", text: String(r.inputs.create ?? "") }];
    const job = r.type === "kubernetes:core/v1:ConfigMap" ? r.inputs.data?.["compile-job.sh"] : undefined;
    return job ? [{ on: "job", text: String(job) }] : [];
  });
  const steps = scripts
    .filter((s) => setting(s.text, "compile_here") !== undefined)
    .map((s) => ({
      on: s.on,
      key: setting(s.text, "key")!,
      compileHere: setting(s.text, "compile_here") === "yes",
      repository: setting(s.text, "repository") ?? "",
    }));
  const compiling = steps.filter((s) => s.compileHere);
  const repositories = [...new Set(steps.map((s) => s.repository).filter((r) => r !== ""))];
  return {
    mode: compiling.length === 0 ? "off" : compiling[0]!.on,
    compiled: [...new Set(compiling.map((s) => s.key))].sort(),
    pulled: [...new Set(steps.filter((s) => !s.compileHere).map((s) => s.key))].sort(),
    repository: repositories.length === 0 ? null : repositories,
  };
}

/** The same, as the plan says it: every model's keys (each model of a variant has the same compile settings). */
function planned(stack: StackPlan) {
  const { mode, registry } = stack.models[0]!.compile;
  const all = [...new Set(stack.models.flatMap((m) => m.compile.keys.map((k) => k.key)))].sort();
  return { mode, compiled: mode === "off" ? [] : all, pulled: mode === "off" && registry ? all : [], repository: registry ? [registry.repository] : null };
}

describe.each(STACKS)("stack %s: the public plan entry is the plan the program acts on", (stack) => {
  it.each(variants(readStackFile(stack).raw))("%s", async (_, raw) => {
    const stack = planStack(parseStackSettings(raw), shippedCatalog);
    const { registrations, result, error } = await runUnderMocks(runProgram, raw, secretsFor(raw));
    expect(error).toBeUndefined();
    const outputs = result as ReturnType<typeof runProgram>;
    expect(actedOn(registrations)).toEqual(planned(stack));
    expect((await outputValue(outputs.compileKeys)).map(({ key, roles }) => ({ key, roles }))).toEqual(
      stack.models.flatMap((m) => m.compile.keys.map(({ key, roles }) => ({ key, roles }))),
    );
    expect([outputs.warnings, outputs.notes]).toEqual([messagesAt(stack.messages, "warning"), messagesAt(stack.messages, "note")]);
  });
});

it("covers every shipped stack", () => {
  expect(STACKS).toEqual(["dev", "edge", "multi", "multi-hosts", "prod", "staging"]);
});
