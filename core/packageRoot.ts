import * as fs from "node:fs";
import * as path from "node:path";

/**
 * The directory holding this package's package.json: the repository when run from source, the
 * installed package when run from dist/ (one level deeper), so shipped folders such as recipes/
 * resolve the same way from both.
 */
export function packageRoot(from: string = __dirname): string {
  let dir = from;
  while (!fs.existsSync(path.join(dir, "package.json"))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${from}`);
    dir = parent;
  }
  return dir;
}
