import { createHash } from "node:crypto";
import type { Unwrap } from "@pulumi/pulumi";
import type { types } from "@pulumi/kubernetes";
import { renderScript } from "../../template";
import { weightsMarker } from "../../cache/markers";
import type { ModelRef } from "../../plan/types";
import { KUBERNETES_DEFAULTS } from "./defaults";

/** `@pulumi/kubernetes`'s input types with the Pulumi wrappers taken off: a misspelled field fails to compile. */
type Job = Unwrap<types.input.batch.v1.Job> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; labels: Record<string, string> };
};
type PodSpec = Unwrap<types.input.core.v1.PodSpec>;
type Container = Unwrap<types.input.core.v1.Container>;

export interface WeightsJobInput {
  instance: string;
  namespace: string;
  labels: Record<string, string>;
  image: string;
  /** Every model the plan loads (served and draft), each with its revision. */
  models: readonly ModelRef[];
  hfHome: string;
  weightsClaim: string;
  /** Environment from the stack's Secret (HF_TOKEN) and the like. */
  env?: Container["env"];
  /** Pod-level settings shared with the serving pods: security context, pull secrets, placement. */
  pod?: Omit<PodSpec, "containers" | "volumes" | "restartPolicy">;
  /** The container's security context, as the serving containers have it. */
  securityContext?: Container["securityContext"];
  /** Seconds the download may take before Kubernetes gives up on the Job. */
  activeDeadlineSeconds: number;
  /** How often the download prints a progress line; tests shorten it. */
  progressSeconds?: number;
}

/**
 * The one-shot Job that fills the weights volume. Its name carries a digest of the models and
 * revisions, so it runs again only when they change; the serving pods never download (they run
 * with HF_HUB_OFFLINE=1) and wait for its markers.
 */
export function weightsJob(input: WeightsJobInput): Job {
  const script = renderScript("core/render/kubernetes/scripts/fetch-weights.sh", `fetch ${input.models.map((m) => m.id).join(", ")} into the weights volume`, {
    models: input.models.map((m) => m.id),
    revisions: input.models.map((m) => m.revision ?? ""),
    markers: input.models.map((m) => weightsMarker(input.hfHome, m.id)),
    // Kubernetes ends the Job at its deadline: the progress lines' budget.
    budget_s: input.activeDeadlineSeconds,
    progress_s: input.progressSeconds ?? KUBERNETES_DEFAULTS.weightsProgressSeconds,
  });
  const digest = createHash("sha256")
    .update(JSON.stringify(input.models.map((m) => [m.id, m.revision])))
    .digest("hex")
    .slice(0, 10);
  const labels = { ...input.labels, "app.kubernetes.io/component": "weights" };
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: `${input.instance}-weights-${digest}`, namespace: input.namespace, labels },
    spec: {
      backoffLimit: KUBERNETES_DEFAULTS.budgets.weightsJobBackoffLimit,
      activeDeadlineSeconds: input.activeDeadlineSeconds,
      template: {
        metadata: { labels },
        spec: {
          ...input.pod,
          restartPolicy: "OnFailure",
          containers: [
            {
              name: "fetch",
              image: input.image,
              command: ["bash", "-c", script],
              resources: KUBERNETES_DEFAULTS.resources.weightsFetch,
              // HOME on a scratch folder: the root filesystem may be read-only.
              env: [{ name: "HF_HOME", value: input.hfHome }, { name: "HOME", value: "/tmp" }, ...(input.env ?? [])],
              volumeMounts: [
                { name: "weights", mountPath: input.hfHome },
                { name: "scratch", mountPath: "/tmp" },
              ],
              ...(input.securityContext ? { securityContext: input.securityContext } : {}),
            },
          ],
          volumes: [
            { name: "weights", persistentVolumeClaim: { claimName: input.weightsClaim } },
            { name: "scratch", emptyDir: {} },
          ],
        },
      },
    },
  };
}

/** Waits for each (marker, revision) pair of its arguments: the marker exists and, for a pinned revision, holds that commit. */
const WAIT_FOR_MARKERS = `while [ $# -gt 0 ]; do
  until [ -f "$1" ] && { [ -z "$2" ] || [ "$(cat "$1")" = "$2" ]; }; do echo "waiting for $1\${2:+ at $2}"; sleep ${KUBERNETES_DEFAULTS.probes.weightsWaitPollSeconds}; done
  shift 2
done`;

/** An init container that holds a serving pod until every model's marker says it is complete: pods wait, they never download. */
export function waitForWeights(image: string, hfHome: string, models: readonly ModelRef[], securityContext?: Container["securityContext"]): Container {
  return {
    name: "wait-for-weights",
    image,
    command: ["bash", "-c", WAIT_FOR_MARKERS, "wait-for-weights", ...models.flatMap((m) => [weightsMarker(hfHome, m.id), m.revision ?? ""])],
    volumeMounts: [{ name: "weights", mountPath: hfHome, readOnly: true }],
    resources: KUBERNETES_DEFAULTS.resources.weightsWait,
    ...(securityContext ? { securityContext } : {}),
  };
}
