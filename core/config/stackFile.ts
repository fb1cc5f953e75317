import { isUtf8 } from "node:buffer";
import * as fs from "node:fs";
import * as path from "node:path";
import { type Document, parse, parseDocument, type YAMLError } from "yaml";
import { ConfigError } from "../errors";
import { packageRoot } from "../packageRoot";
import { readUserBytes, type UserPath } from "../userFiles";
import { holdsCiphertext, readConfigEntries } from "./configEntries";
import { type ValuePath, type Written, writtenNumber } from "./numbers";
import type { SecretKey } from "./secrets";

export const DEFAULT_STACK_DIR = path.join(packageRoot(), "stacks");

/** Where Pulumi keeps the stack files of the project in `dir`: its Pulumi.yaml's `stackConfigDir`, else `dir` itself. */
export function projectStackDir(dir: string = process.cwd()): string {
  const project = path.join(dir, "Pulumi.yaml");
  if (!fs.existsSync(project)) return dir;
  const { stackConfigDir } = (parse(fs.readFileSync(project, "utf8")) ?? {}) as { stackConfigDir?: unknown };
  return typeof stackConfigDir === "string" ? path.resolve(dir, stackConfigDir) : dir;
}

/** A stack file read offline: the project's keys (prefix removed) and which secrets it holds encrypted. */
export interface StackFile {
  name: string;
  /** The settings input, read as the program reads it (readConfigEntries). */
  raw: Record<string, unknown>;
  secrets: SecretKey[];
  /** Keys the file holds that nothing reads (another namespace), one line each. */
  warnings: string[];
}

export function stackFilePath(name: string, dir: string = DEFAULT_STACK_DIR): string {
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new ConfigError("--stack", `"${name}" is not a stack name (letters, digits, '.', '_', '-')`);
  return path.join(dir, `Pulumi.${name}.yaml`);
}

/** Larger than any stack file (a thousand hosts take a few hundred kB); a bigger one is refused unread. */
const MAX_STACK_FILE_BYTES = 4 * 2 ** 20;
const STACK_FILE: UserPath = { key: "--stack", wanted: `a stack file: a YAML text file of at most ${MAX_STACK_FILE_BYTES / 2 ** 20} MiB` };

/**
 * A stack file's text: a regular file (a folder, FIFO or device is refused without reading it);
 * a byte that is not UTF-8 is refused with its line (a decoder would make it U+FFFD without a word).
 */
function readUtf8(shownPath: string): string {
  return stackFileText(readUserBytes(shownPath, STACK_FILE, MAX_STACK_FILE_BYTES), shownPath);
}

/** A stack file's bytes (from a file, or from git) as text: at most the size a stack file may have, UTF-8 line by line. */
export function stackFileText(bytes: Buffer, shownPath: string): string {
  if (bytes.length > MAX_STACK_FILE_BYTES) throw new ConfigError(shownPath, `is ${bytes.length} bytes; allowed: ${STACK_FILE.wanted}`);
  if (!isUtf8(bytes)) {
    // A newline byte is never inside a UTF-8 sequence, so the first line that fails alone holds the fault.
    let start = 0;
    for (let line = 1; ; line++) {
      const end = bytes.indexOf(0x0a, start);
      if (!isUtf8(bytes.subarray(start, end < 0 ? bytes.length : end)))
        throw new ConfigError(`${shownPath}:${line}`, "not UTF-8 text; save the stack file as UTF-8");
      start = end + 1;
    }
  }
  return bytes.toString("utf8");
}

/** Anchors a stack file may expand: enough for any config, and far short of an alias bomb's billions. */
const MAX_ALIAS_COUNT = 100;

/**
 * The stack file's YAML as Pulumi's engine reads it (YAML 1.2 core types, `<<` merge keys); a fault
 * (bad indent, duplicate key, an unknown tag, an alias bomb) is one line naming the file, line and column.
 */
function parseStackYaml(text: string, shownPath: string): { document: { config?: Record<string, unknown> }; yaml: Document } {
  const parsed = parseDocument(text, { merge: true, resolveKnownTags: false, logLevel: "silent" });
  const fault: YAMLError | undefined = parsed.errors[0] ?? parsed.warnings[0];
  if (fault) {
    const at = fault.linePos?.[0];
    throw new ConfigError(
      at ? `${shownPath}:${at.line}:${at.col}` : shownPath,
      `invalid YAML: ${fault.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")}`,
    );
  }
  let document: unknown;
  try {
    document = parsed.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    // The yaml package throws a ReferenceError for an alias without its anchor, and for too many aliases.
    if (!(error instanceof ReferenceError)) throw error;
    throw new ConfigError(
      shownPath,
      `invalid YAML: ${/excessive alias count/i.test(error.message) ? `more than ${MAX_ALIAS_COUNT} aliases to expand, as in an alias bomb` : error.message}`,
    );
  }
  const config = (document as { config?: unknown } | null)?.config;
  if (
    (document !== null && (typeof document !== "object" || Array.isArray(document))) ||
    (config != null && (typeof config !== "object" || Array.isArray(config)))
  ) {
    throw new ConfigError(shownPath, "not a Pulumi stack file: expected a mapping with a config: mapping of keys");
  }
  return { document: (document ?? {}) as { config?: Record<string, unknown> }, yaml: parsed };
}

/** How a stack file writes the number at `path` of config key `fullKey`, and on which line. */
function writtenIn(yaml: Document, text: string, shownPath: string): (fullKey: string, path: ValuePath) => Written {
  return (fullKey, path) => {
    const node = yaml.getIn(["config", fullKey, ...path], true) as { range?: [number, number, number] } | undefined;
    const line = node?.range ? text.slice(0, node.range[0]).split("\n").length : undefined;
    return { text: writtenNumber(yaml, ["config", fullKey, ...path]), where: line === undefined ? shownPath : `${shownPath}:${line}` };
  };
}

export function readStackFile(name: string, dir: string = DEFAULT_STACK_DIR): StackFile {
  const file = stackFilePath(name, dir);
  if (!fs.existsSync(file)) {
    const known = fs.existsSync(dir)
      ? fs
          .readdirSync(dir)
          .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
          .map((f) => f.slice(7, -5))
      : [];
    throw new ConfigError("--stack", `no stack file ${path.relative(process.cwd(), file)}; stacks: ${known.join(", ") || "(none)"}`);
  }
  const shownPath = path.relative(process.cwd(), file);
  return parseStackFile(name, readUtf8(shownPath), shownPath);
}

/** A stack file's text read as the program reads the stack: `shownPath` names it in refusals (a path, or `REF:path` from git). */
export function parseStackFile(name: string, text: string, shownPath: string): StackFile {
  const { document, yaml } = parseStackYaml(text, shownPath);
  const { settings, secrets, warnings } = readConfigEntries(document.config ?? {}, (_, value) => holdsCiphertext(value), writtenIn(yaml, text, shownPath));
  return { name, raw: settings, secrets, warnings: warnings.map((w) => `${path.basename(shownPath)}: ${w}`) };
}

/** A stack file the user names by its path (`diff --against FILE`). */
export function readStackFileAt(file: string): StackFile {
  return parseStackFile(path.basename(file).replace(/^Pulumi\.(.+)\.yaml$/, "$1"), readUtf8(file), file);
}
