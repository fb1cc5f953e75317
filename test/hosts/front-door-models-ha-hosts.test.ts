import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_INSTANCE, deploymentId } from "../../core/render/hosts/names";
import type { UpResult } from "../helpers/engine";
import { type HaStack, startHaStack } from "../helpers/frontDoorHaStack";
import { startLoad } from "../helpers/frontDoorLoad";
import { prepareStandInServer } from "../helpers/standInServer";

/**
 * Two models behind a front door of two router hosts (issue 30 with issue 28's router.hosts), for
 * real: the HA stack of test/helpers/frontDoorHaStack.ts (two router hosts and two NPU hosts, each on
 * a network of its own, keepalived holding the virtual address), with `chat` on one NPU host and
 * `batch` on the other. Every router host runs one Envoy and an EPP per model; each model's EPP
 * cluster falls back to the peer's EPP of that model, reached through the peer's Envoy over mutual
 * TLS by the stream's authority. The apply steps run front-door-models-apply.sh with its roll
 * (front-door-roll.sh), as the engine runs the program's commands over SSH.
 */
const INSTALL_ROOT = "/opt/rbln-ha-test";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const MODELS = [
  { name: "chat", served: "minimax" },
  { name: "batch", served: "minimax-batch" },
] as const;
const modelDir = (name: string) => `${INSTALL_ROOT}/router/${deploymentId("test", `${DEFAULT_INSTANCE}-${name}`)}`;
const eppUnit = (name: string) => `rbln-serving-${deploymentId("test", `${DEFAULT_INSTANCE}-${name}`)}.front-door-epp.service`;

let stack: HaStack;
let first: UpResult & { endpoints: string[] };

function settings() {
  const { strategy: _s, target: _t, replicas: _r, extraEnv, ...shared } = stack.settings() as Record<string, any>;
  return {
    ...shared,
    models: MODELS.map(({ name, served }, i) => ({
      name,
      strategy: "aggregated-data-expert-parallel",
      target: "Latency",
      servedNames: [served],
      hosts: [`npu-${i}`],
      extraEnv,
    })),
  } as ReturnType<HaStack["settings"]>;
}

/** A completion for `model` at the virtual address: its status. */
async function ask(model: string): Promise<number> {
  const response = await fetch(`${stack.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "hi", max_tokens: 2 }),
    signal: AbortSignal.timeout(30_000),
  });
  await response.text();
  return response.status;
}

beforeAll(async () => {
  stack = await startHaStack();
  // Each model's venv, named after its deployment id, on its host.
  for (const [i, { name }] of MODELS.entries())
    await prepareStandInServer(stack.npuHosts[i]!, {
      venv: `${INSTALL_ROOT}/venvs/test.rbln-serving-${name}/rebel-compiler-0.12.0_vllm-rbln-0.12.0`,
      devRoot: FAKE_DEV,
    });
  first = await stack.up(settings());
}, 600_000);
afterAll(async () => {
  await stack?.stop();
});

describe("two models behind two router hosts on fake hosts", { timeout: 300_000 }, () => {
  it("deploys one front door on each router host, every model's EPP on each, and serves both models at the virtual address", async () => {
    expect(first.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    expect(first.endpoints).toEqual([stack.url]);
    const applies = first.runs.filter((r) => r.name.endsWith("-front-door-apply")).map((r) => r.name);
    expect(applies).toEqual(["rbln-serving-door-a-front-door-apply", "rbln-serving-door-b-front-door-apply"]);
    for (const router of stack.routers)
      for (const [i, { name }] of MODELS.entries())
        await expect
          .poll(async () => (await router.console(`cat ${modelDir(name)}/epp/endpoints.yaml`)).stdout, { timeout: 60_000 })
          .toContain(`npu-${i}-main-0`);
    await expect.poll(() => stack.holder(), { timeout: 30_000 }).not.toBeNull();
    for (const { served } of MODELS) expect(await ask(served)).toBe(200);
    expect(await ask("unknown")).toBe(404);
  });

  it("one router host's EPP of one model killed: that model's requests go on through the peer's EPP of that model, the other's stay home", async () => {
    const holder = (await stack.holder())!;
    const loads = MODELS.map(({ served }) =>
      startLoad(stack.url, { concurrency: 3, body: { model: served, prompt: "hi", max_tokens: 2 }, maxSeconds: 120, requestTimeoutMs: 30_000 }),
    );
    await expect.poll(() => Math.min(...loads.map((l) => l.answered)), { timeout: 30_000 }).toBeGreaterThanOrEqual(6);
    const inFlightAtKill = loads.map((l) => l.records.length);
    // The EPP of batch on the host that holds the address stops for good (its unit, so systemd does not bring it back).
    await holder.console(`systemctl kill --signal=SIGKILL ${eppUnit("batch")}; systemctl stop ${eppUnit("batch")}`);
    const killedAt = Date.now();
    // Requests after the kill, for several seconds: batch's through the peer's EPP of batch.
    await expect
      .poll(() => loads[1]!.records.filter((r) => r.startedAt > killedAt + 2000 && r.error === undefined).length, { timeout: 60_000 })
      .toBeGreaterThanOrEqual(20);
    const [chat, batch] = await Promise.all(loads.map((l) => l.stop()));
    expect(chat!.failures.map((f) => f.error)).toEqual([]);
    // Only batch's requests the killed EPP held at the kill may fail (their ext_proc streams break), none after.
    const afterKill = batch!.failures.filter((f) => f.startedAt > killedAt + 1000);
    expect(afterKill.map((f) => f.error)).toEqual([]);
    expect(batch!.failed).toBeLessThanOrEqual(3);
    expect(chat!.total + batch!.total).toBeGreaterThan(inFlightAtKill[0]! + inFlightAtKill[1]! + 40);
    const clusters = (await holder.console("curl -s http://127.0.0.1:9901/clusters")).stdout;
    expect(clusters).toMatch(/^epp-chat::127\.0\.0\.1:\d+::health_flags::healthy$/m);
    expect(clusters).not.toMatch(/^epp-batch::127\.0\.0\.1:\d+::health_flags::healthy$/m);
  });
});
