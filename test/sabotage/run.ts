import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { applyEdits } from "./apply";
import { BREAKAGES, type Breakage } from "./breakages";

/**
 * `npm run test:sabotage [-- <name>...] [--fast-only] [--every-tier] [--no-baseline]`: applies each
 * breakage of breakages.ts to a scratch copy of the working tree and runs the tests named for it
 * there, the fast tier first and the host tier (root, fake hosts) only when the fast tier missed it
 * (with --every-tier: always, and then each tier must catch it), one run at a time. Each named test
 * set first runs once unbroken (the baseline): a set that fails unbroken proves nothing, so its
 * breakages are errors, never "caught"; and a catch is run again, to count only if it happens twice. After each breakage the scratch tree must be as committed (the edits put back,
 * nothing the tests wrote): else the breakage is an error and the tree is reset, so no breakage runs
 * on another's leftovers. Prints a line per breakage as it goes and a table at the end; exits 1 when
 * a breakage is missed, could not be applied, was caught only once (flaky), left the tree dirty or was
 * not run.
 */

const ROOT = path.resolve(__dirname, "../..");
const args = process.argv.slice(2);
const named = args.filter((a) => !a.startsWith("--"));
const fastOnly = args.includes("--fast-only");
const everyTier = args.includes("--every-tier");
const baseline = !args.includes("--no-baseline");
const unknown = named.filter((n) => !BREAKAGES.some((b) => b.name === n));
if (unknown.length > 0) {
  process.stderr.write(`test:sabotage: no breakage ${unknown.join(", ")}; breakages: ${BREAKAGES.map((b) => b.name).join(", ")}\n`);
  process.exit(2);
}
const selected = named.length === 0 ? BREAKAGES : BREAKAGES.filter((b) => named.includes(b.name));

type Tier = "fast" | "hosts";
const CONFIG: Record<Tier, string> = { fast: "vitest.config.mts", hosts: "vitest.hosts.config.mts" };

interface TestRun {
  passed: boolean;
  /** The tests that failed, `file > name`. */
  failed: string[];
  /** Set when vitest ended without a report (it could not start, no test ran). */
  problem?: string;
  seconds: number;
}

/** A copy of the working tree (tracked and untracked files, not ignored ones) with node_modules linked, committed as a repository of its own. */
function scratchCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-sabotage-"));
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const file of listed.stdout.split("\0").filter(Boolean)) {
    const from = path.join(ROOT, file);
    if (!fs.existsSync(from)) continue;
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.copyFileSync(from, path.join(dir, file));
    fs.chmodSync(path.join(dir, file), fs.statSync(from).mode);
  }
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
  // A repository of its own, for the suites that ask git which files are the repository's.
  for (const command of [
    ["init", "-q"],
    ["add", "-A"],
    ["-c", "user.name=sabotage", "-c", "user.email=sabotage@localhost", "commit", "-q", "-m", "scratch"],
  ]) {
    const git = spawnSync("git", command, { cwd: dir, encoding: "utf8" });
    if (git.status !== 0) throw new Error(`git ${command.join(" ")} in ${dir} failed: ${git.stderr}`);
  }
  return dir;
}

/** Where each run's vitest JSON report is kept, for a look at why a test failed (reports/ is not committed). */
const REPORTS = path.join(ROOT, "reports", "sabotage");

