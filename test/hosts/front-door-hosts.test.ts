import { FLAG_REFUSED_AT_START } from "../helpers/fakeVllm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listedEndpoints, now } from "../helpers/frontDoorLoad";
import { hostEntry } from "../helpers/hostStack";
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

/** Long streams beside the short load: three per replica, each longer than a drain's settle, so every rank that stops has some in flight. */
const STREAMS = { streams: 9 };
/** At least one stop of a rank caught completions in flight, which --shutdown-timeout let finish (or the test fails on their abort). */
const someInFlight = (stops: number[]) => expect(Math.max(0, ...stops), `in flight at each stop: ${stops.join(", ") || "no stop"}`).toBeGreaterThan(0);

const names = (text: string) => [...text.matchAll(/^- name: "([^"]+)"$/gm)].map((m) => m[1]);
const UNIT = "rbln-serving-test.main-0.service";

/** One host's unit step of `config`, to run by hand: its command, and its stdin with the host's front door key the engine would pass (its access step's stdout). */
async function stepByHand(
  config: ReturnType<FrontDoorStack["settings"]>,
  host: number,
  timings?: Parameters<FrontDoorStack["register"]>[1],
): Promise<{ create: string; stdin: string }> {
  const step = (await stack.register(config, timings)).find((r) => r.name === `rbln-serving-npu-${host}-main-0`)!;
  const key = (await stack.router.run(`cat /opt/rbln-front-door-test/router/test/drain-keys/npu-${host}/id`)).stdout;
  return { create: String(step.inputs.create), stdin: String(step.inputs.stdin).replace(/<<stdout of [^>]+>>/, key.trimEnd()) };
}

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
    const { result, load, samples, inFlightAtStops } = await underLoad(
      stack,
      () => stack.up(stack.settings({ main: { extraArgs: ["--max-log-len", "100"] } })),
      STREAMS,
    );
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
    expect(samples.bad).toEqual([]);
    // Three stops; the first caught the streams spread at the start (the later ones, whichever the round robin sent them).
    expect(inFlightAtStops).toHaveLength(3);
    someInFlight(inFlightAtStops);
    // Each replica left the file while it restarted, one at a time: the samples saw every restart, however slow they were.
    for (const name of ["npu-0-main-0", "npu-1-main-0", "npu-2-main-0"])
      expect(
        samples.samples.some((s) => !s.listed.some((e) => e.name === name)),
        name,
      ).toBe(true);
    expect(Math.min(...samples.samples.map((s) => s.listed.length))).toBe(2);
    expect(names(await untilListed(stack, 3))).toHaveLength(3);
  });

  it("a bad flag rolls back: no request fails, and the rolled-back replica is listed again", async () => {
    const { result, load, samples, inFlightAtStops } = await underLoad(
      stack,
      () => stack.up(stack.settings({ main: { extraArgs: ["--max-log-len", "100", FLAG_REFUSED_AT_START.arg], extraEnv: FLAG_REFUSED_AT_START.env } })),
      STREAMS,
    );
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
      /^npu-0 main rank 0: the new config failed \(.*unrecognized arguments: --rbln-use-custom-kernel\); the previous config is restored and serving$/,
    );
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    expect(samples.samples.some((s) => !s.listed.some((e) => e.name === "npu-0-main-0"))).toBe(true);
    someInFlight(inFlightAtStops);
    expect(names(await untilListed(stack, 3))).toContain("npu-0-main-0");
  });

  it("a change cut off midway and resumed by the next run: no request fails, and the replica is listed again", async () => {
    const step = await stepByHand(stack.settings({ main: { extraArgs: ["--max-log-len", "200"] } }), 1);
    const { load, samples, inFlightAtStops } = await underLoad(
      stack,
      async () => {
        const cut = await stack.npuHosts[1]!.run(`timeout -s KILL 4 ${step.create}`, step.stdin);
        expect(cut.status).not.toBe(0);
        const resumed = await stack.npuHosts[1]!.run(step.create, step.stdin);
        expect(resumed.status, resumed.stderr).toBe(0);
        return resumed;
      },
      STREAMS,
    );
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    someInFlight(inFlightAtStops);
    expect(names(await untilListed(stack, 3))).toContain("npu-1-main-0");
  });

  it("a change that serves and then fails its step (a compiled-cache miss) goes back through a drain: no request fails, and the replica is listed again", async () => {
    const host = stack.npuHosts[2]!;
    // The step looks every 3 s (30 s on a real host), the rank serves after 1: it serves before the step has decided.
    const step = await stepByHand(stack.settings({ main: { extraArgs: ["--max-log-len", "300"], extraEnv: { FAKE_VLLM_READY_AFTER: "1" } } }), 2, {
      readinessIntervalSeconds: 3,
    });
    const marker = /^compile_marker=(\S+)$/m.exec(step.create)![1]!;
    // The key's compiled cache was placed ahead (its marker), but its bundle is gone: the rank compiles instead of loading.
    const placed = await host.run(`touch ${marker} && find /var/lib/rbln-front-door-test/vllm/rbln -name mega_cache.bin -delete -print`);
    expect(placed.stdout).toContain("mega_cache.bin");
    const { result, load, samples, inFlightAtStops } = await underLoad(stack, () => host.run(step.create, step.stdin), STREAMS);
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split("\n").pop()).toMatch(
      /^npu-2 main rank 0: the new config failed \(compiled cache miss: .*\); the previous config is restored and serving$/,
    );
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    someInFlight(inFlightAtStops);
    expect(names(await untilListed(stack, 3))).toContain("npu-2-main-0");
  });

  it("a listed rank that crashes is restarted by systemd: it leaves the endpoints file once it stops answering, and comes back only once it serves", async () => {
    const host = stack.npuHosts[0]!;
    const restarts = async () => Number((await host.run(`systemctl show -p NRestarts --value ${UNIT}`)).stdout.trim());
    const before = await restarts();
    const listed = async () => names(await stack.endpointsFile()).includes("npu-0-main-0");
    const {
      result: killedAt,
      load,
      samples,
    } = await underLoad(
      stack,
      async () => {
        const at = now();
        expect((await host.run(`systemctl kill -s KILL ${UNIT}`)).status).toBe(0);
        for (let i = 0; await listed(); i++) expect(i, "still listed").toBeLessThan(200);
        await untilListed(stack, 3);
        return at;
      },
      STREAMS,
    );
    expect(await restarts()).toBe(before + 1);
    const outAt = samples.samples.find((s) => s.at > killedAt && !s.listed.some((e) => e.name === "npu-0-main-0"))!.at;
    const backAt = samples.samples.find((s) => s.at > outAt && s.listed.some((e) => e.name === "npu-0-main-0"))!.at;
    // Once out, it is listed again only as it serves. What fails was in flight at the kill or sent before the
    // agent's probe found the rank dead: nothing ended before the kill, or started once it was back.
    expect(samples.bad.filter((s) => s.at >= outAt)).toEqual([]);
    expect(load.failures.filter((f) => f.endedAt < killedAt || f.startedAt >= backAt)).toEqual([]);
  });
});

