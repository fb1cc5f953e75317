import * as fs from "node:fs";
import { ConfigError } from "./errors";

/**
 * Files and folders a user names on the command line (a recipe page, a recipe folder, an output
 * folder). A fault of the file system is refused in one line naming the option, the path and what
 * is wanted, never a stack trace: `PAGE: "/tmp" is a folder; allowed: a recipe page, ...`.
 */

/** What a user wants of a path, for the refusal: the option that named it and what it should be. */
export interface UserPath {
  key: string;
  wanted: string;
}

/** The file system's fault in words, or undefined for an error that is no file-system fault (a bug). */
function fsFault(error: unknown): string | undefined {
  if (!(error instanceof Error) || !("syscall" in error)) return undefined;
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return "does not exist";
  if (code === "ENOTDIR") return "does not exist: a part of its path is a file";
  if (code === "EISDIR") return "is a folder";
  if (code === "EACCES" || code === "EPERM") return "is not accessible (permission denied)";
  if (code === "ELOOP") return "is a loop of symbolic links";
  if (code === "EROFS") return "is on a read-only file system";
  if (code === "ENOSPC") return "is on a full disk";
  return `cannot be used (${code})`;
}

function refusal(at: string, where: UserPath, problem: string): ConfigError {
  return new ConfigError(where.key, `${JSON.stringify(at)} ${problem}; allowed: ${where.wanted}`);
}

/** Runs a file-system step; its fault becomes the one-line refusal. */
function fsStep<T>(at: string, where: UserPath, step: () => T): T {
  try {
    return step();
  } catch (error) {
    const fault = fsFault(error);
    if (fault === undefined) throw error;
    throw refusal(at, where, fault);
  }
}

/**
 * A regular file of at most `maxBytes` (which `where.wanted` states), as UTF-8. The size is
 * checked before reading, so a huge file is refused unread, and a FIFO is refused without
 * blocking on it.
 */
export function readUserFile(file: string, where: UserPath, maxBytes: number): string {
  return readUserBytes(file, where, maxBytes).toString("utf8");
}

/** readUserFile's bytes, for a reader that checks the encoding itself. */
export function readUserBytes(file: string, where: UserPath, maxBytes: number): Buffer {
  const stat = fsStep(file, where, () => fs.statSync(file));
  if (stat.isDirectory()) throw refusal(file, where, "is a folder");
  if (!stat.isFile()) throw refusal(file, where, "is not a regular file");
  if (stat.size > maxBytes) throw refusal(file, where, `is ${stat.size} bytes`);
  return fsStep(file, where, () => fs.readFileSync(file));
}

/** The names in an existing folder. */
export function listUserFolder(dir: string, where: UserPath): string[] {
  if (!fsStep(dir, where, () => fs.statSync(dir)).isDirectory()) throw refusal(dir, where, "is not a folder");
  return fsStep(dir, where, () => fs.readdirSync(dir));
}

/** A folder to write into: made (with its parents) when missing; a file there is refused. */
export function makeUserFolder(dir: string, where: UserPath): void {
  if (dir.trim() === "") throw new ConfigError(where.key, `empty; allowed: ${where.wanted}`);
  if (fs.existsSync(dir) && !fsStep(dir, where, () => fs.statSync(dir)).isDirectory()) throw refusal(dir, where, "is not a folder");
  fsStep(dir, where, () => fs.mkdirSync(dir, { recursive: true }));
}

/** Writes `text` to `file`, a fault refused naming the file. */
export function writeUserFile(file: string, text: string, where: UserPath): void {
  fsStep(file, where, () => fs.writeFileSync(file, text));
}
