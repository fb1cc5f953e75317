import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it, vi } from "vitest";
import { NpuHost } from "../components/hosts/npuHost";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { renderHost } from "../core/render/hosts/bundle";
import { envFileLine, quoteExecWord, renderEnvFile } from "../core/render/hosts/systemd";
import { renderKubernetesWorkloads } from "../core/render/kubernetes/workloads";
import { runProgram } from "../program";
import { isSecretAt, ofType, runUnderMocks } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";

/** Single-line changes that once passed the whole suite (issue 13); each must fail a test here. */

// The connection each remote Command is given, before @pulumi/command 1.2.1 wraps the whole of it
// as a secret (a later SDK need not): the key must already be a secret when it leaves NpuHost.
const { connections } = vi.hoisted(() => ({ connections: [] as any[] }));
vi.mock("@pulumi/command", async (importOriginal) => {
  const original = await importOriginal<typeof import("@pulumi/command")>();
  class RecordingCommand extends original.remote.Command {
    constructor(name: string, args: import("@pulumi/command").remote.CommandArgs, opts?: pulumi.CustomResourceOptions) {
      connections.push(args.connection);
      super(name, args, opts);
    }
  }
  return { ...original, remote: { ...original.remote, Command: RecordingCommand } };
});

const devDeployment = (extra: Record<string, unknown> = {}) => planDeployment(parseStackSettings({ ...readStackFile("dev").raw, ...extra }), shippedCatalog);

describe("host scripts stop at the first failure (set -euo pipefail)", () => {
  it.skipIf(process.getuid?.() !== 0)("a weights download that fails exits non-zero and writes no completion marker", () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-weights-"));
    const deployment = devDeployment({ installRoot: `${work}/opt`, cacheRoot: `${work}/cache` });
    const { weightsScript } = renderHost(deployment, deployment.placements[0]!, "test");
    // Every python3 fails, as a broken download or index would.
    const stubs = path.join(work, "bin");
    fs.mkdirSync(stubs);
    fs.writeFileSync(path.join(stubs, "python3"), "#!/bin/sh\necho 'stub python3: failing' >&2\nexit 1\n", { mode: 0o755 });
    const run = spawnSync("bash", ["-c", weightsScript], { input: "\n", encoding: "utf8", env: { ...process.env, PATH: `${stubs}:${process.env.PATH}` } });
    const files = fs.readdirSync(`${work}/cache`, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
    expect(run.status, run.stderr).not.toBe(0);
    expect(files.map((f) => f.name)).toEqual([]);
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

describe("NpuHost", () => {
  it("keeps the SSH key a secret even when given as a plain string", async () => {
    const deployment = devDeployment();
    const rendered = renderHost(deployment, deployment.placements[0]!, "test");
    const { registrations, error } = await runUnderMocks(() => new NpuHost("h", { rendered, sshPrivateKey: "MARKER-PLAIN-KEY", secrets: {}, downloads: true }));
    expect(error).toBeUndefined();
    const commands = ofType(registrations, "command:remote:Command");
    expect(commands.length).toBeGreaterThan(0);
    for (const command of commands) expect(isSecretAt(command.wireInputs, ["connection", "privateKey"]), command.name).toBe(true);
    expect(connections.length).toBeGreaterThanOrEqual(commands.length);
    for (const connection of connections) expect(await pulumi.isSecret(pulumi.output(connection.privateKey))).toBe(true);
  });

  it("logs no pip or download output while the pip password is in play, and logs it otherwise", async () => {
    const withPassword = await runUnderMocks(runProgram, readStackFile("dev").raw, { sshPrivateKey: "k", pipPassword: "p" });
    const without = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, pip: {} }, { sshPrivateKey: "k" });
    const logging = (registrations: typeof withPassword.registrations) => Object.fromEntries(ofType(registrations, "command:remote:Command").map((r) => [r.name.split("-").pop(), r.inputs.logging]));
    expect(logging(withPassword.registrations)).toMatchObject({ install: "none", weights: "none" });
    expect(logging(without.registrations)).toMatchObject({ install: "stdoutAndStderr", weights: "stdoutAndStderr" });
  });
});

describe("the Kubernetes startup probe", () => {
  it("waits for the engine's ready timeout plus an hour (another pod's compile of the same key, then the load)", () => {
    const deployment = planDeployment(parseStackSettings(readStackFile("prod").raw), shippedCatalog);
    const workloads = renderKubernetesWorkloads(deployment, { instance: "t", namespace: "t" }, []);
    for (const role of workloads.roles) {
      const container = (role.deployment as any).spec.template.spec.containers[0];
      const ready = Number(deployment.plan.roles.find((r) => r.role === role.role)!.ranks[0]!.env["VLLM_ENGINE_READY_TIMEOUT_S"]);
      expect(container.startupProbe.periodSeconds * container.startupProbe.failureThreshold, role.role).toBeGreaterThanOrEqual(ready + 3600);
    }
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
