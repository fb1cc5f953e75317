import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type * as pulumi from "@pulumi/pulumi";
import { Analyzer } from "@pulumi/pulumi/provider/experimental/analyzer";
import { generateSchema } from "@pulumi/pulumi/provider/experimental/schema";
import { describe, expect, expectTypeOf, it } from "vitest";
import { parse } from "yaml";
import { z } from "zod";
import { ConfigError } from "../core/errors";
import { StackSettings } from "../core/config/stackConfig";
import { SECRET_KEYS } from "../core/config/secrets";
import { secretDoc, settingDoc } from "../core/config/settingDocs";
import { settingsShape, type SettingField, type SettingShape } from "../core/config/settingsShape";
import { planServing, type ModelServing as ComponentModelServing } from "../components/modelServing";
import { componentArgs, type ModelServing as PackageModelServing, type ModelServingArgs } from "../provider/modelServing";
import { GENERATE_COMMAND, GENERATED_FILE, generatedFileText, providerTypesSource } from "../scripts/generate-provider-types";
import pulumiPythonSdk from "./fixtures/pulumi-v3.248.0/python-sdk.json";
import { pyInputClass, pyName, pyPackage } from "./helpers/pyName";
import type { ResearchFixture } from "./helpers/researchFixtures";

// The schema `pulumi package add` would publish, inferred offline by Pulumi's own analyzer from
// the TypeScript source the provider entry points it at (provider/).
const PROVIDER_DIR = path.resolve(__dirname, "../provider");
const packageJson = JSON.parse(fs.readFileSync(path.join(PROVIDER_DIR, "package.json"), "utf8"));
const rootPackage = JSON.parse(fs.readFileSync(path.resolve(__dirname, "../package.json"), "utf8"));
const analysis = new Analyzer(PROVIDER_DIR, "rbln-serving", packageJson, new Set(["ModelServing"])).analyze();
const schema = generateSchema("rbln-serving", "0.1.0", packageJson.description, analysis.components, analysis.typeDefinitions, analysis.dependencies);
const resource = schema.resources["rbln-serving:index:ModelServing"]!;
const ANY = "pulumi.json#/Any";

/** A property or a type of the package schema, every field optional, to walk either. */
interface Spec {
  type?: string;
  $ref?: string;
  plain?: boolean;
  items?: Spec;
  additionalProperties?: Spec;
  properties?: Record<string, Spec>;
  required?: string[];
  enum?: { value: unknown }[];
  description?: string;
}
const inputs: Spec = { type: "object", properties: resource.inputProperties as Record<string, Spec>, required: resource.requiredInputs! };

/** A property's type: its `#/types/` definition, or the property itself. */
function deref(spec: Spec): Spec {
  return spec.$ref?.startsWith("#/types/") ? (schema.types[spec.$ref.slice("#/types/".length)] as Spec) : spec;
}

/** The package schema's input at a key path (`[]` an item, `{}` a map value), and whether it is required. */
function inputAt(keys: readonly string[]): { spec: Spec; required: boolean } | undefined {
  let object = inputs;
  let found: { spec: Spec; required: boolean } | undefined;
  for (const key of keys) {
    const spec = key === "[]" ? object.items : key === "{}" ? object.additionalProperties : object.properties?.[key];
    if (!spec) return undefined;
    found = { spec, required: key === "[]" || key === "{}" || (object.required ?? []).includes(key) };
    object = deref(spec);
  }
  return found;
}

interface KeyPath {
  keys: string[];
  schema: z.core.$ZodTypes;
  required: boolean;
}

/**
 * Every key path the stack config takes (`hosts.[].proxy.hostKey`, `kubernetes.resources.{}.limits.cpu`),
 * walked on the zod schema itself: through optional, default, pipe, array, record, object, and each
 * option of a union.
 */
function keyPaths(node: z.core.$ZodType, keys: string[] = [], required = true): KeyPath[] {
  const schema = node as z.core.$ZodTypes;
  const def = schema._zod.def;
  const here = keys.length > 0 ? [{ keys, schema, required }] : [];
  switch (def.type) {
    case "optional":
    case "default":
      return keyPaths(def.innerType, keys, false);
    case "pipe":
      // `structured` preprocesses before its schema; absolutePath transforms after a string.
      return keyPaths(def.in._zod.def.type === "transform" ? def.out : def.in, keys, required);
    case "array":
      return [...here, ...keyPaths(def.element, [...keys, "[]"])];
    case "record":
      return [...here, ...keyPaths(def.valueType, [...keys, "{}"])];
    case "object":
      return [...here, ...Object.entries(def.shape).flatMap(([key, field]) => keyPaths(field, [...keys, key]))];
    case "union":
      return [...here, ...def.options.flatMap((option) => keyPaths(option, keys, required).filter((p) => p.keys.length > keys.length))];
    default:
      return here;
  }
}

