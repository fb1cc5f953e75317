import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A new user's view: `npm pack`, the tarball installed into a Pulumi TypeScript program outside the
// repository, that program run under the mock runtime. The install is offline: its lockfile pins the
// same packages as this repository's, so npm takes them from its cache (filled by `npm ci`).
const REPO = path.resolve(__dirname, "..");

const PROGRAM = `import * as pulumi from "@pulumi/pulumi";
import { ModelServing, planServing, RecipeCatalog, resolvePlan, DEFAULT_MODEL, type LaunchPlan } from "rbln-serving";

const onHosts = new ModelServing("lab", {
  settings: { strategy: "aggregated-pipeline-parallel", target: "Throughput", hosts: [{ name: "box-1", address: "192.168.10.5", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII1GI7+3R49Q9T3kRWVrxat8JwYNEnkkdZU3QYoOokEG" }] },
  secrets: { sshPrivateKey: pulumi.secret("not-a-key") },
});
const onCluster = new ModelServing("cluster", {
  settings: { platform: "kubernetes", strategy: "prefill-decode-disaggregated", target: "Throughput", kubernetes: { image: "registry.example.com/ml/vllm-rbln:0.12.0", gateway: { name: "inference-gateway" } } },
});
const plan: LaunchPlan = planServing({ settings: { strategy: "aggregated-data-expert-parallel", target: "Latency", hosts: [{ name: "box-2", address: "192.168.10.6", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII1GI7+3R49Q9T3kRWVrxat8JwYNEnkkdZU3QYoOokEG" }] }, secrets: { sshPrivateKey: "k" } }).plan;

export const hostEndpoints = onHosts.endpoints;
export const clusterEndpoints = onCluster.endpoints;
export const planned = plan.roles.map((role) => role.role);
export const resolved = resolvePlan(RecipeCatalog.load().get(DEFAULT_MODEL), { model: DEFAULT_MODEL, strategy: "prefill-decode-disaggregated", target: "Latency" }).roles.map((role) => role.role);
`;

// Runs the program with the program's own @pulumi/pulumi (the one the package's components extend).
const RUNNER = `import * as fs from "node:fs";
import { runUnderMocks, outputValue } from "./pulumiHarness";

void (async () => {
  const { registrations, result, error } = await runUnderMocks(() => require("./index"));
  if (error) throw error;
  const outputs = result as Record<string, any>;
  fs.writeFileSync("result.json", JSON.stringify({
    registrations: registrations.map((r) => ({ type: r.type, name: r.name })),
    hostEndpoints: await outputValue(outputs.hostEndpoints),
    clusterEndpoints: await outputValue(outputs.clusterEndpoints),
    planned: outputs.planned,
    resolved: outputs.resolved,
  }));
})();
`;

/** The program's lockfile: the tarball plus exactly the production packages this repository locks. */
function lockfileFor(tarball: string): object {
  const repoLock = JSON.parse(fs.readFileSync(path.join(REPO, "package-lock.json"), "utf8"));
  const manifest = JSON.parse(fs.readFileSync(path.join(REPO, "package.json"), "utf8"));
  const spec = `file:${tarball}`;
  const packages: Record<string, unknown> = {
    "": { name: "consumer", version: "1.0.0", dependencies: { "rbln-serving": spec, "@pulumi/pulumi": manifest.dependencies["@pulumi/pulumi"] } },
    "node_modules/rbln-serving": {
      version: manifest.version,
      resolved: spec,
      integrity: `sha512-${createHash("sha512").update(fs.readFileSync(tarball)).digest("base64")}`,
      license: manifest.license,
      dependencies: manifest.dependencies,
      bin: manifest.bin,
      engines: manifest.engines,
    },
  };
  for (const [key, entry] of Object.entries(repoLock.packages as Record<string, { dev?: boolean }>)) if (key !== "" && !entry.dev) packages[key] = entry;
  return { name: "consumer", version: "1.0.0", lockfileVersion: 3, requires: true, packages };
}

