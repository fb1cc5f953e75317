import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  formatBytes,
  formatDuration,
  formatProgressLine,
  formatTransfer,
  parseProgressLine,
  PROGRESS_PHASES,
  type ProgressLine,
} from "../core/render/progress";

/**
 * The progress lines' one format (docs/progress.md): progress.sh prints them on the hosts and in the
 * compile Job, core/render/progress.ts describes and reads them. Here the two agree on generated
 * inputs under real bash, the mask hides secrets in every form, and progress_run reports while a
 * program runs and hands back its status.
 */
const SCRIPTS = path.join(__dirname, "..", "core", "render", "scripts");

/** Runs `body` under bash with progress-run.sh (and so progress.sh) sourced; `date` is pinned to `now` when given. */
function bash(body: string, { now, stdin = "", env = {} }: { now?: number; stdin?: string; env?: Record<string, string> } = {}) {
  const pin = now === undefined ? "" : `date() { echo ${now}; }\n`;
  const result = spawnSync("bash", ["-c", `set -euo pipefail\n. ./progress-run.sh\n${pin}${body}`], {
    cwd: SCRIPTS,
    input: stdin,
    encoding: "utf8",
    env: { ...process.env, ...env },
  });
  if (result.status !== 0) throw new Error(`bash exited ${result.status}: ${result.stderr}`);
  return result.stdout;
}

/** Values near each unit's bounds as often as large ones: a bound off by one shows. */
const seconds = fc.oneof(fc.nat(200), fc.nat(8_000), fc.nat(400_000));
const bytes = fc.oneof(fc.nat(2_000), fc.nat(2_000_000), fc.nat(3e9), fc.nat(3e15));

const q = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

describe("the progress line: progress.sh and core/render/progress.ts agree", () => {
  it("durations, bytes and transfers, over generated values", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(seconds, bytes, fc.oneof(fc.constant(-1), bytes), fc.nat(100)), { minLength: 40, maxLength: 40 }), (cases) => {
        const script = cases
          .map(
            ([s, done, total, seconds]) =>
              `progress_duration ${s}; progress_bytes ${done}; progress_transfer ${done} ${total} ${Math.min(done, total)} ${seconds}`,
          )
          .join("\n");
        const expected = cases.flatMap(([s, done, total, seconds]) => [
          formatDuration(s),
          formatBytes(done),
          formatTransfer(done, total, Math.min(done, total), seconds),
        ]);
        expect(bash(script).split("\n").slice(0, -1)).toEqual(expected);
      }),
      { numRuns: 5 },
    );
  });

  it("whole lines, read back by parseProgressLine", () => {
    const word = fc.stringMatching(/^[A-Za-z0-9/:._-]{1,20}$/);
    const line = fc.record({
      host: word,
      who: word,
      phase: fc.constantFrom(...PROGRESS_PHASES),
      elapsedSeconds: seconds,
      budgetSeconds: seconds,
      amount: fc.option(
        fc.stringMatching(/^[a-z0-9 ,./()]{1,30}$/).filter((a) => a.trim() === a && !a.includes("  ")),
        { nil: undefined },
      ),
      last: fc.option(fc.stringMatching(/^[ -~]{1,200}$/), { nil: undefined }),
    });
    fc.assert(
      fc.property(fc.array(line, { minLength: 20, maxLength: 20 }), (lines: ProgressLine[]) => {
        const now = 2_000_000_000;
        const script = lines
          .map((p) => `progress_line ${q(p.host)} ${q(p.who)} ${p.phase} ${now - p.elapsedSeconds} ${p.budgetSeconds} ${q(p.amount ?? "")} ${q(p.last ?? "")}`)
          .join("\n");
        const printed = bash(script, { now }).split("\n").slice(0, -1);
        expect(printed).toEqual(lines.map(formatProgressLine));
        for (const [i, text] of printed.entries()) {
          const p = lines[i]!;
          expect(parseProgressLine(text)).toMatchObject({
            host: p.host,
            who: p.who,
            phase: p.phase,
            elapsed: formatDuration(p.elapsedSeconds),
            budget: formatDuration(p.budgetSeconds),
            left: formatDuration(p.budgetSeconds - p.elapsedSeconds),
            amount: p.amount ?? null,
            last: p.last?.slice(0, 160) ?? null,
          });
        }
      }),
      { numRuns: 5 },
    );
  });

  it("the issue's example shape", () => {
    expect(
      formatProgressLine({ host: "npu-0", who: "main/0", phase: "compile", elapsedSeconds: 42 * 60, budgetSeconds: 160 * 60, last: "Compiling layer 31/62" }),
    ).toBe('npu-0 main/0 compile  42 min  (budget 2 h 40 min, 118 min left)  last: "Compiling layer 31/62"');
    expect(parseProgressLine("ready npu-0: main rank 0 serves on port 8000 after 3s")).toBeNull();
  });
});

