import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UpResult } from "../helpers/engine";
import { startFrontDoorStack, untilListed, type FrontDoorStack } from "../helpers/frontDoorStack";

/**
 * `apiKey` at the front door, for real: one fake NPU host and a router host (test/helpers/frontDoorStack.ts),
 * deployed with a key. The Envoy stand-in reads the API key filter's config as Envoy does (ECDS from the
 * file the apply step wrote from its stdin); the stand-in vLLM guards /v1 paths only, as vLLM does.
 */
const KEY = `k3y of "every" kind: $HOME \`id\` 'q' \\ end`;
const INSTALL_ROOT = "/opt/rbln-front-door-test";
let stack: FrontDoorStack;
let first: UpResult;

const ask = (base: string, pathname: string, key?: string) =>
  fetch(`${base}${pathname}`, {
    method: pathname === "/invocations" || pathname.endsWith("completions") ? "POST" : "GET",
    headers: { "content-type": "application/json", ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
    body: pathname === "/invocations" || pathname.endsWith("completions") ? JSON.stringify({ prompt: "p", max_tokens: 2 }) : undefined,
  });
const applyOf = (result: UpResult) => result.runs.find((r) => r.name.endsWith("front-door-apply"));
const failures = (result: UpResult) => result.failed.map((f) => `${f.name}: ${f.stderr}`);
/** One server: a change of the key restarts its rank, which the front door may then drain. */
const settings = () => stack.settings({}, { rollout: { shutdownTimeoutSeconds: 30, allowEmptyFrontDoor: true } });

beforeAll(async () => {
  stack = await startFrontDoorStack(1, { secrets: { apiKey: KEY } });
  first = await stack.up(settings());
  expect(failures(first)).toEqual([]);
  await untilListed(stack, 1);
}, 600_000);
afterAll(async () => {
  await stack?.stop();
});

describe("apiKey at the front door, on every path", () => {
  it("answers 401 without the key on /v1/models, /invocations and /health, and passes each on with it", async () => {
    for (const pathname of ["/v1/models", "/invocations", "/v1/completions", "/health"]) {
      for (const key of [undefined, "wrong", KEY.slice(0, -1)]) {
        const refused = await ask(stack.url, pathname, key);
        expect(refused.status, `${pathname} with ${key}`).toBe(401);
        expect(await refused.text()).toBe("Client authentication failed.");
      }
      expect((await ask(stack.url, pathname, KEY)).status, pathname).toBe(200);
    }
  });

  it("closes what the rank leaves open: vLLM asks for the key on /v1 paths only, so a rank answers /invocations to anyone", async () => {
    const rank = `http://${stack.npuHosts[0]!.address}:8000`;
    expect((await ask(rank, "/v1/models")).status).toBe(401);
    expect((await ask(rank, "/invocations")).status).toBe(200);
    expect((await ask(stack.url, "/invocations")).status).toBe(401);
  });

  it("keeps the key on the router host in the filter's file alone, readable by Envoy's user only", async () => {
    const holding = async (text: string) =>
      (await stack.router.run(`grep -rlF -f - ${INSTALL_ROOT} /etc/systemd/system || true`, `${text}\n`)).stdout.trim().split("\n").filter(Boolean);
    // As written (nowhere), and as JSON writes it (in the filter's config only).
    expect(await holding(KEY)).toEqual([]);
    expect(await holding(JSON.stringify(KEY).slice(1, -1))).toEqual([`${INSTALL_ROOT}/router/test/envoy/api-key.json`]);
    expect((await stack.router.run(`stat -c '%a %u' ${INSTALL_ROOT}/router/test/envoy/api-key.json`)).stdout).toBe("400 65532\n");
    for (const run of first.runs) expect(`${run.stdout}${run.stderr}`.includes(KEY), run.name).toBe(false);
  });

  it("restarts nothing on a re-run with the same key; a new key takes over from the old", async () => {
    const again = await stack.up(settings());
    expect(failures(again)).toEqual([]);
    expect(applyOf(again)?.stdout ?? "").not.toContain("(re)started");
    const rotated = await stack.up(settings(), { apiKey: "the next key" });
    expect(failures(rotated)).toEqual([]);
    expect(applyOf(rotated)!.stdout).toContain("(re)started rbln-serving-test.front-door-proxy.service");
    await untilListed(stack, 1);
    expect((await ask(stack.url, "/v1/models", KEY)).status).toBe(401);
    expect((await ask(stack.url, "/v1/models", "the next key")).status).toBe(200);
  });
});
