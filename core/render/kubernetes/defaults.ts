import { LEASE_DEFAULTS } from "../../cache/leaseLock";
import { REPLICA_LOAD_SECONDS } from "../../config/defaults";

/**
 * Every operational default of the Kubernetes platform, in one place (as an Ansible role keeps its
 * defaults/main.yml): paths in the pods, timeouts and budgets, probe timings, container sizes and
 * the compile lock's timings. Settings a stack may change are in the config schema instead.
 */
export const KUBERNETES_DEFAULTS = {
  paths: {
    /** Where the pods keep the weights (HF_HOME), compiled graphs (VLLM_CACHE_ROOT) and offload files. */
    dataRoot: "/var/lib/rbln-serving",
    /** Where a role's launch ConfigMap is mounted. */
    launchDir: "/etc/rbln-serving",
    /** The processes' home and temporary files, with a read-only root filesystem. */
    scratchDir: "/tmp",
  },
  budgets: {
    /**
     * A start's budget on top of the engine's ready timeout: a pod may first wait for another pod's
     * compile of the same key, then load (the weights are already there: the Job fetched them).
     */
    startMarginSeconds: 3600,
    /** How long the weights Job may download (about 230 GB). */
    weightsJobDeadlineSeconds: 8 * 3600,
    /** The weights Job's retries of a failed download. */
    weightsJobBackoffLimit: 6,
    /** Rollouts may run this long past the startup budget before Kubernetes and Pulumi call them failed. */
    rolloutMarginSeconds: 1800,
  },
  /**
   * A stopping pod: the preStop sleep, then vLLM's drain (`--shutdown-timeout`), then teardown. The
   * grace period is their sum, so the kubelet never kills a request the drain lets finish.
   */
  termination: {
    /**
     * How long vLLM keeps taking requests after the pod starts terminating, so the endpoint picker,
     * the gateway and kube-proxy drop it first (vLLM refuses new requests once SIGTERM arrives).
     * llm-d's and KServe's preStop is 15 s.
     */
    preStopSleepSeconds: 15,
    /** After the drain: the engines' teardown, the supervisor and the routing sidecar's exit. */
    teardownSeconds: 30,
  },
  /** KEDA ScaledObjects (scaledObjects.ts), with `autoscaling.enabled`. */
  autoscaling: {
    /**
     * How often KEDA reads the triggers at and near zero replicas (llm-d's guides: 15 s), its
     * pollingInterval with scaleToZero. Above zero the HPA reads them on its own sync period
     * (kube-controller-manager's default: 15 s too), and the ScaledObject leaves pollingInterval out.
     */
    pollingIntervalSeconds: 15,
    /** A new replica's start from the compiled cache: scale-up waits at least this long, and so does the unavailable alert. */
    loadSeconds: REPLICA_LOAD_SECONDS,
    /** Load must stay low this long before a replica goes. */
    scaleDownWindowSeconds: 300,
    /** At most one replica goes per this many seconds. */
    scaleDownPeriodSeconds: 300,
    /** KEDA's wait before a role with nothing to do goes to zero (its cooldownPeriod, with a minimum of 0 only). */
    cooldownSeconds: 300,
    /** Failed reads before KEDA keeps the current replicas (fallback currentReplicasIfHigher). */
    fallbackFailureThreshold: 3,
    /** Waiting requests per replica, unless `autoscaling.roles.<role>.target` says otherwise (llm-d's queue threshold). */
    waitingPerReplica: 1,
    /** Running requests per replica as a share of its compiled batch (max_num_seqs per engine) that adds a replica. */
    batchShare: 0.8,
  },
  probes: {
    startupPeriodSeconds: 60,
    readinessPeriodSeconds: 10,
    readinessFailureThreshold: 3,
    livenessPeriodSeconds: 30,
    livenessFailureThreshold: 5,
    /** Per port of a probe; an exec probe's own timeout covers every port in turn. */
    portTimeoutSeconds: 5,
    /** How often the init container looks for the weights' markers. */
    weightsWaitPollSeconds: 10,
  },
  resources: {
    /**
     * Per vLLM container, sized for MiniMax-M2.7 (FP8, about 230 GB of weights): `--safetensors-load-strategy
     * prefetch` reads the checkpoint into the page cache, which the kernel charges to the container's memory
     * cgroup, on top of the engine's own host memory (and LMCache's CPU buffer, 10 GB per rank, with
     * `lmcache: cpu`). The request equals the limit, so the pod is never among the first evicted under
     * memory pressure; no CPU limit, so tokenization and the API servers are not throttled.
     */
    vllm: { requests: { cpu: "32", memory: "384Gi" }, limits: { memory: "384Gi" } },
    /** The routing sidecar proxies requests: a small Go process. */
    sidecar: { requests: { cpu: "250m", memory: "256Mi" }, limits: { memory: "1Gi" } },
    /** A download is network-bound: a few CPUs for hashing, a little memory for buffers. */
    weightsFetch: { requests: { cpu: "2", memory: "4Gi" }, limits: { memory: "8Gi" } },
    weightsWait: { requests: { cpu: "10m", memory: "32Mi" }, limits: { memory: "64Mi" } },
    /**
     * The compile Job (compile.enabled): the serving container's figures without its NPUs, since a
     * compile-only run loads the same model into host memory and runs the compiler; Rebellions
     * publishes no figure of its own (test/fixtures/vllm-rbln-0.12.0.json: compileOnly.resources).
     */
    compile: { requests: { cpu: "32", memory: "384Gi" }, limits: { memory: "384Gi" } },
  },
  /** How often a compile Job looks for vllm-rbln's "saved" line. */
  compileJobPollSeconds: 30,
  /** How often the weights Job prints a progress line (docs/progress.md). */
  weightsProgressSeconds: 30,
  /** A compile Job's retries of a failed compile or pull. */
  compileJobBackoffLimit: 2,
  /** One compiler per compile key on a role's compile-cache volume. */
  compileLock: LEASE_DEFAULTS,
} as const;
