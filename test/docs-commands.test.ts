import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { marked, type Token } from "marked";
import { afterAll, describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { RecipeCatalog } from "../core/recipe/catalog";
import { renderDeployment } from "../core/render/deployment";

const ROOT = path.resolve(__dirname, "..");
const DOCS = ["README.md", ...fs.readdirSync(path.join(ROOT, "docs")).flatMap((name) => (name.endsWith(".md") ? [`docs/${name}`] : []))];

/** The offline commands the docs' commands run as written: plan, diff, render and recipe. */
const RUN = /^npm run (--silent )?(plan|diff|render|recipe)( |$)/;

/**
 * Commands of the docs' `sh` blocks that do not run here, each by a pattern and why: they need the
 * Pulumi CLI, SSH to a server, a cluster, running ranks, a network, or are the repository's own
 * test tiers. A command that is neither run nor listed here fails the test.
 */
const SKIPPED: readonly { pattern: RegExp; why: string }[] = [
  { pattern: /^pulumi /, why: "needs the Pulumi CLI" },
  { pattern: /^export PULUMI_/, why: "sets the Pulumi CLI's environment" },
  { pattern: /^ssh-keyscan /, why: "needs SSH to a server" },
  { pattern: /^kubectl /, why: "needs a cluster" },
  { pattern: /^(docker |printf '\[global\])/, why: "builds the image: Docker and RBLN Portal credentials" },
  { pattern: /^npm run (--silent )?status /, why: "asks running ranks" },
  { pattern: /^npm (ci|install)( |$)/, why: "installs from the npm registry" },
  { pattern: /^npx rbln-serving /, why: "needs the packed package installed (test/package.test.ts installs it)" },
  { pattern: /^(npm test|npm run (test:hosts|test:sabotage|mutation)|npx stryker |MUTATION_TESTS=)/, why: "the repository's own test tiers (docs/testing.md)" },
];

/**
 * Placeholders the docs write for what is yours, and what stands for them here: the recipe page of
 * the second model the tests import, its model and its strategy.
 */
const PLACEHOLDERS: Readonly<Record<string, string>> = {
  "PAGE.txt": "test/fixtures/second-model-page.txt",
  "ORG/MODEL": "example/Tiny-Chat-1B",
  SLUG: "two-role",
};

interface DocCommand {
  file: string;
  line: string;
  /** The exit status the doc implies: 0, or the N of a trailing `# ... exit status N`. */
  status: number;
}

/** Every command line of the `sh` code blocks of `file`: comments and continuations joined, trailing comments off. */
function docCommands(file: string, text = fs.readFileSync(path.join(ROOT, file), "utf8")): DocCommand[] {
  const blocks: string[] = [];
  const walk = (token: Token) => {
    if (token.type === "code" && token.lang === "sh") blocks.push(token.text);
    for (const child of ("tokens" in token && token.tokens) || []) walk(child);
    for (const item of ("items" in token && (token.items as Token[])) || []) walk(item);
  };
  marked.lexer(text).forEach(walk);
  return blocks.flatMap((block) =>
    block
      .replace(/\s*\\\n\s*/g, " ")
      .split("\n")
      .map((raw) => {
        const comment = /\s+#\s.*$/.exec(raw)?.[0] ?? "";
        const status = Number(/exit status (\d+)/.exec(comment)?.[1] ?? 0);
        return { file, line: raw.slice(0, raw.length - comment.length).trim(), status };
      })
      .filter((c) => c.line !== "" && !c.line.startsWith("#")),
  );
}

/** A command with the docs' placeholders replaced. */
const withPlaceholders = (line: string) => Object.entries(PLACEHOLDERS).reduce((text, [from, to]) => text.split(from).join(to), line);

/**
 * A scratch copy of the repository to run the commands in (they write `rendered/` and import recipes),
 * its node_modules linked, committed in a git repository of its own so `--against HEAD` reads as in a
 * fresh clone.
 */
function scratchCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "docs-commands-"));
  const skip = new Set(["node_modules", ".git", "dist", "reports", "rendered"]);
  for (const entry of fs.readdirSync(ROOT)) if (!skip.has(entry)) fs.cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true });
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
  const git = (...args: string[]) =>
    spawnSync("git", ["-c", "user.name=docs", "-c", "user.email=docs@example.com", "-c", "commit.gpgsign=false", ...args], { cwd: dir });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-q", "-m", "scratch");
  return dir;
}

