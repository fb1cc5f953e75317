import { z } from "zod";
import type { RankState, StateReading } from "./states";

/**
 * The parts of a pod and a Job (Kubernetes core/v1 and batch/v1, as `kubectl get pods,jobs -o json`
 * prints them) that `status` reads; the rest passes through unread.
 */
const time = z.string().optional();
const Metadata = z.looseObject({
  name: z.string(),
  labels: z.record(z.string(), z.string()).optional(),
  creationTimestamp: time,
  deletionTimestamp: time,
});
const ContainerState = z.looseObject({
  waiting: z.looseObject({ reason: z.string().optional(), message: z.string().optional() }).optional(),
  running: z.looseObject({ startedAt: time }).optional(),
  terminated: z.looseObject({ exitCode: z.number(), reason: z.string().optional(), finishedAt: time }).optional(),
});
const ContainerStatus = z.looseObject({
  name: z.string(),
  ready: z.boolean().optional(),
  restartCount: z.number().optional(),
  state: ContainerState.optional(),
  lastState: ContainerState.optional(),
});
const Condition = z.looseObject({
  type: z.string(),
  status: z.string(),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: time,
});
export const PodObject = z.looseObject({
  kind: z.literal("Pod"),
  metadata: Metadata,
  spec: z.looseObject({ nodeName: z.string().optional() }).optional(),
  status: z
    .looseObject({
      phase: z.string().optional(),
      podIP: z.string().optional(),
      conditions: z.array(Condition).optional(),
      initContainerStatuses: z.array(ContainerStatus).optional(),
      containerStatuses: z.array(ContainerStatus).optional(),
    })
    .optional(),
});
export type PodObject = z.infer<typeof PodObject>;
export const JobObject = z.looseObject({
  kind: z.literal("Job"),
  metadata: Metadata,
  status: z
    .looseObject({ active: z.number().optional(), succeeded: z.number().optional(), startTime: time, conditions: z.array(Condition).optional() })
    .optional(),
});
export type JobObject = z.infer<typeof JobObject>;

/** A Job's state: running, done, or failed (its Failed condition). */
export function jobState(job: JobObject): "running" | "succeeded" | "failed" {
  const status = job.status ?? {};
  if (status.conditions?.some((c) => c.type === "Failed" && c.status === "True")) return "failed";
  if ((status.succeeded ?? 0) > 0 || status.conditions?.some((c) => c.type === "Complete" && c.status === "True")) return "succeeded";
  return "running";
}

const COMPONENT = "app.kubernetes.io/component";
const epochOf = (t: string | undefined) => (t === undefined || Number.isNaN(Date.parse(t)) ? null : Date.parse(t) / 1000);
const reading = (state: RankState, since: number | null, detail: string | null): StateReading => ({ state, since, detail });
/** Waiting reasons that stay until someone acts: a bad image, a crash loop, a config the kubelet refuses. */
const STUCK = new Set([
  "ImagePullBackOff",
  "ErrImagePull",
  "InvalidImageName",
  "CrashLoopBackOff",
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
]);
/** The serving container (core/render/kubernetes/containers.ts), and the init container that waits for the weights Job (weights.ts). */
export const SERVING_CONTAINER = "vllm";
const WAIT_FOR_WEIGHTS = "wait-for-weights";

function stuck(statuses: readonly z.infer<typeof ContainerStatus>[]): StateReading | null {
  for (const s of statuses) {
    const waiting = s.state?.waiting;
    if (waiting?.reason !== undefined && STUCK.has(waiting.reason)) {
      const last = s.lastState?.terminated;
      const exit = last ? `; last exit ${last.exitCode}${last.reason ? ` (${last.reason})` : ""}` : "";
      return reading("FAILED", epochOf(last?.finishedAt), `${s.name}: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ""}${exit}`);
    }
    const terminated = s.state?.terminated;
    if (terminated !== undefined && terminated.exitCode !== 0)
      return reading("FAILED", epochOf(terminated.finishedAt), `${s.name}: exited ${terminated.exitCode}${terminated.reason ? ` (${terminated.reason})` : ""}`);
  }
  return null;
}

