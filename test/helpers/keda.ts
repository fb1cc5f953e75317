import kedaFixture from "../fixtures/keda.json";
import keda220Fixture from "../fixtures/keda-v2.20.json";
import { knownSeries, seriesNames } from "./promql";

/**
 * Checks a KEDA ScaledObject against the facts in test/fixtures/keda.json (KEDA v2.19.0, read from
 * kedacore/keda's types, webhook and prometheus scaler), and (checkScaledObjectV220) against what
 * v2.20 adds in test/fixtures/keda-v2.20.json: its refusals and its warnings. It refuses what KEDA or the HPA would
 * refuse and, stricter than KEDA, what would silently do nothing: unknown fields and metadata keys
 * (typos), a metricType the HPA rejects, a non-boolean pause annotation, and, when `series` is
 * given, a prometheus query naming a series nobody exports.
 */

interface FieldSpec {
  type: string;
  required?: boolean;
  default?: unknown;
  enum?: string[];
  min?: number;
}

const facts = kedaFixture.facts;
const SPEC = facts["scaledObject.specFields"].value as Record<string, FieldSpec>;
const TARGET = facts["scaledObject.scaleTargetRefFields"].value as Record<string, FieldSpec>;
const FALLBACK = facts["scaledObject.fallback"].value.fields as Record<string, FieldSpec>;
const ADVANCED = facts["scaledObject.advancedFields"].value;
const HPA_BEHAVIOR = facts["scaledObject.hpaBehaviorShape"].value;
const TRIGGER = facts["scaledObject.triggerFields"].value;
const METRIC_TYPES = facts["scaledObject.externalMetricTypes"].value;
const PROMETHEUS = facts["prometheus.metadata"].value as Record<string, FieldSpec>;
const ANNOTATIONS = facts["annotations.pause"].value as Record<string, string>;

const INT32_MAX = 2 ** 31 - 1;
/** strconv.ParseBool's spellings, which KEDA's typed config uses for bool metadata. */
const GO_BOOLS = new Set(["1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"]);
/** strconv.ParseFloat's decimal form (the helper does not accept hex floats, Inf or NaN). */
const GO_FLOAT = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
/** time.ParseDuration's form, or a whole number of milliseconds. */
const GO_DURATION = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$|^\d+$/;
/** Triggers the fallback cannot stand on (KEDA's CheckFallbackValid). */
const RESOURCE_TRIGGERS = new Set(["cpu", "memory"]);

export interface ScaledObjectCheckOptions {
  /** Series a prometheus query may select; omit to skip the check. */
  series?: Set<string>;
}

type Obj = Record<string, unknown>;
const isObj = (value: unknown): value is Obj => value !== null && typeof value === "object" && !Array.isArray(value);

function unknownKeys(at: string, value: Obj, allowed: Iterable<string>, problems: string[]): void {
  const known = new Set(allowed);
  for (const key of Object.keys(value)) {
    if (!known.has(key)) problems.push(`${at}.${key}: unknown field; allowed: ${[...known].join(", ")}`);
  }
}

function checkInt32(at: string, value: unknown, problems: string[], min = 0): void {
  if (typeof value !== "number" || !Number.isInteger(value)) problems.push(`${at}: ${JSON.stringify(value)} is not an integer`);
  else if (value < min || value > INT32_MAX) problems.push(`${at}: ${value} is outside ${min}..${INT32_MAX}`);
}

/** A spec field's default as KEDA's types give it (the fixture's specFields); a fixture without it is broken. */
function specDefault(name: string): number {
  const value = SPEC[name]?.default;
  if (typeof value !== "number") throw new Error(`the KEDA fixture gives spec.${name} no numeric default`);
  return value;
}