describe("the docs' commands", () => {
  const commands = DOCS.flatMap((file) => docCommands(file));
  const runnable = commands.filter((c) => RUN.test(c.line));
  let scratch: string | undefined;
  afterAll(() => {
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it("are each run here, or skipped by a pattern that says why", () => {
    expect(runnable.length).toBeGreaterThan(15);
    const unclassified = commands.filter((c) => !RUN.test(c.line) && !SKIPPED.some((s) => s.pattern.test(c.line)));
    expect(unclassified.map((c) => `${c.file}: ${c.line}`)).toEqual([]);
    // Every pattern still skips something: one that matches nothing is stale.
    expect(SKIPPED.filter((s) => !commands.some((c) => s.pattern.test(c.line))).map((s) => String(s.pattern))).toEqual([]);
  });

  it("would find a command nobody classified, join continued lines, and read an exit status from the comment", () => {
    const doc =
      "```sh\nnpm run --silent plan -- --stack dev \\\n  --format json   # one object\nnpm run --silent plan -- --stack nope   # exit status 2\nterraform apply\n```\n";
    const found = docCommands("docs/x.md", doc);
    expect(found).toEqual([
      { file: "docs/x.md", line: "npm run --silent plan -- --stack dev --format json", status: 0 },
      { file: "docs/x.md", line: "npm run --silent plan -- --stack nope", status: 2 },
      { file: "docs/x.md", line: "terraform apply", status: 0 },
    ]);
    expect(found.filter((c) => !RUN.test(c.line) && !SKIPPED.some((s) => s.pattern.test(c.line))).map((c) => c.line)).toEqual(["terraform apply"]);
  });

  /** One command in the scratch copy, by bash as a reader would paste it: why it failed, or nothing. */
  function runOne(command: DocCommand, cwd: string): Promise<string | undefined> {
    const line = withPlaceholders(command.line);
    return new Promise((resolve) => {
      const child = spawn("bash", ["-c", line], { cwd, env: { ...process.env, npm_config_update_notifier: "false" } });
      let [stdout, stderr] = ["", ""];
      child.stdout.on("data", (chunk) => (stdout += chunk));
      child.stderr.on("data", (chunk) => (stderr += chunk));
      child.on("close", (status) => {
        const error = stderr.split("\n").find((l) => l.startsWith("error:"));
        const empty = stdout.trim() === "";
        const ok = status === command.status && (command.status !== 0 || (error === undefined && !empty));
        resolve(
          ok
            ? undefined
            : `${command.file}: ${line}: exit ${status} (expected ${command.status})${error ? `: ${error}` : ""}${empty ? ", nothing on stdout" : ""}`,
        );
      });
    });
  }

  it("plan, diff, render and recipe run as written and exit as the doc says, without an error line", { timeout: 600_000 }, async () => {
    scratch = scratchCopy();
    const cwd = scratch;
    // Each distinct command once; an import first, since a later command plans the model it imports.
    const distinct = [...new Map(runnable.map((c) => [withPlaceholders(c.line), c])).values()];
    const imports = distinct.filter((c) => / recipe -- import /.test(c.line));
    const failures: (string | undefined)[] = [];
    for (const command of imports) failures.push(await runOne(command, cwd));
    const queue = distinct.filter((c) => !imports.includes(c));
    // Three at a time: most of each is tsx starting up.
    await Promise.all(
      Array.from({ length: 3 }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) failures.push(await runOne(next, cwd));
      }),
    );
    expect(failures.filter((f) => f !== undefined)).toEqual([]);
  });
});

describe("the names docs/first-deploy.md tells you to look up are the rendered ones", () => {
  const text = fs.readFileSync(path.join(ROOT, "docs/first-deploy.md"), "utf8");
  const catalog = RecipeCatalog.load();
  const rendered = (stack: string) =>
    renderDeployment(planDeployment(parseStackSettings(readStackFile(stack).raw), catalog), { stack, instance: "rbln-serving", secrets: [] });

  it("systemd units of the dev and edge stacks", () => {
    const units = new Set<string>();
    for (const stack of ["dev", "edge"]) {
      const hosts = rendered(stack).hosts!;
      for (const rank of hosts.waves.flat().flatMap((h) => h.ranks)) units.add(rank.unitName);
      for (const sidecar of hosts.frontDoor?.sidecars ?? []) units.add(sidecar.unitName);
      for (const group of hosts.waves.flat().flatMap((h) => h.groups)) units.add(group.unitName);
      for (const router of hosts.frontDoor?.routers ?? [])
        for (const file of Object.keys(router.files)) if (file.startsWith("systemd/")) units.add(file.slice("systemd/".length));
    }
    const named = [...text.matchAll(/rbln-serving-(?:dev|edge)\.[a-z0-9<>-]+\.service/g)].map((m) => m[0]);
    expect(named.length).toBeGreaterThan(5);
    // A compile host's unit carries its key: `<key>` in the doc.
    expect(named.filter((name) => !units.has(name) && !/\.compile-<key>\.service$/.test(name))).toEqual([]);
  });

  it("the prod stack's Jobs and Deployments, and the compile Jobs' form: <role> and <key>, the first 10 digits of its compile key", () => {
    const { workloads } = rendered("prod").kubernetes!;
    const objects = new Set([`job/${workloads.weightsJob.metadata?.name}`, ...workloads.roles.map((r) => `deployment/${r.deployment.metadata.name}`)]);
    const named = [...text.matchAll(/\b(?:job|deployment)\/[a-z0-9<>-]+/g)].map((m) => m[0]);
    expect(named.length).toBeGreaterThan(2);
    const compileForm = /^job\/rbln-serving-compile-(<role>|prefill|decode)-<key>$/;
    expect(named.filter((name) => !objects.has(name) && !compileForm.test(name))).toEqual([]);
    expect(text).toContain(`-n ${workloads.namespace.metadata.name} `);
    // The form, against the Jobs compile ahead renders.
    const prod = readStackFile("prod").raw as Record<string, any>;
    const image = `registry.example.com/ml/vllm-rbln@sha256:${"e".repeat(64)}`;
    const ahead = renderDeployment(
      planDeployment(parseStackSettings({ ...prod, compile: { enabled: true }, kubernetes: { ...prod.kubernetes, image } }), catalog),
      { stack: "prod", instance: "rbln-serving", secrets: [] },
    ).kubernetes!.workloads.compileJobs;
    expect(ahead.map((j) => j.job.metadata.name)).toEqual(ahead.map((j) => `rbln-serving-compile-${j.role}-${j.key.slice(0, 10)}`));
  });
});
