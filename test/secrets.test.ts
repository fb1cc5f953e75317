import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it, vi } from "vitest";
import { NpuHost } from "../components/hosts/npuHost";
import { parseStackSettings } from "../core/config/stackConfig";
import { planDeployment } from "../core/plan/deployment";
import { renderHost } from "../core/render/hosts/bundle";
import { readStackFile } from "../core/config/stackFile";
import { ModelServing, type ModelServingArgs } from "../components/modelServing";
import { runProgram } from "../program";
import { isSecretAt, ofType, runUnderMocks, SECRET_SIG, outputValue } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";

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

const MARKERS = { sshPrivateKey: "MARKER-SSH-7f3a", pipPassword: "MARKER-PIP-91bc", hfToken: "MARKER-HF-55de", apiKey: "MARKER-KEY-0a1f" };
const markerPattern = new RegExp(Object.values(MARKERS).join("|"));

/** The inputs with every secret-wrapped value blanked: what the engine may show and store in plain text. */
function plainPart(value: any): any {
  if (Array.isArray(value)) return value.map(plainPart);
  if (value !== null && typeof value === "object") {
    if (value["4dabf18193072939515e22adb298388d"] === SECRET_SIG) return "[secret]";
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plainPart(v)]));
  }
  return value;
}

for (const [stack, secrets] of [
  ["dev", MARKERS],
  ["prod", { hfToken: MARKERS.hfToken, apiKey: MARKERS.apiKey }],
] as const) {
  describe(`secrets in the ${stack} stack's program`, async () => {
    const { registrations, result, error } = await runUnderMocks(runProgram, readStackFile(stack).raw, secrets);

    it("runs", () => expect(error).toBeUndefined());

    it("reach resources only as secret values, never in plain inputs or command strings", () => {
      let carried = 0;
      for (const r of registrations) {
        expect(JSON.stringify(plainPart(r.wireInputs)), `${r.type} ${r.name}`).not.toMatch(markerPattern);
        for (const key of ["create", "update", "delete"]) expect(String(r.inputs[key] ?? ""), `${r.name}.${key}`).not.toMatch(markerPattern);
        if (markerPattern.test(JSON.stringify(r.inputs))) carried++;
      }
      expect(carried).toBeGreaterThan(0);
    });

    it("never reach a ConfigMap", () => {
      for (const r of registrations.filter((r) => r.type === "kubernetes:core/v1:ConfigMap")) expect(JSON.stringify(r.inputs)).not.toMatch(markerPattern);
    });

    it("never reach the stack outputs", async () => {
      const outputs = result as ReturnType<typeof runProgram>;
      const values = await Promise.all([
        outputValue(outputs.endpoints),
        outputValue(outputs.curl),
        outputValue(outputs.units),
        outputValue(outputs.deployments),
      ]);
      expect(JSON.stringify([values, outputs.selection, outputs.warnings, outputs.notes])).not.toMatch(markerPattern);
    });
  });
}

describe("secrets passed to ModelServing as plain strings (library use)", () => {
  for (const stack of ["dev", "prod"]) {
    it(`are still secret values in every input (${stack})`, async () => {
      const settings = readStackFile(stack).raw as ModelServingArgs["settings"];
      const secrets = stack === "dev" ? MARKERS : { hfToken: MARKERS.hfToken, apiKey: MARKERS.apiKey };
      const { registrations, error } = await runUnderMocks(() => new ModelServing("lib", { settings, secrets }));
      expect(error).toBeUndefined();
      let carried = 0;
      for (const r of registrations) {
        expect(JSON.stringify(plainPart(r.wireInputs)), `${r.type} ${r.name}`).not.toMatch(markerPattern);
        if (markerPattern.test(JSON.stringify(r.inputs))) carried++;
      }
      expect(carried).toBeGreaterThan(0);
    });
  }
});

describe("stack files read offline", () => {
  function stackDir(config: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stacks-"));
    fs.writeFileSync(path.join(dir, "Pulumi.t.yaml"), `config:\n  rbln-serving:strategy: aggregated-data-expert-parallel\n${config}`);
    return dir;
  }

  it("note encrypted secrets by name only", () => {
    const file = readStackFile("t", stackDir("  rbln-serving:hfToken:\n    secure: v1:AAAAciphertext\n"));
    expect(file.secrets).toEqual(["hfToken"]);
    expect(JSON.stringify(file.raw)).not.toContain("ciphertext");
  });

  it("refuse a secret stored in plain text", () => {
    expect(() => readStackFile("t", stackDir("  rbln-serving:apiKey: hunter2\n"))).toThrow(
      /^apiKey: is stored in plain text; set it with: pulumi config set --secret apiKey$/,
    );
  });
});

describe("NpuHost", () => {
  it("keeps the SSH key a secret even when given as a plain string", async () => {
    const deployment = planDeployment(parseStackSettings(readStackFile("dev").raw), shippedCatalog);
    const rendered = renderHost(deployment, deployment.placements[0]!, "test");
    const { registrations, error } = await runUnderMocks(() => new NpuHost("h", { rendered, sshPrivateKey: "MARKER-PLAIN-KEY", secrets: {}, downloads: true }));
    expect(error).toBeUndefined();
    const commands = ofType(registrations, "command:remote:Command");
    expect(commands.length).toBeGreaterThan(0);
    for (const command of commands) expect(isSecretAt(command.wireInputs, ["connection", "privateKey"]), command.name).toBe(true);
    expect(connections.length).toBeGreaterThanOrEqual(commands.length);
    for (const connection of connections) expect(await pulumi.isSecret(pulumi.output(connection.privateKey))).toBe(true);
  });

  it("logs nothing of a copy grant, whose stdout is the one-time private key", async () => {
    const { registrations, error } = await runUnderMocks(runProgram, readStackFile("edge").raw, { sshPrivateKey: "k", pipPassword: "p" });
    expect(error).toBeUndefined();
    const grants = ofType(registrations, "command:remote:Command").filter((r) => /-allow-/.test(r.name));
    expect(grants.length).toBeGreaterThan(0);
    for (const grant of grants) expect(grant.inputs.logging, grant.name).toBe("none");
  });

  it("logs no pip or download output while the pip password is in play, and logs it otherwise", async () => {
    const withPassword = await runUnderMocks(runProgram, readStackFile("dev").raw, { sshPrivateKey: "k", pipPassword: "p" });
    const without = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, pip: {} }, { sshPrivateKey: "k" });
    const logging = (registrations: typeof withPassword.registrations) =>
      Object.fromEntries(ofType(registrations, "command:remote:Command").map((r) => [r.name.split("-").pop(), r.inputs.logging]));
    expect(logging(withPassword.registrations)).toMatchObject({ install: "none", weights: "none" });
    expect(logging(without.registrations)).toMatchObject({ install: "stdoutAndStderr", weights: "stdoutAndStderr" });
  });
});
