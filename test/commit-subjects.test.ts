import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "..");
const SCRIPT = path.join(ROOT, "scripts/check-commit-subjects.sh");
// A scratch repository's git: no user or system config, a fixed identity.
const GIT_ENV = {
  PATH: process.env.PATH,
  HOME: os.tmpdir(),
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "t",
  GIT_AUTHOR_EMAIL: "t@example.com",
  GIT_COMMITTER_NAME: "t",
  GIT_COMMITTER_EMAIL: "t@example.com",
};

function git(cwd: string, ...args: string[]): string {
  const run = spawnSync("git", args, { cwd, env: GIT_ENV, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`git ${args.join(" ")}: ${run.stderr}`);
  return run.stdout.trim();
}

/** A repository with one commit, the base; returns its folder and the base's hash. */
function scratchRepo(): { dir: string; base: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "subjects-"));
  git(dir, "init", "-q", "-b", "main");
  git(dir, "commit", "-q", "--allow-empty", "-m", `An old commit from before the rule, with a subject of ${"x".repeat(60)}`);
  return { dir, base: git(dir, "rev-parse", "HEAD") };
}

const commit = (dir: string, subject: string) => git(dir, "commit", "-q", "--allow-empty", "-m", subject, "-m", "The story, in the body.");
const check = (dir: string, ...args: string[]) => spawnSync("bash", [SCRIPT, ...args], { cwd: dir, env: GIT_ENV, encoding: "utf8" });

describe("scripts/check-commit-subjects.sh", () => {
  it("passes subjects of 72 characters, counted as characters, and fails one of 73, naming it", () => {
    const { dir, base } = scratchRepo();
    commit(dir, "a".repeat(72));
    // 72 characters, 74 bytes.
    commit(dir, `${"b".repeat(71)}→`);
    const fits = check(dir, base);
    expect(fits.status, fits.stderr).toBe(0);
    expect(fits.stdout).toContain("2 commit subjects after");

    commit(dir, `Add a feature ${"c".repeat(59)}`);
    const long = check(dir, base);
    expect(long.status).toBe(1);
    expect(long.stdout).toBe(`${git(dir, "rev-parse", "--short=12", "HEAD")} 73 characters: Add a feature ${"c".repeat(59)}\n`);
    expect(long.stderr).toMatch(/^check-commit-subjects: 1 of 3 commit subjects after \w{12} are over 72 characters; reword them/);
  });

  it("leaves merge commits and the commits up to the base alone", () => {
    const { dir, base } = scratchRepo();
    git(dir, "checkout", "-q", "-b", "topic");
    commit(dir, "A short subject on a branch");
    git(dir, "checkout", "-q", "main");
    git(dir, "merge", "-q", "--no-ff", "topic", "-m", `Merge branch 'topic', which says at length what it brings: ${"d".repeat(40)}`);
    const run = check(dir, base);
    expect(run.status, run.stdout).toBe(0);
    expect(run.stdout).toContain("1 commit subjects after");
  });

  it("refuses a base that is no commit, with exit 2", () => {
    const { dir } = scratchRepo();
    const run = check(dir, "0".repeat(40));
    expect(run.status).toBe(2);
    expect(run.stderr).toBe(`check-commit-subjects: base ${"0".repeat(40)} is not a commit of this repository\n`);
  });

  it("in a shallow clone without the base, says so and checks the commits it has", () => {
    const { dir, base } = scratchRepo();
    commit(dir, "First after the base");
    commit(dir, `Second after the base, and too long: ${"e".repeat(40)}`);
    commit(dir, "Third after the base");
    const shallow = fs.mkdtempSync(path.join(os.tmpdir(), "subjects-shallow-"));
    git(shallow, "clone", "-q", "--depth", "2", `file://${dir}`, ".");
    const run = check(shallow, base);
    expect(run.stderr).toContain(`shallow history without ${base}; checking every commit it has`);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("1 of 2 commit subjects");
  });
});

describe(".ci/run", () => {
  it("lints, and checks the commit subjects, before the test tiers", () => {
    const ci = fs.readFileSync(path.join(ROOT, ".ci/run"), "utf8");
    const { scripts } = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
    expect(scripts.lint).toBe("biome ci .");
    const at = (line: RegExp) => ci.split("\n").findIndex((l) => line.test(l));
    expect(at(/^npm run lint$/)).toBeGreaterThan(-1);
    expect(at(/^bash scripts\/check-commit-subjects\.sh$/)).toBeGreaterThan(-1);
    expect(at(/^npm run lint$/)).toBeLessThan(at(/^npm test$/));
    expect(at(/^bash scripts\/check-commit-subjects\.sh$/)).toBeLessThan(at(/^npm test$/));
  });
});
