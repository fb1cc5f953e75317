import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { note, warning } from "../core/plan/messages";
import { compileOnlyEnv } from "../core/render/compileCache";
import { readStackFile } from "../core/config/stackFile";
import { PLACEHOLDER } from "../core/plan/argv";
import { renderStackFiles } from "./helpers/render";
import { scriptSettings } from "./helpers/scriptSettings";
import { compileJobScript } from "../core/render/kubernetes/compileJob";
import { parseStackSettings } from "../core/config/stackConfig";
import { planDeployment } from "../core/plan/deployment";
import { renderDeployment } from "../core/render/deployment";
import { REGISTRY_PASSWORD_ENV } from "../core/render/kubernetes/compileJob";
import { planServing } from "../components/modelServing";
import { runProgram } from "../program";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { ofType, runUnderMocks, outputValue, type Registration } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";
import { freePort } from "./helpers/sshd";
import { COMPILE_AHEAD_SERVING_ENV } from "../core/plan/compileAhead";
import { UNKEYED_ENV } from "../core/plan/compileKey";
import signatureFixture from "./fixtures/vllm-rbln-cache-signature.json";
import { copyStandInVllm, RBLN_SIGNATURE } from "./helpers/vllmParser";

/**
 * Compile ahead under the mock runtime (issue 22): the compile host's steps come before every unit
 * step of a changed key, no NPU unit runs compile-only, and the settings are refused or warned
 * about as docs/compile-ahead.md says.
 */
const SECRETS = { sshPrivateKey: "MARKER-SSH-KEY", registryPassword: "MARKER-REGISTRY-PW" };
const REVISION = "0123456789abcdef0123456789abcdef01234567";
const hosts = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `npu-${i}`, address: `10.0.0.${i + 10}`, hostKey: EXAMPLE_HOST_KEY }));
const compileHost = { name: "cpu-0", address: "10.0.1.5", hostKey: EXAMPLE_HOST_KEY };
const REGISTRY = { repository: "registry.example.com/ml/rbln-compile-cache", username: "ci" };

function hostsStack(more: Record<string, unknown> = {}, replicas = 4): Record<string, unknown> {
  return {
    strategy: "aggregated-data-expert-parallel",
    target: "Latency",
    replicas,
    hosts: hosts(replicas),
    revision: REVISION,
    compile: { host: compileHost, registry: REGISTRY },
    ...more,
  };
}

const commands = (registrations: readonly Registration[]) => ofType(registrations, "command:remote:Command");
const isUnitStep = (name: string) => /-npu-\d+-main-\d+$/.test(name);

/** Every command `urn` depends on, directly or through others. */
function upstream(registrations: readonly Registration[], urn: string): Set<string> {
  const byUrn = new Map(registrations.map((r) => [r.urn, r]));
  const seen = new Set<string>();
  const visit = (u: string) => {
    for (const d of byUrn.get(u)?.dependencies ?? []) {
      if (seen.has(d)) continue;
      seen.add(d);
      visit(d);
    }
  };
  visit(urn);
  return new Set([...seen].map((u) => byUrn.get(u)?.name ?? u));
}

/** A setting of a rendered host script's settings block (`name=value`, quotes off). */
const setting = (script: string, name: string) => new RegExp(`^${name}=(.*)$`, "m").exec(script)?.[1]?.replace(/^'(.*)'$/, "$1");

/** What a command does with compiled caches: runs a rank of a key, brings a key's cache (a copy, a pull, a compile) onto a host, or neither. */
function cacheRole(r: Registration): { kind: "unit" | "copy" | "pull" | "compile"; host: string; keys: string[]; source?: string } | undefined {
  const script = String(r.inputs.create ?? "");
  const host = setting(script, "host_name");
  if (host === undefined) return undefined;
  const unitMarker = setting(script, "compile_marker");
  if (unitMarker) return { kind: "unit", host, keys: [/compile-([0-9a-f]{16})$/.exec(unitMarker)![1]!] };
  if (/-copy-compile-/.test(r.name))
    return {
      kind: "copy",
      host,
      keys: [...script.matchAll(/rbln-serving-complete\/compile-([0-9a-f]{16})/g)].map((m) => m[1]!),
      source: setting(script, "source_name"),
    };
  const key = setting(script, "key");
  if (key && setting(script, "compile_here") !== undefined) return { kind: setting(script, "compile_here") === "yes" ? "compile" : "pull", host, keys: [key] };
  return undefined;
}

/**
 * Ordering by dependency, not by luck: every NPU unit step of a key has upstream the step that
 * brings that key's cache onto its host (a copy, a pull), and every copy of a key has upstream a
 * step on its source that holds that key (the compile host's compile or pull, a peer's unit of the
 * key). Only where nothing compiles or pulls a key ahead may one host of it go without: it compiles.
 */
