/**
 * What a host step or Job reports on stdout for the program to read back: the word after `prefix`
 * on the last line that starts with it (`revision <model> <commit>`, `compiled <key> <digest>`), or
 * null when no such line holds a word that `valid` matches. The last line wins: a step run again
 * prints its report again.
 */
export function reportedWord(stdout: string | undefined, prefix: string, valid: RegExp): string | null {
  const line = (stdout ?? "")
    .split("\n")
    .reverse()
    .find((l) => l.startsWith(prefix));
  const word = line?.slice(prefix.length).split(" ")[0];
  return word !== undefined && valid.test(word) ? word : null;
}
