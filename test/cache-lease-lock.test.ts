import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LEASE_LOCK_PATH, lockNameOf, renderLeaseLock } from "../core/cache/leaseLock";

/** The lease lock under real bash: several processes on one directory stand for several hosts on NFS. */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function scratch(): { dir: string; script: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lease-lock-"));
  dirs.push(dir);
  const script = path.join(dir, "lease-lock.sh");
  // A short lease so a dead writer is taken over within seconds; the heartbeat renews it twice a lease.
  fs.writeFileSync(
    script,
    renderLeaseLock({
      lockRoot: path.join(dir, "locks"),
      lockName: "compile-0123abcd",
      leaseSeconds: 2,
      heartbeatSeconds: 1,
      pollSeconds: 0.2,
      waitLimitSeconds: 60,
    }),
    { mode: 0o755 },
  );
  return { dir, script };
}

interface Run {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

function start(script: string, owner: string, args: string[]): Run {
  const child = spawn("bash", [script, "run", ...args], { env: { ...process.env, LEASE_OWNER: owner }, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stderr })),
  );
  return { child, done };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (condition()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim().split("\n") : []);

describe("lease lock", () => {
  it("passes shellcheck as shipped and as rendered", () => {
    const { script } = scratch();
    for (const file of [LEASE_LOCK_PATH, script]) {
      const check = spawnSync("shellcheck", ["-s", "bash", file], { encoding: "utf8" });
      expect(check.stdout + check.stderr).toBe("");
      expect(check.status).toBe(0);
    }
    const rendered = fs.readFileSync(script, "utf8");
    expect(rendered).toMatch(/^LOCK_NAME=compile-0123abcd$/m);
    expect(rendered).toMatch(/^LEASE_SECONDS=2$/m);
    expect(() => renderLeaseLock({ lockRoot: "/x", lockName: "a b" })).toThrow(/letters, digits/);
    expect(lockNameOf("weights", "MiniMaxAI/MiniMax-M2.7", "main")).toBe("weights-MiniMaxAI-MiniMax-M2.7-main");
  });

  it("lets exactly one of five concurrent callers write; the others wait for its marker", async () => {
    const { dir, script } = scratch();
    const log = path.join(dir, "writes");
    const write = `echo "$LEASE_OWNER" >> ${log}; sleep 1; echo weights > ${path.join(dir, "snapshot")}`;
    const runs = ["h0", "h1", "h2", "h3", "h4"].map((owner) => start(script, owner, ["--", "bash", "-c", write]));
    const results = await Promise.all(runs.map((r) => r.done));
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0, 0]);
    expect(lines(log)).toHaveLength(1);
    const writer = lines(log)[0]!;
    expect(fs.readFileSync(path.join(dir, "locks", "compile-0123abcd.done"), "utf8")).toMatch(new RegExp(`^${writer} `));
    expect(results.filter((r) => r.stderr.includes("already complete"))).toHaveLength(4);
    expect(fs.existsSync(path.join(dir, "locks", "compile-0123abcd.lease"))).toBe(false);
    // A later caller finds the marker and does nothing.
    const later = await start(script, "h5", ["--", "bash", "-c", write]).done;
    expect(later.code).toBe(0);
    expect(lines(log)).toHaveLength(1);
  }, 30_000);

  it("with --ready, one compiles and the others start after its marker and load", async () => {
    const { dir, script } = scratch();
    const events = path.join(dir, "events");
    const cache = path.join(dir, "compiled");
    // A stand-in for vllm serve: compiles when the cache is missing, then serves a moment.
    const serve = `if [ -e ${cache} ]; then echo "load $LEASE_OWNER" >> ${events}; else echo "compile $LEASE_OWNER" >> ${events}; sleep 1; touch ${cache}; fi; sleep 0.5`;
    const runs = ["pod-0", "pod-1", "pod-2", "pod-3"].map((owner) => start(script, owner, ["--ready", `test -e ${cache}`, "--", "bash", "-c", serve]));
    const results = await Promise.all(runs.map((r) => r.done));
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    const seen = lines(events);
    expect(seen.filter((e) => e.startsWith("compile "))).toHaveLength(1);
    expect(seen.filter((e) => e.startsWith("load "))).toHaveLength(3);
    expect(seen[0]).toMatch(/^compile /);
  }, 30_000);

  it("--name locks another resource with the same script: one writer per name", async () => {
    const { dir, script } = scratch();
    const log = path.join(dir, "writes");
    const write = `echo "$LEASE_OWNER" >> ${log}`;
    const runs = [
      ["a0", "compile-aaaa"],
      ["a1", "compile-aaaa"],
      ["b0", "compile-bbbb"],
      ["b1", "compile-bbbb"],
    ].map(([owner, name]) => start(script, owner!, ["--name", name!, "--", "bash", "-c", write]));
    const results = await Promise.all(runs.map((r) => r.done));
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    expect(
      lines(log)
        .map((owner) => owner[0])
        .sort(),
    ).toEqual(["a", "b"]);
    expect(fs.readdirSync(path.join(dir, "locks")).sort()).toEqual(["compile-aaaa.done", "compile-bbbb.done"]);
  }, 30_000);

  it("a writer told to stop after it is ready waits for the server's graceful shutdown before it exits", async () => {
    const { dir, script } = scratch();
    const events = path.join(dir, "events");
    // A server that is ready at once and takes a second to shut down on SIGTERM.
    const serve = `trap 'sleep 1; echo shut-down >> ${events}; exit 0' TERM; touch ${path.join(dir, "ready")}; while :; do sleep 0.1; done`;
    const writer = start(script, "pod-0", ["--ready", `test -e ${path.join(dir, "ready")}`, "--", "bash", "-c", serve]);
    await until(() => fs.existsSync(path.join(dir, "locks", "compile-0123abcd.done")), "the writer to mark the compile complete");
    // `exit`, not `close`: the server holds the script's stderr open until it is gone itself.
    const exited = new Promise((resolve) => writer.child.on("exit", resolve));
    writer.child.kill("SIGTERM");
    await exited;
    // Without the second wait the script exits at once and the unit's remaining processes are killed mid-shutdown.
    expect(lines(events)).toEqual(["shut-down"]);
  }, 30_000);

  it("takes over from a writer killed with SIGKILL once its lease expires; one waiter of three writes", async () => {
    const { dir, script } = scratch();
    const log = path.join(dir, "writes");
    const write = `echo "$LEASE_OWNER" >> ${log}; sleep 1`;
    const dead = start(script, "dead", ["--", "bash", "-c", `echo "$LEASE_OWNER started" >> ${log}; sleep 60`]);
    await until(() => lines(log).includes("dead started"), "the first writer to start");
    const waiters = ["w1", "w2", "w3"].map((owner) => start(script, owner, ["--", "bash", "-c", write]));
    await until(
      () => waiters.every((w) => w.child.exitCode === null) && fs.existsSync(path.join(dir, "locks", "compile-0123abcd.lease", "1", "owner")),
      "the waiters",
    );
    dead.child.kill("SIGKILL");
    const results = await Promise.all(waiters.map((w) => w.done));
    expect((await dead.done).signal).toBe("SIGKILL");
    expect(results.map((r) => r.code)).toEqual([0, 0, 0]);
    const writers = lines(log).filter((l) => l !== "dead started");
    expect(writers).toHaveLength(1);
    const taker = results.find((r) => r.stderr.includes("taking over"))!;
    expect(taker.stderr).toMatch(/the lease of dead expired \d+s after its last heartbeat; taking over/);
    expect(fs.readFileSync(path.join(dir, "locks", "compile-0123abcd.done"), "utf8")).toMatch(new RegExp(`^${writers[0]} `));
  }, 30_000);

  it("a stale lease left by a dead host is taken over by exactly one of five callers that see it at once", async () => {
    const { dir, script } = scratch();
    const stale = path.join(dir, "locks", "compile-0123abcd.lease", "1");
    fs.mkdirSync(stale, { recursive: true });
    fs.writeFileSync(path.join(stale, "owner"), "gone-host\n");
    fs.writeFileSync(path.join(stale, "heartbeat"), "");
    const old = new Date(Date.now() - 3600_000);
    fs.utimesSync(path.join(stale, "heartbeat"), old, old);
    const log = path.join(dir, "writes");
    const go = path.join(dir, "go");
    // A start barrier, so the five look at the expired lease together and race to take it over.
    const runs = ["h0", "h1", "h2", "h3", "h4"].map((owner) => {
      const child = spawn(
        "bash",
        ["-c", `until [ -e ${go} ]; do sleep 0.01; done; exec bash ${script} run -- bash -c 'echo "$LEASE_OWNER" >> ${log}; sleep 1'`],
        { env: { ...process.env, LEASE_OWNER: owner }, stdio: ["ignore", "ignore", "pipe"] },
      );
      let stderr = "";
      child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      return new Promise<{ code: number | null; stderr: string }>((resolve) => child.on("close", (code) => resolve({ code, stderr })));
    });
    await new Promise((r) => setTimeout(r, 300));
    fs.writeFileSync(go, "");
    const results = await Promise.all(runs);
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0, 0]);
    expect(lines(log)).toHaveLength(1);
    expect(results.some((r) => /the lease of gone-host expired \d+s after its last heartbeat; taking over/.test(r.stderr))).toBe(true);
  }, 30_000);

  it("a failed writer leaves no marker and hands over at once; the next caller writes", async () => {
    const { dir, script } = scratch();
    const failed = await start(script, "h0", ["--", "bash", "-c", "exit 7"]).done;
    expect(failed.code).toBe(7);
    expect(fs.existsSync(path.join(dir, "locks", "compile-0123abcd.done"))).toBe(false);
    const next = await start(script, "h1", ["--", "true"]).done;
    expect(next.code).toBe(0);
    expect(next.stderr).not.toMatch(/taking over/);
    expect(fs.existsSync(path.join(dir, "locks", "compile-0123abcd.done"))).toBe(true);
  }, 30_000);
});