function cacheOrderProblems(registrations: readonly Registration[]): string[] {
  const roles = commands(registrations).flatMap((r) => {
    const role = cacheRole(r);
    return role ? [{ r, ...role }] : [];
  });
  const problems: string[] = [];
  const holds = (host: string, key: string, kinds: string[]) => roles.filter((x) => x.host === host && x.keys.includes(key) && kinds.includes(x.kind));
  for (const key of new Set(roles.flatMap((x) => x.keys))) {
    const ahead = roles.some((x) => x.keys.includes(key) && (x.kind === "compile" || x.kind === "pull"));
    const unbrought = new Set<string>();
    for (const unit of roles.filter((x) => x.kind === "unit" && x.keys.includes(key))) {
      const bringers = holds(unit.host, key, ["copy", "pull"]);
      const before = upstream(registrations, unit.r.urn);
      if (bringers.length === 0) unbrought.add(unit.host);
      else if (!bringers.some((b) => before.has(b.r.name))) problems.push(`${unit.r.name}: none of ${bringers.map((b) => b.r.name).join(", ")} is upstream`);
    }
    if (unbrought.size > (ahead ? 0 : 1)) problems.push(`key ${key}: nothing brings its cache to ${[...unbrought].join(", ")}`);
    for (const copy of roles.filter((x) => x.kind === "copy" && x.keys.includes(key))) {
      const holders = holds(copy.source!, key, ["compile", "pull", "unit"]);
      const before = upstream(registrations, copy.r.urn);
      if (!holders.some((h) => before.has(h.r.name)))
        problems.push(
          `${copy.r.name}: copies key ${key} before ${copy.source} has it (none of ${holders.map((h) => h.r.name).join(", ") || "nothing"} is upstream)`,
        );
    }
  }
  return problems;
}

describe("compile ahead on hosts, under the mock runtime", async () => {
  const { registrations, error, result } = await runUnderMocks(runProgram, hostsStack(), SECRETS);
  const names = commands(registrations).map((r) => r.name);

  it("runs, with the compile host's steps: preflight, install, weights (it is the seed), one compile step per key", () => {
    expect(error).toBeUndefined();
    expect(names.filter((n) => n.includes("-cpu-0-") && !/-(allow|revoke)-/.test(n)).sort()).toEqual(
      [
        "rbln-serving-cpu-0-preflight",
        "rbln-serving-cpu-0-install",
        "rbln-serving-cpu-0-weights",
        expect.stringMatching(/^rbln-serving-cpu-0-compile-[0-9a-f]{16}$/),
      ].sort(),
    );
    // Nothing else downloads from the hub: every NPU host copies the weights from the compile host.
    expect(names.filter((n) => n.endsWith("-weights"))).toEqual(["rbln-serving-cpu-0-weights"]);
  });

  it("puts every compile step before every NPU unit step, and the first wave copies from the compile host instead of compiling", () => {
    const compileSteps = names.filter((n) => n.includes("-cpu-0-compile-"));
    const units = commands(registrations).filter((r) => isUnitStep(r.name));
    expect(units).toHaveLength(4);
    for (const unit of units) for (const step of compileSteps) expect(upstream(registrations, unit.urn), unit.name).toContain(step);
    expect(names).toContain("rbln-serving-npu-0-copy-compile-cpu-0");
    expect(names.filter((n) => /-copy-compile-npu-/.test(n))).toEqual([
      "rbln-serving-npu-1-copy-compile-npu-0",
      "rbln-serving-npu-2-copy-compile-npu-1",
      "rbln-serving-npu-3-copy-compile-npu-2",
    ]);
  });

  it("runs compile-only on the compile host and on no NPU unit", () => {
    const compile = commands(registrations).find((r) => r.name.includes("-cpu-0-compile-"))!;
    const [env] = scriptSettings(compile.inputs.create, "env_texts");
    expect(env).toContain("VLLM_RBLN_COMPILE_ONLY='1'");
    expect(env).toContain("RBLN_TARGET_SOC='RBLN-CR13'");
    for (const unit of commands(registrations).filter((r) => isUnitStep(r.name))) expect(unit.inputs.create).not.toContain("VLLM_RBLN_COMPILE_ONLY");
  });

  it("sends the registry password only on stdin, as a secret; the step logs, its script masks what it prints", () => {
    const compile = commands(registrations).find((r) => r.name.includes("-cpu-0-compile-"))!;
    expect(compile.inputs.stdin).toBe(`${SECRETS.registryPassword}\n`);
    expect(compile.inputs.logging).toBe("stdoutAndStderr");
    expect(compile.inputs.create).toContain("exec > >(progress_mask) 2> >(progress_mask >&2)");
    for (const r of registrations) expect(JSON.stringify({ create: r.inputs.create, delete: r.inputs.delete }), r.name).not.toContain(SECRETS.registryPassword);
  });

  it("lists the stack's compile keys, with the digest the compile step reports", async () => {
    const keys = await outputValue((result as ReturnType<typeof runProgram>).compileKeys);
    // Under mocks the step printed nothing: the key is listed, its digest unknown yet.
    expect(keys).toEqual([{ key: expect.stringMatching(/^[0-9a-f]{16}$/), roles: ["main"] }]);
  });
});

