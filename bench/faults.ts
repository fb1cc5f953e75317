import { startHaStack } from "../test/helpers/frontDoorHaStack";
import { faultLine, faultStackUnit, npuFaults, runFault, startFaultStack } from "../test/helpers/faults";
import { ROUTER_FAULTS, routerFaultLine, runRouterFault, untilEppsHealthy } from "../test/helpers/routerFaults";
import type { BenchPart, PartOutcome } from "./part";

/**
 * Issue 28's unplanned faults, measured on fake hosts under steady load (short requests and long
 * streams): the NPU side's cases of test/helpers/faults.ts, one after another on one deployed stack,
 * then the router side's of test/helpers/routerFaults.ts on a front door of two router hosts with
 * networks of their own, one JSON line each. Needs root (namespaces); nothing is printed as
 * measured where that is not so.
 */
export const faultsPart: BenchPart = {
  name: "faults",
  what: "unplanned faults on fake hosts under steady load: requests, failed, in flight at the fault, seconds to recover (measured; needs root)",
  async run() {
    if (process.getuid?.() !== 0) return { report: null, lines: ["not measured: the fake hosts need root"], targets: [] };
    const npu = await npuFaultOutcome();
    const router = await routerFaultOutcome();
    return {
      report: [...(npu.report as unknown[]), ...(router.report as unknown[])],
      lines: [...npu.lines, ...router.lines],
      targets: [...npu.targets, ...router.targets],
    };
  },
};

/** What a fault case of either side gives the bench: its name, its bound on failed requests, and whether a run kept it. */
interface BenchedFault<Stack, Run> {
  name: string;
  bound: string;
  withinBound(run: Run): boolean;
  restore?(stack: Stack): Promise<void>;
}

/** Each fault in turn on one stack, after its first deploy (restored after each), one JSON line a run, the stack stopped at the end. */
async function measureFaults<Stack extends { stop(): Promise<void> }, Run extends { failed: number }, Fault extends BenchedFault<Stack, Run>>(
  stack: Stack,
  deploy: (stack: Stack) => Promise<void>,
  faults: readonly Fault[],
  run: (stack: Stack, fault: Fault) => Promise<Run>,
  line: (run: Run) => Record<string, unknown>,
): Promise<PartOutcome> {
  try {
    await deploy(stack);
    const runs = [];
    for (const fault of faults) {
      runs.push({ fault, run: await run(stack, fault) });
      await fault.restore?.(stack);
    }
    return {
      report: runs.map(({ run }) => line(run)),
      lines: runs.map(({ run }) => JSON.stringify(line(run))),
      targets: runs.map(({ fault, run }) => ({ target: `${fault.name}: ${fault.bound}`, value: run.failed, met: fault.withinBound(run) })),
    };
  } finally {
    await stack.stop();
  }
}

/** The NPU side's cases on their prefill/decode stack (deployed as it starts). */
async function npuFaultOutcome(): Promise<PartOutcome> {
  return measureFaults(await startFaultStack(), async () => {}, npuFaults(faultStackUnit), runFault, faultLine);
}

/** The router side's cases on a front door of two router hosts. */
async function routerFaultOutcome(): Promise<PartOutcome> {
  const deploy = async (stack: Awaited<ReturnType<typeof startHaStack>>) => {
    const first = await stack.up(stack.settings());
    if (first.failed.length > 0) throw new Error(`the first deploy failed: ${first.failed.map((f) => `${f.name}: ${f.stderr}`).join("\n")}`);
    for (const router of stack.routers) await untilEppsHealthy(router);
  };
  return measureFaults(await startHaStack(), deploy, ROUTER_FAULTS, runRouterFault, routerFaultLine);
}