function checkFields(at: string, value: unknown, fields: Record<string, FieldSpec>, problems: string[]): value is Obj {
  if (!isObj(value)) {
    problems.push(`${at}: not an object`);
    return false;
  }
  unknownKeys(at, value, Object.keys(fields), problems);
  for (const [key, spec] of Object.entries(fields)) {
    const v = value[key];
    if (v === undefined) {
      if (spec.required) problems.push(`${at}.${key}: required`);
      continue;
    }
    const path = `${at}.${key}`;
    if (spec.type === "int32") checkInt32(path, v, problems, spec.min ?? 0);
    else if (spec.type === "string") {
      if (typeof v !== "string" || (spec.required && v === "")) problems.push(`${path}: needs a${spec.required ? " non-empty" : ""} string`);
      else if (spec.enum && !spec.enum.includes(v)) problems.push(`${path}: "${v}" is not one of ${spec.enum.join(", ")}`);
    } else if (spec.type === "boolean") {
      if (typeof v !== "boolean") problems.push(`${path}: needs true or false`);
    } else if (spec.type === "object") {
      if (!isObj(v)) problems.push(`${path}: not an object`);
    } else if (spec.type === "array") {
      if (!Array.isArray(v)) problems.push(`${path}: not a list`);
    }
  }
  return true;
}

function checkHpaBehavior(at: string, behavior: unknown, problems: string[]): void {
  if (!isObj(behavior)) {
    problems.push(`${at}: not an object`);
    return;
  }
  unknownKeys(at, behavior, HPA_BEHAVIOR.directions, problems);
  for (const direction of HPA_BEHAVIOR.directions) {
    const rules = behavior[direction];
    if (rules === undefined) continue;
    const path = `${at}.${direction}`;
    if (!isObj(rules)) {
      problems.push(`${path}: not an object`);
      continue;
    }
    unknownKeys(path, rules, HPA_BEHAVIOR.ruleKeys, problems);
    if (rules.stabilizationWindowSeconds !== undefined) checkInt32(`${path}.stabilizationWindowSeconds`, rules.stabilizationWindowSeconds, problems);
    if (rules.selectPolicy !== undefined && !HPA_BEHAVIOR.selectPolicy.includes(rules.selectPolicy as string)) {
      problems.push(`${path}.selectPolicy: "${String(rules.selectPolicy)}" is not one of ${HPA_BEHAVIOR.selectPolicy.join(", ")}`);
    }
    if (rules.policies === undefined) continue;
    if (!Array.isArray(rules.policies)) {
      problems.push(`${path}.policies: not a list`);
      continue;
    }
    rules.policies.forEach((policy: unknown, i: number) => {
      const p = `${path}.policies[${i}]`;
      if (!isObj(policy)) {
        problems.push(`${p}: not an object`);
        return;
      }
      unknownKeys(p, policy, HPA_BEHAVIOR.policyKeys, problems);
      if (!HPA_BEHAVIOR.policyTypes.includes(policy.type as string))
        problems.push(`${p}.type: "${String(policy.type)}" is not one of ${HPA_BEHAVIOR.policyTypes.join(", ")}`);
      checkInt32(`${p}.value`, policy.value, problems, 1);
      checkInt32(`${p}.periodSeconds`, policy.periodSeconds, problems, 1);
    });
  }
}

function checkAdvanced(at: string, advanced: unknown, problems: string[]): void {
  if (!isObj(advanced)) return;
  unknownKeys(at, advanced, Object.keys(ADVANCED), problems);
  if (advanced.restoreToOriginalReplicaCount !== undefined && typeof advanced.restoreToOriginalReplicaCount !== "boolean") {
    problems.push(`${at}.restoreToOriginalReplicaCount: needs true or false`);
  }
  const hpa = advanced.horizontalPodAutoscalerConfig;
  if (
    hpa !== undefined &&
    checkFields(`${at}.horizontalPodAutoscalerConfig`, hpa, ADVANCED.horizontalPodAutoscalerConfig as Record<string, FieldSpec>, problems)
  ) {
    if (hpa.behavior !== undefined) checkHpaBehavior(`${at}.horizontalPodAutoscalerConfig.behavior`, hpa.behavior, problems);
  }
  if (advanced.scalingModifiers !== undefined) {
    checkFields(`${at}.scalingModifiers`, advanced.scalingModifiers, ADVANCED.scalingModifiers as Record<string, FieldSpec>, problems);
  }
}

