import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { compileLock } from "../core/render/kubernetes/compileLock";
import { freePort } from "./helpers/sshd";

/**
 * The pods' compile lock as the container runs it: two "pods" of one role start together on one
 * compile-cache directory; one compiles (its launch script runs first), the other starts only after
 * the compiler's ranks answer, and loads.
 */
const work = fs.mkdtempSync(path.join(os.tmpdir(), "compile-lock-"));
const pods: ChildProcess[] = [];
afterAll(() => {
  for (const pod of pods) pod.kill("SIGKILL");
  fs.rmSync(work, { recursive: true, force: true });
});

/** A launch script standing in for vLLM: records when it starts, answers /health after 3 s (its "compile"). */
const LAUNCH = `#!/usr/bin/env bash
echo "start $POD $(date +%s%N)" >> "$LOG"
exec python3 -c '
import http.server, sys, time
ready = time.time() + 3
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200 if time.time() >= ready else 503); self.end_headers()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' "$PORT"
`;

function startPod(name: string, port: number, cacheRoot: string, log: string): { output: () => string } {
  const launchDir = path.join(work, name);
  fs.mkdirSync(launchDir);
  const lock = compileLock("abc123", cacheRoot, [port], launchDir, { pollSeconds: 1 });
  fs.writeFileSync(path.join(launchDir, lock.file), lock.text);
  fs.writeFileSync(path.join(launchDir, "launch.sh"), LAUNCH);
  let output = "";
  const pod = spawn(lock.command[0]!, lock.command.slice(1), {
    env: { PATH: process.env.PATH, POD: name, PORT: String(port), LOG: log, LEASE_OWNER: name },
    stdio: ["ignore", "pipe", "pipe"],
  });
  pod.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  pods.push(pod);
  return { output: () => output };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("the compile lock of a role's pods", () => {
  it("lets one pod compile; the other starts after the compiler serves, and loads", async () => {
    const cacheRoot = path.join(work, "vllm");
    fs.mkdirSync(cacheRoot);
    const log = path.join(work, "starts.log");
    const [portA, portB] = [await freePort(), await freePort()];
    const a = startPod("pod-a", portA, cacheRoot, log);
    const b = startPod("pod-b", portB, cacheRoot, log);
    await until(() => fs.existsSync(log) && fs.readFileSync(log, "utf8").trim().split("\n").length === 2, "both pods to start");
    const writer = /writing as (pod-[ab])/.exec(a.output() + b.output())![1];
    const loader = writer === "pod-a" ? "pod-b" : "pod-a";
    expect((writer === "pod-a" ? b : a).output()).toContain("complete; starting, loading what the writer made");
    const starts = fs
      .readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((line) => line.split(" "));
    expect(starts.map((s) => s[1])).toEqual([writer, loader]);
    // The loader started only once the compiler answered, 3 s after it started (it polls every second).
    expect(Number(starts[1]![2]) - Number(starts[0]![2])).toBeGreaterThanOrEqual(3e9);
    expect(fs.readdirSync(path.join(cacheRoot, "rbln-serving-locks"))).toContain("compile-abc123.done");
  });
});
