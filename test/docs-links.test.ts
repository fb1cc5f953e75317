import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import GithubSlugger from "github-slugger";
import { marked, type Token, type Tokens } from "marked";
import { describe, expect, it } from "vitest";
import { HOST_TIER_LONGEST } from "./helpers/longestFirst";
import { settingsShape, type SettingShape } from "../core/config/settingsShape";
import { parseStackSettings, StackSettings } from "../core/config/stackConfig";
import { SECRET_KEYS } from "../core/config/secrets";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { RecipeCatalog } from "../core/recipe/catalog";
import { renderDeployment } from "../core/render/deployment";

const ROOT = path.resolve(__dirname, "..");
const DOCS = [
  "README.md",
  "CONTRIBUTING.md",
  "CHANGELOG.md",
  ...fs
    .readdirSync(path.join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

/** A cell's or a heading's text as GitHub renders it: code spans' and links' text kept, HTML tags dropped. */
function plainText(tokens: readonly Token[]): string {
  return tokens
    .map((token) => {
      if (token.type === "html") return "";
      if ("tokens" in token && token.tokens) return plainText(token.tokens);
      return "text" in token ? String(token.text) : "";
    })
    .join("");
}

interface Document {
  tokens: Token[];
  links: string[];
  anchors: Set<string>;
}

/** A Markdown file's tokens, the targets of its links, and the anchors GitHub gives its headings. */
function readDocument(file: string, text = fs.readFileSync(path.join(ROOT, file), "utf8")): Document {
  const tokens = marked.lexer(text);
  const slugger = new GithubSlugger();
  const links: string[] = [];
  const anchors = new Set<string>();
  marked.walkTokens(tokens, (token) => {
    if (token.type === "link" || token.type === "image") links.push(token.href);
    if (token.type === "heading") anchors.add(slugger.slug(plainText(token.tokens ?? [])));
  });
  return { tokens, links, anchors };
}

/** Links of `file` that do not resolve: a missing file, or an anchor no heading of the target has. */
function brokenLinks(file: string, document: Document, documents: ReadonlyMap<string, Document>): string[] {
  return document.links.flatMap((href) => {
    if (/^[a-z][a-z0-9+.-]*:/i.test(href)) return []; // https:, mailto:: not this repository's
    const [target = "", anchor] = href.split("#", 2);
    const resolved = target === "" ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURIComponent(target)));
    if (!documents.has(resolved) && !fs.existsSync(path.join(ROOT, resolved))) return [`${file}: ${href}: no file ${resolved}`];
    if (anchor === undefined) return [];
    const anchors = (documents.get(resolved) ?? (resolved.endsWith(".md") ? readDocument(resolved) : undefined))?.anchors;
    return anchors?.has(anchor) ? [] : [`${file}: ${href}: no heading #${anchor} in ${resolved}`];
  });
}

/** The rows of the first table after the heading `title`, each as its cells' tokens. */
function tableAfter(document: Document, title: string): Tokens.TableCell[][] {
  const start = document.tokens.findIndex((token) => token.type === "heading" && plainText(token.tokens ?? []) === title);
  const table = document.tokens.slice(start + 1).find((token): token is Tokens.Table => token.type === "table");
  if (start < 0 || !table) throw new Error(`no table after the heading "${title}"`);
  return table.rows;
}

const codeSpans = (cell: Tokens.TableCell): string[] => cell.tokens.flatMap((token) => (token.type === "codespan" ? [token.text] : []));

/** A key path of the stack config: `hosts.[].name`, `kubernetes.resources.{}.limits.cpu`. */
interface SchemaKey {
  path: string[];
  shape: SettingShape;
  default?: unknown;
}

/** Every key path the stack config takes, from the same input shape the component package is generated from. */
function schemaKeys(shape: SettingShape, at: string[] = []): SchemaKey[] {
  switch (shape.kind) {
    case "object":
      return Object.entries(shape.fields).flatMap(([key, field]) => [
        { path: [...at, key], shape: field.shape, default: field.default },
        ...schemaKeys(field.shape, [...at, key]),
      ]);
    case "array":
      return [{ path: [...at, "[]"], shape: shape.items }, ...schemaKeys(shape.items, [...at, "[]"])];
    case "map":
      return [{ path: [...at, "{}"], shape: shape.values }, ...schemaKeys(shape.values, [...at, "{}"])];
    default:
      return [];
  }
}

