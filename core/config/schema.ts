// The stack config's schema: its sections (hosts, Kubernetes, the router, autoscaling, compile
// ahead) and its top level, key by key, built from the field primitives (fields.ts). The checks
// across keys are crossFieldChecks.ts; parsing, with them, is stackConfig.ts.
import { z } from "zod";
import { DEFAULT_MODEL } from "../recipe/catalog";
import { COMMIT_HASH, DEFAULT_MAX_UNAVAILABLE, DEFAULT_RESTART_FREE_GIB, DEFAULT_WEIGHTS_STORAGE_GIB } from "./defaults";
import {
  absolutePath,
  address,
  dnsLabel,
  dnsSubdomain,
  duration,
  hostKey,
  imageReference,
  indexUrl,
  labelKey,
  labelValue,
  MaxUnavailable,
  ociRepository,
  packageVersion,
  port,
  posixUser,
  quantity,
  quantityValue,
  replicaLimit,
  roleName,
  unixId,
  userName,
  volumeSize,
} from "./fields";
import { extraArgs, extraEnv } from "./vllmOptions";

/** How an SSH server is reached: its address, and the user and port, root and 22 unless set. */
const sshLogin = { address, user: posixUser.default("root"), port: port.default(22) };

/** A bastion (jump host) the SSH connection goes through; it gets the same private key. */
const SshProxy = z.strictObject({
  ...sshLogin,
  hostKey: hostKey.optional(),
});
export type SshProxy = z.infer<typeof SshProxy>;

export const Host = z.strictObject({
  name: dnsLabel,
  ...sshLogin,
  /** The address vLLM listens on (`--host`); all interfaces when unset. */
  listenAddress: z.union([z.ipv4(), z.ipv6()], { error: "an IPv4 or IPv6 address" }).optional(),
  /** The server's public SSH host key; the connection refuses any other server. */
  hostKey: hostKey.optional(),
  /** A bastion for this host; overrides the stack-wide `sshProxy`. */
  proxy: SshProxy.optional(),
});
export type Host = z.infer<typeof Host>;

const Pip = z.strictObject({
  /** Replaces PyPI, e.g. a mirror for air-gapped sites. */
  indexUrl: indexUrl.optional(),
  /** Replaces the recipe's extra index URLs when set. */
  extraIndexUrls: z.array(indexUrl).optional(),
  /** The user name for the index's basic auth; the password is the `pipPassword` secret. */
  username: userName(/^[^\s:@/]+$/, "a user name without spaces, ':', '@' or '/'").optional(),
});

const ResourceList = z.strictObject({ cpu: quantity.optional(), memory: quantity.optional() });
const ContainerResources = z.strictObject({ requests: ResourceList.optional(), limits: ResourceList.optional() }).superRefine((r, ctx) => {
  for (const name of ["cpu", "memory"] as const) {
    const request = r.requests?.[name];
    const limit = r.limits?.[name];
    if (request && limit && quantityValue(request) > quantityValue(limit)) {
      ctx.addIssue({ code: "custom", path: ["requests", name], message: `more than limits.${name} (${limit})` });
    }
  }
});
export type ContainerResources = z.infer<typeof ContainerResources>;
const Toleration = z.strictObject({
  key: labelKey.optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: labelValue.optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: z.number().int().optional(),
});
/** Who the pods run as. Non-root needs the NPU device nodes to be reachable by that user (README, "NPU device access"). */
const PodSecurity = z
  .strictObject({
    runAsNonRoot: z.boolean().default(true),
    runAsUser: unixId.default(10001),
    runAsGroup: unixId.default(10001),
    fsGroup: unixId.default(10001),
    /** Extra groups, e.g. the GID that owns /dev/rbln* on the nodes. */
    supplementalGroups: z.array(unixId).default([]),
    readOnlyRootFilesystem: z.boolean().default(true),
  })
  .refine((s) => !s.runAsNonRoot || s.runAsUser !== 0, { path: ["runAsUser"], message: "0 is root: set a non-zero UID, or runAsNonRoot: false" });

