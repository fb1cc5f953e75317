import { faultLine, faultStackUnit, npuFaults, runFault, startFaultStack } from "../test/helpers/faults";
import type { BenchPart, PartOutcome } from "./part";
import { routerFaultOutcome } from "./routerFaults";

/**
 * Issue 28's unplanned faults, measured on fake hosts under steady load (short requests and long
 * streams): the NPU side's cases of test/helpers/faults.ts, one after another on one deployed stack,
 * then the router side's of test/helpers/routerFaults.ts on a front door of two router hosts
 * (bench/routerFaults.ts), one JSON line each. Needs root (namespaces); nothing is printed as
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

/** The NPU side's cases on their prefill/decode stack. */
async function npuFaultOutcome(): Promise<PartOutcome> {
  const stack = await startFaultStack();
  const faults = npuFaults(faultStackUnit);
  try {
    const runs = [];
    for (const fault of faults) {
      const run = await runFault(stack, fault);
      runs.push({ fault, run });
      await fault.restore?.(stack);
    }
    return {
      report: runs.map(({ run }) => faultLine(run)),
      lines: runs.map(({ run }) => JSON.stringify(faultLine(run))),
      targets: runs.map(({ fault, run }) => ({ target: `${fault.name}: ${fault.bound}`, value: run.failed, met: fault.withinBound(run) })),
    };
  } finally {
    await stack.stop();
  }
}
