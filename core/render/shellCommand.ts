import { PLACEHOLDER } from "../plan/argv";
import type { Flag } from "../plan/types";
import { quoteShellWord } from "../shell";

/**
 * Quotes a word for bash, turning the placeholders named in `variables` into references to shell
 * variables (`<POD_IP>` → `"${POD_IP}"`), so a value known only at run time lands inside the word.
 */
export function quoteWithVariables(word: string, variables: Readonly<Record<string, string>> = {}): string {
  const parts: string[] = [];
  let last = 0;
  for (const match of word.matchAll(PLACEHOLDER)) {
    const variable = variables[match[1]!];
    if (!variable) continue;
    if (match.index! > last) parts.push(quoteShellWord(word.slice(last, match.index)));
    parts.push(`"\${${variable}}"`);
    last = match.index! + match[0].length;
  }
  if (last < word.length || parts.length === 0) parts.push(quoteShellWord(word.slice(last)));
  return parts.join("");
}

export interface CommandParts {
  /** The launcher and model, e.g. `vllm serve MiniMaxAI/MiniMax-M2.7`. */
  command: readonly string[];
  flags: readonly Flag[];
  env: Readonly<Record<string, string>>;
}

/** `env NAME=value ... vllm serve model --flag value ...`, one item a line, continued with `\`. */
export function shellCommandLines(parts: CommandParts, variables: Readonly<Record<string, string>> = {}): string[] {
  const q = (word: string) => quoteWithVariables(word, variables);
  const lines = [
    "env",
    ...Object.entries(parts.env).map(([name, value]) => `  ${name}=${q(value)}`),
    `  ${parts.command.map(q).join(" ")}`,
    ...parts.flags.map((f) => `    ${[f.name, ...f.values].map(q).join(" ")}`),
  ];
  return lines.map((line, i) => (i < lines.length - 1 ? `${line} \\` : line));
}
