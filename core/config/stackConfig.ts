// Parsing the stack config: the schema (schema.ts) with the checks across keys (crossFieldChecks.ts),
// one refusal line per bad config, and the warnings about keys the project does not read.
import type { z } from "zod";
import { MAX_JSON_DEPTH } from "../recipe/catalog";
import { ConfigError, formatPath, issueMessage, maskedUrl, maskUrlCredentials } from "../errors";
import { crossFieldIssues } from "./crossFieldChecks";
import { modelIssues, refuseModelKeysBesideModels, topLevelSelection } from "./models";
import { refuseNumbersOutOfRange } from "./numbers";
import { SettingsSchema } from "./schema";
import { SECRET_KEYS } from "./secrets";

/** The project's config namespace: stack keys are `rbln-serving:<key>`. */
export const CONFIG_NAMESPACE = "rbln-serving";

/** What the checks across keys refuse, in order: the top level's selection, the checks of one stack, those of models. */
function settingsIssues(settings: z.output<typeof SettingsSchema>) {
  return [...topLevelSelection(settings), ...crossFieldIssues(settings), ...modelIssues(settings)];
}

/** The stack config's schema with its checks across keys. */
export const StackSettings = SettingsSchema.superRefine((settings, ctx) => {
  for (const { path, message, hideValue } of settingsIssues(settings))
    ctx.addIssue({ code: "custom", path, message, ...(hideValue ? { params: { hideValue } } : {}) });
});
export type StackSettings = z.infer<typeof StackSettings>;

/**
 * Warnings for config keys under another namespace that the project would have read under its
 * own (`rbln_serving:strategy`, `rbln:hosts`): Pulumi keeps them, and nothing reads them.
 */
export function foreignKeyWarnings(fullKeys: readonly string[]): string[] {
  const ours = new Set<string>([...Object.keys(StackSettings.shape), ...SECRET_KEYS]);
  return fullKeys.flatMap((fullKey) => {
    const colon = fullKey.indexOf(":");
    if (colon < 0) return [];
    const [namespace, key] = [fullKey.slice(0, colon), fullKey.slice(colon + 1)];
    if (namespace === CONFIG_NAMESPACE) return [];
    const lookalike = namespace.toLowerCase().replace(/[_.\s]/g, "-") === CONFIG_NAMESPACE;
    if (!lookalike && !ours.has(key)) return [];
    return [`${fullKey}: not read: the project reads keys under "${CONFIG_NAMESPACE}:" only; did you mean ${CONFIG_NAMESPACE}:${key}?`];
  });
}

/** Settings that only one platform reads: on the other they do nothing. */
export const PLATFORM_ONLY_KEYS: Readonly<Record<StackSettings["platform"], readonly (keyof StackSettings)[]>> = {
  hosts: ["hosts", "sshProxy", "insecureSkipHostKeyCheck", "pip", "versions", "installRoot", "cacheRoot", "minFreeDiskGb", "minFreeDiskGbToRestart", "cache"],
  kubernetes: ["kubernetes", "autoscaling"],
};

/** The keys the chosen platform ignores. */
export function otherPlatformKeys(platform: StackSettings["platform"]): readonly string[] {
  return platform === "hosts" ? PLATFORM_ONLY_KEYS.kubernetes : PLATFORM_ONLY_KEYS.hosts;
}

/** The keys the object schema at `at` (a config path such as `["hosts", 0, "proxy"]`) takes, through zod's wrappers. */
function objectKeysAt(schema: z.ZodType, at: readonly PropertyKey[]): string[] {
  let current: z.core.$ZodType | undefined = schema;
  let rest = [...at];
  while (current) {
    const def = current._zod.def as unknown as Record<string, unknown> & { type: string };
    // A preprocess (a transform before its schema) goes on to the schema; a transform after one, to what it transforms.
    if (def.type === "pipe") current = ((def.in as z.core.$ZodType)._zod.def.type === "transform" ? def.out : def.in) as z.core.$ZodType;
    else if (def.type === "default" || def.type === "optional" || def.type === "nullable") current = def.innerType as z.core.$ZodType;
    else if (def.type === "array" && typeof rest[0] === "number") [current, rest] = [def.element as z.core.$ZodType, rest.slice(1)];
    else if (def.type === "record" && rest.length > 0) [current, rest] = [def.valueType as z.core.$ZodType, rest.slice(1)];
    else if (def.type === "object" && rest.length > 0) [current, rest] = [(def.shape as Record<string, z.core.$ZodType>)[String(rest[0])], rest.slice(1)];
    else if (def.type === "object") return Object.keys(def.shape as object);
    else return [];
  }
  return [];
}

