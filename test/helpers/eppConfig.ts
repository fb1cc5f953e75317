import { parseDocument } from "yaml";
import configSchema from "../fixtures/llm-d-router-v0.10.0/config-schema.json";
import fileDiscovery from "../fixtures/llm-d-router-v0.10.0/file-discovery.json";
import pluginFacts from "../fixtures/llm-d-router-v0.10.0/plugins.json";

/**
 * Checks EPP inputs the way the llm-d-router v0.10.0 endpoint picker loads them, from the facts in
 * test/fixtures/llm-d-router-v0.10.0/ (each fact there names its source file at commit 71f4f099).
 *
 * - The config file: strict k8s decoding of the typed levels (unknown or mis-typed fields refused,
 *   case-sensitive names, duplicate YAML keys refused), plugin parameters decoded by each factory
 *   with encoding/json (case-insensitive names, unknown fields refused unless the factory ignores its
 *   parameters), then the loader's reference and profile checks.
 * - The endpoints file of the file-discovery plugin: its decoding and per-entry rules.
 *
 * YAML is read as YAML 1.1 (the loader uses go-yaml v2 through sigs.k8s.io/yaml): unquoted yes/no/on/off
 * are booleans, and timestamps stay strings as go-yaml v2 leaves them when decoding into interface{}.
 */

interface FieldSpec {
  json: string;
  goType: string;
  type: string;
  items?: FieldSpec;
  fields?: FieldSpec[];
  required?: boolean;
  min?: number;
  max?: number;
  enum?: string[];
  pluginRef?: boolean;
  pluginRefRoles?: string[];
  producerRef?: boolean;
}
interface ParamSpec {
  ignoresParameters?: boolean;
  unknownFieldsRefused?: boolean;
  fields?: FieldSpec[];
  legacyFields?: FieldSpec[];
}
interface PluginType {
  type: string;
  stability: string;
  roles: string[];
  factoryIgnoresParameters: boolean;
}
interface StructSpec {
  fields: FieldSpec[];
}

const types = configSchema.types as unknown as Record<string, StructSpec>;
const registry = new Map((pluginFacts.types as PluginType[]).map((t) => [t.type, t]));
const parameterSpecs = pluginFacts.parameters as unknown as Record<string, ParamSpec>;
const gates = configSchema.featureGates.registered as Record<string, { default: boolean }>;
const acceptedApiVersions = configSchema.apiVersions.accepted;
const prefixKey = pluginFacts.dataKeys.PrefixCacheMatchInfoDataKey;
const defaults = configSchema.defaults;
const maxEndpointsFileBytes = fileDiscovery.file.maxSizeBytes;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface EppConfigOptions {
  /** The EPP's --allow-experimental-plugins flag (default false: alpha plugins are refused). */
  allowExperimentalPlugins?: boolean;
}

export interface EndpointsFileOptions {
  /**
   * The v0.10.0 loader accepts two entries with the same namespace and name (the later replaces the
   * earlier). Set this to also report them, for files we write ourselves.
   */
  refuseDuplicateNames?: boolean;
}

/** Reads YAML as go-yaml v2 would: YAML 1.1, no timestamp type. Returns the value or the problems. */
function readYaml(text: string, uniqueKeys: boolean): { value: Json; problems: string[] } {
  const doc = parseDocument(text, {
    version: "1.1",
    uniqueKeys,
    customTags: (tags) => tags.filter((tag) => typeof tag === "string" || tag.tag !== "tag:yaml.org,2002:timestamp"),
  });
  if (doc.errors.length > 0) return { value: null, problems: doc.errors.map((e) => `invalid YAML: ${e.message.split("\n")[0]}`) };
  const value = doc.toJS({ maxAliasCount: 1000 }) as unknown;
  const problems: string[] = [];
  checkJsonable(value, "", problems);
  return { value: (value ?? null) as Json, problems };
}

