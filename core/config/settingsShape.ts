import { z } from "zod";

export type ScalarType = "string" | "number" | "boolean";

/**
 * What a zod schema takes as input, in the terms Pulumi's component schema has: scalars, enums,
 * lists, maps, objects and `any`. The component package's argument types are generated from it
 * (scripts/generate-provider-types.ts), so the stack config's schema stays their one declaration.
 */
export type SettingShape =
  | { kind: ScalarType | "any" }
  /** Literals of one type: `z.enum`, or a union of literals. */
  | { kind: "enum"; type: "string" | "number"; values: readonly (string | number)[]; schema: z.core.$ZodType }
  /** Scalars of several types (`1` or `"25%"`): a string in the package, which `fromPackageValue` turns back. */
  | { kind: "scalarUnion"; types: readonly ScalarType[]; schema: z.core.$ZodType }
  | { kind: "array"; items: SettingShape }
  /** A record: keys are names (labels, roles, variables), not fixed fields. */
  | { kind: "map"; values: SettingShape }
  | { kind: "object"; fields: Record<string, SettingField>; schema: z.core.$ZodType; id?: string; description?: string };

export interface SettingField {
  shape: SettingShape;
  /** The schema inside the field's wrappers: its checks say what the field allows. */
  schema: z.core.$ZodType;
  /** Neither optional nor defaulted. */
  required: boolean;
  /** The first `.describe()`/`.meta({ description })` from the field's outermost wrapper inwards. */
  description?: string;
  default?: unknown;
}

/** The field's schema without its wrappers (optional, default, pipe), and what the wrappers said. */
function unwrap(schema: z.core.$ZodType): Omit<SettingField, "shape" | "schema"> & { inner: z.core.$ZodTypes } {
  const field: Omit<SettingField, "shape" | "schema"> = { required: true };
  let node = schema as z.core.$ZodTypes;
  for (;;) {
    field.description ??= z.globalRegistry.get(node)?.description;
    const def = node._zod.def;
    if (def.type === "optional") [field.required, node] = [false, def.innerType as z.core.$ZodTypes];
    else if (def.type === "default") [field.required, field.default, node] = [false, def.defaultValue, def.innerType as z.core.$ZodTypes];
    // A preprocess (`structured`) is a transform before the schema; a transform after one (absolutePath) changes no input.
    else if (def.type === "pipe") node = (def.in._zod.def.type === "transform" ? def.out : def.in) as z.core.$ZodTypes;
    else return { ...field, inner: node };
  }
}

function literalValues(schema: z.core.$ZodType): readonly unknown[] | undefined {
  const def = (schema as z.core.$ZodTypes)._zod.def;
  if (def.type === "enum") return Object.values(def.entries);
  if (def.type === "literal") return def.values;
  return undefined;
}

function scalarTypes(shape: SettingShape): readonly ScalarType[] | undefined {
  if (shape.kind === "string" || shape.kind === "number" || shape.kind === "boolean") return [shape.kind];
  if (shape.kind === "enum") return [shape.type];
  if (shape.kind === "scalarUnion") return shape.types;
  return undefined;
}

/** Literals of one type become an enum (one literal, its scalar); literals of several types, a scalar union. */
function literalShape(values: readonly unknown[], schema: z.core.$ZodType): SettingShape {
  const types = [...new Set(values.map((value) => typeof value))];
  const type = types[0];
  if (types.length === 1 && (type === "string" || type === "number" || type === "boolean")) {
    return values.length > 1 && type !== "boolean" ? { kind: "enum", type, values: values as (string | number)[], schema } : { kind: type };
  }
  return { kind: "scalarUnion", types: types as ScalarType[], schema };
}

/**
 * A union: literals as literals; scalars of one type as that type (ipv4 | ipv6 is a string); of
 * several, a scalar union. Pulumi's component analyzer has no other union (it would be `any`, and
 * its keys untyped in every language): an object or a string is refused, for a form of one object
 * type (a preprocess from the string, as `router.host`).
 */
