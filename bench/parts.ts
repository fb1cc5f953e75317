import type { BenchPart } from "./part";
import { deployModelPart } from "./deploy";
import { faultsPart } from "./faults";
import { frontDoorPart } from "./frontDoor";
import { planPart, programPart, rolloutsPart } from "./program";
import { autoscalingPart } from "./scaling";

/** `npm run bench` runs these in order; `npm run bench -- <name>...` runs those named. A new part is one more entry; a new fault, one more case in test/helpers/faults.ts. */
export const BENCH_PARTS: readonly BenchPart[] = [planPart, programPart, rolloutsPart, deployModelPart, autoscalingPart, frontDoorPart, faultsPart];