const scalarOf = (node: z.core.$ZodType): string | undefined => {
  const def = (node as z.core.$ZodTypes)._zod.def;
  if (def.type === "string" || def.type === "number" || def.type === "boolean") return def.type;
  if (def.type === "enum") return typeof Object.values(def.entries)[0];
  if (def.type === "literal") return typeof def.values[0];
  return undefined;
};

/** Why the package's input does not fit the zod schema at that path, or undefined when it does. */
function mismatch({ schema: node, required }: KeyPath, found: { spec: Spec; required: boolean }): string | undefined {
  const { spec } = found;
  const type = deref(spec);
  const def = node._zod.def;
  if (found.required !== required) return `required ${found.required}, the stack config ${required}`;
  // Only a free-form value (a Kubernetes object) is Any: a union's keys have types too.
  if ((spec.$ref === ANY) !== (def.type === "unknown")) return `${JSON.stringify(spec)} for a zod ${def.type}`;
  switch (def.type) {
    case "object":
      return type.type === "object" && type.properties ? undefined : `not an object type: ${JSON.stringify(spec)}`;
    case "array":
      return type.type === "array" ? undefined : "not a list";
    case "record":
      return type.type === "object" && type.additionalProperties ? undefined : "not a map";
    case "enum":
      return JSON.stringify(type.enum?.map((e) => e.value)) === JSON.stringify(Object.values(def.entries))
        ? undefined
        : `not the enum ${Object.values(def.entries)}`;
    case "union": {
      const scalars = def.options.map(scalarOf);
      if (scalars.includes(undefined)) return `a union of ${scalars.map((s) => s ?? "another type").join(", ")}`;
      const expected = new Set(scalars).size === 1 ? scalars[0] : "string";
      return type.type === expected ? undefined : `a ${type.type} for a union the package gives as a ${expected}`;
    }
    case "unknown":
      return undefined;
    default:
      return type.type === scalarOf(node) ? undefined : `a ${type.type} for a zod ${def.type}`;
  }
}

/** Every named key of the stack config with its field, at every depth (`[]` an item, `{}` a map value), as keyPaths names them. */
function settingFields(shape: SettingShape, keys: string[] = []): { keys: string[]; field: SettingField }[] {
  if (shape.kind === "array") return settingFields(shape.items, [...keys, "[]"]);
  if (shape.kind === "map") return settingFields(shape.values, [...keys, "{}"]);
  if (shape.kind !== "object") return [];
  return Object.entries(shape.fields).flatMap(([key, field]) => [{ keys: [...keys, key], field }, ...settingFields(field.shape, [...keys, key])]);
}
const SETTINGS = settingFields(settingsShape(StackSettings));

