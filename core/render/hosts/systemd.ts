import { isPortableEnvValue } from "../../config/vllmOptions";

/**
 * systemd quoting. ExecStart words go in double quotes with C escapes (systemd unquotes them with
 * cunescape), `$` doubled (systemd substitutes `$VAR` at exec time) and `%` doubled (unit
 * specifiers). EnvironmentFile values use the env-file rules: single quotes are literal and may
 * span lines; double quotes take backslash escapes for `\ " $ \``. Tests check both against
 * systemd's own parsers.
 */

const CONTROL = /[\u0000-\u001f\u007f]/;

export class UnitSyntaxError extends Error {}

const SAFE_WORD = /^[A-Za-z0-9_@+=:,./-]+$/;

export function quoteExecWord(word: string): string {
  if (SAFE_WORD.test(word)) return word;
  if (word.includes("\0")) throw new UnitSyntaxError(`${JSON.stringify(word)} contains a NUL byte`);
  let out = "";
  for (const ch of word) {
    if (ch === "\\") out += "\\\\";
    else if (ch === '"') out += '\\"';
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (CONTROL.test(ch)) out += `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`;
    else if (ch === "$") out += "$$";
    else if (ch === "%") out += "%%";
    else out += ch;
  }
  return `"${out}"`;
}

/** An ExecStart= line, one flag with its values a line (continued with `\`), so a changed flag is a changed line. */
export function execStartLine(lines: readonly (readonly string[])[]): string {
  return `ExecStart=${lines.map((words) => words.map(quoteExecWord).join(" ")).join(" \\\n    ")}`;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Values systemd's EnvironmentFile can carry: no control characters but newline and tab. */
export const isEnvFileValue = isPortableEnvValue;

export function envFileLine(name: string, value: string): string {
  if (!ENV_NAME.test(name)) throw new UnitSyntaxError(`${JSON.stringify(name)} is not an environment variable name`);
  if (!isEnvFileValue(value)) throw new UnitSyntaxError(`${name}: value has control characters systemd cannot read from an EnvironmentFile`);
  if (!value.includes("'")) return `${name}='${value}'`;
  return `${name}="${value.replace(/[\\"$`]/g, (c) => `\\${c}`)}"`;
}

export function renderEnvFile(env: Readonly<Record<string, string>>): string {
  return Object.entries(env)
    .map(([name, value]) => `${envFileLine(name, value)}\n`)
    .join("");
}