/** Namespaces of the cluster itself (Kubernetes reserves the kube- prefix): the package creates its namespace and sets its Pod Security labels. */
const isClusterNamespace = (namespace: string) => namespace === "default" || namespace.startsWith("kube-");

const Kubernetes = z.strictObject({
  namespace: dnsLabel
    .refine(
      (namespace) => !isClusterNamespace(namespace),
      "a namespace of the deployment's own, such as rbln-serving: default and kube-* belong to the cluster, and the package labels its namespace with Pod Security levels",
    )
    .default("rbln-serving"),
  /** A vllm-rbln image built from this project's Dockerfile; there is no public one. */
  image: imageReference.optional(),
  npuResource: z
    .string()
    .regex(/^[a-z0-9.-]+\/[A-Za-z0-9._-]+$/, "an extended resource name such as rebellions.ai/npu")
    .default("rebellions.ai/npu"),
  nodeSelector: z.record(labelKey, labelValue).default({ "rebellions.ai/npu.product": "RBLN-CR13" }),
  storageClass: dnsLabel.optional(),
  weightsVolumeSize: volumeSize("500Gi").default(`${DEFAULT_WEIGHTS_STORAGE_GIB}Gi`),
  compileCacheVolumeSize: volumeSize("200Gi").default("200Gi"),
  gateway: z.strictObject({ name: dnsLabel, namespace: dnsLabel.optional() }).optional(),
  provider: z.enum(["none", "istio", "gke"]).default("none"),
  /** Per role (`main`, `prefill`, `decode`): CPU and memory of the vLLM container, over the defaults. */
  resources: z.record(roleName, ContainerResources).default({}),
  /** The routing sidecar's CPU and memory, over the defaults. */
  sidecarResources: ContainerResources.default({}),
  /** The memory-backed `/dev/shm`'s size limit (it counts against the container's memory). */
  shmSizeLimit: quantity.default("16Gi"),
  tolerations: z.array(Toleration).default([]),
  /** Replaces the default: one pod of a role per node (each takes the node's NPUs). */
  affinity: z.record(z.string(), z.unknown()).optional(),
  topologySpreadConstraints: z.array(z.record(z.string(), z.unknown())).default([]),
  priorityClassName: dnsSubdomain.optional(),
  /** Secrets for pulling the image, e.g. a login to repo.rebellions.ai. */
  imagePullSecrets: z.array(dnsSubdomain).default([]),
  securityContext: PodSecurity.default(PodSecurity.parse({})),
  /** Who may reach the aggregated strategies' pods; by default the gateway's namespace and the namespace itself. */
  clients: z.strictObject({ namespaces: z.array(dnsLabel).min(1).optional(), podLabels: z.record(labelKey, labelValue).optional() }).default({}),
});

const ROUTER_HOST_FORMS = "a router host {name, address, user, port, hostKey, proxy, listenAddress}, or {name} (or the name alone) of an entry of hosts";

/** A server of the front door on hosts: no NPU needed, podman or docker. */
const RouterHostFields = z.strictObject(
  {
    name: dnsLabel,
    address: address.optional(),
    user: posixUser.default("root"),
    port: port.default(22),
    hostKey: hostKey.optional(),
    proxy: SshProxy.optional(),
    /** The address the front door listens on (Envoy, the picker's metrics); all interfaces when unset. */
    listenAddress: z.union([z.ipv4(), z.ipv6()], { error: "an IPv4 or IPv6 address" }).optional(),
  },
  { error: ROUTER_HOST_FORMS },
);
const SERVER_KEYS = Object.keys(RouterHostFields.shape).filter((key) => key !== "name" && key !== "address");

/**
 * The front door's server: one of its own (with an address), or an entry of `hosts` it shares,
 * named alone (`{name}`, or the name as a string, the form stacks used first). One object type
 * either way, so the package schema types every key; the parsed form is the name of the shared
 * entry, or the server.
 */
