import * as fs from "node:fs";
import * as path from "node:path";

/** What the package ships as code: the folders and files whose TypeScript the repository's guards read. */
export const SHIPPED = ["core", "components", "cli", "provider", "program.ts", "index.ts"];

/** Every shipped file (declaration files left out), relative to `root`, sorted: TypeScript, and the scripts and templates the package renders. */
export function shippedPaths(root: string): string[] {
  const files: string[] = [];
  const walk = (relative: string) => {
    const full = path.join(root, relative);
    if (fs.statSync(full).isFile()) {
      if (!relative.endsWith(".d.ts")) files.push(relative);
      return;
    }
    for (const entry of fs.readdirSync(full)) walk(path.join(relative, entry));
  };
  for (const entry of SHIPPED) walk(entry);
  return files.sort();
}

/** Every shipped TypeScript file (declaration files left out), relative to `root`, sorted. */
export function shippedFiles(root: string): string[] {
  return shippedPaths(root).filter((file) => file.endsWith(".ts"));
}