/** The README's spelling of a key path (`hosts[].proxy`) as a schema key path (`hosts.[].proxy`). */
const keyPath = (key: string) => key.split(".").flatMap((part) => (part.endsWith("[]") ? [part.slice(0, -2), "[]"] : [part]));

interface ReferenceLine {
  key: string;
  path: string[];
  /** The words of the type column: the keys a line that stands for an object or a list of them names. */
  typeWords: Set<string>;
  defaults: string[];
}

function referenceLines(readme: Document): ReferenceLine[] {
  return tableAfter(readme, "Config reference").map(([key, type, defaults]) => {
    const [name = ""] = codeSpans(key!);
    return { key: name, path: keyPath(name), typeWords: new Set(plainText(type!.tokens).match(/[A-Za-z][A-Za-z0-9]*/g)), defaults: codeSpans(defaults!) };
  });
}

/**
 * What is wrong with the reference against the schema: a listed key the stack config does not take,
 * and a key it takes that no line covers. A line covers its own key and, when its type column
 * names them (`{address, user, port, hostKey}`), the keys under it.
 */
function referenceProblems(lines: readonly ReferenceLine[], keys: readonly SchemaKey[]): string[] {
  const known = new Set([...keys.map((k) => k.path.join(".")), ...SECRET_KEYS]);
  const listed = lines.map((line) => line.path.join("."));
  const problems = [
    ...listed.filter((key, i) => listed.indexOf(key) !== i).map((key) => `${key}: listed twice`),
    ...lines.filter((line) => !known.has(line.path.join("."))).map((line) => `${line.key}: not a key of the stack config`),
    ...SECRET_KEYS.filter((secret) => !listed.includes(secret)).map((secret) => `${secret}: a secret without a line`),
  ];
  for (const key of keys) {
    if (key.shape.kind === "object") continue; // a group: its keys have lines, or their parent's line names them
    const nearest = lines.filter((line) => line.path.every((part, i) => key.path[i] === part)).sort((a, b) => b.path.length - a.path.length)[0];
    const unnamed = nearest ? key.path.slice(nearest.path.length).filter((part) => part !== "[]" && part !== "{}" && !nearest.typeWords.has(part)) : key.path;
    if (unnamed.length > 0)
      problems.push(`${key.path.join(".")}: no line, and ${nearest ? `the line of ${nearest.key} does not name ${unnamed.join(", ")}` : "no line above it"}`);
  }
  for (const line of lines) {
    const value = keys.find((k) => k.path.join(".") === line.path.join("."))?.default;
    if (["string", "number", "boolean"].includes(typeof value) && !line.defaults.includes(String(value)))
      problems.push(`${line.key}: the default column does not show \`${String(value)}\``);
  }
  return problems;
}

