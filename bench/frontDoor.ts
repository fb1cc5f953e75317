import { FLAG_REFUSED_AT_START } from "../test/helpers/fakeVllm";
import { startFrontDoorStack, underLoad, untilListed, type RoleChange } from "../test/helpers/frontDoorStack";
import type { BenchPart } from "./part";

/** What a change of a running deployment behind the front door cost its clients, measured on fake hosts. */
export interface FrontDoorChange {
  change: string;
  requests: number;
  failed: number;
  /** Samples of the endpoints file in which a listed endpoint did not serve. */
  badSamples: number;
  samples: number;
}

/**
 * Runs the front door's fake-host scenario with `replicas` aggregated replicas (real systemd and sshd
 * in namespaces, stand-ins only for vLLM, the EPP and Envoy: test/helpers/frontDoorStack.ts) and
 * counts the requests that fail under steady load during a rolling one-flag change and a change
 * that rolls back. Needs root (namespaces); `null` where that is not so, never a made-up figure.
 */
export async function frontDoorChanges(replicas: number): Promise<FrontDoorChange[] | null> {
  if (process.getuid?.() !== 0) return null;
  const stack = await startFrontDoorStack(replicas);
  try {
    const first = await stack.up(stack.settings());
    if (first.failed.length > 0) throw new Error(`first deploy failed: ${first.failed.map((f) => f.stderr).join("\n")}`);
    await untilListed(stack, replicas, 60);
    const changes: FrontDoorChange[] = [];
    // The change that rolls back passes planning (the product refuses a flag vLLM does not have) and is refused by the rank at start.
    const scenarios: [string, RoleChange][] = [
      ["rolling one-flag change", { extraArgs: ["--max-log-len", "100"] }],
      ["change that rolls back", { extraArgs: ["--max-log-len", "100", FLAG_REFUSED_AT_START.arg], extraEnv: { ...FLAG_REFUSED_AT_START.env } }],
    ];
    for (const [change, main] of scenarios) {
      const { result, load, samples } = await underLoad(stack, () => stack.up(stack.settings({ main })));
      // A scenario that did not happen as named measures nothing: the first must pass, the second roll back at its first rank.
      const refusals = result.failed.filter((f) => f.stderr.includes(FLAG_REFUSED_AT_START.refusal)).length;
      if (refusals !== (change === "change that rolls back" ? 1 : 0) || result.failed.length !== refusals)
        throw new Error(`${change}: ${result.failed.map((f) => `${f.name}: ${f.stderr.trim().split("\n").pop()}`).join("; ") || "nothing failed"}`);
      changes.push({ change, requests: load.total, failed: load.failed, badSamples: samples.bad.length, samples: samples.samples.length });
      await untilListed(stack, replicas, 60);
    }
    return changes;
  } finally {
    await stack.stop();
  }
}

/** The least load a change must have carried for its failures to count (the 2026-12-02 run: 297 requests, 34 samples, for the shorter change). */
const MIN_REQUESTS = 100;
const MIN_SAMPLES = 10;

export const frontDoorPart: BenchPart = {
  name: "front-door",
  what: "4 aggregated replicas behind the front door on fake hosts, under a steady load of 6 clients: requests failed during changes (measured; needs root)",
  async run() {
    const changes = await frontDoorChanges(4);
    if (!changes) return { report: null, lines: ["not measured: the fake hosts need root"], targets: [] };
    return {
      report: changes,
      lines: changes.map(
        (c) =>
          `  ${c.change.padEnd(24)}  ${String(c.requests).padStart(6)} requests  ${String(c.failed).padStart(3)} failed  ${c.badSamples}/${c.samples} samples listing an endpoint that did not serve`,
      ),
      // "No request failed" means nothing when no load ran: the load must have made requests and samples.
      targets: changes.map((c) => ({
        target: `hosts, 4 replicas behind the front door: no request fails during a ${c.change}, of at least ${MIN_REQUESTS} requests and ${MIN_SAMPLES} samples`,
        value: c.failed,
        met: c.failed === 0 && c.badSamples === 0 && c.requests >= MIN_REQUESTS && c.samples >= MIN_SAMPLES,
      })),
    };
  },
};
