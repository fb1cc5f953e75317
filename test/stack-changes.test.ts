import { describe, expect, it } from "vitest";
import { runProgram } from "../program";
import { type CommandRun, FakeEngine, type UpResult } from "./helpers/engine";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { runUnderMocks } from "./helpers/pulumiHarness";

/**
 * What `pulumi up` runs on the hosts when a running stack loses a server, a replica or a role, or a
 * host's connection changes: the program under the mock runtime, its commands run by the test
 * engine (test/helpers/engine.ts: create, update, replace and delete as Pulumi does with
 * @pulumi/command) against a recording executor. The fake-host tiers run the same changes for real
 * (test/hosts/front-door-hosts.test.ts: a server removed under load).
 */
const KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----";
const npu = (i: number, address = `10.0.0.${i + 10}`) => ({ name: `npu-${i}`, address, hostKey: EXAMPLE_HOST_KEY });
const router = { host: { name: "door", address: "10.0.2.1", hostKey: EXAMPLE_HOST_KEY } };

const aggregated = (servers: number, more: Record<string, unknown> = {}) => ({
  strategy: "aggregated-data-expert-parallel",
  target: "Latency",
  replicas: servers,
  hosts: Array.from({ length: servers }, (_, i) => npu(i)),
  router,
  ...more,
});

/** The script a command ran, by the settings line its renderer writes first: which script (the header) and where. */
const scriptOf = (command: string) => /^# (.+)$/m.exec(command)?.[1] ?? command.slice(0, 60);

/** An engine that runs nothing: every command succeeds, a grant or access step printing a key. */
function recordingEngine() {
  const ran: { host: string; script: string }[] = [];
  const engine = new FakeEngine(async ({ host }, command) => {
    ran.push({ host, script: scriptOf(command) });
    return { status: 0, stdout: /allow|access/.test(command) ? `${KEY}\n` : "ok\n", stderr: "" };
  });
  return { ran, engine };
}

async function up(engine: FakeEngine, settings: Record<string, unknown>): Promise<UpResult> {
  const { registrations, error } = await runUnderMocks(runProgram, settings, { sshPrivateKey: "MARKER-SSH-KEY" });
  if (error) throw error;
  const result = await engine.up(registrations);
  expect(result.failed).toEqual([]);
  return result;
}

const named = (runs: readonly CommandRun[]) => runs.map((r) => `${r.operation} ${r.name}`);
const lastNonDelete = (runs: readonly CommandRun[]) => Math.max(0, ...runs.filter((r) => r.operation !== "delete").map((r) => r.endedAt));

describe("changes of a running hosts stack, as pulumi up runs them", () => {
  it("removing a server (a replica): the front door drops it first, then its unit and its copies' grants are deleted, nothing else restarts", async () => {
    const { engine } = recordingEngine();
    await up(engine, aggregated(3));
    const removed = await up(engine, aggregated(2));
    const runs = named(removed.runs);
    // The front door's desired endpoints change: updated first, with every other change.
    expect(runs).toContain("update rbln-serving-door-front-door-apply");
    // Everything of npu-2 goes, as deletes, after every create and update.
    const deletes = removed.runs.filter((r) => r.operation === "delete");
    expect(deletes.map((r) => r.name).every((n) => n.includes("npu-2"))).toBe(true);
    expect(deletes.map((r) => r.name)).toContain("rbln-serving-npu-2-main-0");
    expect(Math.min(...deletes.map((r) => r.startedAt))).toBeGreaterThanOrEqual(lastNonDelete(removed.runs));
    // No unit of the servers that stay runs.
    expect(runs.filter((r) => /npu-[01]-main-0$/.test(r))).toEqual([]);
    expect(engine.stateNames().filter((n) => n.includes("npu-2"))).toEqual([]);
  });

  it("removing a role: the front door lets go of the old roles' endpoints first, each new unit step stops the old ranks on its host before its own starts, their deletes come last", async () => {
    const { engine } = recordingEngine();
    const servers = { hosts: [npu(0), npu(1)], router };
    await up(engine, { strategy: "prefill-decode-disaggregated", target: "Throughput", replicas: 1, ...servers });
    const { registrations } = await runUnderMocks(
      runProgram,
      { strategy: "aggregated-data-expert-parallel", target: "Latency", replicas: 2, ...servers },
      { sshPrivateKey: "K" },
    );
    const changed = await engine.up(registrations);
    expect(changed.failed).toEqual([]);
    const deletes = changed.runs.filter((r) => r.operation === "delete").map((r) => r.name);
    expect(deletes).toEqual(expect.arrayContaining(["rbln-serving-npu-0-prefill-0", "rbln-serving-npu-1-decode-0", "rbln-serving-npu-1-sidecar"]));
    const created = changed.runs.filter((r) => r.operation === "create" && /-main-0$/.test(r.name));
    expect(created.map((r) => r.name).sort()).toEqual(["rbln-serving-npu-0-main-0", "rbln-serving-npu-1-main-0"]);
    // Pulumi deletes last: the old roles' ranks still run when the new role's units start on the same servers (the same port 8000, the same NPUs) ...
    const firstDelete = Math.min(...changed.runs.filter((r) => r.operation === "delete").map((r) => r.startedAt));
    for (const unit of created) expect(unit.endedAt).toBeLessThanOrEqual(firstDelete);
    // ... so each new unit step stops this deployment's other units on its host first (stray-units.sh): only its own are kept.
    for (const unit of created) {
      const script = String(registrations.find((r) => r.name === unit.name)!.inputs.create);
      expect(script).toContain("stray_glob='rbln-serving-test.*.service'");
      expect(/^host_units=\((.*)\)$/m.exec(script)![1]).toBe("rbln-serving-test.main-0.service");
    }
    // The front door's step comes first, and takes the old endpoints out of the file before it ends (front-door-apply.sh).
    const door = changed.runs.find((r) => r.name === "rbln-serving-door-front-door-apply")!;
    expect(door.operation).toBe("update");
    for (const unit of created) expect(door.endedAt).toBeLessThanOrEqual(unit.startedAt);
  });

  it("a host's changed connection updates its steps in place, on the new address; the old address runs nothing, not even a delete", async () => {
    const { ran, engine } = recordingEngine();
    await up(engine, aggregated(2));
    ran.length = 0;
    const moved = await up(engine, aggregated(2, { hosts: [npu(0), npu(1, "10.0.0.99")] }));
    expect(moved.runs.filter((r) => r.operation !== "update").map((r) => `${r.operation} ${r.name}`)).toEqual([]);
    expect(named(moved.runs)).toEqual(expect.arrayContaining(["update rbln-serving-npu-1-install", "update rbln-serving-npu-1-main-0"]));
    expect(ran.filter((r) => r.host === "10.0.0.11")).toEqual([]);
    expect(ran.some((r) => r.host === "10.0.0.99")).toBe(true);
  });
});
