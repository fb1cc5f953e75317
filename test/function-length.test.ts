import * as fs from "node:fs";
import * as path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { shippedFiles } from "./helpers/shippedFiles";

// House rule: no shipped function over 80 lines, outside data literals. A function is measured from
// its first line to its last (its doc comment left out), less the lines of the data literals in it:
// an object or array literal that is the function's sole return (or an arrow's expression body).
// (A data table held by a top-level const is no function, so it is never measured.)
const ROOT = path.resolve(__dirname, "..");
const MAX_LINES = 80;

interface Measured {
  /** `file:name`: the function's name, or its line where it has none. */
  id: string;
  line: number;
  lines: number;
}

type FunctionNode = ts.FunctionLikeDeclaration & { body: ts.ConciseBody };

function isMeasured(node: ts.Node): node is FunctionNode {
  return (
    (ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isArrowFunction(node) ||
      ts.isFunctionExpression(node) ||
      ts.isGetAccessor(node) ||
      ts.isSetAccessor(node)) &&
    node.body !== undefined
  );
}

/** The literal under `as`, `satisfies` and parentheses, if the expression is an object or array literal. */
function dataLiteral(expression: ts.Expression | undefined): ts.Expression | undefined {
  let current = expression;
  while (current && (ts.isParenthesizedExpression(current) || ts.isAsExpression(current) || ts.isSatisfiesExpression(current))) current = current.expression;
  return current && (ts.isObjectLiteralExpression(current) || ts.isArrayLiteralExpression(current)) ? current : undefined;
}

/** The function's own return statements (not those of functions inside it). */
function ownReturns(body: ts.Block): ts.ReturnStatement[] {
  const found: ts.ReturnStatement[] = [];
  const visit = (node: ts.Node) => {
    if (isMeasured(node)) return;
    if (ts.isReturnStatement(node)) found.push(node);
    ts.forEachChild(node, visit);
  };
  ts.forEachChild(body, visit);
  return found;
}

function dataLiterals(node: FunctionNode): ts.Expression[] {
  const body = node.body;
  if (!ts.isBlock(body)) return [dataLiteral(body)].filter((e) => e !== undefined);
  const returns = ownReturns(body);
  return (returns.length === 1 ? [dataLiteral(returns[0]!.expression)] : []).filter((e) => e !== undefined);
}

function nameOf(node: FunctionNode, source: ts.SourceFile): string {
  const owner = ts.isClassLike(node.parent) && node.parent.name ? `${node.parent.name.text}.` : "";
  if (ts.isConstructorDeclaration(node)) return `${owner}constructor`;
  if (node.name && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name))) return `${owner}${node.name.text}`;
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && ts.isIdentifier(parent.name))
    return parent.name.text;
  return `(function at line ${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1})`;
}

/** Every function of a source text with its length in lines, data literals left out. */
function measureFunctions(file: string, text: string): Measured[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lineOf = (position: number) => source.getLineAndCharacterOfPosition(position).line;
  const measured: Measured[] = [];
  const visit = (node: ts.Node) => {
    if (isMeasured(node)) {
      const first = lineOf(node.getStart(source));
      const all = lineOf(node.getEnd()) - first + 1;
      const data = dataLiterals(node).reduce((sum, literal) => sum + lineOf(literal.getEnd()) - lineOf(literal.getStart(source)) + 1, 0);
      measured.push({ id: `${file}:${nameOf(node, source)}`, line: first + 1, lines: all - data });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return measured;
}

describe("function length", () => {
  const all = shippedFiles(ROOT).flatMap((file) => measureFunctions(file, fs.readFileSync(path.join(ROOT, file), "utf8")));
  const long = all.filter((f) => f.lines > MAX_LINES);

  it(`no shipped function is over ${MAX_LINES} lines, outside data literals`, () => {
    expect(long.map((f) => `${f.id} (line ${f.line}): ${f.lines} lines`)).toEqual([]);
  });

  it("reads every shipped file", () => {
    expect(all.some((f) => f.id === "core/config/stackConfig.ts:parseStackSettings")).toBe(true);
    expect(all.length).toBeGreaterThan(300);
  });

  it("counts a long body, and leaves out only the data literals", () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  step(${i});`).join("\n");
    const entries = (n: number) => Array.from({ length: n }, (_, i) => `    k${i}: ${i},`).join("\n");
    const [long] = measureFunctions("x.ts", `function long() {\n${body(81)}\n}\n`);
    expect(long).toMatchObject({ id: "x.ts:long", lines: 83 });
    const [data] = measureFunctions("x.ts", `/** doc */\nexport function data() {\n  step();\n  return [\n${entries(90)}\n  ];\n}\n`);
    expect(data).toMatchObject({ id: "x.ts:data", line: 2, lines: 3 });
    // Data built in a const is still the function's work.
    const [built] = measureFunctions("x.ts", `function built() {\n  const table = {\n${entries(90)}\n  };\n  return table;\n}\n`);
    expect(built!.lines).toBeGreaterThan(MAX_LINES);
    // Two returns: neither is the sole return, so both count.
    const [twice] = measureFunctions("x.ts", `function twice(a: boolean) {\n  if (a) return {\n${entries(50)}\n  };\n  return {\n${entries(50)}\n  };\n}\n`);
    expect(twice!.lines).toBeGreaterThan(MAX_LINES);
    const arrows = measureFunctions("x.ts", `class C {\n  constructor() {\n    const f = () => {\n${body(90)}\n    };\n  }\n}\n`);
    expect(arrows.map((f) => f.id)).toEqual(["x.ts:C.constructor", "x.ts:f"]);
    expect(arrows.every((f) => f.lines > MAX_LINES)).toBe(true);
  });
});
