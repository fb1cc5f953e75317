import type { StackSettings } from "../../config/stackConfig";
import { KUBERNETES_DEFAULTS } from "./defaults";
import type * as k8s from "./objects";
import { containerSecurity, type mergeResources, rankProbe } from "./pod";

/** The vLLM container of a role's pod: its ranks' ports, the NPUs, the volumes and the probes over every rank port. */
export function vllmContainer(input: {
  image: string;
  command: string[];
  env: k8s.Container["env"];
  rankPorts: number[];
  npus: Record<string, string>;
  resources: ReturnType<typeof mergeResources>;
  security: StackSettings["kubernetes"]["securityContext"];
  apiKey: boolean;
  /** How long a start may take: the engine's ready timeout and the margin. */
  startupBudgetSeconds: number;
  /** How long vLLM keeps serving once its pod terminates, before it gets SIGTERM and drains. */
  preStopSleepSeconds: number;
  mounts: { launchDir: string; hfHome: string; compileCache: string; offload: string; scratch: string };
}): k8s.Container {
  const { probes } = KUBERNETES_DEFAULTS;
  const { rankPorts, apiKey, mounts } = input;
  return {
    name: "vllm",
    image: input.image,
    command: input.command,
    env: input.env,
    ports: rankPorts.map((port, i) => ({ name: `vllm-${i}`, containerPort: port, protocol: "TCP" })),
    resources: { requests: { ...input.resources.requests, ...input.npus }, limits: { ...input.resources.limits, ...input.npus } },
    securityContext: containerSecurity(input.security),
    volumeMounts: [
      { name: "launch", mountPath: mounts.launchDir, readOnly: true },
      { name: "weights", mountPath: mounts.hfHome },
      { name: "compile-cache", mountPath: mounts.compileCache },
      { name: "offload", mountPath: mounts.offload },
      { name: "scratch", mountPath: mounts.scratch },
      { name: "dshm", mountPath: "/dev/shm" },
    ],
    // Compilation takes hours on a cold cache: the startup probe holds the others off until then.
    startupProbe: {
      ...rankProbe("/health", rankPorts, apiKey),
      periodSeconds: probes.startupPeriodSeconds,
      failureThreshold: Math.ceil(input.startupBudgetSeconds / probes.startupPeriodSeconds),
    },
    readinessProbe: {
      ...rankProbe("/v1/models", rankPorts, apiKey),
      periodSeconds: probes.readinessPeriodSeconds,
      failureThreshold: probes.readinessFailureThreshold,
    },
    livenessProbe: {
      ...rankProbe("/health", rankPorts, apiKey),
      periodSeconds: probes.livenessPeriodSeconds,
      failureThreshold: probes.livenessFailureThreshold,
    },
    // vLLM refuses new requests from SIGTERM on, and its /health stays 200 while it drains, so nothing
    // in the pod tells the router to stop sending: sleep until the endpoint picker, the gateway and
    // kube-proxy have seen the pod terminate. The image's sleep (no shell needed), on every Kubernetes.
    lifecycle: { preStop: { exec: { command: ["sleep", String(input.preStopSleepSeconds)] } } },
  };
}

/**
 * The llm-d routing sidecar in front of a decode pod's ranks, as a native sidecar (an init
 * container that restarts always: it starts before vLLM and lives as long as the pod). It listens
 * on the pool's ports and forwards to the ranks' (8000+r → 8200+r). It has no preStop: Kubernetes
 * (1.29+) sends a native sidecar SIGTERM only once the vLLM container has exited, so it forwards
 * throughout vLLM's drain; v0.10.0 then exits at once (it does not drain), with nothing left in flight.
 */
export function routingSidecar(input: {
  image: string;
  /** The ports it listens on, one per rank. */
  ports: number[];
  rankPorts: number[];
  resources: ReturnType<typeof mergeResources>;
  security: StackSettings["kubernetes"]["securityContext"];
}): k8s.Container {
  return {
    name: "routing-proxy",
    image: input.image,
    restartPolicy: "Always",
    args: [
      `--port=${input.ports[0]}`,
      `--model-server-port=${input.rankPorts[0]}`,
      `--data-parallel-size=${input.rankPorts.length}`,
      "--kv-connector=nixlv2",
      "--secure-proxy=false",
    ],
    ports: input.ports.map((port, i) => ({ name: `proxy-${i}`, containerPort: port, protocol: "TCP" })),
    resources: input.resources,
    securityContext: { ...containerSecurity(input.security), readOnlyRootFilesystem: true },
  };
}
