import * as command from "@pulumi/command";
import type * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { durationMs, FakeEngine, type Executor } from "./helpers/engine";
import { runUnderMocks, type Registration } from "./helpers/pulumiHarness";

/**
 * The test engine (test/helpers/engine.ts) does what `pulumi up` does with @pulumi/command 1.2.1's
 * remote commands: create, update, replace and delete, in the engine's order, honouring the
 * resource options. The host tiers trust it to tell what a change of a running stack runs.
 */
interface Spec {
  create: string;
  delete?: string;
  update?: string;
  stdin?: pulumi.Input<string>;
  host?: string;
  triggers?: string[];
  after?: string[];
  options?: pulumi.CustomResourceOptions;
}

/** The registrations of a program of remote commands, by name, each on host `host` (default a). */
async function program(specs: Record<string, Spec>): Promise<Registration[]> {
  const { registrations, error } = await runUnderMocks(() => {
    const made = new Map<string, command.remote.Command>();
    for (const [name, spec] of Object.entries(specs)) {
      made.set(
        name,
        new command.remote.Command(
          name,
          {
            connection: { host: spec.host ?? "a", port: 22 },
            create: spec.create,
            ...(spec.delete ? { delete: spec.delete } : {}),
            ...(spec.update ? { update: spec.update } : {}),
            ...(spec.stdin ? { stdin: spec.stdin } : {}),
            ...(spec.triggers ? { triggers: spec.triggers } : {}),
          },
          { dependsOn: (spec.after ?? []).map((a) => made.get(a)!), ...spec.options },
        ),
      );
    }
    return made;
  });
  if (error) throw error;
  return registrations;
}

/** An executor that records what ran where, in order; a command `fail` fails, `sleep N` takes N ms. */
function recorder() {
  const log: string[] = [];
  const execute: Executor = async ({ host }, script, stdin) => {
    log.push(`start ${host}: ${script}${stdin ? ` <${stdin}` : ""}`);
    const sleep = /^sleep (\d+)/.exec(script);
    await new Promise((r) => setTimeout(r, sleep ? Number(sleep[1]) : 5));
    log.push(`end ${host}: ${script}`);
    return script.startsWith("fail") ? { status: 1, stdout: "", stderr: "failed" } : { status: 0, stdout: `out of ${script}\n`, stderr: "" };
  };
  return { log, engine: new FakeEngine(execute) };
}

const starts = (log: string[]) => log.filter((l) => l.startsWith("start ")).map((l) => l.slice(6));