/** Why a setting's own description does not do, or undefined when it does: it must say more than its default. */
function descriptionProblem(description: string | undefined): string | undefined {
  if (!description?.trim()) return "no description";
  return /^(Default: [^.]*\.?|The stack config's `[^`]*`\.?)$/.test(description.trim()) ? `only "${description}"` : undefined;
}

describe("the settings' descriptions", () => {
  it("each key of the stack config, at every depth, has a description of its own in the schema, more than its default", () => {
    expect(SETTINGS.length).toBeGreaterThan(150);
    const problems = SETTINGS.flatMap(({ keys, field }) => {
      const problem = descriptionProblem(field.description);
      return problem ? [`${keys.join(".")}: ${problem}`] : [];
    });
    expect(problems).toEqual([]);
  });

  it("would find a key without one, or with a default alone", () => {
    expect(descriptionProblem(undefined)).toBe("no description");
    expect(descriptionProblem(" ")).toBe("no description");
    expect(descriptionProblem('Default: "root".')).toBe('only "Default: "root"."');
    expect(descriptionProblem("The SSH user. Default: root.")).toBeUndefined();
  });

  it("reach the package schema: every input property, nested and secret, carries its setting's documentation", () => {
    const mismatches = SETTINGS.flatMap(({ keys, field }) => {
      const found = inputAt(keys)?.spec.description;
      return found === settingDoc(field).join("\n") ? [] : [`${keys.join(".")}: ${JSON.stringify(found)}`];
    });
    expect(mismatches).toEqual([]);
    for (const secret of SECRET_KEYS) expect(resource.inputProperties![secret]!.description, secret).toBe(secretDoc(secret).join("\n"));
    expect(resource.inputProperties!.model!.description).toMatch(/^The model to serve: .*\nAllowed: not empty\.\nDefault: "MiniMaxAI\/MiniMax-M2\.7"\.$/s);
  });
});

describe("the component package schema", () => {
  it("lists ModelServing as a component in the index module, requiring what the stack config requires", () => {
    expect(resource.isComponent).toBe(true);
    const required = Object.entries(StackSettings.shape)
      .filter(([, field]) => !field.safeParse(undefined).success)
      .map(([key]) => key);
    expect(resource.requiredInputs?.sort()).toEqual(required.sort());
    // strategy and target are required of a stack without models only: a check across keys, not the schema.
    expect(required.sort()).toEqual([]);
  });

  it("has every key path the stack config takes, nested, with a compatible type", () => {
    const paths = keyPaths(StackSettings);
    const names = paths.map((p) => p.keys.join("."));
    // The walk itself reaches the nested keys the hand-copied types once lacked.
    expect(names).toEqual(
      expect.arrayContaining([
        "hosts.[].hostKey",
        "hosts.[].proxy.hostKey",
        "sshProxy.port",
        "kubernetes.resources.{}.limits.cpu",
        "kubernetes.tolerations.[].effect",
        "router.pickerResources.requests.memory",
        "rollout.maxUnavailable",
        "cache.shared",
        "router.host.address",
        "router.host.proxy.hostKey",
      ]),
    );
    expect(paths.length).toBeGreaterThan(100);
    const problems = paths.flatMap((p) => {
      const found = inputAt(p.keys);
      const problem = found ? mismatch(p, found) : "missing";
      return problem ? [`${p.keys.join(".")}: ${problem}`] : [];
    });
    expect(problems).toEqual([]);
    // Free-form Kubernetes objects, passed to the pod spec as written, are the only values of no type.
    expect(paths.filter((p) => inputAt(p.keys)?.spec.$ref === ANY).map((p) => p.keys.join("."))).toEqual([
      "kubernetes.affinity.{}",
      "kubernetes.topologySpreadConstraints.[].{}",
    ]);
  });

  it("has nothing the stack config does not take: each object's keys are the schema's, plus the secrets at the top", () => {
    for (const { keys, schema: node } of keyPaths(StackSettings).filter((p) => p.schema._zod.def.type === "object")) {
      const type = deref(inputAt(keys)!.spec);
      expect(Object.keys(type.properties ?? {}), keys.join(".")).toEqual(Object.keys((node._zod.def as z.core.$ZodObjectDef).shape));
    }
    expect(Object.keys(resource.inputProperties!)).toEqual([...Object.keys(StackSettings.shape), ...SECRET_KEYS]);
  });

  it("takes the settings as plain values and the secrets as inputs", () => {
    const inputs = resource.inputProperties!;
    for (const key of Object.keys(StackSettings.shape)) expect(inputs[key]!.plain, key).toBe(true);
    for (const secret of SECRET_KEYS) {
      expect(inputs[secret]).toMatchObject({ type: "string" });
      expect(inputs[secret]!.plain).toBeUndefined();
    }
  });

  it("has the component's outputs with their types", () => {
    expect(resource.properties).toMatchObject({
      endpoints: { type: "array", items: { type: "string" } },
      curl: { type: "string" },
      units: { type: "array", items: { $ref: "#/types/rbln-serving:index:RankUnitOutput" } },
      deployments: { type: "array", items: { $ref: "#/types/rbln-serving:index:RoleDeploymentOutput" } },
      modelRevision: { type: "string", optional: true },
      selection: { type: "object", additionalProperties: { type: "string" } },
      warnings: { type: "array", items: { type: "string" } },
      notes: { type: "array", items: { type: "string" } },
      scrapeTargets: { type: "array", items: { $ref: "#/types/rbln-serving:index:ScrapeTargetOutput" } },
      compileKeys: { type: "array", items: { $ref: "#/types/rbln-serving:index:CompileKeyOutput" } },
    });
    expect(schema.types["rbln-serving:index:RoleDeploymentOutput"]?.properties?.ranks).toMatchObject({
      type: "array",
      items: { $ref: "#/types/rbln-serving:index:RankPlacement" },
    });
    expect(schema.types["rbln-serving:index:ScrapeTargetOutput"]?.properties?.labels).toMatchObject({ $ref: "#/types/rbln-serving:index:ScrapeLabelsOutput" });
  });

  it("types and describes every output, nested too: the types are the TypeScript component's own", () => {
    const outputs = (spec: Spec, at: string): { at: string; spec: Spec }[] => {
      const type = deref(spec.items ?? spec.additionalProperties ?? spec);
      const nested = Object.entries(type === spec ? {} : (type.properties ?? {})).flatMap(([key, inner]) => outputs(inner, `${at}.${key}`));
      return [{ at, spec }, ...nested];
    };
    const all = Object.entries(resource.properties as Record<string, Spec>).flatMap(([key, spec]) => outputs(spec, key));
    expect(all.length).toBeGreaterThan(30);
    expect(all.filter(({ spec }) => JSON.stringify(spec).includes(ANY) || !spec.description).map(({ at }) => at)).toEqual([]);
    expect(schema.types["rbln-serving:index:ScrapeTargetOutput"]?.properties?.targets).toMatchObject({ type: "array", items: { type: "string" } });
  });

  it("declares the TypeScript component's outputs, with the same types", () => {
    type Outputs<T> = Exclude<keyof T, keyof pulumi.ComponentResource>;
    expectTypeOf<Outputs<PackageModelServing>>().toEqualTypeOf<Outputs<ComponentModelServing>>();
    type Same<K extends Outputs<ComponentModelServing>> = [pulumi.Unwrap<PackageModelServing[K]>, pulumi.Unwrap<ComponentModelServing[K]>];
    expectTypeOf<Same<"endpoints">[0]>().toEqualTypeOf<Same<"endpoints">[1]>();
    expectTypeOf<Same<"curl">[0]>().toEqualTypeOf<Same<"curl">[1]>();
    expectTypeOf<Same<"units">[0]>().toEqualTypeOf<Same<"units">[1]>();
    expectTypeOf<Same<"deployments">[0]>().toEqualTypeOf<Same<"deployments">[1]>();
    expectTypeOf<Same<"selection">[0]>().toEqualTypeOf<Same<"selection">[1]>();
    expectTypeOf<Same<"warnings">[0]>().toEqualTypeOf<Same<"warnings">[1]>();
    expectTypeOf<Same<"notes">[0]>().toEqualTypeOf<Same<"notes">[1]>();
    expectTypeOf<Same<"scrapeTargets">[0]>().toEqualTypeOf<Same<"scrapeTargets">[1]>();
    expectTypeOf<Same<"compileKeys">[0]>().toEqualTypeOf<Same<"compileKeys">[1]>();
    expectTypeOf<Same<"models">[0][number]["servedNames"]>().toEqualTypeOf<Same<"models">[1][number]["servedNames"]>();
    expectTypeOf<Same<"models">[0][number]["modelRevision"]>().toEqualTypeOf<Exclude<Same<"models">[1][number]["modelRevision"], null> | undefined>();
    // The analyzer has no null: an unresolved revision is an absent one.
    expectTypeOf<Same<"modelRevision">[0]>().toEqualTypeOf<Exclude<Same<"modelRevision">[1], null> | undefined>();
  });

  it("is generated from the stack config's schema, and the generated file is fresh", () => {
    expect(fs.readFileSync(GENERATED_FILE, "utf8"), `${path.relative(process.cwd(), GENERATED_FILE)} is stale: run \`${GENERATE_COMMAND}\``).toBe(
      generatedFileText(),
    );
  });
});

/** Where a YAML value does not fit the package schema's property, at every depth. */
function yamlMismatches(value: unknown, spec: Spec, where: string): string[] {
  if (spec.$ref === ANY) return [];
  const type = deref(spec);
  if (type.enum) return type.enum.some((e) => e.value === value) ? [] : [`${where}: ${JSON.stringify(value)} is not one of ${type.enum.map((e) => e.value)}`];
  if (type.type === "array")
    return Array.isArray(value) ? value.flatMap((item, i) => yamlMismatches(item, type.items!, `${where}[${i}]`)) : [`${where}: not a list`];
  if (type.type === "object") {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return [`${where}: not an object`];
    return objectMismatches(value as Record<string, unknown>, type, where);
  }
  return typeof value === type.type ? [] : [`${where}: ${JSON.stringify(value)} is not a ${type.type}`];
}

function objectMismatches(value: Record<string, unknown>, type: Spec, where: string): string[] {
  const at = (key: string) => (where ? `${where}.${key}` : key);
  if (type.additionalProperties) return Object.entries(value).flatMap(([key, item]) => yamlMismatches(item, type.additionalProperties!, at(key)));
  const missing = (type.required ?? []).filter((key) => !(key in value)).map((key) => `${at(key)}: required`);
  return [
    ...missing,
    ...Object.entries(value).flatMap(([key, item]) =>
      type.properties?.[key] ? yamlMismatches(item, type.properties[key], at(key)) : [`${at(key)}: not in the schema`],
    ),
  ];
}

describe("the example YAML program", () => {
  const program = parse(fs.readFileSync(path.resolve(__dirname, "../examples/yaml/Pulumi.yaml"), "utf8"));
  const { type, properties } = program.resources.serving;

  it("sets only properties of the schema, at every depth, with the schema's types", () => {
    expect(type).toBe("rbln-serving:index:ModelServing");
    expect(properties.hosts[0].hostKey).toMatch(/^ssh-ed25519 /);
    expect(objectMismatches(properties, inputs, "")).toEqual([]);
  });

  it("finds a property the schema lacks and a value of the wrong type", () => {
    const wrong = { ...properties, hosts: [{ ...properties.hosts[0], hostkey: "x" }], rollout: { maxUnavailable: 1 }, platform: "nomad" };
    expect(objectMismatches(wrong, inputs, "")).toEqual([
      "hosts[0].hostkey: not in the schema",
      "rollout.maxUnavailable: 1 is not a string",
      'platform: "nomad" is not one of hosts,kubernetes',
    ]);
  });

  it("plans, through componentArgs as the package passes it", () => {
    // Secrets are interpolated config; any value stands in for them here.
    const args = { ...properties, sshPrivateKey: "key", pipPassword: "pw" } as ModelServingArgs;
    const { plan, settings } = planServing(componentArgs(args));
    expect(plan.selection).toMatchObject({ spec_decode: "suffix" });
    expect(settings.sshProxy).toMatchObject({ address: "bastion.example.com", user: "deploy" });
    expect(settings.hosts.map((h) => h.listenAddress)).toEqual(["10.20.0.11", "10.20.0.12"]);
    expect(settings.rollout.maxUnavailable).toBe(1);
  });
});

/** The schema's own names for a Python program's: every key of an object type by its PyName, a map's keys as written. */
function fromPython(value: unknown, spec: Spec, where: string, problems: string[]): unknown {
  if (spec.$ref === ANY || value === null || typeof value !== "object") return value;
  const type = deref(spec);
  if (Array.isArray(value)) return type.items ? value.map((item, i) => fromPython(item, type.items!, `${where}[${i}]`, problems)) : value;
  const entries = Object.entries(value as Record<string, unknown>);
  if (type.additionalProperties) return Object.fromEntries(entries.map(([k, v]) => [k, fromPython(v, type.additionalProperties!, `${where}.${k}`, problems)]));
  const byPython = new Map(Object.keys(type.properties ?? {}).map((key) => [pyName(key), key]));
  return Object.fromEntries(
    entries.map(([k, v]) => {
      const key = byPython.get(k);
      const at = where ? `${where}.${k}` : k;
      if (key === undefined) problems.push(`${at}: no argument of that Python name`);
      return [key ?? k, key ? fromPython(v, type.properties![key]!, at, problems) : v];
    }),
  );
}

describe("the example Python program", () => {
  const EXAMPLE = path.resolve(__dirname, "../examples/python");
  const pythonSdk = pulumiPythonSdk as unknown as ResearchFixture;
  const fact = (id: string) => pythonSdk.facts[id]!.value as Record<string, string>;

  it("names as Pulumi v3.248.0's generator does: PyName's own cases, the package, the class, the input types", () => {
    for (const [name, python] of Object.entries(fact("python.propertyName"))) expect(pyName(name), name).toBe(python);
    expect(pyPackage(schema.name)).toBe(fact("python.package")[schema.name]);
    expect(pyInputClass("rbln-serving:index:HostArgs")).toBe(fact("python.inputTypeName")["rbln-serving:index:HostArgs"]![0]);
    expect(Object.keys(schema.resources)).toEqual(["rbln-serving:index:ModelServing"]);
    expect(fact("python.resourceClass")["rbln-serving:index:ModelServing"]).toBe(`${pyPackage(schema.name)}.ModelServing`);
  });

  /**
   * Runs __main__.py under python3 with stand-ins for `pulumi` and the generated package: the
   * package's ModelServing takes exactly the keyword arguments the generator would give it (each
   * input's PyName) and has each output under its PyName, so a wrong name fails as it would with the
   * real SDK. Returns what the program passed and exported.
   */
  function runExample(source = fs.readFileSync(path.join(EXAMPLE, "__main__.py"), "utf8")) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "python-example-"));
    try {
      const pkg = path.join(dir, pyPackage(schema.name));
      fs.mkdirSync(pkg);
      fs.mkdirSync(path.join(dir, "pulumi"));
      const args = Object.keys(resource.inputProperties!).map(pyName);
      const outputs = Object.keys(resource.properties!).map(pyName);
      fs.writeFileSync(
        path.join(dir, "pulumi", "__init__.py"),
        [
          "import atexit, json",
          "RECORD = {'exports': {}, 'resources': []}",
          "class Config:",
          "    def require_secret(self, key): return '<secret:%s>' % key",
          "    def get_secret(self, key): return '<secret:%s>' % key",
          "    def require(self, key): return '<config:%s>' % key",
          "def export(name, value): RECORD['exports'][name] = value",
          "atexit.register(lambda: print(json.dumps(RECORD)))",
        ].join("\n"),
      );
      fs.writeFileSync(
        path.join(pkg, "__init__.py"),
        [
          "import pulumi",
          "class ModelServing:",
          `    def __init__(self, resource_name, opts=None, *, ${args.map((a) => `${a}=None`).join(", ")}):`,
          `        given = {k: v for k, v in dict(${args.map((a) => `${a}=${a}`).join(", ")}).items() if v is not None}`,
          "        pulumi.RECORD['resources'].append({'name': resource_name, 'args': given})",
          ...outputs.map((o) => `        self.${o} = '<output ${o}>'`),
        ].join("\n"),
      );
      fs.writeFileSync(path.join(dir, "__main__.py"), source);
      const run = spawnSync("python3", [path.join(dir, "__main__.py")], { cwd: dir, encoding: "utf8", env: { ...process.env, PYTHONPATH: dir } });
      return { status: run.status, stderr: run.stderr, record: run.status === 0 ? JSON.parse(run.stdout) : undefined };
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  it("runs with the generated names, passes only arguments of the schema with the schema's types, and plans", () => {
    const { status, stderr, record } = runExample();
    expect([status, stderr]).toEqual([0, ""]);
    expect(record.resources).toHaveLength(1);
    expect(Object.keys(record.exports)).toEqual(["endpoints", "curl", "units", "model_revision", "warnings", "notes"]);
    const problems: string[] = [];
    const properties = fromPython(record.resources[0].args, inputs, "", problems) as Record<string, unknown>;
    expect(problems).toEqual([]);
    expect(objectMismatches(properties, inputs, "")).toEqual([]);
    expect(properties).toMatchObject({ sshPrivateKey: "<secret:sshPrivateKey>", hosts: [{ hostKey: expect.stringMatching(/^ssh-ed25519 /) }, {}] });
    const { plan, settings, frontDoor } = planServing(componentArgs(properties as unknown as ModelServingArgs));
    expect(plan.selection).toMatchObject({ spec_decode: "suffix" });
    expect([settings.rollout.maxUnavailable, settings.minFreeDiskGbToRestart, settings.cacheRoot]).toEqual([1, 80, "/data/rbln-serving"]);
    expect(frontDoor?.routers.map((r) => r.host.name)).toEqual(["door"]);
  });

  it("would fail on a camelCase argument, a camelCase key of a nested setting, and an output that is no PyName", () => {
    const source = fs.readFileSync(path.join(EXAMPLE, "__main__.py"), "utf8");
    expect(runExample(source.replace("cache_root=", "cacheRoot=")).stderr).toMatch(/TypeError: .*unexpected keyword argument 'cacheRoot'/);
    expect(runExample(source.replace("serving.model_revision", "serving.modelRevision")).stderr).toMatch(/AttributeError: .*modelRevision/);
    const problems: string[] = [];
    fromPython({ hosts: [{ name: "a", hostKey: "k" }], rollout: { maxUnavailable: "1" } }, inputs, "", problems);
    expect(problems).toEqual(["hosts[0].hostKey: no argument of that Python name", "rollout.maxUnavailable: no argument of that Python name"]);
  });

  it("is a Python project that names the package, and pins the SDK it was read against", () => {
    const project = parse(fs.readFileSync(path.join(EXAMPLE, "Pulumi.yaml"), "utf8"));
    expect(project.runtime).toMatchObject({ name: "python", options: { toolchain: "pip", virtualenv: "venv" } });
    expect(project.packages).toEqual({ [schema.name]: "../.." });
    expect(fs.readFileSync(path.join(EXAMPLE, "requirements.txt"), "utf8")).toMatch(
      new RegExp(`^pulumi>=${pythonSdk.pinned.pulumi!.slice(1).replace(/\./g, "\\.")},<4\\.0\\.0$`, "m"),
    );
    expect(rootPackage.dependencies["@pulumi/pulumi"]).toBe(pythonSdk.pinned.pulumi!.slice(1));
  });
});

