// A setting's documentation as the faces show it to people who never read the TypeScript (the
// component package's descriptions, Pulumi.yaml): the description the schema gives it, then what
// its own checks allow, in the words of their refusals, then its default.
import type { z } from "zod";
import { SECRET_DESCRIPTIONS, SECRET_ENV, type SecretKey } from "./secrets";
import type { SettingField } from "./settingsShape";

type Def = z.core.$ZodTypes["_zod"]["def"];
type Check = z.core.$ZodCheck<never>;

/** A refusal's message when it is fixed text; a message built from the value says nothing ahead of it. */
function fixedMessage(error: unknown): string | undefined {
  if (typeof error !== "function" || error.length > 0) return undefined;
  const message = (error as () => unknown)();
  return typeof message === "string" ? message : undefined;
}

function lengthRule(check: Check, unit: string): string | undefined {
  const def = check._zod.def as { check: string; minimum?: number; maximum?: number };
  if (def.check === "min_length") return def.minimum === 1 ? "not empty" : `at least ${def.minimum} ${unit}`;
  if (def.check === "max_length") return `at most ${def.maximum} ${unit}`;
  return undefined;
}

/** Whether a number schema takes integers only. */
export function isInteger(schema: z.core.$ZodType): boolean {
  return ((schema._zod.def as Def).checks ?? []).some((check) => {
    const def = check._zod.def as { check: string; format?: string };
    return def.check === "number_format" && /int/.test(def.format ?? "");
  });
}

/** An integer's or a number's range: `an integer from 1 to 65535`, `a number, more than 0 and at most 10000`; nothing for any number. */
function numberRule(schema: z.core.$ZodType, checks: readonly Check[]): string[] {
  const integer = isInteger(schema);
  const defs = checks.map((check) => check._zod.def as { check: string; value?: number; inclusive?: boolean });
  const low = defs.find((def) => def.check === "greater_than");
  const high = defs.find((def) => def.check === "less_than");
  const noun = integer ? "an integer" : "a number";
  if (low?.inclusive && high?.inclusive) return [`${noun} from ${low.value} to ${high.value}`];
  const bounds = [
    low && `${low.inclusive ? "at least" : "more than"} ${low.value}`,
    high && `${high.inclusive ? "at most" : "less than"} ${high.value}`,
  ].filter((bound) => bound !== undefined);
  if (bounds.length > 0) return [`${noun}, ${bounds.join(" and ")}`];
  return integer ? [noun] : [];
}

function literalValues(schema: z.core.$ZodType): readonly unknown[] | undefined {
  const def = schema._zod.def as Def;
  if (def.type === "enum") return Object.values(def.entries);
  if (def.type === "literal") return def.values;
  return undefined;
}

const oneOf = (values: readonly unknown[]) => (values.length === 1 ? `only ${values[0]}` : `one of ${values.join(", ")}`);

/** What a schema's own checks allow, each as its refusal says it; empty where the checks build their message from the value. */
export function allowedValues(schema: z.core.$ZodType): string[] {
  const def = schema._zod.def as Def;
  const checks = (def.checks ?? []) as Check[];
  const own = fixedMessage((def as { error?: unknown }).error);
  switch (def.type) {
    case "string":
      return [
        ...(own ? [own] : []),
        ...checks.flatMap((check) => lengthRule(check, "characters") ?? fixedMessage((check._zod.def as { error?: unknown }).error) ?? []),
      ];
    case "number":
      return numberRule(schema, checks);
    case "enum":
    case "literal":
      return [oneOf(literalValues(schema)!)];
    case "union": {
      if (own) return [own];
      const literals = def.options.map((option) => literalValues(option));
      if (literals.every((values) => values !== undefined)) return [oneOf(literals.flat())];
      // An option its checks say nothing of (any string) would leave the rule short of what the union takes.
      const options = def.options.map((option) => allowedValues(option).join(", "));
      return options.includes("") ? [] : [options.join("; or ")];
    }
    case "array": {
      const items = allowedValues(def.element);
      return [...checks.flatMap((check) => lengthRule(check, "entries") ?? []), ...(items.length > 0 ? [`each ${items.join(", ")}`] : [])];
    }
    case "record": {
      const [keys, values] = [allowedValues(def.keyType), allowedValues(def.valueType)];
      return [...(keys.length > 0 ? [`keys: ${keys.join(", ")}`] : []), ...(values.length > 0 ? [`values: ${values.join(", ")}`] : [])];
    }
    default:
      return [];
  }
}

/** Whether a default says something: `{}` and `[]` (nothing set) and an object's (its keys' own) do not. */
function shownDefault(field: SettingField): string | undefined {
  if (field.default === undefined || field.shape.kind === "object") return undefined;
  const shown = JSON.stringify(field.default);
  return shown === "{}" || shown === "[]" ? undefined : shown;
}

/**
 * A setting's documentation, line by line: its description, how the package takes it where that
 * differs from the stack config, what it allows (its checks' refusals), and its default, unless
 * `withDefault` is false (Pulumi.yaml has a field of its own for it).
 */
export function settingDoc(field: SettingField, { withDefault = true } = {}): string[] {
  const { shape } = field;
  const asString =
    shape.kind === "scalarUnion"
      ? `A ${shape.types.join(" or ")} in the stack config, given as a string here${shape.types.includes("number") ? ` ("1" for 1)` : ""}.`
      : undefined;
  const any = shape.kind === "any" ? "Any value; the component checks it as the stack config does." : undefined;
  const allowed = shape.kind === "object" ? [] : allowedValues(field.schema);
  const shown = withDefault ? shownDefault(field) : undefined;
  return [
    field.description,
    asString,
    any,
    allowed.length > 0 ? `Allowed: ${allowed.join("; ")}.` : undefined,
    shown === undefined ? undefined : `Default: ${shown}.`,
  ].filter((line): line is string => line !== undefined && line !== "");
}

/** A secret's documentation: what it is, how it is set, and the variable vLLM gets it as. */
export function secretDoc(key: SecretKey): string[] {
  const env = SECRET_ENV[key];
  return [SECRET_DESCRIPTIONS[key], `A secret: pulumi config set --secret ${key}.${env ? ` vLLM gets it as ${env}.` : ""}`];
}
