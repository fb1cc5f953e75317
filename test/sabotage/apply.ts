import * as fs from "node:fs";
import * as path from "node:path";
import type { Edit } from "./breakages";

/** How often `search` occurs in `text`. */
export function occurrences(text: string, search: string): number {
  return search === "" ? 0 : text.split(search).length - 1;
}

/**
 * Applies the edits under `root`, each of which must match exactly once in its file (after the
 * edits before it), and returns what puts the files back. Throws, with nothing changed, when one
 * does not apply; with `dryRun` it only checks.
 */
export function applyEdits(root: string, edits: readonly Edit[], dryRun = false): () => void {
  const originals = new Map<string, string>();
  const current = new Map<string, string>();
  for (const edit of edits) {
    const file = path.join(root, edit.file);
    if (!current.has(edit.file)) {
      if (!fs.existsSync(file)) throw new Error(`${edit.file}: no such file`);
      const text = fs.readFileSync(file, "utf8");
      originals.set(edit.file, text);
      current.set(edit.file, text);
    }
    const text = current.get(edit.file)!;
    const count = occurrences(text, edit.search);
    if (count !== 1) throw new Error(`${edit.file}: the edit's search text occurs ${count} times, not once: ${JSON.stringify(edit.search.slice(0, 80))}`);
    current.set(
      edit.file,
      text.replace(edit.search, () => edit.replace),
    );
  }
  if (dryRun) return () => {};
  for (const [file, text] of current) fs.writeFileSync(path.join(root, file), text);
  return () => {
    for (const [file, text] of originals) fs.writeFileSync(path.join(root, file), text);
  };
}
