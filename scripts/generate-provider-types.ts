// Writes provider/settingsArgs.generated.ts, the component package's argument types, from the stack
// config's zod schema: Pulumi's analyzer reads only plain TypeScript types, and the schema stays their
// one declaration. `npm run generate`; test/provider-schema.test.ts fails while the file is stale.
//
// Per zod construct: scalars as themselves; z.enum and unions of literals as `as const` enum objects
// (the analyzer's enum form; one literal is its scalar); unions of scalars of several types as a
// string that componentArgs converts (other unions are refused: settingsShape.ts); z.unknown() as
// `any`; arrays as lists; records as maps; objects as interfaces named after their path (`kubernetes.gateway`:
// KubernetesGatewayArgs), or after their `.meta({ id })`. Doc comments are each setting's
// documentation (core/config/settingDocs.ts): its description, what its checks allow, its default.
import * as fs from "node:fs";
import * as path from "node:path";
import type { z } from "zod";
import { StackSettings } from "../core/config/stackConfig";
import { SECRET_KEYS } from "../core/config/secrets";
import { secretDoc, settingDoc } from "../core/config/settingDocs";
import { settingsShape, type SettingShape } from "../core/config/settingsShape";
import { biomeFormatted } from "./biomeFormat";

export const GENERATED_FILE = path.resolve(__dirname, "../provider/settingsArgs.generated.ts");
export const GENERATE_COMMAND = "npm run generate";
/** Why a generated type says `any`: the one form of a free-form value (z.unknown()) the analyzer keeps. */
const ANY_REASON = "a free-form value; Pulumi's analyzer makes only any the schema's Any";
/** The component's args interface: the stack config's top level and the secrets. */
const ROOT = "ModelServingArgs";

type ObjectShape = Extract<SettingShape, { kind: "object" }>;
type EnumShape = Extract<SettingShape, { kind: "enum" }>;
interface Named {
  name: string;
  /** The config path where the type is first reached. */
  at: string;
  shape: ObjectShape | EnumShape;
}