describe("the README and docs/", () => {
  const documents = new Map(DOCS.map((file) => [file, readDocument(file)]));

  it("have links that resolve: every relative file, and every #anchor as GitHub makes it from the heading", () => {
    expect(DOCS).toEqual(expect.arrayContaining(["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/hosts.md", "docs/testing.md"]));
    expect([...documents].flatMap(([file, document]) => brokenLinks(file, document, documents))).toEqual([]);
  });

  it("would find a missing file, a missing anchor, and take GitHub's slugs of code and punctuation", () => {
    const page = readDocument(
      "docs/example.md",
      "# Hosts: `compile.host`\n## `status`\n## A stopping rank loses no request\n\n[a](#hosts-compilehost) [b](#status) [c](hosts.md#the-front-door) [d](hosts.md#nowhere) [e](gone.md) [f](../README.md#quick-start) [g](https://example.com/x.md#y)\n",
    );
    expect(brokenLinks("docs/example.md", page, new Map([...documents, ["docs/example.md", page]]))).toEqual([
      "docs/example.md: hosts.md#nowhere: no heading #nowhere in docs/hosts.md",
      "docs/example.md: gone.md: no file docs/gone.md",
    ]);
  });

  it("README's config reference has a line for every key the stack config takes, and nothing else; defaults as the schema's", () => {
    const lines = referenceLines(documents.get("README.md")!);
    expect(lines.length).toBeGreaterThan(50);
    expect(referenceProblems(lines, schemaKeys(settingsShape(StackSettings)))).toEqual([]);
  });

  it("would find a key without a line, a line without a key, a key its parent's line does not name, and a wrong default", () => {
    const keys = schemaKeys(settingsShape(StackSettings)).filter((k) => ["model", "sshProxy"].includes(k.path[0]!));
    const line = (key: string, type: string, defaults: string[] = []) => ({ key, path: keyPath(key), typeWords: new Set(type.split(/\W+/)), defaults });
    const secrets = SECRET_KEYS.map((secret) => line(secret, "secret"));
    expect(
      referenceProblems([line("model", "string", ["MiniMaxAI/MiniMax-M2.7"]), line("sshProxy", "{address, user, port, hostKey}"), ...secrets], keys),
    ).toEqual([]);
    expect(
      referenceProblems(
        [line("model", "string", ["other"]), line("sshProxy", "{address, user, port}"), line("sshProxy.timeout", "integer"), ...secrets.slice(1)],
        keys,
      ),
    ).toEqual([
      "sshProxy.timeout: not a key of the stack config",
      `${SECRET_KEYS[0]}: a secret without a line`,
      "sshProxy.hostKey: no line, and the line of sshProxy does not name hostKey",
      "model: the default column does not show `MiniMaxAI/MiniMax-M2.7`",
    ]);
  });

  it("docs/testing.md's table of suites names every test file, and only those", () => {
    const listed = tableAfter(documents.get("docs/testing.md")!, "The suites").map((row) => codeSpans(row[1]!)[0]);
    const files = (fs.readdirSync(path.join(ROOT, "test"), { recursive: true }) as string[])
      .filter((name) => name.endsWith(".test.ts"))
      .map((name) => `test/${name.split(path.sep).join("/")}`);
    expect([...listed].sort()).toEqual([...files].sort());
    // The host tier's sequencer starts these first: a renamed one would start late, unseen.
    expect(HOST_TIER_LONGEST.filter((file) => !files.includes(file))).toEqual([]);
  });
});

describe("docs/hosts.md's numbers are the rendered ones", () => {
  const text = fs.readFileSync(path.join(ROOT, "docs/hosts.md"), "utf8").replace(/\s+/g, " ");
  const deployment = planDeployment(parseStackSettings(readStackFile("dev").raw), RecipeCatalog.load());
  const rank = renderDeployment(deployment, { stack: "dev", instance: "rbln-serving", secrets: [] }).hosts!.waves[0]![0]!.ranks[0]!;
  const read = (pattern: RegExp, from: string) => Number(pattern.exec(from)?.[1] ?? Number.NaN);
  const unit = (key: string) => read(new RegExp(`^${key}=(\\d+)s?$`, "m"), rank.unitText);
  const shutdown = read(/--shutdown-timeout (\d+)/, rank.unitText);
  const deviceWait = read(/^ExecStartPre=\/usr\/bin\/timeout (\d+) /m, rank.unitText);
  const stopMargin = unit("TimeoutStopSec") - shutdown;
  const grouped = (n: number) => n.toLocaleString("en-US");

  it("the unit's device wait, start bound, restarts and stop timeout, as the dev stack's unit has them", () => {
    expect(text).toContain(`an \`ExecStartPre\` waits up to ${deviceWait} s for the rank's`);
    expect(text).toContain(`\`TimeoutStartSec=${unit("TimeoutStartSec")}s\``);
    expect(text).toContain(`\`Restart=on-failure\` after ${unit("RestartSec")} s`);
    expect(text).toContain(`\`StartLimitBurst=${unit("StartLimitBurst")}\` in \`StartLimitIntervalSec=${unit("StartLimitIntervalSec")}s\``);
    expect(text).toContain(`\`TimeoutStopSec\` = \`--shutdown-timeout\` + ${stopMargin} s`);
  });

  it("the host lock's wait: its formula gives the unit step's host_lock_wait_s, and the default it states is that value", () => {
    const lockWait = read(/^host_lock_wait_s=(\d+)$/m, rank.applyScript);
    const [, margin, device, start] = /`2 × \(--shutdown-timeout \+ (\d+) s\) \+ (\d+) s \+ (\d+) s`/.exec(text)!.map(Number);
    expect([margin, device]).toEqual([stopMargin, deviceWait]);
    expect(2 * (shutdown + margin!) + device! + start!).toBe(lockWait);
    expect(text).toContain(`so ${grouped(lockWait)} s with the default \`--shutdown-timeout\` of ${grouped(shutdown)} s`);
    expect(text).toContain(`held /run/rbln-serving-units.lock for ${lockWait}s; run again when it ends`);
  });
});

