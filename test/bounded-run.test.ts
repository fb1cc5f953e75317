import { describe, expect, it } from "vitest";
import { failureLine, mapLimited, runBounded } from "../cli/boundedRun";

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
