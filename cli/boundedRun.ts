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

/** Runs a piece of work when fewer than its limit run: one bound shared by every read that holds it. */
export type Bound = <R>(work: () => Promise<R>) => Promise<R>;

/**
 * A bound of `limit` pieces of work at once, in the order they ask. `status` holds one for all its
 * SSH and kubectl processes, whichever model each reads for, so several models read at once still
 * open at most `limit` clients.
 */
export function bound(limit: number): Bound {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (work) => {
    // A released slot goes to the first waiter, which takes it over without running dropping below the limit.
    if (running < limit) running++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/** `work` over `items`, at most `limit` at once (or within a shared bound), results in the items' order: one read per host or pod, without a hundred clients at once. */
export function mapLimited<T, R>(items: readonly T[], limit: number | Bound, work: (item: T) => Promise<R>): Promise<R[]> {
  const within = typeof limit === "number" ? bound(limit) : limit;
  return Promise.all(items.map((item) => within(() => work(item))));
}