/** The first line of a failure, without colours, short enough for one line. */
const firstLine = (message: string | undefined) =>
  (message ?? "")
    .replace(/\x1b\[[0-9;]*m/g, "")
    .split("\n")
    .find((line) => line.trim())
    ?.trim()
    .slice(0, 160) ?? "";

/** `keepAs`: the name the report is kept under in reports/sabotage/. */
function runTests(dir: string, tier: Tier, files: readonly string[], keepAs: string): TestRun {
  // Outside the scratch tree, which must stay as committed.
  const report = path.join(os.tmpdir(), `rbln-sabotage-report-${process.pid}.json`);
  fs.rmSync(report, { force: true });
  const started = Date.now();
  const run = spawnSync("npx", ["vitest", "run", "--config", CONFIG[tier], "--reporter=json", `--outputFile=${report}`, ...files], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, CI: "true" },
    maxBuffer: 256 * 1024 * 1024,
  });
  const seconds = (Date.now() - started) / 1000;
  if (!fs.existsSync(report))
    return {
      passed: false,
      failed: [],
      problem: `vitest wrote no report (exit ${run.status}): ${run.stderr.trim().split("\n").slice(-3).join(" | ")}`,
      seconds,
    };
  fs.mkdirSync(REPORTS, { recursive: true });
  fs.copyFileSync(report, path.join(REPORTS, `${keepAs}.json`));
  const result = JSON.parse(fs.readFileSync(report, "utf8")) as {
    numTotalTests: number;
    testResults: {
      name: string;
      status: string;
      message?: string;
      assertionResults: { fullName: string; status: string; failureMessages?: string[] }[];
    }[];
  };
  const failed = result.testResults.flatMap((file) => {
    const relative = path.relative(dir, file.name);
    const tests = file.assertionResults.filter((t) => t.status === "failed").map((t) => `${relative} > ${t.fullName}: ${firstLine(t.failureMessages?.[0])}`);
    // A file that failed outside any test (an error at import, in a hook) counts as a failure of the file.
    return tests.length > 0 || file.status !== "failed" ? tests : [`${relative} (${firstLine(file.message) || "failed"})`];
  });
  if (result.numTotalTests === 0) return { passed: false, failed, problem: "no test ran", seconds };
  return { passed: failed.length === 0 && run.status === 0, failed, seconds };
}

type Outcome = { status: "caught"; tier: Tier; by: string[] } | { status: "missed" | "error" | "not run"; detail: string };

/** What is in the scratch tree that its commit does not hold (`git status`), then the tree put back as committed. */
function leftovers(dir: string): string[] {
  const git = (...command: string[]) => spawnSync("git", command, { cwd: dir, encoding: "utf8" });
  const status = git("status", "--porcelain", "--untracked-files=all");
  if (status.status !== 0) throw new Error(`git status in ${dir} failed: ${status.stderr}`);
  const dirty = status.stdout.split("\n").filter(Boolean);
  if (dirty.length > 0) for (const reset of [git("checkout", "-q", "--", "."), git("clean", "-fdq")]) if (reset.status !== 0) throw new Error(reset.stderr);
  return dirty;
}

interface Result {
  breakage: Breakage;
  outcome: Outcome;
  seconds: number;
}

function tiersOf(breakage: Breakage): [Tier, string[]][] {
  const tiers: [Tier, string[]][] = [];
  if (breakage.tests.fast?.length) tiers.push(["fast", breakage.tests.fast]);
  if (breakage.tests.hosts?.length && !fastOnly) tiers.push(["hosts", breakage.tests.hosts]);
  return tiers;
}

const baselines = new Map<string, TestRun>();

function baselineOf(dir: string, tier: Tier, files: readonly string[]): TestRun | undefined {
  if (!baseline) return undefined;
  const key = `${tier} ${files.join(" ")}`;
  if (!baselines.has(key)) {
    process.stdout.write(`  baseline ${tier}: ${files.join(" ")} ...`);
    const run = runTests(dir, tier, files, `baseline-${tier}-${baselines.size + 1}`);
    baselines.set(key, run);
    process.stdout.write(` ${run.passed ? "passes" : `FAILS (${run.problem ?? run.failed.slice(0, 3).join("; ")})`} in ${run.seconds.toFixed(0)} s\n`);
  }
  return baselines.get(key);
}

/**
 * A catch counts only when it happens again: a test that fails now and then under load (timing)
 * would otherwise pass off a missed breakage as caught. The broken run is repeated; caught only if
 * the second run fails too.
 */
function confirmed(dir: string, breakage: Breakage, tier: Tier, files: readonly string[], first: TestRun): Outcome {
  const restore = applyEdits(dir, breakage.edits);
  let again: TestRun;
  try {
    again = runTests(dir, tier, files, `${breakage.name}-${tier}-again`);
  } finally {
    restore();
  }
  if (again.problem) return { status: "error", detail: `${tier}, run again: ${again.problem}` };
  if (again.passed) return { status: "error", detail: `flaky: ${tier} failed once (${first.failed.slice(0, 2).join("; ")}), then passed` };
  return { status: "caught", tier, by: again.failed };
}