const pascal = (words: string) =>
  words
    .split(/[^A-Za-z0-9]+/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join("");
/** An enum member's name: `hosts` is Hosts, `25%` Value25. */
const memberName = (value: string | number) => {
  const name = pascal(String(value));
  return /^[A-Za-z_]/.test(name) ? name : `Value${name}`;
};
/** A list's or a map's items: `hosts` holds a Host, `tolerations` a Toleration. */
const singular = (key: string) => (key.endsWith("s") && !key.endsWith("ss") ? key.slice(0, -1) : key);

function docComment(lines: readonly (string | undefined)[], indent: string): string {
  const text = lines.filter((line): line is string => !!line).map((line) => line.replace(/\*\//g, "*\\/"));
  if (text.length === 0) return "";
  return text.length === 1 ? `${indent}/** ${text[0]} */\n` : `${indent}/**\n${text.map((line) => `${indent} * ${line}`).join("\n")}\n${indent} */\n`;
}

/**
 * Every object and enum type of the settings, in the order they are first reached (breadth first),
 * named after their path, or after their `.meta({ id })`, which alone makes one type of several places.
 */
function namedTypes(root: ObjectShape): { types: Named[]; nameAt: Map<string, string> } {
  const rootType = { name: ROOT, at: "", shape: root };
  const byName = new Map<string, Named>([[rootType.name, rootType]]);
  const nameAt = new Map<string, string>();
  const objects: (Named & { shape: ObjectShape })[] = [rootType];
  for (let i = 0; i < objects.length; i++) {
    const parent = objects[i]!;
    const stem = i === 0 ? "" : parent.name.replace(/Args$/, "");
    for (const [key, field] of Object.entries(parent.shape.fields)) {
      let [shape, at, item] = [field.shape, parent.at ? `${parent.at}.${key}` : key, false];
      for (; shape.kind === "array" || shape.kind === "map"; item = true)
        [shape, at] = shape.kind === "array" ? [shape.items, `${at}[]`] : [shape.values, `${at}.*`];
      if (shape.kind !== "object" && shape.kind !== "enum") continue;
      const base = `${stem}${pascal(item ? singular(key) : key)}`;
      const id = shape.kind === "object" ? shape.id : undefined;
      const type = { name: shape.kind === "object" ? `${id ?? base}Args` : base, at, shape };
      const taken = byName.get(type.name);
      nameAt.set(at, type.name);
      if (taken && id !== undefined && taken.shape.schema === shape.schema) continue;
      if (taken) throw new Error(`${taken.at || "the root"} and ${at} would both be ${type.name}: give them different .meta({ id }) in the schema`);
      byName.set(type.name, type);
      if (type.shape.kind === "object") objects.push(type as Named & { shape: ObjectShape });
    }
  }
  return { types: [...byName.values()], nameAt };
}

function render(root: ObjectShape): string {
  const { types, nameAt } = namedTypes(root);
  const typeOf = (shape: SettingShape, at: string): string => {
    switch (shape.kind) {
      case "object":
      case "enum":
        return nameAt.get(at)!;
      case "array":
        return `${typeOf(shape.items, `${at}[]`)}[]`;
      case "map":
        return `{ [key: string]: ${typeOf(shape.values, `${at}.*`)} }`;
      case "scalarUnion":
        return "string";
      default:
        return shape.kind;
    }
  };
  const blocks = types.map(({ name, at, shape }) => {
    const fieldPath = (key: string) => (at ? `${at}.${key}` : key);
    if (shape.kind === "enum") {
      const members = shape.values.map((value) => `${memberName(value)}: ${JSON.stringify(value)}`);
      if (new Set(shape.values.map(memberName)).size !== members.length) throw new Error(`${at}: two values of ${name} give the same member name`);
      return `${docComment([`The values of the stack config's \`${at}\`.`], "")}export const ${name} = { ${members.join(", ")} } as const;\nexport type ${name} = (typeof ${name})[keyof typeof ${name}];\n`;
    }
    const fields = Object.entries(shape.fields).map(([key, field]) => {
      const type = typeOf(field.shape, fieldPath(key));
      // Pulumi's analyzer gives only `any` as Any: a free-form value needs it, and says why, line by line.
      const anyNote = /\bany\b/.test(type) ? `  // biome-ignore lint/suspicious/noExplicitAny: ${ANY_REASON}\n` : "";
      return `${docComment(settingDoc(field), "  ")}${anyNote}  ${key}${field.required ? "" : "?"}: ${type};\n`;
    });
    const secrets =
      name === ROOT
        ? SECRET_KEYS.map((key) => {
            if (key in shape.fields) throw new Error(`${key} is a secret and a plain setting`);
            return `${docComment(secretDoc(key), "  ")}  ${key}?: pulumi.Input<string>;\n`;
          })
        : [];
    const doc =
      shape.description ?? (at ? `The stack config's \`${at}\`.` : "The keys of the rbln-serving stack config, as plain values, and its secrets as inputs.");
    return `${docComment([doc], "")}export interface ${name} {\n${[...fields, ...secrets].join("")}}\n`;
  });
  return [
    "// Generated by `npm run generate` (scripts/generate-provider-types.ts) from StackSettings",
    "// (core/config/stackConfig.ts) and SECRET_KEYS (core/config/secrets.ts). Do not edit: change the",
    "// schema and generate again.",
    'import type * as pulumi from "@pulumi/pulumi";',
    "",
    blocks.join("\n"),
  ].join("\n");
}

/** The generated file's text for a settings schema: StackSettings unless a test gives another. */
export function providerTypesSource(schema: z.core.$ZodType = StackSettings): string {
  return render(settingsShape(schema));
}

/** The generated file as written: the source in the repository's format. */
export function generatedFileText(source: string = providerTypesSource()): string {
  return biomeFormatted(GENERATED_FILE, source);
}

if (require.main === module) {
  fs.writeFileSync(GENERATED_FILE, generatedFileText());
  console.log(`wrote ${path.relative(process.cwd(), GENERATED_FILE)}`);
}
