import * as fs from "node:fs";
import * as path from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { parseStackSettings, StackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { catalogWithFixtures, shippedCatalog } from "./helpers/recipes";

const project = parse(fs.readFileSync(path.resolve(__dirname, "../Pulumi.yaml"), "utf8"));

describe("Pulumi.yaml", () => {
  it("declares the contract's project settings", () => {
    expect(project).toMatchObject({ name: "rbln-serving", runtime: { name: "nodejs", options: { typescript: true } }, main: "index.ts", stackConfigDir: "stacks" });
  });

  it("declares the same defaults the program applies", () => {
    const defaults = StackSettings.parse({ strategy: "s", target: "t", hosts: [{ name: "h", address: "127.0.0.1" }] }) as Record<string, unknown>;
    for (const [key, declaration] of Object.entries(project.config as Record<string, { type: string; default?: unknown; description: string }>)) {
      expect(declaration.description, key).toBeTruthy();
      if (declaration.default !== undefined) expect(defaults[key], key).toEqual(declaration.default);
    }
  });
});

describe("stack files", () => {
  for (const name of ["dev", "staging", "prod"]) {
    it(`${name} validates and plans offline`, () => {
      const { raw } = readStackFile(name);
      const deployment = planDeployment(parseStackSettings(raw), shippedCatalog);
      expect(deployment.plan.roles.length).toBeGreaterThan(0);
    });
  }

  it("selects a second recipe by its model id", () => {
    const settings = parseStackSettings({ model: "example/tiny-moe", strategy: "two-role", target: "Latency", platform: "kubernetes", kubernetes: { image: "registry.example.com/x:1" } });
    const { plan } = planDeployment(settings, catalogWithFixtures());
    expect(plan.roles.map((r) => [r.role, r.node, r.ranks.map((k) => k.ports[0])])).toEqual([["front", 0, [9000]], ["back", 1, [9100, 9101]]]);
    expect(plan.roles[0]!.ranks[0]!.env).toEqual({ GREETING: "hello world" });
  });
});
