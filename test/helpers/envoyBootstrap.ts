/**
 * Checks an Envoy bootstrap (YAML) against the pinned Envoy release's API definitions, as Envoy loads it.
 *
 * The definitions are a protobufjs JSON descriptor built from the release's `api/` tree and its
 * imports: test/fixtures/envoy-v1.37.11 (v1.37.11 has no readable api tree of its own, so the
 * v1.37.0 tree with more roots: its README.md names every source and commit). The checks, in the
 * order Envoy makes them:
 *
 * 1. YAML to a JSON value the way Envoy's `parseYamlNode` does (yaml-cpp scalars: quoted → string,
 *    plain `true/yes/on/y…` → bool, integers → number (outside int32 → decimal string), floats →
 *    number, else string; keys tagged `!ignore` dropped).
 * 2. The value to `envoy.config.bootstrap.v3.Bootstrap` by protobufjs' strict ProtoJSON reader (the
 *    same rules as protobuf's `JsonStringToMessage`, which Envoy calls without `ignore_unknown_fields`
 *    for the bootstrap): unknown fields refused at every depth, proto or lowerCamelCase names, enum
 *    names, Durations as `"3600s"`, a oneof set once, `google.protobuf.Any` resolved by `@type` and
 *    read just as strictly.
 * 3. protoc-gen-validate rules of every message, Any payloads included (Envoy validates each
 *    typed_config when it builds the extension).
 * 4. Which typed_config type may stand in which extension slot, and a few load-time checks Envoy
 *    makes outside PGV (terminal router last, referenced clusters exist, ORIGINAL_DST rules,
 *    ext_proc's FULL_DUPLEX_STREAMED trailer rule).
 *
 * Stricter than Envoy, on purpose (what we render must be canonical): duplicate YAML keys (yaml-cpp
 * keeps the last), enum names in another case (Envoy parses enums case-insensitively), deprecated
 * fields or enum values set explicitly (Envoy warns), an `@type` host other than
 * `type.googleapis.com` (Envoy needs only a non-empty host), a known extension name on a typed_config
 * of another extension (Envoy picks the factory by type), and any `@type` outside the few payloads
 * in the fixture (Envoy knows every extension it was built with).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import protobuf from "protobufjs";
import protojson from "protobufjs/ext/protojson.js";
import { isAlias, isMap, isScalar, isSeq, parseDocument, parse as parseYaml, Scalar, stringify as stringifyYaml, type Node as YamlNode } from "yaml";
import sources from "../fixtures/envoy-v1.37.11/sources.json";

/** The definitions of the pinned release: v1.37.11's fixture, the v1.37.0 api tree with the roots the HA and multi-model front door need (its README). */
export const ENVOY_FIXTURE_DIR = path.resolve(__dirname, "../fixtures/envoy-v1.37.11");

let cachedRoot: protobuf.Root | undefined;

/** The descriptor fixture as a resolved protobufjs Root. */
export function envoyRoot(): protobuf.Root {
  if (!cachedRoot) {
    const json = JSON.parse(readFileSync(path.join(ENVOY_FIXTURE_DIR, "descriptor.json"), "utf8"));
    cachedRoot = protobuf.Root.fromJSON(json);
    cachedRoot.resolveAll();
  }
  return cachedRoot;
}

// --- extension slots ------------------------------------------------------------------------------

/**
 * The typed_config types this validator knows, with the extension name and category Envoy registers
 * them under (source/extensions/extensions_metadata.yaml; the protocol options factory's name() in
 * source/extensions/upstreams/http/config.h).
 */
export const EXTENSIONS: Record<string, { name: string; category: string }> = {
  "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager": {
    name: "envoy.filters.network.http_connection_manager",
    category: "envoy.filters.network",
  },
  "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor": { name: "envoy.filters.http.ext_proc", category: "envoy.filters.http" },
  "envoy.extensions.filters.http.router.v3.Router": { name: "envoy.filters.http.router", category: "envoy.filters.http" },
  "envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute": { name: "envoy.filters.http.ext_proc", category: "per-route" },
  "envoy.extensions.access_loggers.stream.v3.StdoutAccessLog": { name: "envoy.access_loggers.stdout", category: "envoy.access_loggers" },
  "envoy.extensions.access_loggers.stream.v3.StderrAccessLog": { name: "envoy.access_loggers.stderr", category: "envoy.access_loggers" },
  "envoy.extensions.access_loggers.file.v3.FileAccessLog": { name: "envoy.access_loggers.file", category: "envoy.access_loggers" },
  "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
    name: "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
    category: "envoy.upstream_options",
  },
  // The v1.37.11 fixture's extensions (TLS transport sockets, the HTTP filters it added), by type.
  ...Object.fromEntries(Object.entries(sources.extensions.byType).map(([type, { name, category }]) => [type, { name, category }])),
};

