import { startHaStack } from "../test/helpers/frontDoorHaStack";
import { ROUTER_FAULTS, routerFaultLine, runRouterFault, untilEppsHealthy } from "../test/helpers/routerFaults";
import type { PartOutcome } from "./part";

/**
 * Issue 28's router-side faults for `npm run bench -- faults` (bench/faults.ts), measured on fake
 * hosts with networks of their own under steady load (short requests and streams through the
 * virtual address): the cases of test/helpers/routerFaults.ts, one after another on one deployed
 * front door of two router hosts, one JSON line each. Needs root, as the part checks first.
 */
export async function routerFaultOutcome(): Promise<PartOutcome> {
  const stack = await startHaStack();
  try {
    const first = await stack.up(stack.settings());
    if (first.failed.length > 0) throw new Error(`the first deploy failed: ${first.failed.map((f) => `${f.name}: ${f.stderr}`).join("\n")}`);
    for (const router of stack.routers) await untilEppsHealthy(router);
    const runs = [];
    for (const fault of ROUTER_FAULTS) {
      const run = await runRouterFault(stack, fault);
      runs.push({ fault, run });
      await fault.restore?.(stack);
    }
    return {
      report: runs.map(({ run }) => routerFaultLine(run)),
      lines: runs.map(({ run }) => JSON.stringify(routerFaultLine(run))),
      targets: runs.map(({ fault, run }) => ({ target: `${fault.name}: ${fault.bound}`, value: run.failed, met: fault.withinBound(run) })),
    };
  } finally {
    await stack.stop();
  }
}
