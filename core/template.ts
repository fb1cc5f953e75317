import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { quoteShellWord, shellComment } from "./shell";
import { packageRoot } from "./packageRoot";

/**
 * The scripts the package runs (on hosts, in pods) are bash files beside the code that renders them,
 * which editors and shellcheck read as they are. Each starts with a settings block of example
 * values; rendering replaces that block with the real values (quoted), inlines the fragments it
 * sources, and names its purpose in a comment. Secrets never pass through here: they reach the
 * scripts on stdin.
 */

const SETTINGS = /^# --- settings \(the renderer writes the real values here\) ---\n([\s\S]*?)^# --- end of settings ---\n/m;
const INCLUDE = /^# shellcheck source=(\S+)\n\. \1\n/gm;
/** A setting's name: all lower case, or all upper case (the lease lock's); a mixed-case line such as `ExecStart=` inside an example value is not one. */
const SETTING_NAME = /^([a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*)=/gm;

export type ScriptValue = string | number | readonly string[];

const templates = new Map<string, string>();
/** A shipped file's text, read once: `relative` to the package root. */
export function packageFile(relative: string): string {
  const full = path.join(packageRoot(), relative);
  let text = templates.get(full);
  if (text === undefined) {
    text = fs.readFileSync(full, "utf8");
    templates.set(full, text);
  }
  return text;
}

/** A quoted heredoc delimiter that no line of `text` equals: the fixed one, or one named after the text's hash. */
export function heredocDelimiter(base: string, text: string): string {
  const lines = text.split("\n");
  if (!lines.includes(base)) return base;
  return `${base}_${createHash("sha256").update(text).digest("hex").slice(0, 16)}`;
}

function assignment(name: string, value: ScriptValue): string {
  if (Array.isArray(value)) return `${name}=(${value.map(quoteShellWord).join(" ")})`;
  const text = String(value);
  if (!text.includes("\n")) return `${name}=${quoteShellWord(text)}`;
  // Multi-line text (a unit file, an env file) stays readable in a preview: a quoted heredoc.
  const body = text.endsWith("\n") ? text : `${text}\n`;
  const delimiter = heredocDelimiter("RBLN_SERVING_TEXT", body);
  return `${name}=$(cat <<'${delimiter}'\n${body}${delimiter}\n)`;
}

/** A sourced fragment's text without its shellcheck directives, with the fragments it sources in turn inlined. */
function inlineFragment(file: string): string {
  return packageFile(file)
    .replace(/^# shellcheck (shell|disable)=.*\n/gm, "")
    .replace(INCLUDE, (_, fragment: string) => inlineFragment(path.join(path.dirname(file), fragment)));
}

/** The script `file` (relative to the package root) with its settings block filled from `values`, which must name exactly the block's settings; sourced fragments are read from beside it. */
export function renderScript(file: string, purpose: string, values: Readonly<Record<string, ScriptValue>>): string {
  const template = packageFile(file);
  const block = SETTINGS.exec(template);
  if (!block) throw new Error(`${file} has no settings block`);
  const declared = [...block[1]!.matchAll(SETTING_NAME)].map((m) => m[1]!);
  const given = Object.keys(values);
  if (declared.join(" ") !== given.join(" ")) throw new Error(`${file} declares settings ${declared.join(", ")}; the renderer gives ${given.join(", ")}`);
  const settings = Object.entries(values)
    .map(([name, value]) => `${assignment(name, value)}\n`)
    .join("");
  const [shebang, ...rest] = template
    .replace(SETTINGS, () => `# --- settings ---\n${settings}# --- end of settings ---\n`)
    .replace(INCLUDE, (_, fragment: string) => inlineFragment(path.join(path.dirname(file), fragment)))
    .split("\n");
  return [shebang, shellComment(`rbln-serving: ${purpose}`), ...rest].join("\n");
}

const TEMPLATE_COMMENT = /^\{\{#.*\}\}\n/gm;
const PLACEHOLDER_REF = /\{\{([a-z_][a-z0-9_]*)\}\}/g;

/**
 * A text file (a systemd unit) with `{{name}}` placeholders: each is replaced by its value, and a
 * line that names a value given as null is left out (an optional setting). Lines `{{# ...}}` are
 * the template's own comments and never reach the output. `values` must name exactly the
 * template's placeholders, so a renamed one cannot go unnoticed.
 */
export function renderTemplate(file: string, values: Readonly<Record<string, string | number | null>>): string {
  const template = packageFile(file).replace(TEMPLATE_COMMENT, "");
  const used = new Set([...template.matchAll(PLACEHOLDER_REF)].map((m) => m[1]!));
  const given = Object.keys(values);
  const missing = [...used].filter((name) => !given.includes(name));
  const unused = given.filter((name) => !used.has(name));
  if (missing.length > 0 || unused.length > 0)
    throw new Error(`${file}: placeholders without values: ${missing.join(", ") || "none"}; values without placeholders: ${unused.join(", ") || "none"}`);
  return template
    .split("\n")
    .filter((line) => ![...line.matchAll(PLACEHOLDER_REF)].some((m) => values[m[1]!] === null))
    .map((line) => line.replace(PLACEHOLDER_REF, (_, name: string) => String(values[name])))
    .join("\n");
}