function checkPrometheusMetadata(at: string, metadata: Obj, series: Set<string> | undefined, problems: string[]): void {
  unknownKeys(at, metadata, Object.keys(PROMETHEUS), problems);
  for (const [key, spec] of Object.entries(PROMETHEUS)) {
    const v = metadata[key];
    if (v === undefined) {
      if (spec.required) problems.push(`${at}.${key}: required`);
      continue;
    }
    if (typeof v !== "string") continue; // reported by the trigger check
    const path = `${at}.${key}`;
    if (spec.type === "float" && !GO_FLOAT.test(v.trim())) problems.push(`${path}: "${v}" is not a number`);
    else if (spec.type === "bool" && !GO_BOOLS.has(v)) problems.push(`${path}: "${v}" is not a boolean`);
    else if (spec.type === "duration" && !GO_DURATION.test(v)) problems.push(`${path}: "${v}" is neither a duration ("30s") nor milliseconds`);
    else if (spec.required && v.trim() === "") problems.push(`${path}: empty`);
  }
  if (typeof metadata.serverAddress === "string" && !/^https?:\/\/[^\s/]+/.test(metadata.serverAddress)) {
    problems.push(`${at}.serverAddress: "${metadata.serverAddress}" is not an http(s) URL`);
  }
  if (series && typeof metadata.query === "string") {
    for (const name of seriesNames(metadata.query)) {
      if (!series.has(name)) problems.push(`${at}.query: selects "${name}", which no known exporter exposes`);
    }
  }
}

function checkTriggers(at: string, triggers: unknown, series: Set<string> | undefined, problems: string[]): Obj[] {
  if (!Array.isArray(triggers)) return [];
  if (triggers.length === 0) problems.push(`${at}: needs at least one trigger`);
  const names = new Map<string, number>();
  const good: Obj[] = [];
  triggers.forEach((trigger: unknown, i: number) => {
    const t = `${at}[${i}]`;
    if (!isObj(trigger)) {
      problems.push(`${t}: not an object`);
      return;
    }
    good.push(trigger);
    unknownKeys(
      t,
      trigger,
      Object.keys(TRIGGER).filter((k) => !["namesUnique", "atLeastOne"].includes(k)),
      problems,
    );
    if (typeof trigger.type !== "string" || trigger.type === "") problems.push(`${t}.type: required`);
    if (trigger.name !== undefined) {
      if (typeof trigger.name !== "string") problems.push(`${t}.name: needs a string`);
      else if (trigger.name !== "") {
        if (names.has(trigger.name))
          problems.push(`${t}.name: "${trigger.name}" is also the name of triggers[${names.get(trigger.name)}]; names must be unique`);
        else names.set(trigger.name, i);
      }
    }
    if (trigger.useCachedMetrics !== undefined) {
      if (typeof trigger.useCachedMetrics !== "boolean") problems.push(`${t}.useCachedMetrics: needs true or false`);
      else if (trigger.useCachedMetrics && TRIGGER.useCachedMetrics.notFor.includes(trigger.type as string)) {
        problems.push(`${t}.useCachedMetrics: not supported for the ${String(trigger.type)} scaler`);
      }
    }
    if (trigger.authenticationRef !== undefined)
      checkFields(`${t}.authenticationRef`, trigger.authenticationRef, TRIGGER.authenticationRef as Record<string, FieldSpec>, problems);
    const isResource = RESOURCE_TRIGGERS.has(trigger.type as string);
    if (trigger.metricType !== undefined && !isResource && !METRIC_TYPES.allowed.includes(trigger.metricType as string)) {
      problems.push(`${t}.metricType: "${String(trigger.metricType)}" is not one of ${METRIC_TYPES.allowed.join(", ")} for an external scaler`);
    }
    if (!isObj(trigger.metadata)) {
      problems.push(`${t}.metadata: required (a map of strings)`);
      return;
    }
    for (const [key, v] of Object.entries(trigger.metadata)) {
      if (typeof v !== "string") problems.push(`${t}.metadata.${key}: ${JSON.stringify(v)} is not a string (KEDA metadata is a map of strings)`);
    }
    if (trigger.type === "prometheus") checkPrometheusMetadata(`${t}.metadata`, trigger.metadata, series, problems);
  });
  return good;
}

