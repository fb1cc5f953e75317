import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { bound, failureLine, mapLimited, runBounded } from "../cli/boundedRun";
import { readStatus } from "../cli/status";
import { shippedCatalog } from "./helpers/recipes";

describe("runBounded: the read-only clients of status (ssh, kubectl) run with a time limit and an output cap", () => {
  it("gives stdout, passes stdin and keeps at most the cap (to the chunk that reaches it)", async () => {
    const run = await runBounded("bash", ["-c", "cat; head -c 1000000 /dev/zero | tr '\\0' x"], { stdin: "hello\n", timeoutMs: 10_000, maxStdoutBytes: 1000 });
    expect(run.code).toBe(0);
    expect(run.stdout.startsWith("hello\nx")).toBe(true);
    expect(run.stdout.length).toBeLessThan(1000 + 70_000);
  });

  it("kills a command past its time limit and says what failed", async () => {
    const run = await runBounded("sleep", ["30"], { timeoutMs: 200, maxStdoutBytes: 10 });
    expect(run.code).toBeNull();
    expect(failureLine(run, "sleep")).toBe("sleep exited null");
  });

  it("names a command that is not on PATH as ENOENT, and a failure by its stderr's last line", async () => {
    expect((await runBounded("no-such-command-rbln", [], { timeoutMs: 1000, maxStdoutBytes: 10 })).startError).toBe("ENOENT");
    const failed = await runBounded("bash", ["-c", "echo first >&2; echo 'the reason' >&2; exit 3"], { timeoutMs: 10_000, maxStdoutBytes: 10 });
    expect([failed.code, failureLine(failed, "bash")]).toEqual([3, "the reason"]);
  });
});

describe("mapLimited: one read per host or pod, a few at a time", () => {
  it("never runs more than the limit at once and keeps the items' order", async () => {
    let running = 0;
    let most = 0;
    const results = await mapLimited([5, 1, 4, 2, 3, 0, 6, 7, 8, 9], 3, async (n) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, n * 3));
      running--;
      return n * 10;
    });
    expect(most).toBe(3);
    expect(results).toEqual([50, 10, 40, 20, 30, 0, 60, 70, 80, 90]);
    expect(await mapLimited([], 3, async () => 1)).toEqual([]);
  });
});

describe("one bound for every read of status, whichever model it is for", () => {
  it("lets two callers' work overlap within one limit, each in its own order", async () => {
    const processes = bound(4);
    let running = 0;
    let most = 0;
    const seen = new Set<string>();
    const work = (model: string) => async (n: number) => {
      running++;
      most = Math.max(most, running);
      seen.add(model);
      // Both models have work running at the same time at least once.
      if (seen.size === 2 && running > 1) seen.add("both");
      await new Promise((r) => setTimeout(r, n));
      running--;
      return `${model}${n}`;
    };
    const [a, b] = await Promise.all([mapLimited([9, 3, 6, 1, 8], processes, work("a")), mapLimited([2, 7, 4, 5, 0], processes, work("b"))]);
    expect(most).toBe(4);
    expect(seen.has("both")).toBe(true);
    expect([a, b]).toEqual([
      ["a9", "a3", "a6", "a1", "a8"],
      ["b2", "b7", "b4", "b5", "b0"],
    ]);
  });

  it("reads the models of a stack at once, with at most 8 kubectl processes in all, and prints them in the models' order", async () => {
    // A kubectl stand-in (no cluster here): per model 12 compiling pods, whose logs status reads. Each
    // process lists the ones running as it starts (a file each, while it runs), so a line says how many
    // ran at once and for which models.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kubectl-count-"));
    const recorded = JSON.parse(fs.readFileSync(path.join(__dirname, "fixtures/status/kubectl-get-pods-jobs.json"), "utf8"));
    const compiling = recorded.items.find((i: { metadata: { name: string } }) => i.metadata.name === "rbln-serving-decode-a");
    for (const [model, role] of [
      ["chat", "decode"],
      ["batch", "main"],
    ]) {
      const pods = Array.from({ length: 12 }, (_, i) => ({
        ...compiling,
        metadata: { ...compiling.metadata, name: `${model}-pod-${i}`, labels: { ...compiling.metadata.labels, "app.kubernetes.io/component": role } },
      }));
      fs.writeFileSync(path.join(dir, `rbln-serving-${model}.json`), JSON.stringify({ apiVersion: "v1", kind: "List", items: pods }));
    }
    fs.mkdirSync(path.join(dir, "running"));
    fs.writeFileSync(
      path.join(dir, "kubectl"),
      `#!/bin/sh
d=${JSON.stringify(dir)}
if [ "$1" = logs ]; then me=\${2%%-pod-*}.$$; else me=get.$$; fi
: > "$d/running/$me"
echo "$(ls "$d/running" | tr '\n' ' ')" >> "$d/seen"
sleep 0.4
rm -f "$d/running/$me"
if [ "$1" = logs ]; then echo "$2: Compiling layer 31/62"; exit 0; fi
for a in "$@"; do case "$a" in app.kubernetes.io/instance=*) cat "$d/\${a#app.kubernetes.io/instance=}.json";; esac; done
`,
      { mode: 0o755 },
    );
    const pathBefore = process.env.PATH;
    process.env.PATH = `${dir}:${pathBefore}`;
    try {
      const report = await readStatus({ stack: "multi" }, shippedCatalog);
      expect(report.models.map((m) => [m.name, m.kubernetes!.pods.length, m.kubernetes!.pods.filter((p) => p.lastLine !== null).length])).toEqual([
        ["chat", 12, 12],
        ["batch", 12, 12],
      ]);
      const seen = fs.readFileSync(path.join(dir, "seen"), "utf8").trim().split("\n");
      expect(seen).toHaveLength(26);
      const counts = seen.map((line) => line.trim().split(" ").length);
      expect(Math.max(...counts)).toBeLessThanOrEqual(8);
      // Both models' logs were read at the same time at least once.
      expect(seen.some((line) => line.includes("chat.") && line.includes("batch."))).toBe(true);
    } finally {
      process.env.PATH = pathBefore;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
