import { z } from "zod";
import { ConfigError } from "../core/errors";
import type { Deployment } from "../core/plan/types";
import { classifyPods, JobObject, jobState, PodObject, type PodStatus, SERVING_CONTAINER } from "../core/status/pods";
import { exitCodeOf, STATUS_EXIT } from "../core/status/states";
import { type Bound, failureLine, runBounded } from "./boundedRun";

/** A Kubernetes stack as `status` reads it: its serving pods, its Jobs (compile, weights), and the exit status they make. */
export interface KubernetesStatus {
  namespace: string;
  /** Each serving pod's state, and for one that does not serve the last line of its serving container's log. */
  pods: (PodStatus & { lastLine: string | null })[];
  jobs: { name: string; state: "running" | "succeeded" | "failed" }[];
  /** Why nothing could be read, or that no pod serves. */
  problem: string | null;
  exitCode: number;
}

const List = z.object({ items: z.array(z.looseObject({ kind: z.string() })) });
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
/** `kubectl ARGS` (the user's kubeconfig and context), within `processes`: its stdout, or why it failed (ENOENT: not on PATH). */
async function kubectl(processes: Bound, args: string[]): Promise<{ stdout: string } | { error: string }> {
  const run = await processes(() => runBounded("kubectl", args, { timeoutMs: 60_000, maxStdoutBytes: MAX_OUTPUT_BYTES }));
  return run.code === 0 ? { stdout: run.stdout } : { error: failureLine(run, "kubectl") };
}

/**
 * The instance's pods and Jobs, classified (core/status/pods.ts), from `kubectl get pods,jobs -o json`;
 * every kubectl within `processes`, the bound `status` holds for all its clients (a rollout of a
 * hundred pods asks the API server a few at a time).
 */
export async function readKubernetes(deployment: Deployment, instance: string, processes: Bound): Promise<KubernetesStatus> {
  const namespace = deployment.settings.kubernetes.namespace;
  const read = await kubectl(processes, [
    "get",
    "pods,jobs",
    "--namespace",
    namespace,
    "--selector",
    `app.kubernetes.io/instance=${instance}`,
    "--output",
    "json",
  ]);
  if ("error" in read && read.error === "ENOENT")
    throw new ConfigError("--stack", "a Kubernetes stack is read with kubectl, which is not on PATH: install it, or give each rank's URL with --endpoint");
  if ("error" in read) return { namespace, pods: [], jobs: [], problem: `kubectl: ${read.error}`, exitCode: STATUS_EXIT.failed };
  const items = List.parse(JSON.parse(read.stdout)).items;
  const pods = items.flatMap((item) => (item.kind === "Pod" && PodObject.safeParse(item).success ? [PodObject.parse(item)] : []));
  const jobs = items.flatMap((item) => (item.kind === "Job" && JobObject.safeParse(item).success ? [JobObject.parse(item)] : []));
  const classified = classifyPods(
    pods,
    jobs,
    deployment.plan.roles.map((r) => r.role),
  );
  const jobRows = jobs.map((j) => ({ name: j.metadata.name, state: jobState(j) }));
  const failedJob = jobRows.some((j) => j.state === "failed");
  const exitCode = classified.length === 0 || failedJob ? STATUS_EXIT.failed : exitCodeOf(classified.map((p) => p.state));
  const problem = classified.length === 0 ? `no serving pod of ${instance} in namespace ${namespace}` : null;
  return { namespace, pods: await withLastLines(classified, namespace, processes), jobs: jobRows, problem, exitCode };
}

/** States in which the serving container has not run yet: nothing to read from its log. */
const BEFORE_SERVING = new Set(["READY", "INSTALLING", "DOWNLOADING"]);

/** The last line of each starting or failed pod's serving container (`kubectl logs --tail 1`), as the hosts' journal gives it; null where kubectl has none. */
function withLastLines(pods: PodStatus[], namespace: string, processes: Bound): Promise<(PodStatus & { lastLine: string | null })[]> {
  return Promise.all(
    pods.map(async (pod) => {
      if (BEFORE_SERVING.has(pod.state)) return { ...pod, lastLine: null };
      const log = await kubectl(processes, ["logs", pod.pod, "--namespace", namespace, "--container", SERVING_CONTAINER, "--tail", "1"]);
      const last = "stdout" in log ? log.stdout.trimEnd().split("\n").pop()?.slice(0, 200) : undefined;
      return { ...pod, lastLine: last ? last : null };
    }),
  );
}
