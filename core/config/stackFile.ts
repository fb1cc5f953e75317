import * as fs from "node:fs";
import * as path from "node:path";
import { parse, YAMLParseError } from "yaml";
import { ConfigError } from "../errors";
import { packageRoot } from "../packageRoot";
import { holdsCiphertext, readConfigEntries } from "./configEntries";
import type { SecretKey } from "./stackConfig";

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

/** The stack file's YAML; a syntax fault (bad indent, duplicate key) is one line naming the file, line and column. */
function parseStackYaml(text: string, shownPath: string): { config?: Record<string, unknown> } {
  let document: unknown;
  try {
    document = parse(text);
  } catch (error) {
    if (!(error instanceof YAMLParseError)) throw error;
    const at = error.linePos?.[0];
    const reason = error.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
    throw new ConfigError(at ? `${shownPath}:${at.line}:${at.col}` : shownPath, `invalid YAML: ${reason}`);
  }
  const config = (document as { config?: unknown } | null)?.config;
  if ((document !== null && (typeof document !== "object" || Array.isArray(document))) || (config != null && (typeof config !== "object" || Array.isArray(config)))) {
    throw new ConfigError(shownPath, "not a Pulumi stack file: expected a mapping with a config: mapping of keys");
  }
  return (document ?? {}) as { config?: Record<string, unknown> };
}

export function readStackFile(name: string, dir: string = DEFAULT_STACK_DIR): StackFile {
  const file = stackFilePath(name, dir);
  if (!fs.existsSync(file)) {
    const known = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => /^Pulumi\..+\.yaml$/.test(f)).map((f) => f.slice(7, -5)) : [];
    throw new ConfigError("--stack", `no stack file ${path.relative(process.cwd(), file)}; stacks: ${known.join(", ") || "(none)"}`);
  }
  const shownPath = path.relative(process.cwd(), file);
  const document = parseStackYaml(fs.readFileSync(file, "utf8"), shownPath);
  const { settings, secrets, warnings } = readConfigEntries(document.config ?? {}, (_, value) => holdsCiphertext(value));
  return { name, raw: settings, secrets, warnings: warnings.map((w) => `${path.basename(file)}: ${w}`) };
}