/** pip's strings are index URLs, which may carry a user and password even without a scheme. */
function maskUrls(value: unknown): unknown {
  if (typeof value === "string") return maskedUrl(value);
  if (Array.isArray(value)) return value.map(maskUrls);
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, maskUrls(inner)]));
  return value;
}

function describeIssue(issue: z.core.$ZodIssue, raw: Record<string, unknown>): ConfigError {
  if (issue.code === "unrecognized_keys") {
    const at = formatPath(issue.path);
    const allowed = at
      ? `; allowed: ${objectKeysAt(StackSettings, issue.path).join(", ")}`
      : `; allowed: ${Object.keys(StackSettings.shape).join(", ")} and the secrets ${SECRET_KEYS.join(", ")}`;
    return new ConfigError(at ? `${at}.${issue.keys[0]}` : issue.keys[0]!, `unknown key${allowed}`);
  }
  const at = formatPath(issue.path) || "(config)";
  let value: unknown = raw;
  for (const part of issue.path)
    value = value !== null && typeof value === "object" && Object.hasOwn(value, part) ? (value as Record<PropertyKey, unknown>)[part] : undefined;
  // A refused credential is not repeated in the error, which ends up in terminals and CI logs; other
  // messages with this mark name the value themselves.
  if (issue.code === "custom" && issue.params?.hideValue) return new ConfigError(at, issueMessage(issue));
  const text = JSON.stringify(issue.path[0] === "pip" ? maskUrls(value) : value);
  // Masked before it is cut, so no cut hides the `@` that marks a password.
  const shown = value === undefined ? "missing" : `got ${maskUrlCredentials(text).slice(0, 80)}`;
  return new ConfigError(at, `${issueMessage(issue)} (${shown})`);
}

/**
 * Refuses `__proto__` keys at any depth: JSON and YAML make them ordinary keys, but an object
 * built from them (zod's records, a spread) would take them as its prototype, or drop them. Also
 * refuses nesting deeper than any setting goes (as in a recipe), before anything recurses through it.
 */
function refusePrototypeKeys(value: unknown, path: PropertyKey[] = []): void {
  if (value === null || typeof value !== "object") return;
  if (path.length >= MAX_JSON_DEPTH)
    throw new ConfigError(String(path[0]), `nested more than ${MAX_JSON_DEPTH} levels deep; allowed: at most ${MAX_JSON_DEPTH} levels of maps and lists`);
  if (Object.hasOwn(value, "__proto__"))
    throw new ConfigError(formatPath([...path, "__proto__"]), "not a key any setting takes (JavaScript reads it as an object's prototype)");
  for (const [key, inner] of Object.entries(value)) refusePrototypeKeys(inner, [...path, Array.isArray(value) ? Number(key) : key]);
}

/**
 * Validates the project's stack config (keys without the `rbln-serving:` prefix). Secret keys are
 * taken out first: they are read as secrets by the program and never validated as plain text.
 * Throws one ConfigError naming the key path, the value and what is allowed.
 */
export function parseStackSettings(raw: Record<string, unknown>): StackSettings {
  const plain = Object.fromEntries(Object.entries(raw).filter(([key]) => !(SECRET_KEYS as readonly string[]).includes(key)));
  refusePrototypeKeys(plain);
  // A program may hand Infinity or NaN, which zod would show as null.
  for (const [key, value] of Object.entries(plain)) refuseNumbersOutOfRange(key, value);
  // Each key on its own first, then a model's keys in one place only, then the checks across keys.
  const result = SettingsSchema.safeParse(plain);
  if (!result.success) throw describeIssue(result.error.issues[0]!, plain);
  refuseModelKeysBesideModels(plain);
  const [issue] = settingsIssues(result.data);
  if (issue) {
    const { path, message, hideValue } = issue;
    throw describeIssue({ code: "custom", path, message, input: undefined, ...(hideValue ? { params: { hideValue } } : {}) }, plain);
  }
  return result.data;
}