describe("servers leaving and moving, under steady load", { timeout: 300_000 }, () => {
  it("removing a server: the front door takes its endpoint out first, then its unit is deleted; no request fails", async () => {
    const [npu0, npu1, npu2] = stack.npuHosts;
    const two = { replicas: 2, hosts: [hostEntry(npu0!, 0), hostEntry(npu1!, 1)] };
    const { result, load, samples, inFlightAtStops } = await underLoad(stack, () => stack.up(stack.settings({}, two)), STREAMS);
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const door = result.runs.find((r) => r.name.endsWith("-front-door-apply"))!;
    expect(door.stdout).toContain("npu-2-main-0 out of the endpoints (the stack no longer has them)");
    const removal = result.runs.find((r) => r.name === "rbln-serving-npu-2-main-0")!;
    expect([removal.operation, removal.stdout.trim()]).toEqual(["delete", "unit npu-2: removed rbln-serving-test.main-0.service"]);
    // Out of the file before the front door's step ended, so before the deletes began.
    const lastListed = Math.max(...samples.samples.filter((s) => s.listed.some((e) => e.name === "npu-2-main-0")).map((s) => s.at));
    expect(lastListed).toBeLessThan(door.endedAt);
    expect(door.endedAt).toBeLessThanOrEqual(removal.startedAt);
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    someInFlight(inFlightAtStops);
    expect((await npu2!.run(`systemctl cat ${UNIT}`)).status).not.toBe(0);
    expect(names(await untilListed(stack, 2))).toEqual(["npu-0-main-0", "npu-1-main-0"]);
  });

  it("a host's connection changed to another machine: its steps run again there in place (Pulumi updates them); no request fails, and the first machine keeps its unit", async () => {
    const [npu0, npu1, spare] = stack.npuHosts;
    const moved = { replicas: 2, hosts: [hostEntry(npu0!, 0), { ...hostEntry(spare!, 1), name: "npu-1" }] };
    // A change of a few seconds (the machine had the stand-in already): its load is bounded as such.
    const { result, load, samples } = await underLoad(stack, () => stack.up(stack.settings({}, moved)), { ...STREAMS, minRequests: 20 });
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const npu1Steps = result.runs.filter((r) => r.name.startsWith("rbln-serving-npu-1-"));
    expect(npu1Steps.map((r) => r.operation).every((o) => o === "update")).toBe(true);
    expect(npu1Steps.map((r) => r.name)).toContain("rbln-serving-npu-1-main-0");
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    const listed = listedEndpoints(await untilListed(stack, 2));
    expect(listed.find((e) => e.name === "npu-1-main-0")!.address).toBe(spare!.address);
    // Nothing deletes what the first machine runs: an entry that names another machine is an update, not a removal.
    expect((await npu1!.run(`systemctl is-active ${UNIT}`)).stdout.trim()).toBe("active");
  });
});
