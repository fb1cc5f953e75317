import { spawnSync } from "node:child_process";

/**
 * A list setting of a rendered script (`name=(...)` in its settings block), as bash reads it. The
 * block ends at the last end marker: a setting may hold a whole script, with a settings block of its own.
 */
export function scriptSettings(script: string, name: string): string[] {
  const block = /# --- settings.*\n([\s\S]*)# --- end of settings ---/.exec(script)?.[1];
  if (block === undefined) throw new Error("the script has no settings block");
  const read = spawnSync("bash", ["-c", `${block}\nprintf '%s\\0' "\${${name}[@]}"`], { encoding: "utf8" });
  if (read.status !== 0) throw new Error(read.stderr);
  return read.stdout.split("\0").slice(0, -1);
}
