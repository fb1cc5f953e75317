import { spawnSync } from "node:child_process";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..");

/**
 * A generated file's source in the repository's format (biome.json), so that `npm run lint` accepts
 * the file as generated and `npm run format` leaves it as it is.
 */
export function biomeFormatted(file: string, source: string): string {
  const run = spawnSync(path.join(ROOT, "node_modules/.bin/biome"), ["format", `--stdin-file-path=${path.relative(ROOT, file)}`], {
    cwd: ROOT,
    input: source,
    encoding: "utf8",
  });
  if (run.status !== 0) throw new Error(`biome format of ${path.relative(ROOT, file)} failed: ${run.stderr}`);
  return run.stdout;
}
