import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFrontDoorStack, underLoad, untilListed, type FrontDoorStack } from "../helpers/frontDoorStack";

/**
 * Changes of a running hosts deployment behind the front door lose no request. Three fake NPU hosts
 * and a router host with real systemd and sshd; the EPP, Envoy and vLLM are stand-ins
 * (test/fixtures/stand-ins, test/fixtures/fake-vllm: a stopping vLLM refuses new connections and
 * lets its in-flight requests finish, as --shutdown-timeout does). Under steady load through the
 * front door, every request must succeed, and at every sample every endpoint the EPP's file lists
 * must serve.
 */
let stack: FrontDoorStack;

beforeAll(async () => {
  stack = await startFrontDoorStack(3);
}, 180_000);
afterAll(async () => {
  await stack?.stop();
});

const names = (text: string) => [...text.matchAll(/^- name: "([^"]+)"$/gm)].map((m) => m[1]);

describe("the front door on fake hosts, under steady load", { timeout: 300_000 }, () => {
  it("first deploy: the router host runs the front door, and lists each replica once it serves", async () => {
    const result = await stack.up(stack.settings());
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    expect(result.runs.find((r) => r.name.endsWith("-front-door-apply"))!.stdout).toContain("front door door: serving");
    expect(names(await untilListed(stack, 3))).toEqual(["npu-0-main-0", "npu-1-main-0", "npu-2-main-0"]);
    const answer = await fetch(`${stack.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", prompt: "hi" }),
    });
    expect(answer.status).toBe(200);
  });

  it("a rolling one-flag change of 3 replicas: no request fails, every listed endpoint serves at every sample", async () => {
    const { result, load, samples } = await underLoad(stack, () => stack.up(stack.settings({ main: { extraArgs: ["--max-log-len", "100"] } })));
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    expect(
      result.runs
        .filter((r) => r.name.endsWith("-main-0"))
        .map((r) => r.name)
        .sort(),
    ).toEqual(["rbln-serving-npu-0-main-0", "rbln-serving-npu-1-main-0", "rbln-serving-npu-2-main-0"]);
    for (const step of result.runs.filter((r) => r.name.endsWith("-main-0")))
      expect(step.stdout).toMatch(/out of the endpoints; its in-flight requests finish/);
    expect(load.total).toBeGreaterThan(100);
    expect(load.failures).toEqual([]);
    expect(samples.samples.length).toBeGreaterThan(20);
    expect(samples.bad).toEqual([]);
    // Each replica left the file while it restarted, one at a time.
    expect(Math.min(...samples.samples.map((s) => s.listed.length))).toBe(2);
    expect(names(await untilListed(stack, 3))).toHaveLength(3);
  });

  it("a bad flag rolls back: no request fails, and the rolled-back replica is listed again", async () => {
    const { result, load, samples } = await underLoad(stack, () => stack.up(stack.settings({ main: { extraArgs: ["--max-log-len", "100", "--bogus"] } })));
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
      /^npu-0 main rank 0: the new config failed \(.*unrecognized arguments: --bogus\); the previous config is restored and serving$/,
    );
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    expect(samples.samples.some((s) => !s.listed.some((e) => e.name === "npu-0-main-0"))).toBe(true);
    expect(names(await untilListed(stack, 3))).toContain("npu-0-main-0");
  });

  it("a change cut off midway and resumed by the next run: no request fails, and the replica is listed again", async () => {
    const config = stack.settings({ main: { extraArgs: ["--max-log-len", "200"] } });
    const step = (await stack.register(config)).find((r) => r.name === "rbln-serving-npu-1-main-0")!;
    const stdin = String(step.inputs.stdin);
    const { load, samples } = await underLoad(stack, async () => {
      // The step's stdin holds the front door key as the engine would pass it: the access step's stdout.
      const key = (await stack.router.run("cat /opt/rbln-front-door-test/router/test/access/id")).stdout;
      const realStdin = stdin.replace(/<<stdout of [^>]+>>/, key.trimEnd());
      const cut = await stack.npuHosts[1]!.run(`timeout -s KILL 4 ${step.inputs.create}`, realStdin);
      expect(cut.status).not.toBe(0);
      const resumed = await stack.npuHosts[1]!.run(step.inputs.create, realStdin);
      expect(resumed.status, resumed.stderr).toBe(0);
      return resumed;
    });
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    expect(names(await untilListed(stack, 3))).toContain("npu-1-main-0");
  });
});