describe("the packed package in a new Pulumi program", () => {
  let work: string;
  let app: string;

  beforeAll(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-serving-pack-"));
    app = path.join(work, "app");
    fs.mkdirSync(app);
    // `npm pack` runs the prepare script: the build to dist/.
    const tarball = path.join(
      work,
      execFileSync("npm", ["pack", "--silent", "--pack-destination", work], { cwd: REPO, encoding: "utf8" }).trim().split("\n").pop()!,
    );
    const lock = lockfileFor(tarball) as { packages: Record<string, { dependencies?: object }> };
    fs.writeFileSync(
      path.join(app, "package.json"),
      JSON.stringify({ name: "consumer", version: "1.0.0", private: true, main: "index.ts", dependencies: lock.packages[""]!.dependencies }, null, 2),
    );
    fs.writeFileSync(path.join(app, "package-lock.json"), JSON.stringify(lock, null, 2));
    execFileSync("npm", ["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: app, stdio: "pipe" });
    fs.writeFileSync(path.join(app, "Pulumi.yaml"), "name: consumer\nruntime:\n  name: nodejs\n  options:\n    typescript: true\n");
    fs.writeFileSync(
      path.join(app, "Pulumi.dev.yaml"),
      "config:\n  consumer:unrelated: 1\n  rbln-serving:strategy: aggregated-pipeline-parallel\n  rbln-serving:target: Throughput\n  rbln-serving:hosts:\n    - name: box-1\n      address: 192.168.10.5\n      hostKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII1GI7+3R49Q9T3kRWVrxat8JwYNEnkkdZU3QYoOokEG\n",
    );
    fs.writeFileSync(
      path.join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { strict: true, target: "ES2022", module: "nodenext", moduleResolution: "nodenext", esModuleInterop: true, skipLibCheck: true },
        files: ["index.ts", "run.ts"],
      }),
    );
    fs.writeFileSync(path.join(app, "index.ts"), PROGRAM);
    fs.writeFileSync(path.join(app, "run.ts"), RUNNER);
    fs.copyFileSync(path.join(REPO, "test/helpers/pulumiHarness.ts"), path.join(app, "pulumiHarness.ts"));
  }, 240_000);

  afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

  it("ships JavaScript, declarations, source maps and the recipes, and no tests", () => {
    const installed = path.join(app, "node_modules/rbln-serving");
    for (const file of [
      "dist/components/index.js",
      "dist/components/index.d.ts",
      "dist/components/index.js.map",
      "dist/provider/index.js",
      "recipes/minimaxai--minimax-m2.7.json",
      "PulumiPlugin.yaml",
    ]) {
      expect(fs.existsSync(path.join(installed, file)), file).toBe(true);
    }
    expect(fs.existsSync(path.join(installed, "test"))).toBe(false);
  });

  it("deploys a hosts and a Kubernetes configuration under the mock runtime, importing the package by name", () => {
    // ts-node with type checking, as Pulumi's TypeScript runner loads a program: the program is checked against the shipped declarations.
    execFileSync(process.execPath, ["-r", path.join(REPO, "node_modules/ts-node/register"), "run.ts"], { cwd: app, stdio: "pipe" });
    const result = JSON.parse(fs.readFileSync(path.join(app, "result.json"), "utf8"));
    const registered = result.registrations.map((r: { type: string; name: string }) => `${r.type} ${r.name}`);
    expect(registered).toEqual(
      expect.arrayContaining([
        "rbln-serving:index:ModelServing lab",
        "rbln-serving:index:NpuHost lab-box-1",
        "command:remote:Command lab-box-1-install",
        "command:remote:Command lab-box-1-main-0",
        "rbln-serving:index:ModelServing cluster",
        "rbln-serving:index:NpuWorkloads cluster-workloads",
        "kubernetes:apps/v1:Deployment cluster-workloads-decode",
        "rbln-serving:index:LlmdRouter cluster-router",
        "kubernetes:helm.sh/v4:Chart cluster-router-chart",
      ]),
    );
    expect(result.hostEndpoints).toEqual(["http://192.168.10.5:8000"]);
    expect(result.clusterEndpoints).toEqual(["http://10.0.0.100"]);
    expect(result.planned).toEqual(["main"]);
    expect(result.resolved).toEqual(["prefill", "decode"]);
  });

  it("runs `npx rbln-serving plan --stack dev` against the program's own stack file", () => {
    const out = execFileSync("npx", ["--no-install", "rbln-serving", "plan", "--stack", "dev", "--format", "json"], { cwd: app, encoding: "utf8" });
    const plan = JSON.parse(out);
    expect(plan.strategy).toBe("aggregated-pipeline-parallel");
    expect(plan.roles[0].ranks[0].argv).toContain("--pipeline-parallel-size");
  });

  it("serves the component package as Pulumi runs a plugin: run-plugin loads its main and answers GetSchema", async () => {
    const installed = path.join(app, "node_modules/rbln-serving");
    const fromApp = createRequire(path.join(app, "package.json"));
    // The engine address is never dialled for GetSchema; loopback keeps it local either way.
    const plugin = spawn(process.execPath, [fromApp.resolve("@pulumi/pulumi/cmd/run-plugin"), installed, "127.0.0.1:1"], {
      cwd: installed,
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const port = await new Promise<string>((resolve, reject) => {
        plugin.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString().trim()));
        plugin.once("exit", (code) => reject(new Error(`plugin exited with ${code}`)));
      });
      const grpc = fromApp("@grpc/grpc-js");
      const { ResourceProviderClient } = fromApp("@pulumi/pulumi/proto/provider_grpc_pb");
      const { GetSchemaRequest } = fromApp("@pulumi/pulumi/proto/provider_pb");
      const client = new ResourceProviderClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      const schema = await new Promise<any>((resolve, reject) =>
        client.getSchema(new GetSchemaRequest(), (error: Error | null, response: any) => (error ? reject(error) : resolve(JSON.parse(response.getSchema())))),
      );
      client.close();
      expect(schema.name).toBe("rbln-serving");
      expect(schema.version).toBe("0.1.0");
      expect(Object.keys(schema.resources)).toEqual(["rbln-serving:index:ModelServing"]);
      expect(schema.resources["rbln-serving:index:ModelServing"].isComponent).toBe(true);
      // The shipped sources reach the generated argument types: a hosts stack can be declared in full.
      expect(Object.keys(schema.types["rbln-serving:index:HostArgs"].properties)).toEqual([
        "name",
        "address",
        "user",
        "port",
        "listenAddress",
        "hostKey",
        "proxy",
      ]);
    } finally {
      plugin.kill();
    }
  });
});