describe("every NPU unit waits, by a dependency, for the step that brings its key's cache", () => {
  const variants: [string, Record<string, unknown>][] = [
    ["a compile host and a registry", hostsStack()],
    ["a compile host", hostsStack({ revision: undefined, compile: { host: compileHost } })],
    ["a registry only", hostsStack({ compile: { registry: REGISTRY } })],
    ["no compile ahead: the first host compiles, the others copy", hostsStack({ compile: {} })],
    ["eight replicas over three waves, with a compile host", hostsStack({}, 8)],
  ];
  it.each(variants)("%s", async (_, settings) => {
    const registry = (settings.compile as { registry?: unknown }).registry !== undefined;
    const { registrations, error } = await runUnderMocks(runProgram, settings, registry ? SECRETS : { sshPrivateKey: SECRETS.sshPrivateKey });
    expect(error).toBeUndefined();
    const roles = commands(registrations).flatMap((r) => (cacheRole(r) ? [cacheRole(r)!.kind] : []));
    // The check saw units and what brings their caches: it cannot pass on an empty graph.
    expect(roles.filter((k) => k === "unit").length).toBeGreaterThan(0);
    expect(roles.filter((k) => k !== "unit").length).toBeGreaterThan(0);
    expect(cacheOrderProblems(registrations)).toEqual([]);
  });

  it("finds a copy that runs before the compile, and a unit that runs before its copy", async () => {
    const { registrations } = await runUnderMocks(runProgram, hostsStack(), SECRETS);
    const allow = registrations.find((r) => r.name === "rbln-serving-cpu-0-allow-compile-npu-0")!;
    const compile = registrations.find((r) => /-cpu-0-compile-[0-9a-f]{16}$/.test(r.name))!;
    // The copy's grant no longer waits for the compile.
    const early = registrations.map((r) => (r === allow ? { ...r, dependencies: r.dependencies.filter((d) => d !== compile.urn) } : r));
    expect(cacheOrderProblems(early)).toEqual([expect.stringMatching(/^rbln-serving-npu-0-copy-compile-cpu-0: copies key [0-9a-f]{16} before cpu-0 has it/)]);
    const unit = registrations.find((r) => r.name === "rbln-serving-npu-1-main-0")!;
    const inCopy = registrations.find((r) => r.name === "rbln-serving-npu-1-copy-compile-npu-0")!;
    const unwaited = registrations.map((r) => (r === unit ? { ...r, dependencies: r.dependencies.filter((d) => d !== inCopy.urn) } : r));
    expect(cacheOrderProblems(unwaited)).toEqual(["rbln-serving-npu-1-main-0: none of rbln-serving-npu-1-copy-compile-npu-0 is upstream"]);
  });
});

/** vllm-rbln's compile-env allow-list (RBLN_COMPILE_ENV), as read upstream. */
const COMPILE_ENV = signatureFixture.facts["signature.compileEnv"].value.RBLN_COMPILE_ENV;

/** The stand-in vLLM's bundle signature (test/fixtures/fake-vllm/rbln_signature.py) of each case. */
function standInSignatures(cases: { model?: string; flags?: string[]; npu?: string; env: Record<string, string> }[]): string[] {
  const input = JSON.stringify(cases.map((c) => ({ model: c.model ?? "m", flags: c.flags ?? [], npu: c.npu ?? "RBLN-CR13", env: c.env })));
  const run = spawnSync("python3", [RBLN_SIGNATURE], { input, encoding: "utf8" });
  if (run.status !== 0) throw new Error(run.stderr);
  return JSON.parse(run.stdout) as string[];
}

/**
 * The variables a host script's env_text sets (a compile step's: its first rank's, env_texts[0]), as
 * bash reads the env file (the unit step reads env files with bash).
 */