/** Applies one breakage and runs its tiers in turn until one catches it, putting the files back after each run. */
function sabotage(dir: string, breakage: Breakage): Outcome {
  const tiers = tiersOf(breakage);
  if (tiers.length === 0) return { status: "not run", detail: fastOnly ? "host tier only (--fast-only)" : "no tests named" };
  try {
    applyEdits(dir, breakage.edits, true);
  } catch (error) {
    return { status: "error", detail: (error as Error).message };
  }
  const missedBy: string[] = [];
  const caught: (Outcome & { status: "caught" })[] = [];
  for (const [tier, files] of tiers) {
    if (tier === "hosts" && process.getuid?.() !== 0) return { status: "not run", detail: `the host tier needs root (${files.join(" ")})` };
    const before = baselineOf(dir, tier, files);
    if (before && !before.passed) return { status: "error", detail: `${files.join(" ")} fail without the breakage` };
    const restore = applyEdits(dir, breakage.edits);
    let run: TestRun;
    try {
      run = runTests(dir, tier, files, `${breakage.name}-${tier}`);
    } finally {
      restore();
    }
    if (run.problem) return { status: "error", detail: `${tier}: ${run.problem}` };
    if (run.passed) {
      missedBy.push(`${tier}: ${files.join(" ")} pass`);
      continue;
    }
    const outcome = confirmed(dir, breakage, tier, files, run);
    if (!everyTier || outcome.status !== "caught") return outcome;
    caught.push(outcome);
  }
  if (missedBy.length > 0 || caught.length === 0) return { status: "missed", detail: [...caught.map((c) => `${c.tier}: caught`), ...missedBy].join("; ") };
  return { status: "caught", tier: caught.at(-1)!.tier, by: caught.flatMap((c) => c.by) };
}

function main(): void {
  const dir = scratchCopy();
  const results: Result[] = [];
  const started = Date.now();
  process.stdout.write(`test:sabotage: ${selected.length} breakage(s) in ${dir}\n`);
  for (const [i, breakage] of selected.entries()) {
    process.stdout.write(`[${i + 1}/${selected.length}] ${breakage.name}: ${breakage.why}\n`);
    const t0 = Date.now();
    const ran = sabotage(dir, breakage);
    const dirty = leftovers(dir);
    const outcome: Outcome = dirty.length === 0 ? ran : { status: "error", detail: `left the tree dirty (reset): ${dirty.slice(0, 5).join(", ")}` };
    const seconds = (Date.now() - t0) / 1000;
    results.push({ breakage, outcome, seconds });
    const said =
      outcome.status === "caught"
        ? `caught (${outcome.tier}) by ${outcome.by.slice(0, 2).join("; ")}${outcome.by.length > 2 ? ` and ${outcome.by.length - 2} more` : ""}`
        : `${outcome.status.toUpperCase()}: ${outcome.detail}${outcome.status === "missed" && breakage.awaiting ? ` (awaiting ${breakage.awaiting})` : ""}`;
    process.stdout.write(`[${i + 1}/${selected.length}] ${breakage.name}: ${said} in ${seconds.toFixed(0)} s\n`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
  process.stdout.write("\nbreakage                                  result    tier   seconds\n");
  for (const { breakage, outcome, seconds } of results)
    process.stdout.write(
      `${breakage.name.padEnd(40)}  ${outcome.status.padEnd(8)}  ${(outcome.status === "caught" ? outcome.tier : "").padEnd(5)}  ${seconds.toFixed(0).padStart(7)}\n`,
    );
  const caught = results.filter((r) => r.outcome.status === "caught").length;
  process.stdout.write(
    `\n${caught} caught, ${results.length - caught} not (missed, error or not run) of ${results.length}, in ${((Date.now() - started) / 60000).toFixed(1)} min\n`,
  );
  process.exitCode = caught === results.length ? 0 : 1;
}

main();
