import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseStackFile, readStackFileAt, stackFilePath, stackFileText, type StackFile } from "../core/config/stackFile";
import { ConfigError } from "../core/errors";

/** git in `cwd`: its status and output, or null when git cannot run (not installed). */
function git(args: readonly string[], cwd: string): { status: number | null; stdout: Buffer; stderr: string } | null {
  const run = spawnSync("git", args, { cwd, maxBuffer: 8 * 2 ** 20 });
  if (run.error) return null;
  return { status: run.status, stdout: run.stdout, stderr: run.stderr.toString("utf8").trim() };
}

/**
 * `diff --against FILE|GIT-REF`: the stack file to compare the stack with. A path that exists is a
 * stack file; anything else is a git commit, whose version of the stack's own file is read with
 * `git show REF:path` (a file of the same name wins over a ref). Each fault is one line.
 */
export function stackFileAgainst(stack: string, against: string, stackDir: string): StackFile {
  if (fs.existsSync(against)) return readStackFileAt(against);
  const refusal = (why: string) =>
    new ConfigError("--against", `${JSON.stringify(against)} ${why}; allowed: a stack file, or a git commit that has the stack's file`);
  // A leading dash would be read by git as an option.
  if (against === "" || against.startsWith("-")) throw refusal("is no file and no git ref");
  const file = path.resolve(stackFilePath(stack, stackDir));
  const dir = path.dirname(file);
  const top = fs.existsSync(dir) ? git(["rev-parse", "--show-toplevel"], dir) : null;
  if (top === null) throw refusal("is no file, and git cannot run here, so it is no git ref either");
  if (top.status !== 0) throw refusal(`is no file, and ${path.relative(process.cwd(), dir) || "."} is not in a git repository, so it is no git ref either`);
  const inRepo = path.relative(fs.realpathSync(top.stdout.toString("utf8").trim()), fs.realpathSync(dir));
  const relative = path.posix.join(...inRepo.split(path.sep).filter(Boolean), path.basename(file));
  if (git(["rev-parse", "--verify", "--quiet", `${against}^{commit}`], dir)?.status !== 0) throw refusal("is no file and no commit of this git repository");
  const shown = `${against}:${relative}`;
  const show = git(["show", shown], dir);
  if (show?.status !== 0) throw refusal(`has no ${relative} (git show ${shown})`);
  return parseStackFile(stack, stackFileText(show.stdout, shown), shown);
}