describe("the folders and files the project names are there", () => {
  const tracked = () =>
    (require("node:child_process") as typeof import("node:child_process"))
      .spawnSync("git", ["ls-files"], { cwd: ROOT, encoding: "utf8" })
      .stdout.split("\n")
      .filter(Boolean);

  it("the README's folder table names every folder at the root and under core/, and only folders that are there", () => {
    const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
    const table = /\| where \| what \|\n\|---\|---\|\n((?:\|.*\n)+)/.exec(readme)![1]!;
    const named = [...table.matchAll(/^\| ([^|]+) \|/gm)].flatMap((row) => [...row[1]!.matchAll(/`([\w./*-]+\/)`/g)].map((m) => m[1]!));
    const folders = new Set(
      tracked().flatMap((file) => {
        const parts = file.split("/");
        if (parts.length < 2 || parts[0]!.startsWith(".")) return [];
        return parts[0] === "core" && parts.length > 2 ? [`${parts[0]}/`, `core/${parts[1]}/`] : [`${parts[0]}/`];
      }),
    );
    folders.delete("core/");
    expect([...folders].filter((folder) => !named.includes(folder)).sort()).toEqual([]);
    expect(named.filter((folder) => !fs.existsSync(path.join(ROOT, folder)))).toEqual([]);
  });

  it("every path of this repository that the docs and the shipped code's comments name exists", () => {
    // A path of this repository: a root folder, then segments; not a segment of another path (vllm/entrypoints/cli/serve.py).
    const roots = "core|components|cli|provider|test|bench|scripts|stacks|recipes|examples|dashboards";
    const inDocs = new RegExp(`(?<![\\w./-])((?:${roots}|docs)/[\\w./-]*[\\w-]\\.(?:ts|mts|sh|py|json|md|yaml|service))`, "g");
    // In code, docs/ names upstream pages as often as ours (llm-d-router's docs/discovery.md): only our folders there.
    const inCode = new RegExp(`(?<![\\w./-])((?:${roots})/[\\w./-]*[\\w-]\\.(?:ts|mts|sh|py|json|md|yaml|service))`, "g");
    // Not ours to have: a placeholder, an error message's example of a broken stack file, vllm-rbln's example.
    const EXAMPLES = new Set(["stacks/Pulumi.NAME.yaml", "stacks/Pulumi.x.yaml", "examples/cpu_only_compile.py"]);
    const sources = [
      ...DOCS.filter((doc) => doc !== "CHANGELOG.md").map((doc) => ({ file: doc, pattern: inDocs })),
      ...tracked()
        .filter((file) => /^(core|components|cli|provider)\/.*\.(ts|sh|py)$/.test(file) || file === "program.ts" || file === "index.ts")
        .map((file) => ({ file, pattern: inCode })),
    ];
    const missing = sources.flatMap(({ file, pattern }) =>
      [...fs.readFileSync(path.join(ROOT, file), "utf8").matchAll(pattern)]
        .map((m) => m[1]!)
        .filter((named) => !EXAMPLES.has(named) && !fs.existsSync(path.join(ROOT, named)))
        .map((named) => `${file}: ${named}`),
    );
    expect(missing).toEqual([]);
  });
});

describe("no merge left its conflict markers behind", () => {
  it("no tracked text file has a line that is a conflict marker", () => {
    const root = path.join(__dirname, "..");
    const tracked = spawnSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8" });
    // A clone without git history (an unpacked tarball) has nothing to check here.
    const files = tracked.status === 0 ? tracked.stdout.split("\0").filter((f) => f !== "") : [];
    const marked = files.flatMap((file) => {
      const full = path.join(root, file);
      if (!fs.statSync(full).isFile() || fs.statSync(full).size > 4_000_000) return [];
      const text = fs.readFileSync(full, "latin1");
      return /^(<{7}|>{7}) |^={7}$/m.test(text) && /^<{7} /m.test(text) ? [file] : [];
    });
    expect(marked).toEqual([]);
  });
});
