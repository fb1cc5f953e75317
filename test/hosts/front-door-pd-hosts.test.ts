import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UpResult } from "../helpers/engine";
import { validateEndpointsFile } from "../helpers/eppConfig";
import { bodyProblem, listedEndpoints } from "../helpers/frontDoorLoad";
import { startFrontDoorStack, underLoad, untilListed, type FrontDoorStack } from "../helpers/frontDoorStack";
import type { TestHost } from "../helpers/hostNamespace";
import { hostEntry } from "../helpers/hostStack";

/**
 * prefill-decode-disaggregated on hosts, for real: a prefill server, a decode server (a second one
 * joins later) and a router host, fake hosts with real systemd and sshd, each as if on a network of
 * its own (loopbackIsHostAddress: the decode ranks listen on all interfaces and the sidecar forwards
 * to localhost). The program's commands run over SSH in graph order; stand-ins only for vLLM, the
 * EPP, Envoy and the routing sidecar (docs/testing.md).
 */
let stack: FrontDoorStack;
/** The servers of a stack, the prefill servers first, then the decode servers; ranks on all interfaces. */
const servers = (npuHosts: readonly TestHost[]) => npuHosts.map((h, i) => hostEntry(h, i, { allInterfaces: true }));

beforeAll(async () => {
  stack = await startFrontDoorStack(3, {
    loopbackIsHostAddress: true,
    stack: (npuHosts) => ({ strategy: "prefill-decode-disaggregated", target: "Throughput", replicas: 1, hosts: servers(npuHosts.slice(0, 2)) }),
  });
}, 180_000);
afterAll(async () => {
  await stack?.stop();
});

const DECODE_RANKS = [0, 1, 2, 3];
const failures = (result: UpResult) => result.failed.map((f) => `${f.name}: ${f.stderr}`);
const decodeSteps = (result: UpResult, host: string) => result.runs.filter((r) => r.name.startsWith(`rbln-serving-${host}-decode-`));
const decodeUnit = (host: TestHost, rank: number) => host.run(`systemctl cat rbln-serving-test.decode-${rank}.service`).then((r) => r.stdout);
/** Two decode servers behind the front door, each decode rank with `extraArgs`. */
const xPyD = (extraArgs?: string[]) => stack.settings({ decode: { extraArgs } }, { decodeReplicas: 2, hosts: servers(stack.npuHosts) });

interface Hop {
  port: number;
  prompt: string;
  max_tokens: number;
  received: Record<string, unknown>;
  answered: Record<string, unknown> | null;
}

/** The P/D hops the stand-in vLLM ranks of a host logged (`kv_transfer` lines), once `count` of them are in its journal. */
async function hops(host: TestHost, count: number): Promise<Hop[]> {
  const read = await host.run(`for i in $(seq 50); do
  lines=$(journalctl -o cat -u 'rbln-serving-test.*' | grep '^kv_transfer ' || true)
  [ "$(printf '%s' "$lines" | grep -c .)" -ge ${count} ] && break
  sleep 0.2
done
printf '%s\\n' "$lines"`);
  return read.stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line.slice("kv_transfer ".length)) as Hop);
}