/** Every problem of `object` as a ScaledObject, each naming its path; empty when KEDA would take it. */
export function checkScaledObject(object: unknown, options: ScaledObjectCheckOptions = {}): string[] {
  const problems: string[] = [];
  if (!isObj(object)) return ["ScaledObject: not an object"];
  if (object.apiVersion !== "keda.sh/v1alpha1") problems.push(`apiVersion: "${String(object.apiVersion)}" is not keda.sh/v1alpha1`);
  if (object.kind !== "ScaledObject") problems.push(`kind: "${String(object.kind)}" is not ScaledObject`);
  const metadata = isObj(object.metadata) ? object.metadata : {};
  if (typeof metadata.name !== "string" || metadata.name === "") problems.push("metadata.name: required");

  const annotations = isObj(metadata.annotations) ? metadata.annotations : {};
  for (const [key, value] of Object.entries(annotations)) {
    const at = `metadata.annotations["${key}"]`;
    const kedaPrefix = /^(autoscaling\.keda\.sh|scaledobject\.keda\.sh|validations\.keda\.sh)\//.test(key);
    if (kedaPrefix && !(key in ANNOTATIONS)) problems.push(`${at}: not an annotation KEDA reads; known: ${Object.keys(ANNOTATIONS).join(", ")}`);
    if (key === "autoscaling.keda.sh/paused-replicas" && !(typeof value === "string" && /^\d+$/.test(value))) {
      problems.push(`${at}: ${JSON.stringify(value)} is not a replica count`);
    } else if (
      kedaPrefix &&
      key.startsWith("autoscaling.keda.sh/") &&
      key !== "autoscaling.keda.sh/paused-replicas" &&
      !(typeof value === "string" && GO_BOOLS.has(value))
    ) {
      // KEDA reads any other value as true; refuse it so "paused: no" cannot pause.
      problems.push(`${at}: ${JSON.stringify(value)} is not "true" or "false" (KEDA would read it as true)`);
    }
  }

  const spec = object.spec;
  if (!checkFields("spec", spec, SPEC, problems)) return problems;
  if (spec.scaleTargetRef !== undefined) checkFields("spec.scaleTargetRef", spec.scaleTargetRef, TARGET, problems);

  const min = typeof spec.minReplicaCount === "number" ? spec.minReplicaCount : specDefault("minReplicaCount");
  const max = typeof spec.maxReplicaCount === "number" ? spec.maxReplicaCount : specDefault("maxReplicaCount");
  if (min > max) problems.push(`spec.minReplicaCount: ${min} is above maxReplicaCount ${max}`);
  if (typeof spec.idleReplicaCount === "number" && spec.idleReplicaCount >= min) {
    problems.push(`spec.idleReplicaCount: ${spec.idleReplicaCount} must be below minReplicaCount ${min}`);
  }

  checkAdvanced("spec.advanced", spec.advanced, problems);
  const triggers = checkTriggers("spec.triggers", spec.triggers, options.series, problems);

  if (spec.fallback !== undefined && checkFields("spec.fallback", spec.fallback, FALLBACK, problems)) {
    const modifiers = isObj(spec.advanced) && isObj(spec.advanced.scalingModifiers) && Object.keys(spec.advanced.scalingModifiers).length > 0;
    if (!modifiers && triggers.length > 0 && triggers.every((t) => RESOURCE_TRIGGERS.has(t.type as string))) {
      problems.push("spec.fallback: needs at least one trigger that is not cpu or memory");
    }
  }
  return problems;
}