/** Extension name → its typed_config type, for the names above. */
const TYPE_OF_NAME = new Map<string, string[]>();
for (const [type, { name, category }] of Object.entries(EXTENSIONS)) {
  if (category === "per-route") continue;
  TYPE_OF_NAME.set(name, [...(TYPE_OF_NAME.get(name) ?? []), type]);
}

/** Where an Any may stand, by `<message>.<field>`, and which category its payload must have. */
const ANY_SLOTS: Record<string, { category: string | ((path: string) => string); nameField?: string; keyIsName?: boolean }> = {
  // A transport socket under a listener's filter chain is downstream; under a cluster, upstream.
  "envoy.config.core.v3.TransportSocket.typed_config": {
    category: (at) => (/\.filter_chains\[\d+\]\.transport_socket\./.test(at) ? "envoy.transport_sockets.downstream" : "envoy.transport_sockets.upstream"),
    nameField: "name",
  },
  "envoy.config.listener.v3.Filter.typed_config": { category: "envoy.filters.network", nameField: "name" },
  "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter.typed_config": {
    category: "envoy.filters.http",
    nameField: "name",
  },
  "envoy.config.accesslog.v3.AccessLog.typed_config": { category: "envoy.access_loggers", nameField: "name" },
  "envoy.config.cluster.v3.Cluster.typed_extension_protocol_options": { category: "envoy.upstream_options", keyIsName: true },
  "envoy.config.route.v3.VirtualHost.typed_per_filter_config": { category: "per-route" },
  "envoy.config.route.v3.Route.typed_per_filter_config": { category: "per-route" },
  "envoy.config.route.v3.WeightedCluster.ClusterWeight.typed_per_filter_config": { category: "per-route" },
};

// --- YAML, as Envoy's parseYamlNode reads it --------------------------------------------------------

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const YAML_BOOL = new Map<string, boolean>(Object.entries({ y: true, n: false, yes: true, no: false, true: true, false: false, on: true, off: false }));
const YAML_NULL = new Set(["", "~", "null", "Null", "NULL"]);

/** yaml-cpp's IsFlexibleCase: all lower, all upper, or one capital then lower. */
function flexibleCase(s: string): boolean {
  return s === s.toLowerCase() || s === s.toUpperCase() || (s.charAt(0) === s.charAt(0).toUpperCase() && s.slice(1) === s.slice(1).toLowerCase());
}

