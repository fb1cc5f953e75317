import * as fs from "node:fs";
import * as path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { shippedFiles } from "./helpers/shippedFiles";

// Data flows one way (recipe -> config -> plan -> render -> components): no shipped file imports
// one that imports it back, directly or around a circle, and no two sibling folders import each
// other. Imports are read by TypeScript's own pre-processor, type-only ones included.
const ROOT = path.resolve(__dirname, "..");

/** File → the shipped files it imports (relative specifiers resolved as TypeScript resolves them). */
function importGraph(files: readonly string[]): Map<string, Set<string>> {
  const known = new Set(files);
  const graph = new Map<string, Set<string>>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(path.join(ROOT, file), "utf8"), true, true);
    const targets = new Set<string>();
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith(".")) continue;
      const base = path.normalize(path.join(path.dirname(file), fileName));
      const resolved = [base, `${base}.ts`, path.join(base, "index.ts")].find((candidate) => known.has(candidate));
      if (resolved && resolved !== file) targets.add(resolved);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components of more than one file (Tarjan). */
function circles(graph: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        onStack.delete(w);
        component.push(w);
        if (w === v) break;
      }
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** Folder pairs that import each other; a folder and its own subfolder may (a barrel, a shared leaf). */
function folderPairs(graph: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const edges = new Set<string>();
  for (const [from, targets] of graph) {
    for (const to of targets) {
      const [a, b] = [path.dirname(from), path.dirname(to)];
      const nested = `${a}/`.startsWith(`${b}/`) || `${b}/`.startsWith(`${a}/`);
      if (a !== b && !nested) edges.add(`${a} -> ${b}`);
    }
  }
  return [...edges].filter((edge) => edges.has(edge.split(" -> ").reverse().join(" -> "))).sort();
}

describe("imports of the shipped code", () => {
  const graph = importGraph(shippedFiles(ROOT));

  it("reads every shipped file and the imports between them", () => {
    expect(graph.size).toBeGreaterThan(50);
    expect(graph.get("core/plan/deployment.ts")).toContain("core/plan/resolve.ts");
    // A type-only import is an import.
    expect(graph.get("core/rollout/waves.ts")).toContain("core/config/fields.ts");
  });

  it("have no circle, type-only imports included", () => {
    expect(circles(graph)).toEqual([]);
  });

  it("never have two sibling folders import each other", () => {
    expect(folderPairs(graph)).toEqual([]);
  });

  it("would find a circle and a folder pair where there is one", () => {
    const planted = new Map(graph);
    planted.set("core/config/stackConfig.ts", new Set([...graph.get("core/config/stackConfig.ts")!, "core/plan/deployment.ts"]));
    expect(circles(planted).some((c) => c.includes("core/config/stackConfig.ts"))).toBe(true);
    expect(folderPairs(planted)).toContain("core/config -> core/plan");
  });
});