/** The series a ScaledObject of ours may query: vLLM's and the RBLN exporter's (promql.ts), and the EPP's at llm-d-router v0.10.0. */
export function autoscalingSeries(): Set<string> {
  const series = knownSeries();
  for (const { name } of facts["epp.series"].value) series.add(name);
  return series;
}

const facts220 = keda220Fixture.facts;
const NAME_LIMIT = facts220["refuse.name"].value.max;
const MARKERS = facts220["crd.markers"].value;
const KEDA_DEFAULTS = facts220.defaults.value;

/** The value at a dotted path under `at` (`fallback.replicas`), or undefined. */
function valueAt(at: unknown, path: string): unknown {
  return path.split(".").reduce<unknown>((value, key) => (isObj(value) ? value[key] : undefined), at);
}

/** KEDA's GetHPAMinReplicas: minReplicaCount when it is above 0, else 1. */
const hpaMinReplicas = (spec: Obj) =>
  typeof spec.minReplicaCount === "number" && spec.minReplicaCount > 0 ? spec.minReplicaCount : KEDA_DEFAULTS.hpaMinReplicas;

/** What KEDA 2.20's CRD markers refuse (keda-v2.20.json, crd.markers; v2.19's CRD has none of them). */
function crdMarkerRefusals(spec: Obj): string[] {
  const refusals: string[] = [];
  for (const [path, min] of Object.entries(MARKERS.minimum)) {
    const value = valueAt(spec, path);
    if (typeof value === "number" && value < min) refusals.push(`spec.${path}: ${value} is below the CRD's minimum ${min}`);
  }
  const name = valueAt(spec, "scaleTargetRef.name");
  if (typeof name === "string" && name.length < MARKERS.minLength["scaleTargetRef.name"]) refusals.push("spec.scaleTargetRef.name: empty");
  const triggers = Array.isArray(spec.triggers) ? spec.triggers : [];
  if (triggers.length < MARKERS.minItems.triggers) refusals.push(`spec.triggers: fewer than ${MARKERS.minItems.triggers}`);
  triggers.forEach((trigger: unknown, i: number) => {
    if (!isObj(trigger)) return;
    if (typeof trigger.type === "string" && trigger.type.length < MARKERS.minLength["triggers[].type"]) refusals.push(`spec.triggers[${i}].type: empty`);
    const kind = valueAt(trigger, "authenticationRef.kind");
    if (kind !== undefined && !MARKERS.enum["triggers[].authenticationRef.kind"].includes(kind as string))
      refusals.push(
        `spec.triggers[${i}].authenticationRef.kind: ${JSON.stringify(kind)} is not one of ${MARKERS.enum["triggers[].authenticationRef.kind"].join(", ")}`,
      );
  });
  const behavior = valueAt(spec, "fallback.behavior");
  if (behavior !== undefined && !MARKERS.enum["fallback.behavior"].includes(behavior as string))
    refusals.push(`spec.fallback.behavior: ${JSON.stringify(behavior)} is not one of ${MARKERS.enum["fallback.behavior"].join(", ")}`);
  // The CEL rule: minReplicaCount <= (maxReplicaCount or 100).
  const max = typeof spec.maxReplicaCount === "number" ? spec.maxReplicaCount : KEDA_DEFAULTS.maxReplicaCount;
  if (typeof spec.minReplicaCount === "number" && spec.minReplicaCount > max)
    refusals.push(`spec.minReplicaCount: ${spec.minReplicaCount} is above maxReplicaCount ${max} (the CRD's rule)`);
  return refusals;
}

