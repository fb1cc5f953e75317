import { spawnSync } from "node:child_process";

/** Each script's settings as bash read them, by the script's text: a test asks for many settings of many scripts. */
const READ = new Map<string, Map<string, string[]>>();

/** Every `name=` setting of a settings block, each a list as bash reads it (a plain value is a list of one), in one bash run. */
function readBlock(block: string): Map<string, string[]> {
  // Lines of a setting that holds a whole script name settings of their own, or nothing: asked, they read as empty.
  const names = [...new Set([...block.matchAll(/^([a-z_][a-z0-9_]*)=/gm)].map((m) => m[1]!))];
  const dump = `for __name in ${names.join(" ")}; do declare -n __value=$__name; printf '%s\\0%s\\0' "$__name" "\${#__value[@]}"; printf '%s\\0' "\${__value[@]}"; unset -n __value; done`;
  const read = spawnSync("bash", ["-c", `${block}\n${dump}`], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (read.status !== 0) throw new Error(read.stderr);
  const words = read.stdout.split("\0");
  const settings = new Map<string, string[]>();
  for (let i = 0; i + 1 < words.length; ) {
    const [name, count] = [words[i]!, Number(words[i + 1])];
    // An empty list prints one empty word (printf's format is used once).
    settings.set(name, count === 0 ? [] : words.slice(i + 2, i + 2 + count));
    i += 2 + Math.max(count, 1);
  }
  return settings;
}

/**
 * A list setting of a rendered script (`name=(...)` in its settings block), as bash reads it. The
 * block ends at the last end marker: a setting may hold a whole script, with a settings block of its own.
 */
export function scriptSettings(script: string, name: string): string[] {
  const block = /# --- settings.*\n([\s\S]*)# --- end of settings ---/.exec(script)?.[1];
  if (block === undefined) throw new Error("the script has no settings block");
  let settings = READ.get(script);
  if (settings === undefined) {
    settings = readBlock(block);
    READ.set(script, settings);
  }
  return settings.get(name) ?? [];
}
