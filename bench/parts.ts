import type { BenchPart } from "./part";
import { deployModelPart } from "./deploy";
import { frontDoorPart } from "./frontDoor";
import { planPart, programPart, rolloutsPart } from "./program";
import { routerFaultsPart } from "./routerFaults";
import { autoscalingPart } from "./scaling";

/** `npm run bench` runs these in order; `npm run bench -- <name>...` runs those named. A new part (issue 28's `faults`) is one more entry. */
export const BENCH_PARTS: readonly BenchPart[] = [planPart, programPart, rolloutsPart, deployModelPart, autoscalingPart, frontDoorPart, routerFaultsPart];