/** What KEDA 2.20's admission webhook refuses beyond v2.19's (keda-v2.20.json: refuse.name, refuse.replicaBounds, fallback.scalingModifiers). */
function webhookRefusals(name: unknown, spec: Obj): string[] {
  const refusals: string[] = [];
  if (typeof name === "string") {
    if (name.length > NAME_LIMIT) refusals.push(`metadata.name: "${name}" is ${name.length} characters; at most ${NAME_LIMIT}`);
    const hpaName = valueAt(spec, "advanced.horizontalPodAutoscalerConfig.name");
    const hpa = typeof hpaName === "string" && hpaName !== "" ? hpaName : `keda-hpa-${name}`;
    if (hpa.length > NAME_LIMIT) refusals.push(`HPA name "${hpa}" is ${hpa.length} characters; at most ${NAME_LIMIT}`);
  }
  const [min, max] = [hpaMinReplicas(spec), typeof spec.maxReplicaCount === "number" ? spec.maxReplicaCount : KEDA_DEFAULTS.maxReplicaCount];
  if (min > max) refusals.push(`spec.minReplicaCount: the HPA's minimum ${min} is above maxReplicaCount ${max}`);
  if (typeof spec.idleReplicaCount === "number" && spec.idleReplicaCount >= min)
    refusals.push(`spec.idleReplicaCount: ${spec.idleReplicaCount} must be below the HPA's minimum ${min}`);
  if (valueAt(spec, "fallback.behavior") === facts220["fallback.scalingModifiers"].value.behavior && !valueAt(spec, "advanced.scalingModifiers.formula"))
    refusals.push("spec.fallback.behavior: scalingModifiers needs spec.advanced.scalingModifiers.formula");
  return refusals;
}

/** What KEDA 2.20's admission warns about (keda-v2.20.json: warn.cooldownPeriod, warn.pollingInterval); v2.19 never warns. */
function webhookWarnings(spec: Obj): string[] {
  const minAboveZero = typeof spec.minReplicaCount === "number" && spec.minReplicaCount > 0;
  const idleNotZero = spec.idleReplicaCount === undefined || spec.idleReplicaCount !== 0;
  if (!minAboveZero || !idleNotZero) return [];
  const cachedMetrics = Array.isArray(spec.triggers) && spec.triggers.some((t: unknown) => isObj(t) && t.useCachedMetrics === true);
  return [
    ...(spec.cooldownPeriod !== undefined ? [`spec.cooldownPeriod: ${facts220["warn.cooldownPeriod"].value.warning}`] : []),
    ...(spec.pollingInterval !== undefined && !cachedMetrics ? [`spec.pollingInterval: ${facts220["warn.pollingInterval"].value.warning}`] : []),
  ];
}

/** What KEDA v2.20.2 would refuse and warn about in `object`, beyond what it shares with v2.19 (checkScaledObject). */
export function checkScaledObjectV220(object: unknown): { refusals: string[]; warnings: string[] } {
  if (!isObj(object) || !isObj(object.spec)) return { refusals: ["ScaledObject: no spec"], warnings: [] };
  const name = isObj(object.metadata) ? object.metadata.name : undefined;
  return { refusals: [...webhookRefusals(name, object.spec), ...crdMarkerRefusals(object.spec)], warnings: webhookWarnings(object.spec) };
}

/**
 * Every problem of `object` as a ScaledObject on KEDA v2.19.0 and on v2.20.2, each line saying which
 * version: empty when both take it without a warning. Every ScaledObject the package renders is run
 * through it.
 */
export function checkScaledObjectOnBoth(object: unknown, options: ScaledObjectCheckOptions = {}): string[] {
  const v220 = checkScaledObjectV220(object);
  return [
    ...checkScaledObject(object, options).map((p) => `KEDA 2.19: ${p}`),
    ...v220.refusals.map((p) => `KEDA 2.20 refuses: ${p}`),
    ...v220.warnings.map((p) => `KEDA 2.20 warns: ${p}`),
  ];
}