function plainScalar(source: string): Json {
  if (YAML_NULL.has(source)) return null;
  const lower = source.toLowerCase();
  const bool = YAML_BOOL.get(lower);
  if (flexibleCase(source) && bool !== undefined) return bool;
  // yaml-cpp reads integers with the stream's base unset: 0x.. hex, 0.. octal, else decimal.
  const int = /^([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$/.exec(source);
  if (int) {
    const [, sign, digits = ""] = int;
    const magnitude = /^0[xX]/.test(digits) ? BigInt(digits) : digits.length > 1 && digits[0] === "0" ? BigInt(`0o${digits.slice(1)}`) : BigInt(digits);
    const value = sign === "-" ? -magnitude : magnitude;
    if (value >= -(2n ** 63n) && value < 2n ** 63n) {
      return value >= -(2n ** 31n) && value < 2n ** 31n ? Number(value) : value.toString();
    }
  }
  if (/^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/.test(source)) return Number(source);
  if (/^[+-]?\.(?:inf|Inf|INF)$/.test(source)) return source.startsWith("-") ? "-Infinity" : "Infinity";
  if (/^\.(?:nan|NaN|NAN)$/.test(source)) return "NaN";
  return source;
}

function yamlToJson(node: unknown, path: string, problems: string[], doc: ReturnType<typeof parseDocument>): Json {
  if (isAlias(node)) return yamlToJson(node.resolve(doc), path, problems, doc);
  if (node == null) return null;
  if (isScalar(node)) {
    const text = node.value == null ? "" : String(node.value);
    if (node.type === Scalar.PLAIN && node.tag !== "!") return plainScalar((node.source as string | undefined) ?? text);
    return text;
  }
  if (isSeq(node)) return node.items.map((item, i) => yamlToJson(item, `${path}[${i}]`, problems, doc));
  if (isMap(node)) {
    const out: { [key: string]: Json } = {};
    for (const pair of node.items) {
      const key = pair.key as YamlNode | null;
      if (isScalar(key) && key.tag === "!ignore") continue;
      if (!isScalar(key)) {
        problems.push(`${path || "<root>"}: a mapping key must be a scalar`);
        continue;
      }
      const name = key.value == null ? "" : String(key.value);
      out[name] = yamlToJson(pair.value, path ? `${path}.${name}` : name, problems, doc);
    }
    return out;
  }
  problems.push(`${path || "<root>"}: unsupported YAML node`);
  return null;
}

// --- protoc-gen-validate ----------------------------------------------------------------------------

type Rules = Record<string, any>;
type Msg = Record<string, any>;

/**
 * The PGV rule keys this validator evaluates, and those it leaves alone because Envoy's C++
 * validators (PGV v1.3.0 templates/cc) do not evaluate them either.
 */
export const PGV_CHECKED = new Set([
  "message.required",
  "message.skip",
  "string.min_len",
  "string.max_len",
  "string.len",
  "string.min_bytes",
  "string.max_bytes",
  "string.prefix",
  "string.suffix",
  "string.contains",
  "string.not_contains",
  "string.in",
  "string.not_in",
  "string.pattern",
  "string.ignore_empty",
  "bytes.min_len",
  "bytes.max_len",
  "bool.const",
  "enum.defined_only",
  "enum.in",
  "enum.not_in",
  "enum.const",
  "repeated.min_items",
  "repeated.max_items",
  "repeated.unique",
  "repeated.items",
  "map.min_pairs",
  "map.max_pairs",
  "map.keys",
  "map.values",
  "duration.required",
  "duration.gt",
  "duration.gte",
  "duration.lt",
  "duration.lte",
  "duration.const",
  "any.required",
  "any.in",
  "any.not_in",
  ...["uint32", "int32", "uint64", "int64", "double", "float", "fixed32", "sfixed32", "fixed64", "sfixed64", "sint32", "sint64"].flatMap((t) =>
    ["const", "gt", "gte", "lt", "lte", "in", "not_in"].map((r) => `${t}.${r}`),
  ),
]);
export const PGV_NOT_ENFORCED_BY_ENVOY = new Set(["string.well_known_regex", "string.strict"]);

const WRAPPERS: Record<string, string> = {
  ".google.protobuf.DoubleValue": "double",
  ".google.protobuf.FloatValue": "float",
  ".google.protobuf.Int64Value": "int64",
  ".google.protobuf.UInt64Value": "uint64",
  ".google.protobuf.Int32Value": "int32",
  ".google.protobuf.UInt32Value": "uint32",
  ".google.protobuf.BoolValue": "bool",
  ".google.protobuf.StringValue": "string",
  ".google.protobuf.BytesValue": "bytes",
};

function num(v: unknown): number {
  if (v == null) return 0;
  if (typeof v === "number") return v;
  if (typeof v === "object" && typeof (v as { toNumber?: unknown }).toNumber === "function") return (v as { toNumber(): number }).toNumber();
  return Number(v);
}

function durationNanos(d: Msg | null | undefined): bigint {
  if (!d) return 0n;
  return BigInt(Math.trunc(num(d.seconds))) * 1_000_000_000n + BigInt(Math.trunc(num(d.nanos)));
}

function show(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

/** PGV's ranges: with gt/gte and lt/lte both set and lt below gt, the value must lie outside. */
function checkRange(value: number | bigint, r: Rules, path: string, problems: string[], fmt: (x: any) => string = show) {
  const lower = r.gt !== undefined ? { v: r.gt, ex: true } : r.gte !== undefined ? { v: r.gte, ex: false } : undefined;
  const upper = r.lt !== undefined ? { v: r.lt, ex: true } : r.lte !== undefined ? { v: r.lte, ex: false } : undefined;
  const above = (b: { v: any; ex: boolean }) => (b.ex ? value > b.v : value >= b.v);
  const below = (b: { v: any; ex: boolean }) => (b.ex ? value < b.v : value <= b.v);
  if (lower && upper && upper.v < lower.v) {
    if (!(above(lower) || below(upper))) problems.push(`${path}: ${fmt(value)} must be outside [${fmt(upper.v)}, ${fmt(lower.v)}]`);
    return;
  }
  if (lower && !above(lower)) problems.push(`${path}: ${fmt(value)} must be ${lower.ex ? ">" : ">="} ${fmt(lower.v)}`);
  if (upper && !below(upper)) problems.push(`${path}: ${fmt(value)} must be ${upper.ex ? "<" : "<="} ${fmt(upper.v)}`);
}

function checkIn(value: unknown, r: Rules, path: string, problems: string[], eq: (a: unknown, b: unknown) => boolean = (a, b) => a === b) {
  if (r.const !== undefined && !eq(value, r.const)) problems.push(`${path}: ${show(value)} must equal ${show(r.const)}`);
  if (r.in !== undefined) {
    const list = ([] as unknown[]).concat(r.in);
    if (!list.some((x) => eq(value, x))) problems.push(`${path}: ${show(value)} must be one of ${list.map(show).join(", ")}`);
  }
  if (r.not_in !== undefined) {
    const list = ([] as unknown[]).concat(r.not_in);
    if (list.some((x) => eq(value, x))) problems.push(`${path}: ${show(value)} must not be ${list.map(show).join(", ")}`);
  }
}

/** Checks one value (a singular field or one element) against its PGV rules. */
function checkValue(field: protobuf.Field, value: any, present: boolean, rules: Rules | undefined, path: string, problems: string[], walk: Walker) {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    const full = resolved.fullName;
    if (rules?.message?.required && !present) problems.push(`${path}: is required`);
    if (full === ".google.protobuf.Duration") {
      const r = rules?.duration;
      if (r?.required && !present) problems.push(`${path}: is required`);
      if (r && present) {
        const ns = durationNanos(value);
        const toNs = (d: Msg) => durationNanos(d);
        const bounds: Rules = {};
        for (const k of ["gt", "gte", "lt", "lte"]) if (r[k] !== undefined) bounds[k] = toNs(r[k]);
        checkRange(ns, bounds, path, problems, (x: bigint) => `${Number(x) / 1e9}s`);
        if (r.const !== undefined && ns !== toNs(r.const)) problems.push(`${path}: must be ${Number(toNs(r.const)) / 1e9}s`);
      }
      return;
    }
    if (full === ".google.protobuf.Any") {
      const r = rules?.any;
      if (r?.required && !present) problems.push(`${path}: is required`);
      if (present) {
        const url = String(value.type_url ?? "");
        if (r) checkIn(url, { in: r.in, not_in: r.not_in }, path, problems);
        walk.any(field, value, path);
      }
      return;
    }
    const wrapped = WRAPPERS[full];
    if (wrapped) {
      if (present && rules?.[wrapped])
        checkScalar(wrapped, value.value ?? (wrapped === "string" ? "" : wrapped === "bool" ? false : 0), rules[wrapped], path, problems);
      return;
    }
    if (present && !rules?.message?.skip) walk.message(resolved, value, path);
    return;
  }
  if (resolved instanceof protobuf.Enum) {
    const r = rules?.enum;
    const n = num(value ?? 0);
    if (r?.defined_only && resolved.valuesById[n] === undefined) problems.push(`${path}: ${n} is not a value of ${resolved.fullName.slice(1)}`);
    if (r) checkIn(n, r, path, problems);
    const name = resolved.valuesById[n];
    if (present && name !== undefined && resolved.valuesOptions?.[name]?.deprecated) {
      problems.push(`${path}: enum value ${name} is deprecated (Envoy warns)`);
    }
    return;
  }
  if (rules?.[field.type]) checkScalar(field.type, value, rules[field.type], path, problems);
}

function checkScalar(type: string, value: any, r: Rules, path: string, problems: string[]) {
  if (type === "string") {
    const s: string = value ?? "";
    if (r.ignore_empty && s === "") return;
    const chars = [...s].length;
    const bytes = Buffer.byteLength(s, "utf8");
    if (r.len !== undefined && chars !== r.len) problems.push(`${path}: length must be ${r.len}`);
    if (r.min_len !== undefined && chars < r.min_len) problems.push(`${path}: must be at least ${r.min_len} character(s) long`);
    if (r.max_len !== undefined && chars > r.max_len) problems.push(`${path}: must be at most ${r.max_len} character(s) long`);
    if (r.min_bytes !== undefined && bytes < r.min_bytes) problems.push(`${path}: must be at least ${r.min_bytes} bytes`);
    if (r.max_bytes !== undefined && bytes > r.max_bytes) problems.push(`${path}: must be at most ${r.max_bytes} bytes`);
    if (r.prefix !== undefined && !s.startsWith(r.prefix)) problems.push(`${path}: must start with ${show(r.prefix)}`);
    if (r.suffix !== undefined && !s.endsWith(r.suffix)) problems.push(`${path}: must end with ${show(r.suffix)}`);
    if (r.contains !== undefined && !s.includes(r.contains)) problems.push(`${path}: must contain ${show(r.contains)}`);
    if (r.not_contains !== undefined && s.includes(r.not_contains)) problems.push(`${path}: must not contain ${show(r.not_contains)}`);
    if (r.pattern !== undefined && !new RegExp(`^(?:${r.pattern})$`, "u").test(s)) problems.push(`${path}: ${show(s)} does not match ${r.pattern}`);
    checkIn(s, { in: r.in, not_in: r.not_in }, path, problems);
    return;
  }
  if (type === "bytes") {
    const length = value?.length ?? 0;
    if (r.min_len !== undefined && length < r.min_len) problems.push(`${path}: must be at least ${r.min_len} bytes`);
    if (r.max_len !== undefined && length > r.max_len) problems.push(`${path}: must be at most ${r.max_len} bytes`);
    return;
  }
  if (type === "bool") {
    if (r.const !== undefined && Boolean(value) !== r.const) problems.push(`${path}: must be ${r.const}`);
    return;
  }
  const n = num(value);
  checkRange(n, r, path, problems);
  checkIn(n, r, path, problems, (a, b) => num(a) === num(b));
}

interface Walker {
  message(type: protobuf.Type, msg: Msg, path: string): void;
  any(field: protobuf.Field, any: Msg, path: string): void;
}

function fieldRules(field: protobuf.Field): Rules | undefined {
  return field.options?.["(validate.rules)"] as Rules | undefined;
}

/** A decoded message as a plain object: unset fields absent, enums and 64-bit integers as numbers, bytes as bytes. */
function plain(type: protobuf.Type, message: protobuf.Message): Msg {
  return type.toObject(message, { defaults: false, longs: Number, enums: Number, arrays: false }) as Msg;
}

function isSet(field: protobuf.Field, msg: Msg): boolean {
  if (!Object.hasOwn(msg, field.name)) return false;
  const v = msg[field.name];
  if (v == null) return false;
  if (field.map) return Object.keys(v).length > 0;
  if (field.repeated) return v.length > 0;
  return true;
}

/** Decodes a Bootstrap strictly and walks it; returns the problems. */
function validateMessage(root: protobuf.Root, bootstrap: Msg, rootType = "envoy.config.bootstrap.v3.Bootstrap", extraSlots: typeof ANY_SLOTS = {}): string[] {
  const problems: string[] = [];
  const slots = { ...ANY_SLOTS, ...extraSlots };
  const typeOf = (url: string) => root.lookupType(url.slice(url.lastIndexOf("/") + 1));

  const walker: Walker = {
    message(type, msg, path) {
      for (const oneof of type.oneofsArray) {
        if (oneof.options?.["(validate.required)"] && !oneof.fieldsArray.some((f) => isSet(f, msg))) {
          problems.push(`${path || "<root>"}: one of ${oneof.oneof.join(", ")} is required`);
        }
      }
      for (const field of type.fieldsArray) {
        field.resolve();
        const here = path ? `${path}.${field.name}` : field.name;
        const set = isSet(field, msg);
        if (set && field.options?.deprecated) problems.push(`${here}: deprecated field (Envoy warns)`);
        if (set && field.options?.["(envoy.annotations.disallowed_by_default)"]) problems.push(`${here}: disallowed by default`);
        // Members of a oneof (and proto3 optional fields) are checked only when set, as PGV does.
        if (field.partOf && !set) continue;
        const rules = fieldRules(field);
        const slot = slots[`${type.fullName.slice(1)}.${field.name}`];
        if (field.map) {
          const entries = Object.entries((msg[field.name] ?? {}) as Msg);
          const r = rules?.map;
          if (r?.min_pairs !== undefined && entries.length < r.min_pairs) problems.push(`${here}: needs at least ${r.min_pairs} entries`);
          if (r?.max_pairs !== undefined && entries.length > r.max_pairs) problems.push(`${here}: at most ${r.max_pairs} entries`);
          for (const [key, value] of entries) {
            const at = `${here}[${JSON.stringify(key)}]`;
            if (r?.keys?.string) checkScalar("string", key, r.keys.string, `${at} (key)`, problems);
            if (slot) anySlot(slot, key, value, at);
            else checkValue(field, value, true, r?.values, at, problems, walker);
          }
          continue;
        }
        if (field.repeated) {
          const items: any[] = msg[field.name] ?? [];
          const r = rules?.repeated;
          if (r?.min_items !== undefined && items.length < r.min_items) problems.push(`${here}: needs at least ${r.min_items} items`);
          if (r?.max_items !== undefined && items.length > r.max_items) problems.push(`${here}: at most ${r.max_items} items`);
          if (r?.unique && new Set(items.map((x) => JSON.stringify(x))).size !== items.length) problems.push(`${here}: items must be unique`);
          for (const [i, item] of items.entries()) checkValue(field, item, true, r?.items, `${here}[${i}]`, problems, walker);
          continue;
        }
        if (slot && set) {
          anySlot(slot, typeof msg[slot.nameField ?? ""] === "string" ? msg[slot.nameField!] : undefined, msg[field.name], here);
          checkValue(field, msg[field.name], set, rules, here, problems, { ...walker, any: () => undefined });
          continue;
        }
        checkValue(field, msg[field.name], set, rules, here, problems, walker);
      }
    },
    any(_field, any, path) {
      const url = String(any.type_url ?? "");
      problems.push(`${path}: a google.protobuf.Any (${url}) in a slot this validator has no extensions for`);
    },
  };

  function anySlot(slot: (typeof ANY_SLOTS)[string], name: string | undefined, any: Msg, path: string) {
    const url = String(any?.type_url ?? "");
    const typeName = url.slice(url.lastIndexOf("/") + 1);
    if (!url.startsWith("type.googleapis.com/")) problems.push(`${path}: @type ${show(url)} should start with type.googleapis.com/`);
    const ext = EXTENSIONS[typeName];
    const category = typeof slot.category === "function" ? slot.category(path) : slot.category;
    if (!ext || ext.category !== category) {
      problems.push(`${path}: ${typeName || "<no @type>"} is not an extension of ${category}`);
      return;
    }
    if (slot.keyIsName && name !== ext.name) problems.push(`${path}: the key must be ${ext.name} for ${typeName}`);
    if (slot.category === "per-route" && name !== undefined && TYPE_OF_NAME.has(name) && name !== ext.name) {
      problems.push(`${path}: ${typeName} configures ${ext.name}, not ${name}`);
    }
    if (slot.nameField && name !== undefined && TYPE_OF_NAME.has(name) && !TYPE_OF_NAME.get(name)!.includes(typeName)) {
      problems.push(`${path}: ${name} is configured by ${TYPE_OF_NAME.get(name)!.join(" or ")}, not ${typeName}`);
    }
    const inner = typeOf(url);
    const payload = plain(inner, inner.decode(any.value ?? new Uint8Array()));
    walker.message(inner, payload, `${path}<${typeName}>`);
    semantic(typeName, payload, `${path}<${typeName}>`);
  }

  const clusterNames = new Set<string>(((bootstrap.static_resources?.clusters ?? []) as Msg[]).map((c) => c.name));

  /** Load-time checks Envoy makes outside PGV, per extension type. */
  function semantic(typeName: string, msg: Msg, path: string) {
    if (typeName === "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager") {
      const filters: Msg[] = msg.http_filters ?? [];
      const router = "envoy.extensions.filters.http.router.v3.Router";
      filters.forEach((f, i) => {
        // A filter whose config comes from discovery: the types it takes must be HTTP filters this validator knows.
        for (const url of (f.config_discovery?.type_urls ?? []) as string[]) {
          const ext = EXTENSIONS[url.slice(url.lastIndexOf("/") + 1)];
          if (!url.startsWith("type.googleapis.com/") || ext?.category !== "envoy.filters.http")
            problems.push(`${path}.http_filters[${i}].config_discovery.type_urls: ${show(url)} is not an HTTP filter`);
        }
        const t = String(f.typed_config?.type_url ?? "");
        const isRouter = t.endsWith(`/${router}`);
        if (isRouter && i !== filters.length - 1) problems.push(`${path}.http_filters[${i}]: terminal filter ${f.name} must be the last filter`);
        if (!isRouter && i === filters.length - 1) problems.push(`${path}.http_filters[${i}]: non-terminal filter ${f.name} is the last filter`);
      });
      const routeConfig = msg.route_config as Msg | undefined;
      // Envoy refuses a direct response body longer than the route config's limit (4 KiB unless raised) when it loads the routes.
      const bodyLimit = routeConfig?.max_direct_response_body_size_bytes == null ? 4096 : num(routeConfig.max_direct_response_body_size_bytes.value);
      for (const [v, vh] of ((routeConfig?.virtual_hosts ?? []) as Msg[]).entries())
        for (const [i, r] of ((vh.routes ?? []) as Msg[]).entries()) {
          const body = r.direct_response?.body?.inline_string;
          if (typeof body === "string" && Buffer.byteLength(body) > bodyLimit)
            problems.push(
              `${path}.route_config.virtual_hosts[${v}].routes[${i}].direct_response.body: ${Buffer.byteLength(body)} bytes, over the limit of ${bodyLimit}`,
            );
        }
      const validate = routeConfig?.validate_clusters == null ? true : Boolean(routeConfig.validate_clusters.value);
      if (routeConfig && validate) {
        for (const [v, vh] of ((routeConfig.virtual_hosts ?? []) as Msg[]).entries()) {
          for (const [i, r] of ((vh.routes ?? []) as Msg[]).entries()) {
            const cluster = r.route?.cluster;
            if (cluster && !clusterNames.has(cluster)) {
              problems.push(`${path}.route_config.virtual_hosts[${v}].routes[${i}].route.cluster: unknown cluster ${show(cluster)}`);
            }
          }
        }
      }
    }
    if (typeName === "envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute") {
      // Stricter than Envoy, which would find a missing cluster only when a request takes the route (500).
      const grpcCluster = msg.overrides?.grpc_service?.envoy_grpc?.cluster_name;
      if (grpcCluster && !clusterNames.has(grpcCluster))
        problems.push(`${path}.overrides.grpc_service.envoy_grpc.cluster_name: unknown cluster ${show(grpcCluster)}`);
    }
    if (typeName === "envoy.extensions.filters.http.json_to_metadata.v3.JsonToMetadata") {
      // The filter's constructor throws for an on_missing or on_error without a value (json_to_metadata/filter.cc).
      for (const [i, rule] of ((msg.request_rules?.rules ?? []) as Msg[]).entries())
        for (const key of ["on_missing", "on_error"])
          if (rule[key] && rule[key].value == null) problems.push(`${path}.request_rules.rules[${i}].${key}: needs a value`);
    }
    if (typeName === "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor") {
      const grpcCluster = msg.grpc_service?.envoy_grpc?.cluster_name;
      if (grpcCluster && !clusterNames.has(grpcCluster)) problems.push(`${path}.grpc_service.envoy_grpc.cluster_name: unknown cluster ${show(grpcCluster)}`);
      if (Boolean(msg.grpc_service) === Boolean(msg.http_service))
        problems.push(`${path}: one and only one of grpc_service or http_service must be configured`);
      const mode: Msg = msg.processing_mode ?? {};
      const FULL_DUPLEX = 4;
      const SEND = 1;
      for (const dir of ["request", "response"]) {
        if (num(mode[`${dir}_body_mode`]) === FULL_DUPLEX && num(mode[`${dir}_trailer_mode`]) !== SEND) {
          problems.push(`${path}.processing_mode: ${dir}_body_mode FULL_DUPLEX_STREAMED needs ${dir}_trailer_mode SEND`);
        }
      }
      if ((num(mode.request_body_mode) === FULL_DUPLEX || num(mode.response_body_mode) === FULL_DUPLEX) && msg.failure_mode_allow) {
        problems.push(`${path}: failure_mode_allow must stay false with FULL_DUPLEX_STREAMED`);
      }
    }
  }

  walker.message(root.lookupType(rootType), bootstrap, "");
  const clusterEnum = root.lookupEnum("envoy.config.cluster.v3.Cluster.DiscoveryType");
  const lbEnum = root.lookupEnum("envoy.config.cluster.v3.Cluster.LbPolicy");
  ((bootstrap.static_resources?.clusters ?? []) as Msg[]).forEach((c, i) => {
    const at = `static_resources.clusters[${i}]`;
    const type = clusterEnum.valuesById[num(c.type)];
    const lb = lbEnum.valuesById[num(c.lb_policy)];
    if (type === "ORIGINAL_DST") {
      if (lb !== "CLUSTER_PROVIDED") problems.push(`${at}: LB policy ${lb} is not valid for cluster type ORIGINAL_DST; only CLUSTER_PROVIDED is`);
      if (c.load_assignment) problems.push(`${at}: ORIGINAL_DST clusters must have no load_assignment`);
      const odl = c.original_dst_lb_config;
      if (odl && !odl.use_http_header && odl.http_header_name) problems.push(`${at}: http_header_name is set but use_http_header is false`);
    } else if (lb === "CLUSTER_PROVIDED") {
      problems.push(`${at}: LB policy CLUSTER_PROVIDED is not valid for cluster type ${type}`);
    }
  });
  if (new Set(clusterNames).size !== (bootstrap.static_resources?.clusters ?? []).length) problems.push("static_resources.clusters: names must be unique");
  return problems;
}

/**
 * The problems the pinned Envoy (v1.37.11) would have with this bootstrap (plus the stricter ones named at the top
 * of this file); empty when it is valid.
 */
export function validateEnvoyBootstrap(yamlText: string): string[] {
  const doc = parseDocument(yamlText, { schema: "failsafe", uniqueKeys: true, merge: false, strict: true, prettyErrors: false });
  if (doc.errors.length) return doc.errors.map((e) => `YAML: ${e.message}`);
  const problems: string[] = [];
  const value = yamlToJson(doc.contents, "", problems, doc);
  if (problems.length) return problems;
  if (value === null || typeof value !== "object" || Array.isArray(value)) return ["YAML: the bootstrap must be a mapping"];

  const root = envoyRoot();
  const bootstrapType = root.lookupType("envoy.config.bootstrap.v3.Bootstrap");
  let decoded: Msg;
  try {
    const message = protojson.fromJson(bootstrapType, value);
    // Through the wire format and back: every message, Any payloads included, in one shape.
    decoded = plain(bootstrapType, bootstrapType.decode(bootstrapType.encode(message).finish()));
  } catch (err) {
    const text = err instanceof Error ? err.message : String(err);
    return [`decode: ${text.replace(/^no such type: /, "unknown @type: ")}`];
  }
  return validateMessage(root, decoded);
}

/**
 * The problems Envoy would have with an HTTP filter's config file read through discovery
 * (`config_discovery` with `path_config_source`, a .json file): a DiscoveryResponse whose one
 * resource is a TypedExtensionConfig named as the filter, holding one of the types it takes
 * (Filter::FilterConfigSubscription::onConfigUpdate), its payload checked as a bootstrap's filters are.
 */
export function validateExtensionConfigFile(jsonText: string, filter: { name: string; typeUrls: readonly string[] }): string[] {
  let value: Json;
  try {
    value = JSON.parse(jsonText);
  } catch (err) {
    return [`JSON: ${err instanceof Error ? err.message : String(err)}`];
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return ["the file must be an object (a DiscoveryResponse)"];
  const unknown = Object.keys(value).filter((k) => !["version_info", "resources"].includes(k));
  if (unknown.length) return [`${unknown.join(", ")}: not read from a discovery file here`];
  const resources = value.resources;
  if (!Array.isArray(resources) || resources.length !== 1) return ["resources: exactly one, as ExtensionConfigDS takes"];
  const resource = resources[0] as { [key: string]: Json };
  const typeName = "envoy.config.core.v3.TypedExtensionConfig";
  if (resource?.["@type"] !== `type.googleapis.com/${typeName}`) return [`resources[0]: @type must be type.googleapis.com/${typeName}`];
  const root = envoyRoot();
  const type = root.lookupType(typeName);
  let decoded: Msg;
  try {
    const { "@type": _, ...fields } = resource;
    decoded = plain(type, type.decode(type.encode(protojson.fromJson(type, fields)).finish()));
  } catch (err) {
    return [`decode: ${err instanceof Error ? err.message : String(err)}`];
  }
  const problems = validateMessage(root, decoded, typeName, { [`${typeName}.typed_config`]: { category: "envoy.filters.http" } });
  if (decoded.name !== filter.name) problems.push(`resources[0].name: ${show(decoded.name)}, but the filter is ${show(filter.name)}`);
  const url = String(decoded.typed_config?.type_url ?? "");
  if (!filter.typeUrls.includes(url)) problems.push(`resources[0].typed_config: ${show(url)} is not a type the filter takes (${filter.typeUrls.join(", ")})`);
  return problems;
}

/** A stack of models' Envoy files (core/render/hosts/frontDoor/envoy.ts modelsEnvoy), by role. */
export interface EnvoyWithDiscovery {
  bootstrap: string;
  routes: string;
  clusters: string;
}

/** A discovery file's resources without their @type, after checking the envelope: a DiscoveryResponse of version_info and resources of `typeName` only. */
function discoveredResources(text: string, typeName: string, file: string, problems: string[]): Record<string, unknown>[] {
  const value = parseYaml(text) as { version_info?: unknown; resources?: unknown } | null;
  if (value === null || typeof value !== "object") {
    problems.push(`${file}: must be a DiscoveryResponse (a mapping)`);
    return [];
  }
  const unknown = Object.keys(value).filter((k) => !["version_info", "resources"].includes(k));
  if (unknown.length) problems.push(`${file}: ${unknown.join(", ")}: not read from a discovery file here`);
  if (typeof value.version_info !== "string" || value.version_info === "")
    problems.push(`${file}: version_info must be a non-empty string (Envoy shows it in /config_dump)`);
  if (!Array.isArray(value.resources)) {
    problems.push(`${file}: resources must be a list`);
    return [];
  }
  return value.resources.map((r: Record<string, unknown>, i: number) => {
    if (r?.["@type"] !== `type.googleapis.com/${typeName}`) problems.push(`${file}: resources[${i}]: @type must be type.googleapis.com/${typeName}`);
    const { "@type": _, ...fields } = r ?? {};
    return fields;
  });
}

/**
 * The bootstrap Envoy would run once it has read its discovery files: the routes in the
 * HttpConnectionManager's place of `rds`, the discovered clusters beside the static ones. What the
 * front door does and what the API takes are read from it.
 */
export function withDiscovered(envoy: EnvoyWithDiscovery, problems: string[] = []): string {
  const bootstrap = parseYaml(envoy.bootstrap);
  const [routeConfig, ...more] = discoveredResources(envoy.routes, "envoy.config.route.v3.RouteConfiguration", "routes", problems);
  if (!routeConfig || more.length) problems.push("routes: one RouteConfiguration, as RDS takes for one route_config_name");
  const clusters = discoveredResources(envoy.clusters, "envoy.config.cluster.v3.Cluster", "clusters", problems);
  const manager = bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  if (!manager.rds || manager.rds.route_config_name !== routeConfig?.name)
    problems.push(`routes: named ${String(routeConfig?.name)}, but rds asks for ${manager.rds?.route_config_name}`);
  const paths = [manager.rds?.config_source?.path_config_source?.path, bootstrap.dynamic_resources?.cds_config?.path_config_source?.path];
  if (paths.some((p) => typeof p !== "string"))
    problems.push("the bootstrap must read its routes (rds) and clusters (dynamic_resources.cds_config) from path_config_source");
  delete manager.rds;
  manager.route_config = routeConfig;
  delete bootstrap.dynamic_resources;
  bootstrap.static_resources.clusters.push(...clusters);
  return stringifyYaml(bootstrap, { lineWidth: 0 });
}

/** The problems the pinned Envoy would have with a stack of models' bootstrap and its discovery files; empty when they are valid. */
export function validateEnvoyWithDiscovery(envoy: EnvoyWithDiscovery): string[] {
  const problems: string[] = [];
  const merged = withDiscovered(envoy, problems);
  return [...problems, ...validateEnvoyBootstrap(envoy.bootstrap).map((p) => `bootstrap: ${p}`), ...validateEnvoyBootstrap(merged)];
}
