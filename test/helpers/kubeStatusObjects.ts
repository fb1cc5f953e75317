import { Job } from "kubernetes-models/batch/v1";
import { Pod } from "kubernetes-models/v1";

/**
 * Pods and Jobs of an instance in each state `status` tells apart on Kubernetes, as the API server
 * reports them (core/v1 Pod, batch/v1 Job, built and validated with kubernetes-models against the
 * Kubernetes OpenAPI schema), in the List `kubectl get pods,jobs -o json` prints. The stack is
 * stacks/Pulumi.prod.yaml (prefill and decode roles, namespace llm-serving).
 */
const NAMESPACE = "llm-serving";
const INSTANCE = "rbln-serving";
export const AT = "2026-12-06T10:00:00Z";
const labels = (component: string) => ({
  "app.kubernetes.io/name": "rbln-serving",
  "app.kubernetes.io/instance": INSTANCE,
  "app.kubernetes.io/managed-by": "pulumi",
  "app.kubernetes.io/component": component,
});
const spec = { nodeName: "npu-node-1", containers: [{ name: "vllm", image: "registry.example.com/vllm-rbln:0.12.0" }] };

type PodStatus = NonNullable<Pod["status"]>;
function pod(name: string, role: string, status: PodStatus, deletionTimestamp?: string): Pod {
  const object = new Pod({
    metadata: { name, namespace: NAMESPACE, labels: labels(role), creationTimestamp: AT, ...(deletionTimestamp ? { deletionTimestamp } : {}) },
    spec,
    status,
  });
  object.validate();
  return object;
}
const condition = (type: string, status: "True" | "False", more: Record<string, string> = {}) => ({ type, status, lastTransitionTime: AT, ...more });
const vllm = (state: NonNullable<PodStatus["containerStatuses"]>[number]["state"], more: Record<string, unknown> = {}) => ({
  name: "vllm",
  image: spec.containers[0]!.image,
  imageID: "",
  ready: false,
  restartCount: 0,
  state,
  ...more,
});
const running = (startedAt = AT) => ({ running: { startedAt } });

function job(name: string, component: string, status: NonNullable<Job["status"]>): Job {
  const object = new Job({
    metadata: { name, namespace: NAMESPACE, labels: labels(component) },
    spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "compile", image: spec.containers[0]!.image }] } } },
    status,
  });
  object.validate();
  return object;
}

/** One pod per state (prefill's compile Job has finished, decode's runs), and the two compile Jobs. */
export function kubectlList(): { apiVersion: "v1"; kind: "List"; items: unknown[] } {
  const items = [
    pod("rbln-serving-prefill-a", "prefill", {
      phase: "Running",
      conditions: [condition("Ready", "True")],
      containerStatuses: [vllm(running(), { ready: true })],
    }),
    pod("rbln-serving-prefill-b", "prefill", {
      phase: "Running",
      conditions: [condition("Ready", "False")],
      containerStatuses: [vllm(running("2026-12-06T11:00:00Z"))],
    }),
    pod(
      "rbln-serving-prefill-c",
      "prefill",
      { phase: "Running", conditions: [condition("Ready", "True")], containerStatuses: [vllm(running(), { ready: true })] },
      "2026-12-06T11:30:00Z",
    ),
    pod("rbln-serving-decode-a", "decode", { phase: "Running", conditions: [condition("Ready", "False")], containerStatuses: [vllm(running())] }),
    pod("rbln-serving-decode-b", "decode", {
      phase: "Pending",
      conditions: [condition("Ready", "False")],
      initContainerStatuses: [{ name: "wait-for-weights", image: spec.containers[0]!.image, imageID: "", ready: false, restartCount: 0, state: running() }],
      containerStatuses: [vllm({ waiting: { reason: "PodInitializing" } })],
    }),
    pod("rbln-serving-decode-c", "decode", {
      phase: "Pending",
      conditions: [condition("Ready", "False")],
      containerStatuses: [vllm({ waiting: { reason: "ContainerCreating" } })],
    }),
    pod("rbln-serving-decode-d", "decode", {
      phase: "Running",
      conditions: [condition("Ready", "False")],
      containerStatuses: [
        vllm(
          { waiting: { reason: "CrashLoopBackOff", message: "back-off 5m0s restarting failed container" } },
          { restartCount: 4, lastState: { terminated: { exitCode: 1, reason: "Error", finishedAt: "2026-12-06T11:50:00Z" } } },
        ),
      ],
    }),
    pod("rbln-serving-decode-e", "decode", {
      phase: "Pending",
      conditions: [condition("PodScheduled", "False", { reason: "Unschedulable", message: "0/3 nodes are available: 3 Insufficient rebellions.ai/ATOM." })],
    }),
    job("rbln-serving-compile-prefill-1cf6c97448", "prefill-compile", { succeeded: 1, conditions: [condition("Complete", "True")] }),
    job("rbln-serving-compile-decode-9a8b7c6d5e", "decode-compile", { active: 1, startTime: AT }),
  ];
  return { apiVersion: "v1", kind: "List", items: items.map((item) => item.toJSON()) };
}
