import type { PartOutcome, Target } from "./part";
import { BENCH_PARTS } from "./parts";

/**
 * `npm run bench [-- --json] [<part>...]`: runs each part in turn (all, or those named) and says so as
 * it goes: a line when a part starts, its tables when it ends, with the time it took. Exits 1 when a
 * target is missed, 2 on a part it does not know. With `--json` the progress goes to stderr and one
 * JSON object to stdout.
 */
const args = process.argv.slice(2);
const json = args.includes("--json");
const named = args.filter((a) => !a.startsWith("--"));
const unknown = named.filter((n) => !BENCH_PARTS.some((p) => p.name === n));
if (unknown.length > 0) {
  process.stderr.write(`bench: no part ${unknown.join(", ")}; parts: ${BENCH_PARTS.map((p) => p.name).join(", ")}\n`);
  process.exit(2);
}
const parts = named.length === 0 ? BENCH_PARTS : BENCH_PARTS.filter((p) => named.includes(p.name));
// Progress and tables to stdout as they come, unless stdout carries the JSON.
const say = (line: string) => (json ? process.stderr : process.stdout).write(`${line}\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function main() {
  const outcomes: (PartOutcome & { part: string; seconds: number })[] = [];
  const started = Date.now();
  for (const [i, part] of parts.entries()) {
    say(`[${i + 1}/${parts.length}] ${part.name}: ${part.what} ...`);
    const partStarted = Date.now();
    const outcome = await part.run();
    const took = Date.now() - partStarted;
    outcomes.push({ part: part.name, seconds: took / 1000, ...outcome });
    if (!json) for (const line of outcome.lines) say(`  ${line}`);
    const missed = outcome.targets.filter((t) => !t.met).length;
    say(
      `[${i + 1}/${parts.length}] ${part.name} done in ${seconds(took)}${outcome.targets.length ? `, ${outcome.targets.length - missed} of ${outcome.targets.length} targets met` : ""}`,
    );
  }
  const targets: (Target & { part: string })[] = outcomes.flatMap((o) => o.targets.map((t) => ({ part: o.part, ...t })));
  if (json) {
    const report = Object.fromEntries(outcomes.map((o) => [o.part, { seconds: o.seconds, report: o.report }]));
    process.stdout.write(`${JSON.stringify({ node: process.version, parts: report, targets })}\n`);
  } else {
    say("\ntargets");
    for (const t of targets) say(`  ${t.met ? "met   " : "MISSED"}  ${t.target} (${Number.isInteger(t.value) ? t.value : t.value.toFixed(2)})`);
  }
  say(`bench: ${parts.length} part(s) in ${seconds(Date.now() - started)}; ${targets.filter((t) => !t.met).length} of ${targets.length} targets missed`);
  process.exitCode = targets.every((t) => t.met) ? 0 : 1;
}

void main();
