import * as fs from "node:fs";
import * as path from "node:path";
import { Analyzer } from "@pulumi/pulumi/provider/experimental/analyzer";
import { generateSchema } from "@pulumi/pulumi/provider/experimental/schema";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { componentArgs, type ModelServingArgs } from "../provider/modelServing";
import { planServing } from "../components/modelServing";

// The schema `pulumi package add` would publish, inferred offline by Pulumi's own analyzer from
// the TypeScript source the provider entry points it at (provider/).
const PROVIDER_DIR = path.resolve(__dirname, "../provider");

describe("the component package schema", () => {
  const packageJson = JSON.parse(fs.readFileSync(path.join(PROVIDER_DIR, "package.json"), "utf8"));
  const analysis = new Analyzer(PROVIDER_DIR, "rbln-serving", packageJson, new Set(["ModelServing"])).analyze();
  const schema = generateSchema("rbln-serving", "0.1.0", packageJson.description, analysis.components, analysis.typeDefinitions, analysis.dependencies);

  it("lists ModelServing as a component in the index module", () => {
    const resource = schema.resources["rbln-serving:index:ModelServing"];
    expect(resource?.isComponent).toBe(true);
    expect(resource?.requiredInputs?.sort()).toEqual(["strategy", "target"]);
  });

  it("takes the stack config's keys as plain settings and the secrets as inputs", () => {
    const inputs = schema.resources["rbln-serving:index:ModelServing"]!.inputProperties!;
    expect(inputs["strategy"]).toMatchObject({ type: "string", plain: true });
    expect(inputs["replicas"]).toMatchObject({ type: "number", plain: true });
    expect(inputs["axes"]).toMatchObject({ type: "object", additionalProperties: { type: "string" }, plain: true });
    expect(inputs["hosts"]).toMatchObject({ type: "array", items: { $ref: "#/types/rbln-serving:index:HostArgs" }, plain: true });
    expect(inputs["kubernetes"]).toMatchObject({ $ref: "#/types/rbln-serving:index:KubernetesArgs", plain: true });
    expect(inputs["extraEnv"]).toMatchObject({ type: "object", additionalProperties: { type: "object", additionalProperties: { type: "string" } } });
    expect(inputs["rollout"]).toMatchObject({ $ref: "#/types/rbln-serving:index:RolloutArgs" });
    for (const secret of ["sshPrivateKey", "pipPassword", "hfToken", "apiKey"]) {
      expect(inputs[secret]).toMatchObject({ type: "string" });
      expect(inputs[secret]!.plain).toBeUndefined();
    }
    expect(schema.types["rbln-serving:index:HostArgs"]?.properties).toMatchObject({ name: { type: "string" }, address: { type: "string" }, port: { type: "number" } });
    expect(schema.types["rbln-serving:index:HostArgs"]?.required?.sort()).toEqual(["address", "name"]);
  });

  it("has the component's outputs with their types", () => {
    const resource = schema.resources["rbln-serving:index:ModelServing"]!;
    expect(resource.properties).toMatchObject({
      endpoints: { type: "array", items: { type: "string" } },
      curl: { type: "string" },
      units: { type: "array", items: { $ref: "#/types/rbln-serving:index:RankUnitOutput" } },
      deployments: { type: "array", items: { $ref: "#/types/rbln-serving:index:RoleDeploymentOutput" } },
      selection: { type: "object", additionalProperties: { type: "string" } },
      warnings: { type: "array", items: { type: "string" } },
    });
    expect(schema.types["rbln-serving:index:RoleDeploymentOutput"]?.properties?.["ranks"]).toMatchObject({ type: "array", items: { $ref: "#/types/rbln-serving:index:RankPlacement" } });
  });

  it("accepts the example YAML program: its properties are inputs of the schema, and they plan", () => {
    const program = parse(fs.readFileSync(path.resolve(__dirname, "../examples/yaml/Pulumi.yaml"), "utf8"));
    const { type, properties } = program.resources.serving;
    const resource = schema.resources[type];
    expect(resource?.isComponent).toBe(true);
    for (const key of Object.keys(properties)) expect(Object.keys(resource!.inputProperties!), key).toContain(key);
    for (const key of resource!.requiredInputs!) expect(Object.keys(properties)).toContain(key);
    // Secrets are interpolated config; any value stands in for them here.
    const args = { ...properties, sshPrivateKey: "key", pipPassword: "pw" } as ModelServingArgs;
    expect(planServing(componentArgs(args)).plan.selection).toMatchObject({ spec_decode: "suffix" });
  });
});
