/**
 * One part of `npm run bench`: it measures (or models) one thing, prints its own lines, and may set
 * targets. `npm run bench -- <part>...` runs only the parts named; `bench/parts.ts` lists them.
 */

/** A figure the bench checks. Only a figure that can come out otherwise is a target: a value compared with the constant it is made from is a test's consistency check, not a target. */
export interface Target {
  target: string;
  value: number;
  met: boolean;
}

export interface PartOutcome {
  /** Plain data for `--json`, under the part's name. */
  report: unknown;
  /** What the part prints, in order (tables, the model's inputs). */
  lines: string[];
  targets: Target[];
}

export interface BenchPart {
  /** What `npm run bench -- <name>` selects. */
  name: string;
  /** One line: what it measures, and whether it is measured or a model. */
  what: string;
  run(): Promise<PartOutcome>;
}