function unionShape(schema: z.core.$ZodType, options: readonly z.core.$ZodType[], at: string): SettingShape {
  const literals = options.map((option) => literalValues(unwrap(option).inner));
  if (literals.every((values) => values !== undefined)) return literalShape([...new Set(literals.flat())], schema);
  const types = options.map((option) => scalarTypes(shapeOf(option, at)));
  if (types.some((t) => t === undefined))
    throw new Error(`${at}: a union of other than scalars has no type in the component package; give it one object type (a preprocess from the other forms)`);
  const distinct = [...new Set(types.flat() as ScalarType[])];
  return distinct.length === 1 ? { kind: distinct[0]! } : { kind: "scalarUnion", types: distinct, schema };
}

function fieldOf(schema: z.core.$ZodType, at: string): SettingField {
  const { inner, ...wrappers } = unwrap(schema);
  return { ...wrappers, schema: inner, shape: innerShape(inner, at) };
}

const shapeOf = (schema: z.core.$ZodType, at: string) => fieldOf(schema, at).shape;

function innerShape(inner: z.core.$ZodTypes, at: string): SettingShape {
  const def = inner._zod.def;
  switch (def.type) {
    case "string":
    case "number":
    case "boolean":
      return { kind: def.type };
    case "unknown":
    case "any":
      return { kind: "any" };
    case "enum":
    case "literal":
      return literalShape(literalValues(inner)!, inner);
    case "union":
      return unionShape(inner, def.options, at);
    case "array":
      return { kind: "array", items: shapeOf(def.element, `${at}[]`) };
    case "record":
      return { kind: "map", values: shapeOf(def.valueType, `${at}.*`) };
    case "object": {
      const meta = z.globalRegistry.get(inner);
      const fields = Object.fromEntries(Object.entries(def.shape).map(([key, field]) => [key, fieldOf(field, at ? `${at}.${key}` : key)]));
      return { kind: "object", fields, schema: inner, ...(meta?.id ? { id: meta.id } : {}), ...(meta?.description ? { description: meta.description } : {}) };
    }
    default:
      throw new Error(`${at || "(root)"}: a zod ${def.type} has no type in the component package; give it a rule in core/config/settingsShape.ts`);
  }
}

/** The input shape of an object schema such as StackSettings. */
export function settingsShape(schema: z.core.$ZodType): Extract<SettingShape, { kind: "object" }> {
  const shape = shapeOf(schema, "");
  if (shape.kind !== "object") throw new Error(`settings must be an object schema, not ${shape.kind}`);
  return shape;
}

const DECIMAL = /^-?[0-9]+(\.[0-9]+)?$/;

/** The first reading of `text` the union takes: the string itself, then the number or boolean it spells. */
function scalarFromString(schema: z.core.$ZodType, text: string): unknown {
  const readings = [text, ...(DECIMAL.test(text) ? [Number(text)] : []), ...(text === "true" || text === "false" ? [text === "true"] : [])];
  // None taken: the string goes on, and the schema's own error names it.
  return readings.find((reading) => z.safeParse(schema, reading).success) ?? text;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * A value as the component package passes it, in the schema's terms again: a scalar union arrives
 * as a string (`"1"`) and becomes what the union takes (`1`). Anything else is passed on as it is.
 */
export function fromPackageValue(shape: SettingShape, value: unknown): unknown {
  if (shape.kind === "scalarUnion" && typeof value === "string") return scalarFromString(shape.schema, value);
  if (shape.kind === "array" && Array.isArray(value)) return value.map((item) => fromPackageValue(shape.items, item));
  if (shape.kind === "map" && isRecord(value))
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, fromPackageValue(shape.values, item)]));
  if (shape.kind === "object" && isRecord(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, shape.fields[key] ? fromPackageValue(shape.fields[key].shape, item) : item]));
  }
  return value;
}
