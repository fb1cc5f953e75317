import { parse } from "shell-quote";
import { quote } from "shlex";

/**
 * POSIX shell words. Two libraries, each for the half it gets right (both checked against real
 * bash by property tests): `shell-quote` parses (the `shlex` port drops backslashes inside single
 * quotes), `shlex` quotes (shell-quote escapes `!` inside double quotes, which bash keeps).
 */

export class ShellSyntaxError extends Error {}

/**
 * Splits shell text into words. Only quoting and escaping are understood: text that would need
 * the shell to expand a variable, glob or run an operator is refused, since no shell runs it.
 */
export function splitShellWords(text: string): string[] {
  const entries = parse(text, (name: string) => {
    throw new ShellSyntaxError(`${JSON.stringify(text)} expands $${name}; quote it`);
  });
  return entries.map((entry) => {
    if (typeof entry !== "string") throw new ShellSyntaxError(`${JSON.stringify(text)} has shell syntax ${JSON.stringify(entry)}; quote it`);
    return entry;
  });
}

/** One word, quoted so that any POSIX shell reads it back byte for byte. */
export function quoteShellWord(word: string): string {
  return quote(word);
}

/** Words joined into a command line that a POSIX shell splits back into the same words. */
export function joinShellWords(words: readonly string[]): string {
  return words.map(quoteShellWord).join(" ");
}

/** A `#` comment line for a script: control characters (a newline would end the comment) become spaces. */
export function shellComment(text: string): string {
  return `# ${text.replace(/[\u0000-\u001f\u007f]+/g, " ")}`;
}
