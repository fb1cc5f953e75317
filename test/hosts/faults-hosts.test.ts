import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AGENT_ROUND_SECONDS,
  FAULT_STACK_ENDPOINTS,
  failuresOutOfBound,
  faultLine,
  faultStackUnit as unit,
  npuFaults,
  runFault,
  startFaultStack,
  type FaultRun,
} from "../helpers/faults";
import { listedEndpoints } from "../helpers/frontDoorLoad";
import { underLoad, untilListed, type FrontDoorStack } from "../helpers/frontDoorStack";

/**
 * Unplanned faults on the NPU side under steady load (issue 28): a prefill server, two decode servers
 * and a router host, fake hosts with real systemd and sshd; stand-ins for vLLM (whose data-parallel
 * ranks hang while a peer of their group is down, as vLLM 0.30's do), the EPP, Envoy and the routing
 * sidecar. Short requests and long streams run through the front door while each fault of
 * test/helpers/faults.ts is injected; each stays within issue 28's bound: at most what was in flight
 * on what died (or was sent to it before the front door took it out) fails, and the stack is back
 * without any deploy. `npm run bench -- faults` runs the same cases and prints their figures.
 */
let stack: FrontDoorStack;
const FAULTS = npuFaults(unit);

beforeAll(async () => {
  stack = await startFaultStack();
}, 300_000);
afterAll(async () => {
  await stack?.stop();
});

async function run(index: number): Promise<FaultRun> {
  const result = await runFault(stack, FAULTS[index]!);
  console.log(JSON.stringify(faultLine(result)));
  expect(failuresOutOfBound(result)).toEqual([]);
  expect(FAULTS[index]!.withinBound(result), FAULTS[index]!.bound).toBe(true);
  return result;
}

describe("unplanned faults on the NPU side, under steady load", { timeout: 400_000 }, () => {
  it("the decode ranks of a server are one data-parallel group: none restarts alone, each names the unit that restarts the group", async () => {
    const shown = (await stack.npuHosts[1]!.run(`systemctl show -p OnFailure -p Restart ${unit("decode-2")}`)).stdout;
    expect(shown.trim().split("\n").sort()).toEqual([`OnFailure=${unit("decode-group-restart")}`, "Restart=no"]);
  });

  it("a decode rank killed: its group leaves the front door before its peers stop, restarts as one and is listed again by itself", async () => {
    const decode = stack.npuHosts[1]!;
    const result = await run(0);
    expect(result.samples.bad.filter((s) => s.at >= result.backAt!)).toEqual([]);
    // The peers were stopped only once the group had left the file, and the requests the EPP had placed had
    // had time to reach them (the drain's 3 s settle; 2 s here, as the samples lag the file by up to 0.2 s).
    const journal = (await decode.run(`journalctl -o short-unix -u ${unit("decode-group-restart")}`)).stdout;
    const stoppingAt = Number(/^(\d+\.\d+) .*: stopping rbln-serving/m.exec(journal)?.[1]) * 1000;
    expect(stoppingAt - result.outAt!).toBeGreaterThanOrEqual(2000);
    expect(journal).toContain("every rank started again");
    for (const r of [0, 1, 2, 3]) expect((await decode.run(`systemctl is-active ${unit(`decode-${r}`)}`)).stdout.trim()).toBe("active");
  });

  it("a decode host's sidecar killed: its endpoints leave and come back once it restarts", async () => {
    await run(1);
  });

  it("a whole decode host dies: the front door stops listing it within 2 probe rounds, the rest serve; booted again, it is listed again", async () => {
    const result = await run(2);
    expect(result.outSeconds!).toBeLessThanOrEqual(2 * AGENT_ROUND_SECONDS);
    await FAULTS[2]!.restore!(stack);
    expect(listedEndpoints(await untilListed(stack, FAULT_STACK_ENDPOINTS.length, 120)).map((e) => e.name)).toEqual(FAULT_STACK_ENDPOINTS);
  });

  it("the endpoints agent killed: no request fails; it restarts and keeps the file", async () => {
    const pid = () => stack.router.run(`systemctl show -p MainPID --value ${unit("front-door-agent")}`).then((r) => r.stdout.trim());
    const before = await pid();
    const result = await run(3);
    expect(result.failures).toEqual([]);
    expect(await pid()).not.toBe(before);
    expect((await stack.router.run(`systemctl is-active ${unit("front-door-agent")}`)).stdout.trim()).toBe("active");
    expect(listedEndpoints(await stack.endpointsFile()).map((e) => e.name)).toEqual(FAULT_STACK_ENDPOINTS);
  });

  it("a sidecar change rolls with the waves: each decode server's endpoints leave first, one server after the other, and no request fails", async () => {
    const base = stack.settings({ decode: { extraEnv: { FAKE_VLLM_STEP_SECONDS: "0.05" } } });
    const router = base.router as Record<string, unknown>;
    const changed = { ...base, router: { ...router, images: { sidecar: "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.1" } } };
    const { result, load, samples } = await underLoad(stack, () => stack.up(changed));
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const [first, second] = [1, 2].map((h) => result.runs.find((r) => r.name === `rbln-serving-npu-${h}-sidecar`)!);
    for (const step of [first!, second!]) expect(step.stdout).toMatch(/out of the endpoints/);
    expect(first!.endedAt).toBeLessThanOrEqual(second!.startedAt);
    expect(load.total).toBeGreaterThan(50);
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    expect(listedEndpoints(await untilListed(stack, FAULT_STACK_ENDPOINTS.length)).map((e) => e.name)).toEqual(FAULT_STACK_ENDPOINTS);
  });
});