describe("componentArgs", () => {
  const base = { strategy: "aggregated-pipeline-parallel", target: "Throughput" } as const;

  it("puts the secrets apart and leaves out the unset ones", () => {
    expect(componentArgs({ ...base, sshPrivateKey: "k", hfToken: undefined }).secrets).toEqual({ sshPrivateKey: "k" });
    expect(componentArgs({ ...base, sshPrivateKey: "k" }).settings).toEqual(base);
  });

  it("reads a scalar union's string as the schema takes it: a count as a number, a percentage as itself", () => {
    expect(componentArgs({ ...base, rollout: { maxUnavailable: "2" } }).settings.rollout).toEqual({ maxUnavailable: 2 });
    expect(componentArgs({ ...base, rollout: { maxUnavailable: "25%" } }).settings.rollout).toEqual({ maxUnavailable: "25%" });
  });

  it("passes a key the schema lacks on, for the stack config's own error", () => {
    const args = { ...base, hosts: [{ name: "a", address: "10.0.0.1", hostkey: "x" }], sshPrivateKey: "k" } as unknown as ModelServingArgs;
    expect(() => planServing(componentArgs(args))).toThrow(ConfigError);
    expect(() => planServing(componentArgs(args))).toThrow(/hosts\[0\]\.hostkey/);
  });
});

