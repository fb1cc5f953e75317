/**
 * The progress lines the long steps print while `pulumi up` waits on them, on hosts and in the
 * Kubernetes compile Job (docs/progress.md). The scripts print them with one bash function
 * (core/render/scripts/progress.sh); this is the same format in TypeScript, for the docs, for
 * readers of a step's output (`parseProgressLine`), and for the test that holds the two together.
 *
 *   <host> <who> <phase>  <elapsed>  (budget <budget>, <left> left)[  <amount>][  last: "<line>"]
 */

/** What a step is doing, in the order a first deploy does them. */
export const PROGRESS_PHASES = ["install", "download", "copy", "pull", "compile", "load"] as const;
export type ProgressPhase = (typeof PROGRESS_PHASES)[number];

export interface ProgressLine {
  /** The host (on Kubernetes, the pod). */
  host: string;
  /** One word: `role/rank` for a rank, `key:<compile key>` for a compile, the model for a download, `packages`, `from:<peer>` for a copy. */
  who: string;
  phase: ProgressPhase;
  elapsedSeconds: number;
  /** The bound of the phase's wait: what the step's timeout is summed from (core/render/hosts/stepTimeouts.ts). */
  budgetSeconds: number;
  /** Where it can be known: packages, bytes done of total with rate and ETA, elapsed against the expected. */
  amount?: string;
  /** The last line of the log of what is being waited for (a rank's journal, a compile's output). */
  last?: string;
}

/** A duration as people read it: "42 s" under 2 min, "42 min" under 2 h, else "2 h 40 min"; below 0 is 0. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.floor(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

const BYTE_UNITS = ["B", "kB", "MB", "GB", "TB", "PB"] as const;

/** Bytes in decimal units with one decimal, tenths cut: "512 B", "1.5 kB", "230.0 GB". */
export function formatBytes(bytes: number): string {
  const n = Math.max(0, Math.floor(bytes));
  if (n < 1000) return `${n} B`;
  let scale = 1;
  let unit = 0;
  while (unit < BYTE_UNITS.length - 1 && n >= scale * 1000) {
    scale *= 1000;
    unit += 1;
  }
  return `${Math.floor(n / scale)}.${Math.floor(((n % scale) * 10) / scale)} ${BYTE_UNITS[unit]}`;
}

/** A transfer's amount from two samples `seconds` apart: "<done> of <total>, <rate>/s, ETA <eta>" (total 0: unknown; previous -1: the first sample). */
export function formatTransfer(done: number, total: number, previous: number, seconds: number): string {
  let text = formatBytes(done);
  if (total > 0) text += ` of ${formatBytes(total)}`;
  if (previous >= 0 && seconds > 0) {
    const rate = Math.max(0, Math.floor((done - previous) / seconds));
    text += `, ${formatBytes(rate)}/s`;
    if (total > 0 && rate > 0) text += `, ETA ${formatDuration(Math.floor((total - done + rate - 1) / rate))}`;
  }
  return text;
}

/** The longest log line a progress line quotes. */
export const PROGRESS_LAST_CHARS = 160;

/** One progress line, as progress.sh's `progress_line` prints it. */
export function formatProgressLine(p: ProgressLine): string {
  const budget = `(budget ${formatDuration(p.budgetSeconds)}, ${formatDuration(p.budgetSeconds - p.elapsedSeconds)} left)`;
  let line = `${p.host} ${p.who.replaceAll(" ", "_")} ${p.phase}  ${formatDuration(p.elapsedSeconds)}  ${budget}`;
  if (p.amount) line += `  ${p.amount}`;
  if (p.last) line += `  last: "${p.last.replaceAll("\r", "").slice(0, PROGRESS_LAST_CHARS)}"`;
  return line;
}

const DURATION = String.raw`\d+ s|\d+ min|\d+ h \d+ min`;
const LINE = new RegExp(
  String.raw`^(\S+) (\S+) (${PROGRESS_PHASES.join("|")})  (${DURATION})  \(budget (${DURATION}), (${DURATION}) left\)(?:  (?!last: ")(.*?))?(?:  last: "(.*)")?$`,
);

/** A progress line read back, its durations as printed; null for any other line. */
export interface ParsedProgressLine {
  host: string;
  who: string;
  phase: ProgressPhase;
  elapsed: string;
  budget: string;
  left: string;
  amount: string | null;
  last: string | null;
}

export function parseProgressLine(line: string): ParsedProgressLine | null {
  const m = LINE.exec(line);
  if (!m) return null;
  return {
    host: m[1]!,
    who: m[2]!,
    phase: m[3] as ProgressPhase,
    elapsed: m[4]!,
    budget: m[5]!,
    left: m[6]!,
    amount: m[7] ?? null,
    last: m[8] ?? null,
  };
}
