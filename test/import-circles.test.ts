import * as fs from "node:fs";
import * as path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { shippedPaths } from "./helpers/shippedFiles";

// Data flows one way (recipe -> config -> plan -> render -> components -> the program, the CLI and
// the provider): every import between areas is one the table below allows, no shipped file imports
// one that imports it back, around a circle, and no two sibling folders import each other. Imports
// are read by TypeScript's own pre-processor (type-only ones included), plus the shipped files a
// module names by path (`renderScript("core/...")`, a scripts folder) and the fragments a bash
// script sources (`. file`, `source file`).
const ROOT = path.resolve(__dirname, "..");
/** What is read for imports: TypeScript, and the scripts the package renders. */
const READ = /\.(ts|sh)$/;

/**
 * Each area, and the areas it may import. An area is a folder directly under core/ (core's own
 * files are the area `core`), components/, provider/, cli/, or the program (program.ts, index.ts).
 * The table has no circle, so no two areas can import each other, even around others.
 */
const CORE_AREAS = ["core", "core/recipe", "core/config", "core/plan", "core/rollout", "core/cache", "core/monitoring", "core/render", "core/status"];
const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  core: [],
  "core/recipe": ["core"],
  "core/config": ["core", "core/recipe"],
  "core/plan": ["core", "core/recipe", "core/config"],
  "core/rollout": ["core", "core/config", "core/plan"],
  "core/cache": ["core"],
  "core/monitoring": ["core", "core/config", "core/plan"],
  "core/render": ["core", "core/recipe", "core/config", "core/plan", "core/rollout", "core/cache", "core/monitoring"],
  // What `status` makes of what it read: pure, so it imports no area at all.
  "core/status": [],
  components: CORE_AREAS,
  cli: CORE_AREAS,
  provider: ["components", ...CORE_AREAS],
  program: ["components", ...CORE_AREAS],
};

function areaOf(file: string): string {
  const [top, second, third] = file.split("/");
  if (top === "core") return third === undefined ? "core" : `core/${second}`;
  return top === "program.ts" || top === "index.ts" ? "program" : top!;
}

/** A module's relative imports, resolved as TypeScript resolves them. */
function moduleImports(file: string, text: string, known: ReadonlySet<string>): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.flatMap(({ fileName }) => {
    if (!fileName.startsWith(".")) return [];
    const base = path.normalize(path.join(path.dirname(file), fileName));
    const resolved = [base, `${base}.ts`, path.join(base, "index.ts")].find((candidate) => known.has(candidate));
    return resolved ? [resolved] : [];
  });
}

/** The shipped files a module names by their path from the package root: a script, a template, or every file of a folder. */
function pathReferences(text: string, files: readonly string[]): string[] {
  return [...text.matchAll(/["'`](core\/[\w./-]+?)\/?["'`$]/g)].flatMap(([, named]) => files.filter((f) => f === named || path.dirname(f) === named));
}

/** The fragments a bash script sources, relative to the script (how core/template.ts inlines them). */
function sourcedFiles(file: string, text: string, known: ReadonlySet<string>): string[] {
  return [...text.matchAll(/^\s*(?:\.|source)\s+([^\s;&|]+)\s*$/gm)].flatMap(([, fragment]) => {
    const resolved = path.normalize(path.join(path.dirname(file), fragment!));
    return known.has(resolved) ? [resolved] : [];
  });
}

/** File → the shipped files it imports. */
function importGraph(files: readonly string[]): Map<string, Set<string>> {
  const known = new Set(files);
  const graph = new Map<string, Set<string>>();
  for (const file of files.filter((f) => READ.test(f))) {
    const text = fs.readFileSync(path.join(ROOT, file), "utf8");
    const targets = file.endsWith(".ts") ? [...moduleImports(file, text, known), ...pathReferences(text, files)] : sourcedFiles(file, text, known);
    graph.set(file, new Set(targets.filter((t) => t !== file)));
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

/** Every import between areas that the table does not allow, as `area -> area: file -> file`. */
function backEdges(graph: ReadonlyMap<string, ReadonlySet<string>>, table: Readonly<Record<string, readonly string[]>>): string[] {
  const found: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      const [a, b] = [areaOf(from), areaOf(to)];
      if (a !== b && !table[a]?.includes(b)) found.push(`${a} -> ${b}: ${from} -> ${to}`);
    }
  }
  return found.sort();
}

describe("imports of the shipped code", () => {
  const files = shippedPaths(ROOT);
  const graph = importGraph(files);

  it("reads every shipped module and script, and the imports, path references and sourced fragments between them", () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get("core/plan/deployment.ts")).toContain("core/plan/resolve.ts");
    // A type-only import is an import.
    expect(graph.get("core/rollout/waves.ts")).toContain("core/config/fields.ts");
    // A script or template named by its path, directly or through its folder.
    expect(graph.get("core/cache/leaseLock.ts")).toContain("core/cache/scripts/lease-lock.sh");
    expect(graph.get("core/render/hosts/rank.ts")).toContain("core/render/hosts/templates/rank.service");
    expect(graph.get("core/render/hosts/scripts.ts")).toContain("core/render/hosts/scripts/unit-apply.sh");
    // A fragment a script sources, beside it or in another folder.
    expect(graph.get("core/render/hosts/scripts/unit-apply.sh")).toContain("core/render/hosts/scripts/front-door.sh");
    expect(graph.get("core/render/hosts/scripts/compile-key.sh")).toContain("core/render/scripts/compile-flow.sh");
    expect(graph.get("core/render/scripts/compile-flow.sh")).toContain("core/render/scripts/registry.sh");
  });

  it("stay inside the table of areas: every import goes to an area its own may import", () => {
    expect([...new Set(files.map(areaOf))].filter((area) => !(area in MAY_IMPORT))).toEqual([]);
    expect(backEdges(graph, MAY_IMPORT)).toEqual([]);
  });

  it("follow a table without circles, so no area imports one that imports it back", () => {
    const areas = new Map(Object.entries(MAY_IMPORT).map(([area, allowed]) => [area, new Set(allowed)]));
    expect(circles(areas)).toEqual([]);
    for (const [area, allowed] of areas) expect(allowed.has(area), area).toBe(false);
  });

  it("have no circle, type-only imports included", () => {
    expect(circles(graph)).toEqual([]);
  });

  it("never have two sibling folders import each other", () => {
    expect(folderPairs(graph)).toEqual([]);
  });

  it("would find a back edge, naming the files, a circle and a folder pair where there is one", () => {
    const planted = new Map(graph);
    const add = (from: string, to: string) => planted.set(from, new Set([...planted.get(from)!, to]));
    add("core/config/stackConfig.ts", "core/plan/deployment.ts");
    // A bash include is an import too: the cache's lock sourcing a host script.
    add("core/cache/scripts/lease-lock.sh", "core/render/hosts/scripts/disk.sh");
    expect(backEdges(planted, MAY_IMPORT)).toEqual([
      "core/cache -> core/render: core/cache/scripts/lease-lock.sh -> core/render/hosts/scripts/disk.sh",
      "core/config -> core/plan: core/config/stackConfig.ts -> core/plan/deployment.ts",
    ]);
    expect(circles(planted).some((c) => c.includes("core/config/stackConfig.ts"))).toBe(true);
    expect(folderPairs(planted)).toContain("core/config -> core/plan");
    // A table that lets two areas import each other is refused.
    expect(
      circles(
        new Map([
          ["core/plan", new Set(["core/render"])],
          ["core/render", new Set(["core/plan"])],
        ]),
      ),
    ).toEqual([["core/plan", "core/render"]]);
  });
});
