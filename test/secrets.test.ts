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
import { spawnSync } from "node:child_process";
import { compareCompileKeys, recompileLines } from "../core/plan/compileKey";
import { diffDeployments } from "../core/plan/diff";
import { maskUrlCredentials } from "../core/errors";
import { maskedPlan, renderPlanText } from "../core/render/planText";
import { messagesAt } from "../core/plan/messages";
import { renderStackFiles } from "./helpers/render";

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

  it("logs pip and download output, masked by the steps themselves, whether or not the pip password is in play", async () => {
    const withPassword = await runUnderMocks(runProgram, readStackFile("dev").raw, { sshPrivateKey: "k", pipPassword: "p" });
    const without = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, pip: {} }, { sshPrivateKey: "k" });
    const logging = (registrations: typeof withPassword.registrations) =>
      Object.fromEntries(ofType(registrations, "command:remote:Command").map((r) => [r.name.split("-").pop(), r.inputs.logging]));
    expect(logging(withPassword.registrations)).toMatchObject({ install: "stdoutAndStderr", weights: "stdoutAndStderr" });
    expect(logging(without.registrations)).toMatchObject({ install: "stdoutAndStderr", weights: "stdoutAndStderr" });
  });
});

// extraEnv values that carry credentials in a URL (issue 31): masked in what the commands print,
// on stdin (secret) to the hosts' steps, in the stack's Secret on Kubernetes; never in a script,
// a ConfigMap or a rendered file.
describe("extraEnv values with credentials in a URL", async () => {
  const PASSWORD = "hunter2-5e1f";
  const TOKEN = "ghp-token-77ab";
  const env = (role: string) => ({ [role]: { HTTPS_PROXY: `http://me:${PASSWORD}@proxy.example.com:3128`, PIP_MIRROR: `https://${TOKEN}@git.example.com/x` } });
  const leaks = new RegExp(`${PASSWORD}|${TOKEN}`);
  const REVISION = "0123456789abcdef0123456789abcdef01234567";
  const hostsStack = {
    ...readStackFile("edge").raw,
    revision: REVISION,
    compile: { host: { name: "cpu-0", address: "10.30.0.9", hostKey: (readStackFile("edge").raw.hosts as { hostKey: string }[])[0]!.hostKey } },
    extraEnv: { ...env("prefill"), ...env("decode") },
  };
  const kubeStack = { ...readStackFile("prod").raw, extraEnv: env("decode") };
  const hostsSecrets = { sshPrivateKey: MARKERS.sshPrivateKey, pipPassword: MARKERS.pipPassword };

  it("are masked in the plan, as text and as JSON, and named in a warning without their value", async () => {
    const { plan } = planDeployment(parseStackSettings(hostsStack), shippedCatalog);
    for (const text of [renderPlanText(plan), JSON.stringify(maskedPlan(plan))]) {
      expect(text).not.toMatch(leaks);
      expect(text).toContain("http://***@proxy.example.com:3128");
      expect(text).toContain("https://***@git.example.com/x");
    }
    expect(messagesAt(plan.messages, "warning")).toContain(
      "extraEnv.decode.HTTPS_PROXY: its value carries credentials in a URL, which sit in the stack config in plain text; the package treats it as a secret (masked in what it prints, on stdin to the hosts, in a Secret on Kubernetes)",
    );
  });

  it("are masked in a diff, which still says a change of the credentials alone changed the variable", async () => {
    const a = planDeployment(parseStackSettings(hostsStack), shippedCatalog);
    const b = planDeployment(
      parseStackSettings({
        ...hostsStack,
        extraEnv: { ...hostsStack.extraEnv, decode: { ...env("decode").decode, HTTPS_PROXY: "http://me:other-pw@proxy.example.com:3128" } },
      }),
      shippedCatalog,
    );
    const changes = diffDeployments(a, b);
    expect(JSON.stringify(changes)).not.toMatch(/hunter2|other-pw/);
    expect(changes.filter((c) => c.item === "env HTTPS_PROXY").map((c) => [c.scope, c.before, c.after])).toEqual(
      [0, 1, 2, 3].map((r) => [`decode rank ${r}`, '"http://***@proxy.example.com:3128"', '"http://***@proxy.example.com:3128" (its credentials changed)']),
    );
    expect(recompileLines(compareCompileKeys(a.plan, b.plan)).join("\n")).not.toMatch(/hunter2|other-pw/);
  });

  it("on hosts: reach the unit and compile steps only on stdin, as a secret, and render as placeholders", async () => {
    const { registrations, error } = await runUnderMocks(runProgram, hostsStack, hostsSecrets);
    expect(error).toBeUndefined();
    let carried = 0;
    for (const r of ofType(registrations, "command:remote:Command")) {
      expect(JSON.stringify(plainPart(r.wireInputs)), r.name).not.toMatch(leaks);
      if (leaks.test(String(r.inputs.stdin ?? ""))) {
        carried++;
        expect(isSecretAt(r.wireInputs, ["stdin"]), r.name).toBe(true);
      }
    }
    // Every unit step (prefill 1, decode 4) and the compile host's two compile steps.
    expect(carried).toBe(7);
    const files = renderStackFiles(planDeployment(parseStackSettings(hostsStack), shippedCatalog), [], "edge");
    expect(
      Object.entries(files)
        .filter(([, text]) => leaks.test(text))
        .map(([name]) => name),
    ).toEqual([]);
    expect(files["hosts/npu-edge-1/env/edge.decode-2.env"]).toMatch(/^HTTPS_PROXY='<secret:HTTPS_PROXY>'$/m);
  });

  it("on Kubernetes: live in the stack's Secret under their role, which the pods and the compile Job reference; never in a ConfigMap", async () => {
    const { registrations, error } = await runUnderMocks(runProgram, { ...kubeStack, compile: { enabled: true } }, {});
    expect(error).toBeUndefined();
    for (const r of registrations) expect(JSON.stringify(plainPart(r.wireInputs)), `${r.type} ${r.name}`).not.toMatch(leaks);
    const secret = registrations.find((r) => r.type === "kubernetes:core/v1:Secret" && r.name.endsWith("-secrets"))!;
    expect(secret.inputs.stringData).toEqual({
      "decode.HTTPS_PROXY": `http://me:${PASSWORD}@proxy.example.com:3128`,
      "decode.PIP_MIRROR": `https://${TOKEN}@git.example.com/x`,
    });
    const ref = { name: "HTTPS_PROXY", valueFrom: { secretKeyRef: { name: secret.inputs.metadata.name, key: "decode.HTTPS_PROXY" } } };
    const decode = registrations.find((r) => r.type === "kubernetes:apps/v1:Deployment" && r.name.endsWith("-decode"))!;
    const job = registrations.find((r) => r.type === "kubernetes:batch/v1:Job" && r.name.endsWith("-decode-compile"))!;
    for (const pod of [decode.inputs.spec.template.spec, job.inputs.spec.template.spec]) expect(pod.containers[0].env).toContainEqual(ref);
    const prefill = registrations.find((r) => r.type === "kubernetes:apps/v1:Deployment" && r.name.endsWith("-prefill"))!;
    expect(JSON.stringify(prefill.inputs.spec.template.spec.containers[0].env)).not.toContain("HTTPS_PROXY");
  });

  it("are masked in the journal lines a host step prints (mask.sh), as maskUrlCredentials masks them", async () => {
    const lines = `error: proxy http://me:${PASSWORD}@proxy:3128/x?a=b@c refused\nclone https://${TOKEN}@git.example.com/x and 'http://a:b@c@d'\nplain http://host/path@x\n`;
    const masked = spawnSync("bash", ["-c", `. ${path.join(__dirname, "../core/render/hosts/scripts/mask.sh")}; mask_url_credentials`], {
      input: lines,
      encoding: "utf8",
    });
    expect(masked.stdout).toBe(maskUrlCredentials(lines));
    expect(masked.stdout).not.toMatch(leaks);
  });
});