function scriptEnv(script: string): Record<string, string> {
  const settings = script.slice(script.indexOf("# --- settings"), script.indexOf("# --- end of settings ---"));
  const envText = '"${env_text-${env_texts[0]}}"';
  const run = spawnSync("bash", ["-c", `${settings}\nenv -i bash -c 'set -a; eval "$1"; unset PWD SHLVL _; env -0' _ ${envText}`], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(run.stderr);
  return Object.fromEntries(
    run.stdout
      .split("\0")
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

/** Variables whose value differs between two environments (or that one lacks), but for `allowed`. */
function envDifferences(a: Record<string, string>, b: Record<string, string>, allowed: readonly string[]): string[] {
  const names = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return names.filter((name) => a[name] !== b[name] && !allowed.includes(name)).map((name) => `${name}: ${a[name] ?? "unset"} vs ${b[name] ?? "unset"}`);
}

describe("the compiled cache is the one the NPU units look for", () => {
  it("the stand-in's signature reads every variable of vllm-rbln's allow-list, as vllm-rbln parses it, and nothing else", () => {
    const names = spawnSync(
      "python3",
      ["-c", "import sys; sys.path.insert(0, sys.argv[1]); import rbln_signature as s; print('\\n'.join(s.RBLN_COMPILE_ENV))", path.dirname(RBLN_SIGNATURE)],
      {
        encoding: "utf8",
      },
    );
    expect(names.stdout.trim().split("\n").sort()).toEqual([...COMPILE_ENV].sort());
    const { booleanDefaults, integerDefaults } = signatureFixture.facts["signature.compileEnvValues"].value;
    // Every case in one run of the stand-in's module: [what, env, same as unset?].
    const cases: [string, Record<string, string>, boolean][] = [];
    for (const [name, value] of Object.entries(booleanDefaults)) {
      const read = name === "VLLM_RBLN_USE_CUSTOM_KERNEL" ? "RBLN_USE_CUSTOM_KERNEL" : name;
      // Unset is the default; "1", "true" and "True" are one value; the other value is another bundle.
      cases.push([`${name} as its default`, { [read]: value ? "1" : "0" }, true]);
      cases.push([`${name} as True`, { [read]: value ? "True" : "false" }, true]);
      cases.push([`${name} flipped`, { [read]: value ? "false" : "true" }, false]);
    }
    for (const [name, value] of Object.entries(integerDefaults)) {
      cases.push([`${name} as its default`, { [name]: String(value) }, true]);
      cases.push([`${name} changed`, { [name]: String(value + 1) }, false]);
    }
    // Outside the list: a variable of the other partition, a vLLM one, ones of ours.
    for (const [name, value] of [
      ["VLLM_RBLN_COMPILE_ONLY", "1"],
      ["VLLM_RBLN_SUB_BLOCK_CACHE", "0"],
      ["RBLN_TARGET_SOC", "RBLN-CR13"],
      ["VLLM_LOGGING_LEVEL", "DEBUG"],
    ])
      cases.push([`outside the list: ${name}`, { [name!]: value! }, true]);
    const [base, ...signatures] = standInSignatures([{ env: {} }, ...cases.map(([, env]) => ({ env }))]);
    expect(cases.map(([what], i) => [what, signatures[i] === base])).toEqual(cases.map(([what, , same]) => [what, same]));
    // The model, the flags and the NPU are in it too.
    expect(
      standInSignatures([
        { env: {}, model: "n" },
        { env: {}, flags: ["--max-num-seqs", "4"] },
        { env: {}, npu: "RBLN-CA25" },
      ]),
    ).not.toContain(base);
  });

  for (const [what, settings] of [
    ["a compile host and a registry", hostsStack()],
    ["a compile host", hostsStack({ revision: undefined, compile: { host: compileHost } })],
  ] as const) {
    it(`the compile host's environment is each unit's in every keyed variable: ${what}`, async () => {
      const registry = (settings.compile as { registry?: unknown }).registry !== undefined;
      const { registrations } = await runUnderMocks(runProgram, settings, registry ? SECRETS : { sshPrivateKey: SECRETS.sshPrivateKey });
      const compile = commands(registrations).find((r) => /-cpu-0-compile-[0-9a-f]{16}$/.test(r.name))!;
      const compiling = scriptEnv(String(compile.inputs.create));
      // Compile-only's own variables, none of them on vllm-rbln's list; and the one it needs that is, which the units have too.
      const compileOnly = Object.keys(compileOnlyEnv("RBLN-CR13"));
      expect(compileOnly.filter((name) => COMPILE_ENV.includes(name))).toEqual([]);
      expect(compiling.VLLM_RBLN_USE_VLLM_MODEL).toBe("1");
      const units = commands(registrations).filter((r) => isUnitStep(r.name));
      expect(units.length).toBeGreaterThan(0);
      for (const unit of units) {
        const serving = scriptEnv(String(unit.inputs.create));
        // Exactly equal but for compile-only's own; so equal in every variable the compile key or the bundle's signature reads.
        expect(envDifferences(compiling, serving, compileOnly), unit.name).toEqual([]);
        expect(Object.keys(serving).filter((name) => !(name in UNKEYED_ENV) && serving[name] !== compiling[name])).toEqual([]);
        expect(
          standInSignatures([{ env: compiling }, { env: serving }]).reduce((a, b) => (a === b ? a : "differ")),
          unit.name,
        ).not.toBe("differ");
      }
    });
  }

  it("tells which keyed variable differs", () => {
    expect(envDifferences({ A: "1", VLLM_RBLN_USE_VLLM_MODEL: "1" }, { A: "1" }, [])).toEqual(["VLLM_RBLN_USE_VLLM_MODEL: 1 vs unset"]);
    expect(standInSignatures([{ env: { VLLM_RBLN_USE_VLLM_MODEL: "1" } }, { env: {} }]).reduce((a, b) => (a === b ? a : "differ"))).toBe("differ");
  });

  it("gives no rank of a stack without compile ahead or a registry compile-only's keyed variables", () => {
    const plain = planDeployment(parseStackSettings(hostsStack({ revision: undefined, compile: {} })), shippedCatalog);
    for (const rank of plain.plan.roles.flatMap((r) => r.ranks)) expect(Object.keys(rank.env)).not.toContain("VLLM_RBLN_USE_VLLM_MODEL");
    const pulls = planDeployment(parseStackSettings(hostsStack({ compile: { registry: REGISTRY } })), shippedCatalog);
    for (const rank of pulls.plan.roles.flatMap((r) => r.ranks)) expect(rank.env.VLLM_RBLN_USE_VLLM_MODEL).toBe("1");
  });
});

describe("compile ahead of the disaggregated strategy on hosts (decode: four data-parallel ranks)", () => {
  const edge = readStackFile("edge").raw;
  const render = (raw: Record<string, unknown>) =>
    renderDeployment(planDeployment(parseStackSettings(raw), shippedCatalog), { stack: "edge", instance: "rbln-serving", secrets: [] });

  it("runs every rank of each role together, with the placeholders bound as the units bind them: the server's address, the front door's", () => {
    const rendered = render({ ...edge, compile: { host: compileHost } }).hosts!;
    const steps = rendered.compileHost!.steps;
    expect(steps.map((s) => s.roles)).toEqual([["prefill"], ["decode"]]);
    const decode = steps[1]!.script;
    expect(scriptSettings(decode, "units")).toEqual([0, 1, 2, 3].map((r) => `rbln-serving-${rendered.id}.compile-${steps[1]!.key}-${r}.service`));
    const lengths = scriptSettings(decode, "command_lengths").map(Number);
    const words = scriptSettings(decode, "command_words");
    expect(lengths.reduce((a, b) => a + b, 0)).toBe(words.length);
    const commands = lengths.map((n, i) =>
      words.slice(
        lengths.slice(0, i).reduce((a, b) => a + b, 0),
        lengths.slice(0, i).reduce((a, b) => a + b, 0) + n,
      ),
    );
    commands.forEach((command, r) => {
      expect(command[command.indexOf("--data-parallel-rank") + 1]).toBe(String(r));
      // The rank's own port, which the step swaps for one free at the time (compile-key.sh's start_rank).
      expect(command[command.indexOf("--port") + 1]).toBe(String(8200 + r));
      expect(command[command.indexOf("--data-parallel-address") + 1]).toBe(compileHost.address);
      expect(command.join(" ")).toContain('"endpoint": "tcp://10.30.0.10:');
    });
    expect(scriptSettings(decode, "env_texts").map((env) => /RBLN_VISIBLE_DEVICES='(\d)'/.exec(env)?.[1])).toEqual(["0", "1", "2", "3"]);
  });

  it("leaves no placeholder unbound in any file of any shipped hosts stack, with or without compile ahead and a registry", () => {
    for (const stack of ["dev", "staging", "edge"]) {
      const raw = readStackFile(stack).raw;
      for (const compile of [{}, { host: compileHost }, { host: compileHost, registry: REGISTRY }, { registry: REGISTRY }]) {
        const files = renderStackFiles(planDeployment(parseStackSettings({ ...raw, revision: REVISION, compile }), shippedCatalog), [], stack);
        const unbound = Object.entries(files).flatMap(([name, text]) => [...text.matchAll(PLACEHOLDER)].map((m) => `${name}: ${m[0]}`));
        expect(unbound, `${stack} ${JSON.stringify(compile)}`).toEqual([]);
      }
    }
  });
});

describe("a registry without a compile host pulls on the first host of each key", async () => {
  const settings = hostsStack({ compile: { registry: REGISTRY } });
  const { registrations, error } = await runUnderMocks(runProgram, settings, SECRETS);

  it("pulls before that host's units, and compiles nowhere ahead", () => {
    expect(error).toBeUndefined();
    const names = commands(registrations).map((r) => r.name);
    const pull = names.find((n) => n.includes("-pull-compile-"))!;
    expect(pull).toMatch(/^rbln-serving-npu-0-pull-compile-[0-9a-f]{16}$/);
    expect(names.filter((n) => n.includes("-pull-compile-"))).toHaveLength(1);
    expect(upstream(registrations, commands(registrations).find((r) => r.name === "rbln-serving-npu-0-main-0")!.urn)).toContain(pull);
    // After the install, which creates the service user the pulled files belong to.
    expect(upstream(registrations, commands(registrations).find((r) => r.name === pull)!.urn)).toContain("rbln-serving-npu-0-install");
    expect(commands(registrations).find((r) => r.name === pull)!.inputs.create).toContain("compile_here=no");
  });

  it("notes that this stack only pulls: a deliberate setup, nothing to act on", () => {
    const deployment = planDeployment(parseStackSettings(settings), shippedCatalog);
    expect(deployment.plan.messages).toContainEqual(
      note(
        "compile.registry: without compile.host this stack only pulls: a key the registry has is loaded, a key it lacks is compiled by the first wave on its NPUs and not pushed",
      ),
    );
  });
});

describe("compile settings", () => {
  const refusal = (settings: Record<string, unknown>, secrets: Record<string, string> = { sshPrivateKey: "k" }) => {
    try {
      planServing({ settings: settings as never, secrets });
      return "accepted";
    } catch (e) {
      return (e as Error).message;
    }
  };

  it("refuse a compile host that is one of the hosts, a registry without a pinned revision, a user without the password and back", () => {
    expect(refusal(hostsStack({ compile: { host: { ...compileHost, name: "npu-1" } } }))).toBe(
      'compile.host.name: the compile host must be a server of its own, but hosts[1].name is "npu-1" too',
    );
    // The same SSH server under another spelling of its address.
    expect(refusal(hostsStack({ compile: { host: { ...compileHost, address: "10.0.0.12", port: 22 } } }))).toBe(
      'compile.host.address: the compile host must be a server of its own, but hosts[2].address is "10.0.0.12:22" too',
    );
    expect(refusal(hostsStack({ revision: undefined }), SECRETS)).toMatch(/^revision: required with compile\.registry/);
    expect(refusal(hostsStack({}))).toMatch(/^registryPassword: required when compile\.registry\.username is set/);
    expect(refusal(hostsStack({ compile: { host: compileHost, registry: { repository: REGISTRY.repository } } }), SECRETS)).toMatch(
      /^compile\.registry\.username: required when the registryPassword secret is set/,
    );
    expect(refusal(hostsStack({ compile: { host: compileHost, registry: { repository: "https://registry.example.com/x:tag" } } }), SECRETS)).toMatch(
      /^compile\.registry\.repository: an OCI repository/,
    );
    expect(refusal(hostsStack({ compile: { host: compileHost, registry: { repository: "registry.example.com:99999/x" } } }), SECRETS)).toMatch(
      /^compile\.registry\.repository: a registry port from 1 to 65535/,
    );
    expect(refusal(hostsStack({ compile: { host: compileHost, registry: { repository: "registry.example.com:0/x" } } }), SECRETS)).toMatch(
      /^compile\.registry\.repository: a registry port from 1 to 65535/,
    );
    expect(refusal(hostsStack({ compile: { host: compileHost, registry: { repository: "registry.example.com:5000/x", username: "u" } } }), SECRETS)).toBe(
      "accepted",
    );
    expect(refusal(hostsStack({ compile: { host: { name: "cpu-0", address: "10.0.1.5" } } }))).toMatch(/^compile\.host\.hostKey: required/);
    expect(refusal(hostsStack({ extraEnv: { main: { VLLM_RBLN_COMPILE_ONLY: "1" } } }), SECRETS)).toBe(
      "extraEnv.main.VLLM_RBLN_COMPILE_ONLY: a serving rank in compile-only mode compiles and never serves; compile ahead sets it only where it compiles (compile.host, compile.enabled)",
    );
  });

  it("want the Kubernetes image by digest with a registry, and warn where they do nothing", () => {
    const k8s = {
      strategy: "aggregated-pipeline-parallel",
      target: "Throughput",
      platform: "kubernetes",
      revision: REVISION,
      kubernetes: { image: "registry.example.com/vllm-rbln:0.12.0" },
      compile: { registry: REGISTRY },
    };
    expect(refusal(k8s, SECRETS)).toBe(
      'kubernetes.image: with compile.registry, an image pinned by digest (name@sha256:<64 hex>): the compile key covers the image, and a tag can move (got "registry.example.com/vllm-rbln:0.12.0")',
    );
    const warned = planDeployment(parseStackSettings({ ...hostsStack({ compile: { host: compileHost, enabled: true } }) }), shippedCatalog);
    expect(warned.plan.messages).toContainEqual(warning("compile.enabled: does nothing with platform: hosts (set compile.host for a compile server)"));
  });

  it("fall back to compiling on the NPUs, with a warning, when the installed vllm-rbln has no compile-only mode", () => {
    const old = planDeployment(parseStackSettings(hostsStack({ versions: { vllmRbln: "0.10.4" }, compile: { host: compileHost } })), shippedCatalog);
    expect(old.plan.messages).toContainEqual(
      warning(
        "compile ahead: vllm-rbln 0.10.4 has no compile-only mode (it arrived in 0.10.5a0); the first wave compiles on its NPUs, as without compile ahead; use vllm-rbln 0.10.5a0 or newer (versions.vllmRbln), or drop compile.host",
      ),
    );
  });
});

describe("compile ahead on Kubernetes, under the mock runtime", async () => {
  const IMAGE = `registry.example.com/ml/vllm-rbln@sha256:${"e".repeat(64)}`;
  const prod = {
    strategy: "prefill-decode-disaggregated",
    target: "Throughput",
    platform: "kubernetes",
    revision: REVISION,
    kubernetes: { image: IMAGE, gateway: { name: "gw" } },
    compile: { enabled: true, nodeSelector: { "node-role.example.com/cpu": "true" }, resources: { requests: { cpu: "16" } }, registry: REGISTRY },
  };
  const { registrations, error } = await runUnderMocks(runProgram, prod, { registryPassword: SECRETS.registryPassword });
  const jobs = ofType(registrations, "kubernetes:batch/v1:Job").filter((r) => r.name.endsWith("-compile"));

  it("has a compile Job per role that asks for no NPU, on the compile nodes, valid for the Kubernetes API", async () => {
    expect(error).toBeUndefined();
    expect(jobs.map((j) => j.name).sort()).toEqual(["rbln-serving-workloads-decode-compile", "rbln-serving-workloads-prefill-compile"]);
    const { Job } = await import("kubernetes-models/batch/v1");
    for (const job of jobs) {
      const pod = job.inputs.spec.template.spec;
      expect(pod.nodeSelector).toEqual({ "node-role.example.com/cpu": "true" });
      for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
        expect(
          Object.keys({ ...container.resources?.requests, ...container.resources?.limits }).filter((k) => k.includes("/")),
          `${job.name} ${container.name}`,
        ).toEqual([]);
      }
      const compile = pod.initContainers.find((c: { name: string }) => c.name === "compile");
      expect(compile.resources.requests).toEqual({ cpu: "16", memory: "384Gi" });
      expect(compile.env).toEqual(
        expect.arrayContaining([
          { name: "VLLM_RBLN_COMPILE_ONLY", value: "1" },
          { name: "RBLN_TARGET_SOC", value: "RBLN-CR13" },
        ]),
      );
      expect(() => new Job(job.inputs).validate(), job.name).not.toThrow();
    }
  });

  it("pulls, compiles and pushes in containers of their own, in that order: only the pull and the push have the registry password, and neither runs vLLM", () => {
    const password = { name: "REGISTRY_PASSWORD", valueFrom: { secretKeyRef: { name: "rbln-serving-registry", key: "password" } } };
    for (const job of jobs) {
      const pod = job.inputs.spec.template.spec;
      const phases = [...pod.initContainers, ...pod.containers].map((c: { name: string; command: string[] }) => [c.name, c.command.at(-1)]);
      expect(phases, job.name).toEqual([
        ["wait-for-weights", expect.any(String)],
        ["pull", "pull"],
        ["compile", "compile"],
        ["push", "push"],
      ]);
      for (const container of [...pod.initContainers, ...pod.containers]) {
        const env = container.env ?? [];
        const registry = container.name === "pull" || container.name === "push";
        if (registry)
          expect(env, container.name).toEqual([expect.objectContaining({ name: "HOME" }), expect.objectContaining({ name: "VLLM_CACHE_ROOT" }), password]);
        else expect(JSON.stringify(env), container.name).not.toContain("REGISTRY_PASSWORD");
        // Only the compile container reads the launch script (vLLM) and the stack's other secrets.
        expect(
          container.volumeMounts.some((m: { name: string }) => m.name === "launch"),
          container.name,
        ).toBe(container.name === "compile");
      }
    }
  });

  it("makes each role's Deployment wait for its compile Job; no serving pod runs compile-only", () => {
    for (const role of ["prefill", "decode"]) {
      const deployment = registrations.find((r) => r.type === "kubernetes:apps/v1:Deployment" && r.name === `rbln-serving-workloads-${role}`)!;
      expect(deployment.dependencies).toContain(jobs.find((j) => j.name.includes(`-${role}-`))!.urn);
      expect(JSON.stringify(deployment.inputs)).not.toContain("VLLM_RBLN_COMPILE_ONLY");
    }
  });

  it("keeps the registry password in a Secret of its own, never in plain inputs", () => {
    const secret = registrations.find((r) => r.name === "rbln-serving-workloads-registry")!;
    expect(secret.inputs.stringData).toEqual({ password: SECRETS.registryPassword });
    for (const r of registrations.filter((x) => x !== secret)) expect(JSON.stringify(r.inputs), r.name).not.toContain(SECRETS.registryPassword);
  });
});

describe("the compile Job's environment", () => {
  // What the Job's compile adds on purpose: compile-only mode's variables (core/render/compileCache.ts).
  // The registry password goes to the pull and push containers only, which run no vLLM.
  const ADDED_ON_PURPOSE = Object.keys(compileOnlyEnv("RBLN-CR13"));
  it("adds no variable of vllm-rbln's compile-env allow-list", () => {
    expect(ADDED_ON_PURPOSE.filter((name) => COMPILE_ENV.includes(name))).toEqual([]);
  });
  const stack = (compile: Record<string, unknown>) => ({
    strategy: "prefill-decode-disaggregated",
    target: "Throughput",
    platform: "kubernetes",
    revision: REVISION,
    kubernetes: { image: `registry.example.com/ml/vllm-rbln@sha256:${"e".repeat(64)}`, gateway: { name: "gw" } },
    compile,
  });
  type Pod = { spec: { containers: { name: string; env: { name: string }[] }[]; initContainers?: { name: string; env?: { name: string }[] }[] } };
  const envOf = (pod: unknown) => (pod as Pod).spec.containers[0]!.env;
  /** The env of the Job's container that runs vLLM (compile), or of its only container (a pull-only Job runs no vLLM). */
  const compileEnvOf = (pod: unknown) => {
    const { spec } = pod as Pod;
    return [...(spec.initContainers ?? []), ...spec.containers].find((c) => c.name === "compile")?.env ?? spec.containers[0]!.env;
  };

  const render = (compile: Record<string, unknown>) =>
    renderDeployment(planDeployment(parseStackSettings(stack(compile)), shippedCatalog), {
      stack: "test",
      instance: "rbln-serving",
      secrets: ["hfToken", "apiKey", "registryPassword"],
    }).kubernetes!.workloads;

  for (const [what, compile] of [
    ["compile.enabled and a registry", { enabled: true, registry: REGISTRY }],
    ["compile.enabled alone", { enabled: true }],
  ] as const) {
    it(`is the serving pods' exactly where it compiles, the secrets' variables included, plus only ${ADDED_ON_PURPOSE.join(", ")}: with ${what}`, () => {
      const workloads = render(compile);
      expect(workloads.compileJobs.map((j) => j.role).sort()).toEqual(["decode", "prefill"]);
      for (const job of workloads.compileJobs) {
        const serving = envOf(workloads.roles.find((r) => r.role === job.role)!.deployment.spec!.template);
        const compiling = compileEnvOf(job.job.spec!.template);
        expect(serving.map((v) => v.name)).toEqual(expect.arrayContaining(["HF_HOME", "VLLM_CACHE_ROOT", "HF_TOKEN", "VLLM_API_KEY"]));
        // The keyed variable compile-only needs is in the launch script both run, which exports the ranks' variables.
        expect(JSON.stringify(workloads.roles.find((r) => r.role === job.role))).toMatch(/VLLM_RBLN_USE_VLLM_MODEL='?1/);
        expect(
          compiling.filter((v) => !ADDED_ON_PURPOSE.includes(v.name)),
          job.role,
        ).toEqual(serving);
      }
    });
  }

  it("is the cache folder and the registry password alone where it only pulls (a registry without compile.enabled): no vLLM runs there", () => {
    for (const job of render({ registry: REGISTRY }).compileJobs) {
      const pod = job.job.spec!.template as Pod;
      expect(pod.spec.containers.map((c) => c.name)).toEqual(["pull"]);
      expect(envOf(pod).map((v) => v.name)).toEqual(["HOME", "VLLM_CACHE_ROOT", REGISTRY_PASSWORD_ENV]);
    }
  });
});

describe("the compile Job's script under real bash, with the stand-in vllm in compile-only mode", () => {
  let port = 0;
  const run = (dir: string, launch: string, env: Record<string, string> = {}) => {
    const script = compileJobScript({
      key: "k1",
      roles: ["main"],
      marker: `${dir}/vllm/rbln-serving-complete/compile-k1`,
      compileHere: true,
      launch,
      ports: [port],
      timeoutSeconds: 60,
      intervalSeconds: 1,
      registry: null,
    });
    return spawnSync("bash", ["-c", script], {
      encoding: "utf8",
      env: { PATH: process.env.PATH, VLLM_CACHE_ROOT: `${dir}/vllm`, ...COMPILE_AHEAD_SERVING_ENV, ...compileOnlyEnv("RBLN-CR13"), ...env },
    });
  };

  it("runs the launch script until vllm-rbln saved the cache, records the key's files and marker, and does nothing the second time", async () => {
    port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "compile-job-"));
    try {
      copyStandInVllm(dir, "vllm-bin");
      fs.writeFileSync(`${dir}/launch.sh`, `exec ${dir}/vllm-bin serve MiniMaxAI/MiniMax-M2.7 --port ${port} --host 127.0.0.1\n`);
      const first = run(dir, `${dir}/launch.sh`);
      expect([first.status, first.stderr]).toEqual([0, expect.any(String)]);
      expect(first.stdout).toContain("compile job k1: compiled 1 file(s) in ");
      // The compile host's flow (core/render/scripts/compile-flow.sh): its last line reports the key.
      expect(first.stdout.trimEnd().split("\n").pop()).toBe("compiled k1 local");
      expect(fs.readFileSync(`${dir}/vllm/rbln-serving-complete/compile-k1`, "utf8")).toBe("local\n");
      expect(fs.readFileSync(`${dir}/vllm/rbln-serving-complete/compile-k1.files`, "utf8")).toMatch(
        /^MiniMaxAI_MiniMax-M2\.7-[0-9a-f]{8}\/[0-9a-f]{16}\/rank0\/mega_cache\.bin\n$/,
      );
      const again = run(dir, `${dir}/launch.sh`);
      expect(again.stdout).toContain("already on the compile-cache volume; nothing to do");
      expect(again.stdout.trimEnd().split("\n").pop()).toBe("compiled k1 local");
      // Compile-only without the vLLM-native model path is vllm-rbln's ValueError: the Job fails, no marker.
      fs.rmSync(`${dir}/vllm`, { recursive: true });
      const refused = run(dir, `${dir}/launch.sh`, { VLLM_RBLN_USE_VLLM_MODEL: "0" });
      expect(refused.status).toBe(1);
      expect(refused.stderr.trim().split("\n").pop()).toBe("compile job k1: the compile-only run ended (exit 1) before vllm-rbln saved the cache");
      expect(fs.existsSync(`${dir}/vllm/rbln-serving-complete/compile-k1`)).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("fails a run that ends well without saving a bundle (a save that failed, say), whatever it logged; and writes each compile in a folder of its own", async () => {
    port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "compile-job-"));
    try {
      // Says it saved, exits 0, saved nothing: only the bundle's file counts.
      fs.writeFileSync(`${dir}/launch.sh`, "echo 'Saved rbln mega-cache bundle to /nowhere (1.0 MiB)'; exit 0\n");
      const ended = run(dir, `${dir}/launch.sh`);
      expect(ended.status).toBe(1);
      expect(ended.stderr.trim().split("\n").pop()).toBe("compile job k1: the compile-only run ended (exit 0) before vllm-rbln saved the cache");
      expect(fs.existsSync(`${dir}/vllm/rbln-serving-complete/compile-k1`)).toBe(false);
      // The run's VLLM_CACHE_ROOT is the key's own folder, not the volume's; a serving pod's save meanwhile is not this key's.
      copyStandInVllm(dir, "vllm-bin");
      fs.writeFileSync(
        `${dir}/launch.sh`,
        `echo "$VLLM_CACHE_ROOT" > ${dir}/root-seen; mkdir -p ${dir}/vllm/rbln/other; echo other > ${dir}/vllm/rbln/other/mega_cache.bin; exec ${dir}/vllm-bin serve MiniMaxAI/MiniMax-M2.7 --port ${port} --host 127.0.0.1\n`,
      );
      const compiled = run(dir, `${dir}/launch.sh`);
      expect(compiled.status, compiled.stderr).toBe(0);
      expect(fs.readFileSync(`${dir}/root-seen`, "utf8")).toBe(`${dir}/vllm/.rbln-serving-compile/k1\n`);
      expect(fs.readFileSync(`${dir}/vllm/rbln-serving-complete/compile-k1.files`, "utf8")).not.toContain("other");
      expect(fs.readdirSync(`${dir}/vllm`).sort()).toEqual(["rbln", "rbln-serving-complete"]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