/** A pod whose serving container runs and is not ready: compiling, unless its role's compile Job has compiled ahead. */
function warming(pod: PodObject, compileJobs: readonly JobObject[], started: number | null): StateReading {
  const states = compileJobs.map(jobState);
  if (states.includes("succeeded")) return reading("LOADING", started, "loading the cache its compile Job compiled");
  if (states.includes("running")) return reading("COMPILING", started, "its role's compile Job runs");
  return reading("COMPILING", started, `not ready: compiling, or loading a cache an earlier start saved (${pod.metadata.name})`);
}

/**
 * A serving pod's state, from its phase, conditions and containers, and its role's compile Jobs:
 * READY once its Ready condition is true; DRAINING once deleted (its requests finish within the
 * grace period); DOWNLOADING while it waits for the weights Job; INSTALLING while its image is pulled
 * and its containers created; COMPILING or LOADING while vLLM starts; FAILED for what stays until
 * someone acts (a bad image, a crash loop); DOWN when it cannot be scheduled or ended.
 */
export function classifyPod(pod: PodObject, compileJobs: readonly JobObject[]): StateReading {
  const status = pod.status ?? {};
  const created = epochOf(pod.metadata.creationTimestamp);
  if (pod.metadata.deletionTimestamp !== undefined) return reading("DRAINING", epochOf(pod.metadata.deletionTimestamp), "terminating: its requests finish");
  const ready = status.conditions?.find((c) => c.type === "Ready");
  if (ready?.status === "True") return reading("READY", epochOf(ready.lastTransitionTime), null);
  if (status.phase === "Failed" || status.phase === "Succeeded") return reading(status.phase === "Failed" ? "FAILED" : "DOWN", null, `pod ${status.phase}`);
  const failed = stuck([...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])]);
  if (failed) return failed;
  const scheduled = status.conditions?.find((c) => c.type === "PodScheduled");
  if (scheduled?.status === "False")
    return reading(
      "DOWN",
      epochOf(scheduled.lastTransitionTime),
      `not scheduled: ${scheduled.reason ?? ""}${scheduled.message ? ` ${scheduled.message}` : ""}`.trim(),
    );
  const waitForWeights = status.initContainerStatuses?.find((s) => s.name === WAIT_FOR_WEIGHTS);
  if (waitForWeights?.state?.running) return reading("DOWNLOADING", epochOf(waitForWeights.state.running.startedAt), "waiting for the weights Job");
  const serving = status.containerStatuses?.find((s) => s.name === SERVING_CONTAINER);
  if (serving?.state?.running) return warming(pod, compileJobs, epochOf(serving.state.running.startedAt));
  const waiting = serving?.state?.waiting?.reason ?? status.initContainerStatuses?.find((s) => s.state?.waiting)?.state?.waiting?.reason;
  return reading("INSTALLING", created, waiting ? `${waiting}: pulling the image and creating the containers` : "pending");
}

/** One row of `status` on Kubernetes: a serving pod, its role, its state. */
export interface PodStatus extends StateReading {
  pod: string;
  role: string;
  node: string | null;
  restarts: number;
}

/** Every serving pod of the instance (its role in app.kubernetes.io/component), classified with its role's compile Jobs. */
export function classifyPods(pods: readonly PodObject[], jobs: readonly JobObject[], roles: readonly string[]): PodStatus[] {
  return pods
    .filter((pod) => roles.includes(pod.metadata.labels?.[COMPONENT] ?? ""))
    .map((pod) => {
      const role = pod.metadata.labels![COMPONENT]!;
      const compileJobs = jobs.filter((j) => j.metadata.labels?.[COMPONENT] === `${role}-compile`);
      const restarts = (pod.status?.containerStatuses ?? []).reduce((sum, s) => sum + (s.restartCount ?? 0), 0);
      return { pod: pod.metadata.name, role, node: pod.spec?.nodeName ?? null, restarts, ...classifyPod(pod, compileJobs) };
    })
    .sort((a, b) => roles.indexOf(a.role) - roles.indexOf(b.role) || a.pod.localeCompare(b.pod));
}
