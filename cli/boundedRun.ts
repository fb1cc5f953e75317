import { spawn } from "node:child_process";

/** What a bounded run of a command gave: its exit code (null when it could not start or was killed), its output as far as kept, and why it could not start. */
export interface BoundedRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The spawn's error code (ENOENT: not on PATH) or message; undefined when it started. */
  startError?: string;
}

export interface BoundedRunOptions {
  /** Written to its stdin, then closed; none: stdin is /dev/null. */
  stdin?: string;
  /** Killed after this long: a host or an API server that hangs does not hang `status`. */
  timeoutMs: number;
  /** At most this much of stdout is kept. */
  maxStdoutBytes: number;
}

/** Keeps the end of stderr's first 4 kB: enough for the line that says why. */
const MAX_STDERR_BYTES = 4096;

/** Runs `command args` with a time limit and a cap on the output it keeps (the read-only clients of `status`: ssh, kubectl). */
export function runBounded(command: string, args: readonly string[], options: BoundedRunOptions): Promise<BoundedRun> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: [options.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"], timeout: options.timeoutMs });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => {
      if (stdout.length < options.maxStdoutBytes) stdout += d;
    });
    child.stderr!.on("data", (d: Buffer) => {
      if (stderr.length < MAX_STDERR_BYTES) stderr += d;
    });
    child.on("error", (error) => {
      const code = (error as NodeJS.ErrnoException).code;
      resolve({ code: null, stdout, stderr, startError: code === "ENOENT" ? code : error.message });
    });
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    if (options.stdin !== undefined) {
      child.stdin!.on("error", () => {});
      child.stdin!.end(options.stdin);
    }
  });
}

/** The last line of a failed run's stderr, or what failed. */
export function failureLine(run: BoundedRun, command: string): string {
  return run.startError ?? (run.stderr.trim().split("\n").pop() || `${command} exited ${run.code}`);
}

/** `work` over `items`, at most `limit` at once, results in the items' order: one read per host or pod, without a hundred clients at once. */
export async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