export const RouterHost = z
  .preprocess((value, ctx) => {
    if (typeof value === "string") return { name: value };
    if (value === null || typeof value !== "object" || "address" in value) return value;
    for (const key of SERVER_KEYS.filter((key) => key in value))
      ctx.addIssue({
        code: "custom",
        path: [key],
        message: "only with address: without one, name is an entry of hosts, whose own settings apply",
        input: value,
      });
    return value;
  }, RouterHostFields)
  .transform(({ address, ...host }) => (address === undefined ? host.name : { ...host, address }));
export type RouterHost = Exclude<z.output<typeof RouterHost>, string>;
const Router = z.strictObject({
  /** How long a request may run: the HTTPRoute's (Kubernetes) or Envoy's route timeout (hosts). The chart's own default, 300s, cuts long generations. */
  requestTimeout: duration.default("1h"),
  /** The endpoint picker's container resources (the chart's router.epp.resources); unset keeps the chart's. */
  pickerResources: ContainerResources.optional(),
  /** Hosts: where the front door (the llm-d endpoint picker and Envoy) runs: a server of its own, or an entry of `hosts` named alone to share it. */
  host: RouterHost.optional(),
  /** Hosts: the container runtime the front door and the routing sidecars run under. */
  runtime: z.enum(["podman", "docker"]).default("podman"),
  /** Hosts: the images of the front door and the sidecars, for a mirror or an air-gapped site; unset, the pinned defaults. */
  images: z.strictObject({ endpointPicker: imageReference.optional(), proxy: imageReference.optional(), sidecar: imageReference.optional() }).default({}),
  /** Hosts: the front door's port. */
  port: port.default(8080),
});

/** Per-role replica limits and target of the scaler, over the stack-wide ones. */
const AutoscalingRole = z.strictObject({
  minReplicas: replicaLimit.optional(),
  maxReplicas: replicaLimit.optional(),
  /** Waiting requests per replica the scaler keeps to: more waiting adds replicas. */
  target: z.number().positive().max(10000).optional(),
});
/** KEDA ScaledObjects per role on Kubernetes (docs/kubernetes-autoscaling.md). */
const Autoscaling = z.strictObject({
  enabled: z.boolean().default(false),
  /** Unset: each role's replicas (replicas, prefillReplicas, decodeReplicas). */
  minReplicas: replicaLimit.optional(),
  maxReplicas: replicaLimit.optional(),
  /** Lets minReplicas be 0: a role with nothing to serve gives its NPUs back. */
  scaleToZero: z.boolean().default(false),
  /** The Prometheus KEDA queries; unset, the operator's prometheus-operated Service in monitoring.namespace. */
  prometheusAddress: z
    .url({ protocol: /^https?$/, error: "an http:// or https:// URL such as http://prometheus-operated.monitoring.svc:9090" })
    // It goes into the ScaledObject in plain text, as it stands in the stack file.
    .refine((url) => !URL.canParse(url) || (new URL(url).username === "" && new URL(url).password === ""), {
      message:
        "a URL without user:password@: the stack file and the ScaledObject would hold the password in plain text; give KEDA its credentials through a TriggerAuthentication of your own",
      params: { hideValue: true },
    })
    .optional(),
  roles: z.record(roleName, AutoscalingRole).default({}),
});
export type Autoscaling = z.infer<typeof Autoscaling>;

/**
 * Compile ahead, off the NPUs (core/plan/compileAhead.ts): a CPU server (hosts) or a Job without NPUs
 * (Kubernetes) compiles every compile key before any NPU replica stops serving, and a registry keeps
 * the compiled caches across stacks.
 */
const Compile = z.strictObject({
  /** Hosts: the CPU server that compiles, with the same roots as the NPU hosts; it is also the seed of the weights. */
  host: Host.omit({ listenAddress: true }).optional(),
  /** Kubernetes: a compile Job per compile key, with no NPU request. */
  enabled: z.boolean().default(false),
  /** Kubernetes: where the compile Jobs run (CPU nodes). */
  nodeSelector: z.record(labelKey, labelValue).default({}),
  /** Kubernetes: the compile Job's CPU and memory, over the defaults. */
  resources: ContainerResources.default({}),
  /** An OCI registry the compiled caches are pushed to and pulled from, tagged by compile key; the password is the registryPassword secret. */
  registry: z.strictObject({ repository: ociRepository, username: userName(/^[^\s:]+$/, "a user name without spaces or ':'").optional() }).optional(),
});
export type CompileSettings = z.infer<typeof Compile>;

