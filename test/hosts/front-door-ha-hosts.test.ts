import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { HA_FRONT_DOOR_PORT, haUnit, startHaStack, type HaStack } from "../helpers/frontDoorHaStack";
import { EPP_MIRROR, ROUTER_FAULTS, routerFaultLine, runRouterFault, untilEppsHealthy, type RouterFaultCase } from "../helpers/routerFaults";

/**
 * A change of the EPP's config file alone. No setting changes it for the aggregated strategies (it is
 * the chart's default picker, or the recipe's router values): a new release of the package does. This
 * stands in for one, a scorer's weight rendered differently, and the deploy takes the program's path.
 */
const eppConfigChange = vi.hoisted(() => ({
  on: false,
  from: "pluginRef: prefix-cache-scorer\n        weight: 3",
  to: "pluginRef: prefix-cache-scorer\n        weight: 4",
}));
vi.mock("../../core/render/hosts/frontDoor/eppConfig", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../core/render/hosts/frontDoor/eppConfig")>();
  return {
    ...actual,
    fileModePickerConfig: (...args: Parameters<typeof actual.fileModePickerConfig>) => {
      const text = actual.fileModePickerConfig(...args);
      if (eppConfigChange.on && !text.includes(eppConfigChange.from))
        throw new Error(`the EPP config has no ${JSON.stringify(eppConfigChange.from)} to change`);
      return eppConfigChange.on ? text.replace(eppConfigChange.from, eppConfigChange.to) : text;
    },
  };
});

/**
 * A front door of two router hosts on fake hosts with networks of their own (issue 28): the first
 * deploy, then each fault of the router side under steady load, each within the issue's bound.
 */
let stack: HaStack;

const HA_EPP_CONFIG = "/opt/rbln-ha-test/router/test/epp/epp.yaml";
const eppStarts = (stack: HaStack) =>
  Promise.all(stack.routers.map(async (r) => (await r.console(`systemctl show -p ExecMainStartTimestampMonotonic --value ${haUnit("epp")}`)).stdout.trim()));
const eppConfigFault: RouterFaultCase = {
  name: "a planned change of the EPP's config file, rolled one router host at a time",
  async inject(stack) {
    const before = await eppStarts(stack);
    eppConfigChange.on = true;
    // The image as the image's change left it: the EPP alone changes.
    const result = await stack.up(stack.settings({ router: { ...stack.settings().router, images: { endpointPicker: EPP_MIRROR } } }));
    if (result.failed.length > 0) throw new Error(`the change failed: ${result.failed.map((f) => `${f.name}: ${f.stderr}`).join("\n")}`);
    const after = await eppStarts(stack);
    for (const [i, router] of stack.routers.entries()) {
      if (after[i] === before[i]) throw new Error(`${router.name}'s EPP did not restart`);
      if (!(await router.console(`cat ${HA_EPP_CONFIG}`)).stdout.includes(eppConfigChange.to))
        throw new Error(`${router.name}'s EPP config is not the new one`);
    }
  },
  restore: async (stack) => {
    for (const router of stack.routers) await untilEppsHealthy(router);
  },
  bound: "no request fails; each router host's EPP restarted on the new config",
  withinBound: (run) => run.failed === 0,
};

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

  // The config change right after the EPP's image change, with the same image: the EPP alone changes.
  const afterImage = ROUTER_FAULTS.findIndex((f) => f.name.startsWith("a planned change of the EPP,")) + 1;
  for (const fault of [...ROUTER_FAULTS.slice(0, afterImage), eppConfigFault, ...ROUTER_FAULTS.slice(afterImage)]) {
    it(`${fault.name}: ${fault.bound}`, async () => {
      const run = await runRouterFault(stack, fault);
      // For the record: the bench prints the same line.
      console.log(JSON.stringify(routerFaultLine(run)));
      expect(run.requests).toBeGreaterThan(20);
      expect(
        fault.withinBound(run),
        `${JSON.stringify(routerFaultLine(run))} ${JSON.stringify(run.holders)} ${JSON.stringify(run.afterBoot ?? {})} ${JSON.stringify(run.failures)}`,
      ).toBe(true);
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