/** sigs.k8s.io/yaml then json.Marshal: infinities and NaN cannot become JSON. */
function checkJsonable(value: unknown, path: string, problems: string[]): void {
  if (typeof value === "number" && !Number.isFinite(value)) problems.push(`${path || "(document)"}: ${value} cannot be converted to JSON`);
  else if (Array.isArray(value)) for (const [i, v] of value.entries()) checkJsonable(v, `${path}[${i}]`, problems);
  else if (value !== null && typeof value === "object") for (const [k, v] of Object.entries(value)) checkJsonable(v, join(path, k), problems);
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

function isObject(value: Json): value is { [key: string]: Json } {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function kindOf(value: Json): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value === "object" ? "object" : typeof value;
}

const goDuration = /^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$/;
const quantity = /^[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;

/**
 * Checks one JSON value against a field type. JSON null is accepted everywhere (Go leaves the zero
 * value or a nil pointer). `caseInsensitive` selects encoding/json name matching (plugin parameters)
 * over the case-sensitive k8s decoder (the typed config).
 */
/** The JSON kinds each field type decodes from; `struct:<name>` types decode from an object. */
const DECODES_FROM: Readonly<Record<string, (value: Json) => boolean>> = {
  string: (v) => typeof v === "string",
  bool: (v) => typeof v === "boolean",
  int: (v) => typeof v === "number" && Number.isInteger(v),
  float: (v) => typeof v === "number",
  raw: () => true,
  duration: (v) => typeof v === "string",
  quantity: (v) => typeof v === "string" || typeof v === "number",
  list: (v) => Array.isArray(v),
  object: (v) => isObject(v),
};

function checkValue(value: Json, field: FieldSpec, path: string, problems: string[], caseInsensitive: boolean, refuseUnknown: boolean): void {
  if (value === null) return;
  const struct = field.type.startsWith("struct:") ? field.type.slice("struct:".length) : undefined;
  const decodes = struct === undefined ? DECODES_FROM[field.type] : isObject;
  if (!decodes) throw new Error(`fixture field type ${field.type} is not understood`);
  if (!decodes(value)) {
    problems.push(`${path}: ${kindOf(value)} cannot be decoded into Go ${field.goType}`);
    return;
  }
  if (field.type === "duration" && value !== "" && !goDuration.test(value as string)) problems.push(`${path}: ${JSON.stringify(value)} is not a Go duration`);
  if (field.type === "quantity" && !quantity.test(String(value).trim())) problems.push(`${path}: ${JSON.stringify(value)} is not a resource quantity`);
  if (Array.isArray(value) && field.type === "list")
    for (const [i, item] of value.entries()) checkValue(item, field.items!, `${path}[${i}]`, problems, caseInsensitive, refuseUnknown);
  if (isObject(value) && field.type === "object") checkFields(value, field.fields ?? [], path, problems, caseInsensitive, refuseUnknown);
  if (isObject(value) && struct !== undefined) checkFields(value, types[struct]!.fields, path, problems, caseInsensitive, refuseUnknown);
}

/** The field a JSON key decodes into: exact name first, then (encoding/json only) a case-insensitive match. */
function fieldFor(fields: FieldSpec[], key: string, caseInsensitive: boolean): FieldSpec | undefined {
  return fields.find((f) => f.json === key) ?? (caseInsensitive ? fields.find((f) => f.json.toLowerCase() === key.toLowerCase()) : undefined);
}

function checkFields(
  value: { [key: string]: Json },
  fields: FieldSpec[],
  path: string,
  problems: string[],
  caseInsensitive: boolean,
  refuseUnknown: boolean,
): void {
  for (const [key, item] of Object.entries(value)) {
    const field = fieldFor(fields, key, caseInsensitive);
    if (!field) {
      if (refuseUnknown) problems.push(`${join(path, key)}: unknown field`);
      continue;
    }
    checkValue(item, field, join(path, key), problems, caseInsensitive, refuseUnknown);
  }
}

/** The decoded value of a parameter, by its JSON name, as encoding/json sets it: every key matching the name case-insensitively assigns it, so the last one wins. */
function param(params: { [key: string]: Json }, name: string): Json | undefined {
  let found: Json | undefined;
  for (const [key, value] of Object.entries(params)) if (key.toLowerCase() === name.toLowerCase()) found = value;
  return found;
}

interface Plugin {
  name: string;
  type: string;
  parameters: Json | undefined;
  path: string;
}

function rolesOf(plugin: Plugin | undefined): string[] {
  return plugin ? (registry.get(plugin.type)?.roles ?? []) : [];
}

/** Range, enum and cross-field rules of the recorded parameter structs (plugins.json parameters.*). */
function checkParameterRules(plugin: Plugin, spec: ParamSpec, params: { [key: string]: Json }, byName: Map<string, Plugin>, problems: string[]): void {
  const at = `${plugin.path}.parameters`;
  const walk = (fields: FieldSpec[], obj: { [key: string]: Json }, path: string) => {
    for (const field of fields) {
      const value = param(obj, field.json);
      const where = join(path, field.json);
      if (field.required && (value === undefined || value === null || value === "")) problems.push(`${where}: required`);
      if (value === undefined || value === null) continue;
      if (typeof value === "number") {
        if (field.min !== undefined && value < field.min) problems.push(`${where}: ${value} is below ${field.min}`);
        if (field.max !== undefined && value > field.max) problems.push(`${where}: ${value} is above ${field.max}`);
      }
      if (field.enum && typeof value === "string" && field.json !== "stageOrder" && !field.enum.includes(value))
        problems.push(`${where}: ${JSON.stringify(value)} is not one of ${field.enum.join(", ")}`);
      if (field.pluginRef && typeof value === "string" && value !== "") {
        const target = byName.get(value);
        if (!target) problems.push(`${where}: a plugin has a dependency on the unregistered plugin ${value}`);
        else if (field.pluginRefRoles && !field.pluginRefRoles.some((r) => rolesOf(target).includes(r)))
          problems.push(`${where}: plugin ${value} (type ${target.type}) is not a ${field.pluginRefRoles.join(" or ")}`);
      }
      if (field.producerRef && typeof value === "string" && value !== "" && value !== prefixKey.defaultProducer) {
        const target = byName.get(value);
        if (!target || !prefixKey.producers.includes(target.type))
          problems.push(`${where}: no plugin named ${value} produces PrefixCacheMatchInfo, and it is not the default producer ${prefixKey.defaultProducer}`);
      }
      if (field.fields && isObject(value)) walk(field.fields, value, where);
    }
  };
  walk(spec.fields ?? [], params, at);
  const num = (name: string, fallback: number) => {
    const v = param(params, name);
    return typeof v === "number" ? v : fallback;
  };
  if (plugin.type === "approx-prefix-cache-producer") {
    const autoTune = param(params, "autoTune");
    if (autoTune === false && num("blockSizeTokens", 16) <= 0 && num("blockSize", 0) <= 0)
      problems.push(`${at}.blockSizeTokens: must be > 0 when autoTune is false`);
  }
  if (plugin.type === "prefix-cache-scorer" && num("matchLengthWeight", 0) > 0 && num("matchLengthScaleTokens", 8192) <= 0)
    problems.push(`${at}.matchLengthScaleTokens: must be > 0 when matchLengthWeight > 0`);
  if (plugin.type === "metrics-data-source") {
    const interval = param(params, "interval");
    if (typeof interval === "string" && interval.startsWith("-")) problems.push(`${at}.interval: must be non-negative`);
  }
  if (plugin.type === "disagg-profile-handler") {
    const order = param(params, "stageOrder");
    const normalized = typeof order === "string" ? order.replace(/[-_]/g, "").toLowerCase() : "";
    if (!["", "decodefirst", "decode", "prefillfirst", "prefill"].includes(normalized))
      problems.push(`${at}.stageOrder: invalid stage order ${JSON.stringify(order)}, must be "decode-first" or "prefill-first"`);
    const deciders = param(params, "deciders");
    const prefillDecider = isObject(deciders ?? null)
      ? param(deciders as { [key: string]: Json }, "prefill")
      : (param(params, "prefillDeciderPluginName") ?? param(params, "deciderPluginName"));
    if (["prefillfirst", "prefill"].includes(normalized) && typeof prefillDecider === "string" && prefillDecider !== "")
      problems.push(`${at}: prefill decider is not supported in prefill-first stage order`);
    // The deprecated flat names are not pluginRef-tagged: the factory looks them up by name.
    for (const legacy of ["prefillDeciderPluginName", "deciderPluginName", "encodeDeciderPluginName"]) {
      const ref = param(params, legacy);
      if (!isObject(deciders ?? null) && typeof ref === "string" && ref !== "" && !byName.has(ref))
        problems.push(`${at}.${legacy}: deciders plugin not found: ${ref}`);
    }
  }
}

/** Decodes plugin parameters as the type's factory does. */
function checkParameters(plugin: Plugin, byName: Map<string, Plugin>, problems: string[]): void {
  const type = registry.get(plugin.type);
  if (!type || type.factoryIgnoresParameters) return;
  const spec = parameterSpecs[plugin.type];
  if (!spec?.fields) return; // not recorded: not checked
  const at = `${plugin.path}.parameters`;
  const raw = plugin.parameters;
  if (raw === undefined || raw === null) {
    checkParameterRules(plugin, spec, {}, byName, problems);
    return;
  }
  if (!isObject(raw)) {
    problems.push(`${at}: ${kindOf(raw)} cannot be decoded into the ${plugin.type} parameters`);
    return;
  }
  const refuse = spec.unknownFieldsRefused !== false;
  const found: string[] = [];
  checkFields(raw, spec.fields, at, found, true, refuse);
  if (found.length > 0 && spec.legacyFields) {
    const legacy: string[] = [];
    checkFields(raw, spec.legacyFields, at, legacy, true, refuse);
    if (legacy.length === 0) found.length = 0;
    else found.push(`${at}: the deprecated flat parameter form does not fit either (${legacy.join("; ")})`);
  }
  problems.push(...found);
  if (found.length === 0) checkParameterRules(plugin, spec, raw, byName, problems);
}

function parseGoBool(text: string): boolean | undefined {
  const v = text.trim().toLowerCase();
  if (["1", "t", "true"].includes(v)) return true;
  if (["0", "f", "false"].includes(v)) return false;
  return undefined;
}

/**
 * The problems the v0.10.0 EPP would refuse the config for (empty when it would load). The checks
 * follow pkg/epp/config/loader (decodeRawConfig, validatePlugins, instantiatePlugins, validateConfig,
 * buildSchedulerConfig, buildDataLayerConfig, ...) and cmd/epp/runner (discovery, plugin stability).
 */
export function validateEndpointPickerConfig(yamlText: string, options: EppConfigOptions = {}): string[] {
  const { value: doc, problems } = readYaml(yamlText, true);
  if (problems.length > 0) return problems;
  if (doc === null) return []; // an empty file: the loader uses its default config
  if (!isObject(doc)) return [`(document): ${kindOf(doc)} cannot be decoded into EndpointPickerConfig`];

  const apiVersion = doc.apiVersion;
  if (typeof apiVersion === "string" && apiVersion !== "" && !acceptedApiVersions.includes(apiVersion))
    problems.push(`apiVersion: ${JSON.stringify(apiVersion)} is not registered (accepted: ${acceptedApiVersions.join(", ")})`);
  const kind = doc.kind;
  if (typeof kind === "string" && kind !== "" && kind !== configSchema.apiVersions.kind)
    problems.push(`kind: ${JSON.stringify(kind)} is not registered (only ${configSchema.apiVersions.kind})`);
  checkFields(doc, types[configSchema.root]!.fields, "", problems, false, true);
  if (problems.length > 0) return problems; // the strict decoder fails before any other check

  const obj = (v: Json | undefined): { [key: string]: Json } => (isObject(v ?? null) ? (v as { [key: string]: Json }) : {});
  const list = (v: Json | undefined): Json[] => (Array.isArray(v) ? v : []);
  const str = (v: Json | undefined): string => (typeof v === "string" ? v : "");

  for (const gate of list(doc.featureGates).map(str)) {
    const [name = "", value] = gate.split("=");
    if (!(name in gates)) problems.push(`featureGates: feature gate '${name}' is unknown or unregistered`);
    else if (value !== undefined && parseGoBool(value) === undefined) problems.push(`featureGates: ${value} is not a valid value for the feature gate ${name}`);
  }
  const gateOn = (name: string) => {
    let on = gates[name]?.default ?? false;
    for (const gate of list(doc.featureGates).map(str)) {
      const [n, v] = gate.split("=");
      if (n === name) on = v === undefined ? true : (parseGoBool(v) ?? on);
    }
    return on;
  };

  // Plugins: name defaults to type; type non-empty, names unique, type registered, alpha needs the flag.
  const plugins: Plugin[] = list(doc.plugins).map((p, i) => {
    const spec = obj(p);
    const type = str(spec.type);
    return { name: str(spec.name) || type, type, parameters: spec.parameters, path: `plugins[${i}]` };
  });
  const byName = new Map<string, Plugin>();
  for (const plugin of plugins) {
    if (plugin.type === "") problems.push(`${plugin.path}: plugin '${plugin.name}' is missing a type`);
    else if (!registry.has(plugin.type)) problems.push(`${plugin.path}: plugin type '${plugin.type}' is not registered`);
    else if (registry.get(plugin.type)!.stability === "alpha" && !options.allowExperimentalPlugins)
      problems.push(
        `${plugin.path}: plugin '${plugin.name}' (type: '${plugin.type}') has Alpha stability level, but command line flag --allow-experimental-plugins is not set`,
      );
    if (byName.has(plugin.name)) problems.push(`${plugin.path}: duplicate plugin name '${plugin.name}'`);
    else byName.set(plugin.name, plugin);
  }
  for (const plugin of plugins) if (registry.has(plugin.type)) checkParameters(plugin, byName, problems);

  // Scheduling profiles and the profile handler.
  const profiles = list(doc.schedulingProfiles).map(obj);
  const seenProfiles = new Set<string>();
  profiles.forEach((profile, i) => {
    const name = str(profile.name);
    if (name === "") problems.push(`schedulingProfiles[${i}] is missing a name`);
    else if (seenProfiles.has(name)) problems.push(`schedulingProfiles[${i}] has duplicate name '${name}'`);
    seenProfiles.add(name);
    let pickers = 0;
    for (const [j, entry] of list(profile.plugins).map(obj).entries()) {
      const ref = str(entry.pluginRef);
      const target = byName.get(ref);
      if (ref === "") problems.push(`schedulingProfiles[${name}].plugins[${j}] is missing a 'pluginRef'`);
      else if (!target) problems.push(`schedulingProfiles[${name}] references undefined plugin '${ref}'`);
      else if (rolesOf(target).includes("picker") && ++pickers > 1)
        problems.push(`schedulingProfiles[${name}]: failed to set '${ref}' as picker, already have a registered picker plugin`);
    }
  });
  const profileCount = profiles.length === 0 ? 1 : profiles.length; // none: the loader makes a 'default' profile
  const handlers = plugins.filter((p) => rolesOf(p).includes("profileHandler"));
  if (handlers.length > 1) problems.push(`multiple profile handlers found (${handlers.map((h) => `'${h.name}'`).join(", ")}); only one is allowed`);
  if (handlers.length === 0 && profileCount > 1) problems.push("no profile handler configured");
  if (handlers.length === 1 && handlers[0]!.type === "single-profile-handler" && profileCount > 1)
    problems.push("SingleProfileHandler cannot support multiple scheduling profiles");

  // Data layer: discovery, sources, extractors, cross-replica syncer.
  const dataLayer = obj(doc.dataLayer);
  if (isObject(dataLayer.discovery ?? null)) {
    const ref = str(obj(dataLayer.discovery).pluginRef);
    const target = byName.get(ref);
    if (!target) problems.push(`dataLayer.discovery: no plugin found with name "${ref}"`);
    else if (!rolesOf(target).includes("endpointDiscovery")) problems.push(`dataLayer.discovery: plugin "${ref}" does not implement EndpointDiscovery`);
  }
  list(dataLayer.sources)
    .map(obj)
    .forEach((source, i) => {
      const ref = str(source.pluginRef);
      if (!rolesOf(byName.get(ref)).includes("dataSource")) problems.push(`dataLayer.sources[${i}]: the plugin ${ref} is not a fwkdl.DataSource`);
      list(source.extractors)
        .map(obj)
        .forEach((extractor, j) => {
          const eref = str(extractor.pluginRef);
          if (!byName.has(eref)) problems.push(`dataLayer.sources[${i}].extractors[${j}]: the plugin ${eref} is not registered`);
        });
    });
  const syncer = str(dataLayer.crossReplicaSyncerPluginRef);
  if (syncer !== "" && !rolesOf(byName.get(syncer)).includes("crossReplicaSyncer"))
    problems.push(`dataLayer.crossReplicaSyncerPluginRef: the plugin ${syncer} is not a fwkdl.CrossReplicaSyncer`);

  // Parsers: requestHandler.parsers wins over the deprecated top-level parser.
  const parserRefs =
    list(obj(doc.requestHandler).parsers).length > 0
      ? list(obj(doc.requestHandler).parsers).map((p) => str(obj(p).pluginRef))
      : isObject(doc.parser ?? null)
        ? [str(obj(doc.parser).pluginRef)]
        : [];
  for (const ref of parserRefs) {
    const target = byName.get(ref);
    if (target) {
      if (!rolesOf(target).includes("parser")) problems.push(`requestHandler.parsers: the plugin ${ref} is not a parser plugin`);
    } else if (!registry.has(ref)) problems.push(`requestHandler.parsers: plugin type '${ref}' not found in registry`);
    else if (!registry.get(ref)!.roles.includes("parser")) problems.push(`requestHandler.parsers: the plugin ${ref} is not a parser plugin`);
  }

  // Saturation detector: flowControl.saturationDetector wins over the deprecated top-level one.
  const flowControl = obj(doc.flowControl);
  const detector = isObject(flowControl.saturationDetector ?? null)
    ? obj(flowControl.saturationDetector)
    : isObject(doc.saturationDetector ?? null)
      ? obj(doc.saturationDetector)
      : null;
  const detectorRef = detector ? str(detector.pluginRef) || defaults.saturationDetector : defaults.saturationDetector;
  const detectorPlugin = byName.get(detectorRef);
  if (detectorPlugin) {
    if (!rolesOf(detectorPlugin).includes("saturationDetector"))
      problems.push(`saturation detector: plugin '${detectorRef}' is not a fwkfc.SaturationDetector`);
  } else if (detectorRef !== defaults.saturationDetector) problems.push(`saturation detector references undefined plugin '${detectorRef}'`);

  // Flow control references, read only with the flowControl gate on.
  if (gateOn("flowControl")) {
    const policy = (ref: string, role: string, fallback: string | undefined, where: string) => {
      if (ref === "" || (ref === fallback && !byName.has(ref))) return;
      const target = byName.get(ref);
      if (!target) problems.push(`${where}: plugin '${ref}' not found`);
      else if (!rolesOf(target).includes(role)) problems.push(`${where}: plugin '${ref}' is not a ${role}`);
    };
    const [ordering, fairness, usage] = defaults.flowControlPolicies as [string, string, string];
    policy(str(flowControl.usageLimitPolicyPluginRef), "usageLimitPolicy", usage, "flowControl.usageLimitPolicyPluginRef");
    const bands: [string, Json | undefined][] = [
      ["flowControl.defaultPriorityBand", flowControl.defaultPriorityBand],
      ["flowControl.defaultNegativePriorityBand", flowControl.defaultNegativePriorityBand],
      ...list(flowControl.priorityBands).map((b, i): [string, Json] => [`flowControl.priorityBands[${i}]`, b]),
    ];
    for (const [where, band] of bands) {
      if (!isObject(band ?? null)) continue;
      policy(str(obj(band).fairnessPolicyRef), "fairnessPolicy", fairness, `${where}.fairnessPolicyRef`);
      policy(str(obj(band).orderingPolicyRef), "orderingPolicy", ordering, `${where}.orderingPolicyRef`);
    }
    const quantities: [string, Json | undefined][] = [
      ["flowControl.maxBytes", flowControl.maxBytes],
      ["flowControl.maxRequests", flowControl.maxRequests],
      ...bands.flatMap(([where, band]): [string, Json | undefined][] => [
        [`${where}.maxBytes`, obj(band).maxBytes],
        [`${where}.maxRequests`, obj(band).maxRequests],
      ]),
    ];
    for (const [where, q] of quantities)
      if ((typeof q === "string" && q.trim().startsWith("-")) || (typeof q === "number" && q < 0)) problems.push(`${where}: must be non-negative`);
  }
  return problems;
}

/** net.ParseIP(address).To4() != nil, as Go 1.17+ parses: dotted IPv4, or an IPv4-mapped IPv6 literal. */
export function goParsesAsIPv4(address: string): boolean {
  const v4 = (s: string): number[] | null => {
    const parts = s.split(".");
    if (parts.length !== 4) return null;
    const bytes: number[] = [];
    for (const part of parts) {
      if (!/^\d{1,3}$/.test(part) || (part.length > 1 && part.startsWith("0")) || Number(part) > 255) return null;
      bytes.push(Number(part));
    }
    return bytes;
  };
  if (v4(address)) return true;
  // IPv6: at most one "::", hex groups of 1-4 digits, an optional dotted IPv4 tail; no zone.
  if (!/^[0-9A-Fa-f:.]+$/.test(address) || !address.includes(":")) return false;
  const halves = address.split("::");
  if (halves.length > 2) return false;
  const groups = (s: string): number[] | null => {
    if (s === "") return [];
    const out: number[] = [];
    const items = s.split(":");
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (i === items.length - 1 && item.includes(".")) {
        const b = v4(item);
        if (!b) return null;
        out.push((b[0]! << 8) | b[1]!, (b[2]! << 8) | b[3]!);
      } else if (/^[0-9A-Fa-f]{1,4}$/.test(item)) out.push(parseInt(item, 16));
      else return null;
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return false;
  let words: number[];
  if (halves.length === 2) {
    if (head.length + tail.length > 7) return false;
    words = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    if (head.length !== 8) return false;
    words = head;
  }
  return words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff;
}

/** strconv.Atoi(port) in 1..65535. */
function goPortOk(port: string): boolean {
  return /^[+-]?\d+$/.test(port) && Number(port) >= 1 && Number(port) <= 65535;
}

/**
 * The problems the v0.10.0 file-discovery plugin would report for an endpoints file (empty when every
 * entry loads). Any problem fails the EPP's first load; on a reload, file-level problems keep the
 * previous endpoints and entry problems drop those entries.
 */
export function validateEndpointsFile(yamlText: string, options: EndpointsFileOptions = {}): string[] {
  if (Buffer.byteLength(yamlText, "utf8") > maxEndpointsFileBytes) return ["endpoints file exceeds 1 MiB limit"];
  const { value: doc, problems } = readYaml(yamlText, false);
  if (problems.length > 0) return problems;
  if (doc === null) return [];
  if (!isObject(doc)) return [`json: cannot unmarshal ${kindOf(doc)} into Go value of type file.EndpointsFile`];

  // encoding/json, not strict: unknown keys are ignored, names match case-insensitively, the last match wins.
  const entryFields = fileDiscovery.file.entry as Record<string, { goType: string }>;
  let endpoints: Json = null;
  for (const [key, value] of Object.entries(doc)) if (key.toLowerCase() === fileDiscovery.file.topLevelKey) endpoints = value;
  if (endpoints === null) return [];
  if (!Array.isArray(endpoints))
    return [
      `${fileDiscovery.file.topLevelKey}: json: cannot unmarshal ${kindOf(endpoints)} into Go struct field EndpointsFile.endpoints of type []file.EndpointEntry`,
    ];

  const entries: Record<string, string | Record<string, string>>[] = [];
  for (const [i, raw] of endpoints.entries()) {
    const entry: Record<string, string | Record<string, string>> = { name: "", namespace: "", address: "", port: "", labels: {} };
    entries.push(entry);
    if (raw === null) continue;
    if (!isObject(raw)) {
      problems.push(`endpoints[${i}]: json: cannot unmarshal ${kindOf(raw)} into Go value of type file.EndpointEntry`);
      continue;
    }
    for (const [key, value] of Object.entries(raw)) {
      const field = Object.keys(entryFields).find((f) => f === key) ?? Object.keys(entryFields).find((f) => f.toLowerCase() === key.toLowerCase());
      if (!field || value === null) continue;
      const where = `endpoints[${i}].${key}`;
      if (field === "labels") {
        if (!isObject(value))
          problems.push(`${where}: json: cannot unmarshal ${kindOf(value)} into Go struct field EndpointEntry.endpoints.labels of type map[string]string`);
        else
          for (const [label, v] of Object.entries(value)) {
            if (v !== null && typeof v !== "string")
              problems.push(`${where}.${label}: json: cannot unmarshal ${kindOf(v)} into Go struct field EndpointEntry.endpoints.labels of type string`);
            else (entry.labels as Record<string, string>)[label] = v ?? "";
          }
      } else if (typeof value !== "string")
        problems.push(`${where}: json: cannot unmarshal ${kindOf(value)} into Go struct field EndpointEntry.endpoints.${field} of type string`);
      else entry[field] = value;
    }
  }
  if (problems.length > 0) return problems; // json.Unmarshal failed: nothing is applied

  const seen = new Set<string>();
  for (const entry of entries) {
    const name = entry.name as string;
    const address = entry.address as string;
    const port = entry.port as string;
    if (!goParsesAsIPv4(address)) problems.push(`endpoint ${JSON.stringify(name)}: invalid IPv4 address ${JSON.stringify(address)}`);
    else if (!goPortOk(port)) problems.push(`endpoint ${JSON.stringify(name)}: invalid port ${JSON.stringify(port)}`);
    else if (options.refuseDuplicateNames) {
      const id = `${(entry.namespace as string) || "default"}/${name}`;
      if (seen.has(id)) problems.push(`endpoint ${JSON.stringify(name)}: duplicate of an earlier entry ${id} (the loader keeps the later one)`);
      seen.add(id);
    }
  }
  return problems;
}