describe("the secrets mask", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "progress-mask-"));
  const secrets = ["pa ss/word+1", "hf_tok%en", "key-ü-29"];

  it("hides each secret as written, URL-encoded both ways, and any URL's user info", () => {
    const forms = secrets.flatMap((s) => [s, encodeURIComponent(s), encodeURIComponent(s).replaceAll("%20", "+")]);
    const input = `${forms.map((f) => `x ${f} y`).join("\n")}\nsee http://me:other@host/simple and https://tok@h/x\n`;
    const out = bash("progress_mask", { stdin: input, env: { progress_secrets: secrets.join("\n") } });
    for (const form of forms) expect(out).not.toContain(form);
    expect(out.split("\n").slice(0, forms.length)).toEqual(forms.map(() => "x *** y"));
    expect(out).toContain("see http://***@host/simple and https://***@h/x");
  });

  it("reads the passwords of a pip.conf's URLs and the values of an env file", () => {
    fs.writeFileSync(
      path.join(dir, "pip.conf"),
      "[global]\nindex-url = https://me:pa%20ss%2Fword%2B1@idx/simple\nextra-index-url =\n    https://pypi.org/simple\n",
    );
    expect(bash(`progress_secrets_from_urls ${dir}/pip.conf`)).toBe("pa ss/word+1\n");
    expect(bash("progress_env_values", { stdin: `A='a b'\nB="it's \\"q\\" \\$x"\n` })).toBe(`a b\nit's "q" $x\n`);
  });
});

describe("progress_run", () => {
  it("prints a line every progress_s seconds while the program runs, its output masked, and returns its status", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "progress-run-"));
    const out = bash(
      `progress_s=1 progress_secrets=s3cret
amount() { echo "step $(cat ${dir}/n 2>/dev/null || echo 0) of 5"; }
status=0
progress_run h packages install 60 amount -- bash -c 'for i in 1 2 3 4 5; do echo "s3cret $i"; echo $i > ${dir}/n; sleep 1.2; done; echo "s3cret failed" >&2; exit 7' 2> ${dir}/err || status=$?
echo "status $status"`,
    );
    const lines = out.split("\n");
    expect(lines.filter((l) => l.startsWith("*** "))).toEqual(["*** 1", "*** 2", "*** 3", "*** 4", "*** 5"]);
    const progress = lines.map(parseProgressLine).filter((p) => p !== null);
    expect(progress.length).toBeGreaterThanOrEqual(2);
    for (const p of progress) expect(p).toMatchObject({ host: "h", who: "packages", phase: "install", budget: "60 s" });
    for (const p of progress) expect(p.amount).toMatch(/^step [0-5] of 5$/);
    expect(lines).toContain("status 7");
    // Its stderr stays stderr, masked too.
    expect(fs.readFileSync(path.join(dir, "err"), "utf8")).toBe("*** failed\n");
  });
});
