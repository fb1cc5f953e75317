import type { z } from "zod";
import { ConfigError } from "../errors";
import { numberInJson, refuseNumbersOutOfRange, type ValuePath, type Written } from "./numbers";
import { CONFIG_NAMESPACE, foreignKeyWarnings, StackSettings } from "./stackConfig";
import { SECRET_KEYS, type SecretKey } from "./secrets";

/** The stack config as the project reads it: the same from a stack file (offline) as from Pulumi (the program). */
export interface ConfigReading {
  /** The project's keys without the `rbln-serving:` prefix, each value decoded: parseStackSettings' input. */
  settings: Record<string, unknown>;
  /** The secret keys that are set; their values are read as secrets, never here. */
  secrets: SecretKey[];
  /** Keys under another namespace that look like the project's, one line each. */
  warnings: string[];
}

/** Whether a setting's schema takes text as it is (a string, an enum, a literal) rather than JSON. */
function takesText(schema: z.core.$ZodType): boolean {
  const def = schema._zod.def as unknown as { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType };
  if (def.type === "default" || def.type === "optional") return takesText(def.innerType!);
  if (def.type === "pipe") return takesText(def.in!);
  return def.type === "string" || def.type === "enum" || def.type === "literal";
}

/** Settings whose text is JSON (maps, lists, numbers, booleans); the others take their text as it is. */
const JSON_KEYS = new Set(Object.entries(StackSettings.shape).flatMap(([key, schema]) => (takesText(schema) ? [] : [key])));

/**
 * A config value as Pulumi hands it to programs: a string as it is, anything else (a number, a
 * boolean, null, a map or a list) as JSON text, as the engine writes a stack file's YAML values.
 */
export function pulumiConfigText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * A setting's value from its text: parsed for a JSON key when it parses, else the text, which
 * validation then names as given. A number out of range is refused as the text writes it.
 */
function decode(key: string, text: string): unknown {
  if (!JSON_KEYS.has(key)) return text;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  refuseNumbersOutOfRange(key, value, (path) => ({ text: numberInJson(text, path) }));
  return value;
}

/** Whether a stack file's YAML value is encrypted: a `secure:` map, or a map or list holding one (Pulumi's nested secrets). */
export function holdsCiphertext(value: unknown): boolean {
  if (value === null || typeof value !== "object") return false;
  const entries = Object.entries(value);
  if (!Array.isArray(value) && entries.length === 1 && entries[0]![0] === "secure" && typeof entries[0]![1] === "string") return true;
  return entries.some(([, inner]) => holdsCiphertext(inner));
}

const isSecretKey = (key: string): key is SecretKey => (SECRET_KEYS as readonly string[]).includes(key);

/**
 * The one reading of stack config, for the program and the offline commands alike: `entries` are
 * full keys (`rbln-serving:hosts`; a key without a namespace is the project's, as in a stack file)
 * with their values, as a stack file's YAML holds them or as `pulumi.runtime.allConfig()` hands
 * them (every value a string, objects as JSON text). Every value goes through Pulumi's text form,
 * so both give the same settings. `isSecret` says whether an entry is encrypted. Throws a
 * ConfigError for a secret key in plain text, for an encrypted key that is no secret, and for a
 * number out of range (which JSON would write as null); `written` says how a stack file wrote it.
 */
export function readConfigEntries(
  entries: Readonly<Record<string, unknown>>,
  isSecret: (fullKey: string, value: unknown) => boolean,
  written: (fullKey: string, path: ValuePath) => Written = () => ({}),
): ConfigReading {
  const settings: [string, unknown][] = [];
  const secrets: SecretKey[] = [];
  for (const [fullKey, value] of Object.entries(entries)) {
    const colon = fullKey.indexOf(":");
    const [namespace, key] = colon < 0 ? [CONFIG_NAMESPACE, fullKey] : [fullKey.slice(0, colon), fullKey.slice(colon + 1)];
    if (namespace !== CONFIG_NAMESPACE) continue;
    const encrypted = isSecret(fullKey, value);
    if (isSecretKey(key)) {
      if (!encrypted) throw new ConfigError(key, `is stored in plain text; set it with: pulumi config set --secret ${key}`);
      secrets.push(key);
    } else if (encrypted) {
      throw new ConfigError(key, `is encrypted, but only ${SECRET_KEYS.join(", ")} are read as secrets; set it without --secret`);
    } else {
      refuseNumbersOutOfRange(key, value, (path) => written(fullKey, path));
      settings.push([key, decode(key, pulumiConfigText(value))]);
    }
  }
  // fromEntries keeps a `__proto__` key as an ordinary key, for parseStackSettings to refuse.
  return { settings: Object.fromEntries(settings), secrets, warnings: foreignKeyWarnings(Object.keys(entries)) };
}
