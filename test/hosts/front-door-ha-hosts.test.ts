import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HA_FRONT_DOOR_PORT, haUnit, startHaStack, type HaStack } from "../helpers/frontDoorHaStack";
import { EPP_MIRROR, ROUTER_FAULTS, routerFaultLine, runRouterFault, untilEppsHealthy } from "../helpers/routerFaults";

/**
 * A front door of two router hosts on fake hosts with networks of their own (issue 28): the first
 * deploy, then each fault of the router side under steady load, each within the bound.
 */
let stack: HaStack;

beforeAll(async () => {
  stack = await startHaStack();
}, 180_000);
afterAll(async () => {
  await stack?.stop();
});

describe("a front door of two router hosts on fake hosts", { timeout: 300_000 }, () => {
  it("first deploy: each router host runs the front door, the first holds the virtual address, and a request there is served", async () => {
    const result = await stack.up(stack.settings());
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    expect(result.endpoints).toEqual([`http://${stack.virtualAddress}:${HA_FRONT_DOOR_PORT}`]);
    for (const name of ["door-a", "door-b"])
      expect(result.runs.find((r) => r.name === `rbln-serving-${name}-front-door-apply`)!.stdout).toContain(`front door ${name}: serving`);
    expect((await stack.holder())?.name).toBe(stack.routers[0].name);
    for (const router of stack.routers) expect((await router.console(`systemctl is-active ${haUnit("keepalived")}`)).stdout.trim()).toBe("active");
    const answer = await fetch(`${stack.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", prompt: "hi" }),
    });
    expect(answer.status).toBe(200);
    // Each Envoy has had its peer's EPP pass healthy_threshold checks: the failover has somewhere to go.
    for (const router of stack.routers) await untilEppsHealthy(router);
  });

  for (const fault of ROUTER_FAULTS) {
    it(`${fault.name}: ${fault.bound}`, async () => {
      const run = await runRouterFault(stack, fault);
      // For the record: the bench prints the same line.
      console.log(JSON.stringify(routerFaultLine(run)));
      expect(run.requests).toBeGreaterThan(20);
      expect(fault.withinBound(run), `${JSON.stringify(routerFaultLine(run))} ${JSON.stringify(run.holders)} ${JSON.stringify(run.failures)}`).toBe(true);
      await fault.restore?.(stack);
    });
  }

  it("the planned changes reached every router host: each runs the EPP from the mirror's image, and Envoy with the new route timeout", async () => {
    for (const router of stack.routers) {
      const unit = (await router.console(`systemctl cat ${haUnit("epp")}`)).stdout;
      expect(unit).toContain(EPP_MIRROR);
      expect((await router.console("cat /opt/rbln-ha-test/router/test/envoy/envoy.yaml")).stdout).toContain("timeout: 3000s");
    }
  });
});
