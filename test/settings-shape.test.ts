import { describe, expect, it } from "vitest";
import { z } from "zod";
import { fromPackageValue, settingsShape } from "../core/config/settingsShape";

describe("settingsShape", () => {
  it("reads the input side: through preprocess to its schema, through a transform after a string to the string", () => {
    const preprocessed = z.preprocess((value) => (typeof value === "string" ? JSON.parse(value) : value), z.strictObject({ port: z.number() }));
    const shape = settingsShape(
      z.strictObject({
        proxy: preprocessed.optional(),
        root: z
          .string()
          .transform((p) => p.replace(/\/$/, ""))
          .default("/opt"),
      }),
    );
    expect(shape.fields.proxy).toMatchObject({ required: false, shape: { kind: "object", fields: { port: { required: true, shape: { kind: "number" } } } } });
    expect(shape.fields.root).toMatchObject({ required: false, default: "/opt", shape: { kind: "string" } });
    expect(shape.fields.root!.schema._zod.def.type).toBe("string");
  });

  it("sorts unions: literals of one type an enum, scalars of one type that type, of several a scalar union", () => {
    const { fields } = settingsShape(
      z.strictObject({
        mode: z.union([z.literal("a"), z.enum(["b", "c"])]),
        address: z.union([z.ipv4(), z.ipv6()]),
        count: z.union([z.number().int(), z.string().regex(/%$/)]),
        flag: z.union([z.literal(true), z.literal(false)]),
      }),
    );
    expect(fields.mode!.shape).toMatchObject({ kind: "enum", type: "string", values: ["a", "b", "c"] });
    expect(fields.address!.shape).toEqual({ kind: "string" });
    expect(fields.count!.shape).toMatchObject({ kind: "scalarUnion", types: ["number", "string"] });
    expect(fields.flag!.shape).toEqual({ kind: "boolean" });
  });

  it("refuses a union of an object and a string, which the package could only give as any, naming its path", () => {
    const host = z.union([z.strictObject({ name: z.string() }), z.string()]);
    expect(() => settingsShape(z.strictObject({ router: z.strictObject({ host }) }))).toThrow(
      "router.host: a union of other than scalars has no type in the component package; give it one object type",
    );
  });
});

describe("fromPackageValue", () => {
  const shape = settingsShape(
    z.strictObject({
      waves: z.array(z.union([z.number().int().min(1), z.string().regex(/^[0-9]+%$/)])),
      byRole: z.record(z.string(), z.strictObject({ enabled: z.union([z.boolean(), z.literal("auto")]) })),
      name: z.string(),
    }),
  );

  it("turns each scalar union's string into the reading its schema takes, at any depth", () => {
    expect(fromPackageValue(shape, { waves: ["2", "50%"], byRole: { main: { enabled: "true" }, decode: { enabled: "auto" } }, name: "7" })).toEqual({
      waves: [2, "50%"],
      byRole: { main: { enabled: true }, decode: { enabled: "auto" } },
      name: "7",
    });
  });

  it("leaves what no reading fits, and keys or values of other types, for the schema to refuse", () => {
    expect(fromPackageValue(shape, { waves: ["0", "x", 3], byRole: "none", extra: { waves: ["1"] } })).toEqual({
      waves: ["0", "x", 3],
      byRole: "none",
      extra: { waves: ["1"] },
    });
  });
});