/** Every key of the stack config, without the checks across keys (StackSettings adds them). */
export const SettingsSchema = z.strictObject({
  model: z.string().min(1).default(DEFAULT_MODEL),
  /** The model's commit on the hub, used for the download and passed to vLLM; unset: the first download resolves and records it. */
  revision: z.string().regex(COMMIT_HASH, "a 40-hex commit hash such as 0123456789abcdef0123456789abcdef01234567 (a branch or tag moves)").optional(),
  strategy: z.string().min(1),
  target: z.string().min(1),
  preset: z.literal("recommended").optional(),
  axes: z.record(z.string(), z.string()).default({}),
  versions: z.record(z.string(), packageVersion).default({}),
  platform: z.enum(["hosts", "kubernetes"]).default("hosts"),
  replicas: z.number().int().min(1).max(1024).default(1),
  prefillReplicas: z.number().int().min(1).max(1024).optional(),
  decodeReplicas: z.number().int().min(1).max(1024).optional(),
  hosts: z.array(Host).default([]),
  /** A bastion every host is reached through, unless the host names its own `proxy`. */
  sshProxy: SshProxy.optional(),
  /** Connect without checking the servers' host keys (a warning says so). */
  insecureSkipHostKeyCheck: z.boolean().default(false),
  pip: Pip.default({}),
  installRoot: absolutePath.default("/opt/rbln-serving"),
  cacheRoot: absolutePath.default("/var/lib/rbln-serving"),
  /** Free disk (GiB, as df counts) preflight wants under cacheRoot before the weights are cached; the same default as the Kubernetes weights volume. */
  minFreeDiskGb: z.number().int().min(0).default(DEFAULT_WEIGHTS_STORAGE_GIB),
  /** Free disk (GiB) the unit step wants under cacheRoot before every (re)start of a rank: a start grows the compile cache. */
  minFreeDiskGbToRestart: z.number().int().min(0).default(DEFAULT_RESTART_FREE_GIB),
  /** `shared`: a folder on a filesystem every host mounts (NFS): the weights and compiled caches live there once, instead of being copied between hosts. */
  cache: z.strictObject({ shared: absolutePath.optional() }).default({}),
  kubernetes: Kubernetes.default(Kubernetes.parse({})),
  extraArgs: extraArgs.default({}),
  /** Compile ahead, off the NPUs, and a registry of compiled caches (docs/compile-ahead.md). */
  compile: Compile.default(Compile.parse({})),
  extraEnv: extraEnv.default({}),
  router: Router.default(Router.parse({})),
  /** Prometheus scraping, dashboard and alerts (Kubernetes objects; on hosts, files from `render`). */
  monitoring: z
    .strictObject({ enabled: z.boolean().default(false), namespace: dnsLabel.default("monitoring") })
    .default({ enabled: false, namespace: "monitoring" }),
  /** Replicas that follow the load on Kubernetes: a KEDA ScaledObject per role. */
  autoscaling: Autoscaling.default(Autoscaling.parse({})),
  /** How a change reaches the replicas: at most maxUnavailable of them down at once. */
  rollout: z
    .strictObject({
      maxUnavailable: MaxUnavailable.default(DEFAULT_MAX_UNAVAILABLE),
      /** vLLM's --shutdown-timeout: how long a stopping rank lets its in-flight requests finish; unset, the router's requestTimeout, so no request the front door allows is cut. */
      shutdownTimeoutSeconds: z.number().int().min(0).max(86400).optional(),
      /** Hosts with the front door: let a change take a role's last server out of it while it restarts (an outage of that role); refused otherwise. */
      allowEmptyFrontDoor: z.boolean().default(false),
    })
    .default({ maxUnavailable: DEFAULT_MAX_UNAVAILABLE, allowEmptyFrontDoor: false }),
});
export type Settings = z.infer<typeof SettingsSchema>;
