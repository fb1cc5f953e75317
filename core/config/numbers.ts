// Numbers a stack file or a JSON value cannot carry: a literal past a 64-bit float's range reads as
// Infinity, which JSON writes as null, so the refusal would name a value nobody wrote.
import { isAlias, isScalar, parseDocument, type Document } from "yaml";
import { ConfigError, formatPath } from "../errors";

/** Path steps into a config value: map keys and list indices. */
export type ValuePath = (string | number)[];

/** Why a number read from `written` does not stand for what was written; undefined when it does. */
function outOfRange(value: number, written: string): string | undefined {
  if (Number.isNaN(value)) return `${written} is not a number (NaN); allowed: a finite number`;
  if (!Number.isFinite(value) || Math.abs(value) > Number.MAX_SAFE_INTEGER) {
    return `${written} is a number out of range; allowed: numbers within ±9007199254740991 (2^53 - 1), which a 64-bit float holds exactly`;
  }
  // `1e-400` reads as 0: a digit other than 0 before the exponent says it was not meant as 0.
  if (value === 0 && /[1-9]/.test(written.replace(/^0[xXoO]/, "").split(/[eE]/)[0]!)) {
    return `${written} is a number out of range: closer to 0 than a 64-bit float holds, so it would read as 0; allowed: 0, or a magnitude of at least 5e-324`;
  }
  return undefined;
}

/** Where and how a number was written, when the reader knows. */
export interface Written {
  text?: string;
  where?: string;
}

/**
 * The first number inside `value` (parsed from YAML or JSON, or given by a program) that is out of
 * range: its path and why. Depth first, without recursion: the value may be nested deeper than the
 * stack goes, which a later check refuses.
 */
function firstOutOfRange(value: unknown, written: (path: ValuePath) => Written): { path: ValuePath; refusal: string } | undefined {
  // Each step links to its parent: a path is built only for a number that needs it.
  type Step = { value: unknown; key?: string | number; parent?: Step };
  const pathOf = (step: Step): ValuePath => {
    const path: ValuePath = [];
    for (let at: Step | undefined = step; at?.key !== undefined; at = at.parent) path.unshift(at.key);
    return path;
  };
  const pending: Step[] = [{ value }];
  for (let step = pending.pop(); step; step = pending.pop()) {
    const inner = step.value;
    if (typeof inner === "number") {
      // Looked up only when it may be out of range: a 0 (perhaps an underflow), or one out of range as it reads.
      if (inner !== 0 && outOfRange(inner, String(inner)) === undefined) continue;
      const path = pathOf(step);
      const { text, where } = written(path);
      const refusal = outOfRange(inner, text ?? String(inner));
      if (refusal !== undefined) return { path, refusal: `${refusal}${where ? ` (${where})` : ""}` };
    } else if (inner !== null && typeof inner === "object") {
      const entries = Object.entries(inner);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        pending.push({ value: child, key: Array.isArray(inner) ? Number(key) : key, parent: step });
      }
    }
  }
  return undefined;
}

/** A number's text as a YAML or JSON document writes it at `path`, through aliases; undefined where the path finds no scalar. */
export function writtenNumber(document: Document, path: ValuePath): string | undefined {
  let node: unknown = document.getIn(path, true);
  if (isAlias(node)) node = node.resolve(document);
  return isScalar(node) && typeof node.value === "number" ? (node.source ?? undefined) : undefined;
}

/**
 * Refuses the first number out of range in the value of `key` (a setting, or a config key):
 * Infinity, NaN, beyond ±(2^53 - 1), or a literal other than 0 that reads as 0. `written` gives the
 * number's text as the user wrote it, and where, when the reader knows.
 */
export function refuseNumbersOutOfRange(key: string, value: unknown, written: (path: ValuePath) => Written = () => ({})): void {
  const found = firstOutOfRange(value, written);
  if (found) throw new ConfigError(formatPath([key, ...found.path]), found.refusal);
}

/** The text of the number at `path` of a JSON text, as written. */
export function numberInJson(text: string, path: ValuePath): string | undefined {
  return writtenNumber(parseDocument(text, { logLevel: "silent" }), path);
}