describe("the generator", () => {
  const Resources = z.strictObject({ cpu: z.string().optional() }).meta({ id: "Resources" });
  const settings = (shape: z.core.$ZodLooseShape) => z.strictObject({ strategy: z.string(), ...shape });

  it("writes each zod construct as a type the analyzer reads", () => {
    const source = providerTypesSource(
      settings({
        host: z.preprocess((v) => (typeof v === "string" ? { name: v } : v), z.strictObject({ name: z.string() })).optional(),
        extra: z.record(z.string(), z.unknown()).optional(),
        listen: z.union([z.ipv4(), z.ipv6()]).optional(),
        unavailable: z.union([z.number(), z.string()]).default("25%"),
        mode: z.union([z.literal("fast"), z.literal("safe")]).optional(),
        preset: z.literal("recommended").optional(),
        labels: z.record(z.string(), z.string()).default({}),
        roles: z.record(z.string(), z.array(z.strictObject({ port: z.number() }))).optional(),
      }),
    );
    expect(source).toContain("  host?: HostArgs;\n");
    expect(source).toContain("  extra?: { [key: string]: any };\n");
    expect(source).toContain("  listen?: string;\n");
    expect(source).toMatch(
      /A number or string in the stack config, given as a string here \("1" for 1\)\.\n {3}\* Default: "25%"\.\n {3}\*\/\n {2}unavailable\?: string;/,
    );
    expect(source).toContain('export const Mode = { Fast: "fast", Safe: "safe" } as const;\nexport type Mode = (typeof Mode)[keyof typeof Mode];');
    expect(source).toContain("  mode?: Mode;\n");
    expect(source).toContain("  preset?: string;\n");
    expect(source).toContain("  labels?: { [key: string]: string };\n");
    expect(source).toContain("  roles?: { [key: string]: RoleArgs[] };\n");
    expect(source).toContain("export interface RoleArgs {\n  port: number;\n}");
    expect(source).toContain("  strategy: string;\n");
    for (const secret of SECRET_KEYS) expect(source).toContain(`  ${secret}?: pulumi.Input<string>;\n`);
  });

  it("names a type after its path, unless the schema gives it an id, which one type serves everywhere", () => {
    const Bare = z.strictObject({ cpu: z.string().optional() });
    const source = providerTypesSource(
      settings({
        kubernetes: z.strictObject({ sidecar: Bare.optional(), main: Bare.optional(), picker: Resources.optional() }).optional(),
        router: z.strictObject({ picker: Resources.optional() }).optional(),
      }),
    );
    expect(source.match(/^export interface \w+/gm)).toEqual([
      "export interface ModelServingArgs",
      "export interface KubernetesArgs",
      "export interface RouterArgs",
      "export interface KubernetesSidecarArgs",
      "export interface KubernetesMainArgs",
      "export interface ResourcesArgs",
    ]);
    expect(source).toContain("export interface RouterArgs {\n  picker?: ResourcesArgs;\n}");
  });

  it("refuses two types of one name, and a construct it has no rule for, naming the paths", () => {
    expect(() => providerTypesSource(settings({ a: z.strictObject({ b: z.strictObject({}) }), aB: z.strictObject({}) }))).toThrow(
      "aB and a.b would both be ABArgs",
    );
    expect(() => providerTypesSource(settings({ when: z.strictObject({ at: z.date() }) }))).toThrow("when.at: a zod date has no type in the component package");
    expect(() => providerTypesSource(settings({ host: z.union([z.string(), z.strictObject({ name: z.string() })]) }))).toThrow(
      "host: a union of other than scalars has no type in the component package",
    );
    expect(() => providerTypesSource(settings({ mode: z.enum(["a-b", "aB"]) }))).toThrow("mode: two values of Mode give the same member name");
    expect(() => providerTypesSource(settings({ apiKey: z.string() }))).toThrow("apiKey is a secret and a plain setting");
  });

  it("names enum members after their values, digits first too", () => {
    expect(providerTypesSource(settings({ share: z.enum(["25%", "no-limit"]) }))).toContain(
      'export const Share = { Value25: "25%", NoLimit: "no-limit" } as const;',
    );
  });

  it("takes doc comments from the schema's descriptions, what its checks allow and its defaults, and secrets' from SECRET_DESCRIPTIONS and SECRET_ENV", () => {
    const source = providerTypesSource(
      settings({
        model: z.string().describe("The model id.").default("m"),
        gpu: z.number().meta({ description: "Ignored */ by the comment" }).optional(),
        port: z.number().int().min(1).max(65535).default(22).describe("The SSH port."),
        name: z
          .string()
          .regex(/^[a-z]+$/, "lower-case letters")
          .max(63)
          .optional()
          .describe("A name."),
        mode: z
          .union([z.literal("fast"), z.literal("safe")])
          .optional()
          .describe("How."),
        url: z
          .string()
          .superRefine(() => {})
          .optional()
          .describe("A URL, refused with a message of its value."),
      }),
    );
    expect(source).toContain('  /**\n   * The model id.\n   * Default: "m".\n   */\n  model?: string;\n');
    expect(source).toContain("  /** Ignored *\\/ by the comment */\n  gpu?: number;\n");
    expect(source).toContain("   * The SSH port.\n   * Allowed: an integer from 1 to 65535.\n   * Default: 22.\n");
    expect(source).toContain("   * A name.\n   * Allowed: lower-case letters; at most 63 characters.\n   */\n");
    expect(source).toContain("   * How.\n   * Allowed: one of fast, safe.\n   */\n");
    expect(source).toContain("  /** A URL, refused with a message of its value. */\n");
    expect(source).toContain(
      "   * A Hugging Face token, for the weights download and vLLM: needed for a gated or private model.\n   * A secret: pulumi config set --secret hfToken. vLLM gets it as HF_TOKEN.\n   */\n  hfToken?: pulumi.Input<string>;\n",
    );
  });
});