describe("the test engine, as pulumi up with @pulumi/command", () => {
  it("creates in dependency order, passes stdout on, and runs nothing for inputs that did not change", async () => {
    const { log, engine } = recorder();
    const specs = { one: { create: "c1" }, two: { create: "c2", after: ["one"], stdin: "ignored" } };
    const registrations = await program(specs);
    // The mock runtime gives a command's stdout as a reference; the engine passes what it printed.
    const withRef = registrations.map((r) => (r.name === "two" ? { ...r, inputs: { ...r.inputs, stdin: "<<stdout of one>>" } } : r));
    expect((await engine.up(withRef)).failed).toEqual([]);
    expect(starts(log)).toEqual(["a: c1", "a: c2 <out of c1"]);
    log.length = 0;
    expect((await engine.up(withRef)).runs).toEqual([]);
    expect(log).toEqual([]);
  });

  it("updates a changed command with its update script (else its create), on its new connection too", async () => {
    const { log, engine } = recorder();
    await engine.up(await program({ one: { create: "c1", update: "u1" }, two: { create: "c2" } }));
    log.length = 0;
    const up = await engine.up(await program({ one: { create: "c1 changed", update: "u1" }, two: { create: "c2", host: "b" } }));
    expect(up.runs.map((r) => `${r.name} ${r.operation}`).sort()).toEqual(["one update", "two update"]);
    expect(starts(log).sort()).toEqual(["a: u1", "b: c2"]);
  });

  it("deletes what the program no longer registers after every create and update, dependents first, with the delete the state kept", async () => {
    const { log, engine } = recorder();
    await engine.up(
      await program({
        base: { create: "c-base", delete: "d-base" },
        mid: { create: "c-mid", delete: "d-mid", after: ["base"], host: "b" },
        top: { create: "c-top", delete: "d-top", after: ["mid"] },
        kept: { create: "c-kept" },
      }),
    );
    log.length = 0;
    const up = await engine.up(await program({ kept: { create: "c-kept 2" }, added: { create: "c-added", after: ["kept"] } }));
    expect(up.failed).toEqual([]);
    expect(starts(log)).toEqual(["a: c-kept 2", "a: c-added", "a: d-top", "b: d-mid", "a: d-base"]);
    expect(engine.stateNames().sort()).toEqual(["added", "kept"]);
  });

  it("runs independent deletes side by side, and none once something failed", async () => {
    const { log, engine } = recorder();
    await engine.up(await program({ x: { create: "cx", delete: "sleep 200 dx" }, y: { create: "cy", delete: "sleep 200 dy" }, z: { create: "cz" } }));
    log.length = 0;
    await engine.up(await program({ z: { create: "cz" } }));
    expect(log.slice(0, 2).every((l) => l.startsWith("start"))).toBe(true);
    const { engine: second, log: log2 } = recorder();
    await second.up(await program({ x: { create: "cx", delete: "dx" }, z: { create: "cz" } }));
    log2.length = 0;
    const failing = await second.up(await program({ z: { create: "fail z" } }));
    expect(failing.failed.map((f) => f.name)).toEqual(["z"]);
    expect(failing.notStarted).toEqual(["x"]);
    expect(starts(log2)).toEqual(["a: fail z"]);
    // The failed update is tried again; the delete runs once it passes.
    log2.length = 0;
    await second.up(await program({ z: { create: "cz 2" } }));
    expect(starts(log2)).toEqual(["a: cz 2", "a: dx"]);
  });

  it("replaces on a change of triggers or of a replaceOnChanges property: delete first with deleteBeforeReplace, else the old one goes with the deletes", async () => {
    const { log, engine } = recorder();
    await engine.up(
      await program({
        dbr: { create: "c-dbr", delete: "d-dbr", triggers: ["1"], options: { deleteBeforeReplace: true } },
        cbd: { create: "c-cbd", delete: "d-cbd", triggers: ["1"] },
        conn: { create: "c-conn", delete: "d-conn", options: { replaceOnChanges: ["connection"] } },
        after: { create: "c-after", after: ["dbr", "cbd", "conn"] },
      }),
    );
    log.length = 0;
    await engine.up(
      await program({
        dbr: { create: "c-dbr", delete: "d-dbr", triggers: ["2"], options: { deleteBeforeReplace: true } },
        cbd: { create: "c-cbd", delete: "d-cbd", triggers: ["2"] },
        conn: { create: "c-conn", delete: "d-conn", host: "b", options: { replaceOnChanges: ["connection"] } },
        after: { create: "c-after", after: ["dbr", "cbd", "conn"] },
      }),
    );
    const order = starts(log);
    expect(order.filter((o) => o.endsWith("-dbr"))).toEqual(["a: d-dbr", "a: c-dbr"]);
    // Create before delete: the old cbd and conn are deleted last, conn on its old connection.
    expect(order.slice(-2).sort()).toEqual(["a: d-cbd", "a: d-conn"]);
    expect(order).toContain("b: c-conn");
    expect(order).not.toContain("a: c-after");
  });

  it("honours customTimeouts, and retainOnDelete keeps the delete from running", async () => {
    const { log, engine } = recorder();
    const slow = await engine.up(await program({ slow: { create: "sleep 2000", options: { customTimeouts: { create: "100ms" } } } }));
    expect(slow.failed.map((f) => [f.name, f.status, f.stderr])).toEqual([["slow", null, "slow: create: timed out after 100ms (customTimeouts)"]]);
    await engine.up(
      await program({
        kept: { create: "c-kept", delete: "d-kept", options: { retainOnDelete: true } },
        gone: { create: "cg", delete: "sleep 2000", options: { customTimeouts: { delete: "0.1s" } } },
      }),
    );
    log.length = 0;
    const up = await engine.up(await program({}));
    expect(up.failed.map((f) => f.stderr)).toEqual(["gone: delete: timed out after 0.1s (customTimeouts)"]);
    expect(starts(log)).toEqual(["a: sleep 2000"]);
    // A failed delete stays in the state, to be tried again.
    expect(engine.stateNames()).toContain("gone");
    expect(engine.stateNames()).not.toContain("kept");
  });

  it("reads Pulumi durations", () => {
    expect([durationMs("90s"), durationMs("10m"), durationMs("1h30m"), durationMs("250ms"), durationMs("0.5s")]).toEqual([
      90_000, 600_000, 5_400_000, 250, 500,
    ]);
    expect(() => durationMs("10 minutes")).toThrow("not a duration");
  });
});