describe("prefill/decode on fake hosts behind the front door", { timeout: 300_000 }, () => {
  it("a stack of two servers and router.host plans, renders and deploys: the front door is the one endpoint, the decode host runs its sidecar", async () => {
    const [prefill, decode] = stack.npuHosts;
    const result = await stack.up(stack.settings());
    expect(failures(result)).toEqual([]);
    expect(result.endpoints).toEqual([stack.url]);
    expect(result.runs.find((r) => r.name === "rbln-serving-npu-1-sidecar")!.stdout).toContain("sidecar npu-1: serving on ports 8000 8001 8002 8003");
    const file = await untilListed(stack, 5);
    expect(validateEndpointsFile(file, { refuseDuplicateNames: true })).toEqual([]);
    // The prefill rank on its own port; the decode ranks (8200-8203) through the sidecar's ports.
    expect(listedEndpoints(file)).toEqual([
      { name: "npu-0-prefill-0", address: prefill!.address, port: "8000", labels: { "llm-d.ai/role": "prefill" } },
      ...DECODE_RANKS.map((r) => ({ name: `npu-1-decode-${r}`, address: decode!.address, port: String(8000 + r), labels: { "llm-d.ai/role": "decode" } })),
    ]);
    // The units as deployed, with the container runtime they start (test/front-door.test.ts verifies the rendered ones).
    const router = await stack.router.run("systemd-analyze verify /etc/systemd/system/rbln-serving-test.front-door-{epp,proxy,agent}.service");
    expect(router).toMatchObject({ status: 0, stderr: "" });
    expect(await decode!.run("systemd-analyze verify /etc/systemd/system/rbln-serving-test.sidecar.service")).toMatchObject({ status: 0, stderr: "" });
  });

  it("sends each request through the one URL to the prefill rank, then to a decode rank through the decode host's sidecar", async () => {
    const [prefill, decode] = stack.npuHosts;
    const prompts = Array.from({ length: 8 }, (_, i) => `disaggregated ${i}`);
    for (const [i, prompt] of prompts.entries()) {
      const answer = await fetch(`${stack.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt, max_tokens: 4, stream: i % 2 === 0 }),
      });
      expect(answer.status).toBe(200);
      expect(bodyProblem(answer.headers.get("content-type") ?? "", await answer.text())).toBeUndefined();
    }
    const prefills = await hops(prefill!, prompts.length);
    const decodes = await hops(decode!, prompts.length);
    for (const prompt of prompts) {
      // The sidecar's prefill hop: one token, asking the prefill rank to keep the KV blocks for a remote decode.
      const first = prefills.filter((t) => t.prompt === prompt);
      expect(first).toEqual([
        {
          port: 8000,
          prompt,
          max_tokens: 1,
          received: expect.objectContaining({ do_remote_decode: true }),
          answered: expect.objectContaining({ do_remote_prefill: true, remote_engine_id: "fake-8000", remote_host: prefill!.address }),
        },
      ]);
      // Then the decode request, carrying what the prefill rank answered: only the sidecar hands it on.
      const then = decodes.filter((t) => t.prompt === prompt);
      expect(then).toEqual([{ port: expect.any(Number), prompt, max_tokens: 4, received: first[0]!.answered, answered: null }]);
    }
    // The EPP spreads them over the four decode endpoints; each sidecar port reaches its own rank.
    expect(new Set(decodes.filter((t) => prompts.includes(t.prompt)).map((t) => t.port))).toEqual(new Set([8200, 8201, 8202, 8203]));
  });

  it("with one decode server, refuses a one-flag change of decode that would empty the role, with the reason on one line, and loses no request", async () => {
    // Refused at once: a few seconds of load, bounded as such.
    const { result, load, samples } = await underLoad(stack, () => stack.up(stack.settings({ decode: { extraArgs: ["--max-log-len", "100"] } })), {
      minRequests: 10,
      minSamples: 2,
    });
    expect(result.failed.map((f) => f.name).sort()).toEqual(DECODE_RANKS.map((r) => `rbln-serving-npu-1-decode-${r}`));
    for (const step of result.failed) {
      const endpoint = step.name.replace("rbln-serving-", "");
      expect(step.stderr.trim().split("\n").slice(-2)).toEqual([
        `front door: draining ${endpoint} would leave role decode with no endpoint in the front door (npu-1 is its only server); add a replica, or set rollout.allowEmptyFrontDoor: true to accept the outage`,
        `npu-1: the front door did not take ${endpoint} out (see above); nothing changed`,
      ]);
    }
    expect(load.total).toBeGreaterThan(10);
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    for (const r of DECODE_RANKS) expect(await decodeUnit(stack.npuHosts[1]!, r)).not.toContain("--max-log-len");
    expect(listedEndpoints(await stack.endpointsFile())).toHaveLength(5);
  });

  it("xPyD: a second decode server joins under load, loading the compiled cache of the first; not in the deploy that changes decode", async () => {
    const { result, load, samples } = await underLoad(stack, async () => [await stack.up(xPyD(["--max-log-len", "100"])), await stack.up(xPyD())] as const);
    // The first server's change would wait for the new one, whose steps come only after it: refused at once.
    const [refused, joined] = result;
    expect(refused.failed.map((f) => f.name).sort()).toEqual(DECODE_RANKS.map((r) => `rbln-serving-npu-1-decode-${r}`));
    for (const step of refused.failed) {
      expect(step.stderr).toContain(
        `front door: draining ${step.name.replace("rbln-serving-", "")} would leave role decode with no endpoint in the front door (npu-2 never served and changes only after npu-1); deploy npu-2 first with role decode unchanged, or set rollout.allowEmptyFrontDoor: true to accept the outage\n`,
      );
    }
    expect(failures(joined)).toEqual([]);
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    expect(listedEndpoints(await untilListed(stack, 9)).map((e) => e.name)).toEqual([
      "npu-0-prefill-0",
      ...DECODE_RANKS.map((r) => `npu-1-decode-${r}`),
      ...DECODE_RANKS.map((r) => `npu-2-decode-${r}`),
    ]);
    for (const r of DECODE_RANKS)
      expect((await stack.npuHosts[2]!.run(`journalctl -o cat -u rbln-serving-test.decode-${r}.service`)).stdout).toContain(
        "Loaded rbln mega-cache bundle from",
      );
  });

  it("xPyD: a one-flag change of decode rolls one decode server at a time under load, and no request is lost", async () => {
    const { result, load, samples } = await underLoad(stack, () => stack.up(xPyD(["--max-log-len", "100"])));
    expect(failures(result)).toEqual([]);
    const [first, second] = [decodeSteps(result, "npu-1"), decodeSteps(result, "npu-2")];
    expect([first.length, second.length]).toEqual([4, 4]);
    for (const step of [...first, ...second]) expect(step.stdout).toMatch(/out of the endpoints; its in-flight requests finish/);
    // The second server's steps start once the first's serve again; prefill does not change.
    expect(Math.max(...first.map((s) => s.endedAt))).toBeLessThanOrEqual(Math.min(...second.map((s) => s.startedAt)));
    expect(result.runs.some((r) => r.name.includes("prefill"))).toBe(false);
    for (const host of stack.npuHosts.slice(1)) for (const r of DECODE_RANKS) expect(await decodeUnit(host, r)).toContain("--max-log-len 100");
    expect(load.total).toBeGreaterThan(100);
    expect(load.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    // Each server's decode endpoints left the file while it restarted; the prefill rank and the other server's never did.
    const decodeServers = samples.samples.map(
      (s) => new Set(s.listed.filter((e) => e.labels["llm-d.ai/role"] === "decode").map((e) => e.name.split("-decode-")[0])),
    );
    expect(samples.samples.every((s) => s.listed.some((e) => e.name === "npu-0-prefill-0"))).toBe(true);
    expect(decodeServers.every((listed) => listed.size > 0)).toBe(true);
    expect(decodeServers.some((listed) => !listed.has("npu-1"))).toBe(true);
    expect(decodeServers.some((listed) => !listed.has("npu-2"))).toBe(true);
    expect(listedEndpoints(await untilListed(stack, 9))).toHaveLength(9);
  });
});
