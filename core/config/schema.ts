// The stack config's schema: its sections (hosts, Kubernetes, the router, autoscaling, compile
// ahead) and its top level, key by key, built from the field primitives (fields.ts). The checks
// across keys are crossFieldChecks.ts; parsing, with them, is stackConfig.ts.
import { z } from "zod";
import { DEFAULT_MODEL } from "../recipe/catalog";
import {
  COMMIT_HASH,
  DEFAULT_MAX_UNAVAILABLE,
  DEFAULT_RESTART_FREE_GIB,
  DEFAULT_WEIGHTS_STORAGE_GIB,
  MAX_SHUTDOWN_TIMEOUT_SECONDS,
  MIN_THRESHOLD,
  THRESHOLD_DECIMALS,
} from "./defaults";
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
  listenAddress,
  MaxUnavailable,
  ociRepository,
  packageVersion,
  port,
  posixUser,
  prometheusUrl,
  quantity,
  quantityValue,
  replicaLimit,
  roleName,
  unixId,
  userName,
  virtualAddress,
  volumeSize,
} from "./fields";
import { extraArgs, extraEnv } from "./vllmOptions";

/**
 * How SSH reaches a server: its address, and the user and port, root and 22 unless set. `server`
 * names it in the descriptions; `user` says what the user does there.
 */
const sshLogin = (server: string, user: string) => ({
  address: address.describe(`Where SSH reaches ${server}: a host name, an IPv4 or an IPv6 address.`),
  user: posixUser.default("root").describe(user),
  port: port.default(22).describe(`The SSH port of ${server}.`),
});
const sshHostKey = (server: string) =>
  hostKey
    .optional()
    .describe(
      `The public SSH host key of ${server}, as \`ssh-keyscan\` prints it without the host name (\`ssh-ed25519 AAAA...\`); SSH refuses any other server. Required unless insecureSkipHostKeyCheck is true.`,
    );

const SshProxy = z
  .strictObject({
    ...sshLogin("the bastion", "The SSH user on the bastion; it needs no rights there but to forward the connection."),
    hostKey: sshHostKey("the bastion"),
  })
  .describe("A bastion (jump host) that SSH connects through to reach the servers behind it, with the same sshPrivateKey.");
export type SshProxy = z.infer<typeof SshProxy>;
const proxyOf = (server: string) =>
  SshProxy.optional().describe(`A bastion for ${server} (address, user, port, hostKey); unset, the stack-wide sshProxy (if any).`);

export const Host = z
  .strictObject({
    name: dnsLabel.describe(
      "The server's name, unique among hosts: its resources, unit files and plan lines are named after it, so renaming a host replaces its resources.",
    ),
    ...sshLogin("the server", "The SSH user on the server. A user other than root runs the scripts through `sudo -n`, so it needs password-less sudo."),
    listenAddress: listenAddress
      .optional()
      .describe(
        "The address vLLM's ranks listen on (its `--host`); unset, all interfaces. When it names one address, the endpoints, unit URLs and scrape targets use it instead of address; no two hosts may serve a port on one address.",
      ),
    hostKey: sshHostKey("the server"),
    proxy: proxyOf("this server"),
  })
  .describe(
    "A server reached over SSH: its name, address, SSH login and host key. No two hosts may be one SSH server (the same address and port; host names compare without case).",
  );
export type Host = z.infer<typeof Host>;

const Pip = z
  .strictObject({
    indexUrl: indexUrl
      .optional()
      .describe(
        "A package index that replaces PyPI for the venvs on the hosts, such as a mirror for an air-gapped site: an http:// or https:// URL without user:password@ (the user is pip.username, the password the pipPassword secret). Unset, PyPI.",
      ),
    extraIndexUrls: z
      .array(indexUrl)
      .optional()
      .describe(
        "Extra package indexes, in place of the recipe's own (such as the RBLN Portal's): http:// or https:// URLs without user:password@. Unset, the recipe's.",
      ),
    username: userName(/^[^\s:@/]+$/, "a user name without spaces, ':', '@' or '/'")
      .optional()
      .describe(
        "The user for the credentialed indexes (the recipe's, such as the RBLN Portal, and pip.indexUrl): no spaces, ':', '@' or '/'. The password is the pipPassword secret; each needs the other.",
      ),
  })
  .describe("Where pip installs the recipe's packages from on the hosts, and the user of its credentialed indexes.");

const ResourceList = z.strictObject({
  cpu: quantity.optional().describe("CPU, in cores as a Kubernetes quantity: `8` is 8 cores, `500m` half a core."),
  memory: quantity.optional().describe("Memory, in bytes as a Kubernetes quantity: `64Gi`, `512Mi`."),
});
const ContainerResources = z
  .strictObject({
    requests: ResourceList.optional().describe("What the scheduler reserves for the container on its node (CPU and memory); no request may exceed its limit."),
    limits: ResourceList.optional().describe("The most the container may use: above the memory limit it is killed, above the CPU limit throttled."),
  })
  .superRefine((r, ctx) => {
    for (const name of ["cpu", "memory"] as const) {
      const request = r.requests?.[name];
      const limit = r.limits?.[name];
      if (request && limit && quantityValue(request) > quantityValue(limit)) {
        ctx.addIssue({ code: "custom", path: ["requests", name], message: `more than limits.${name} (${limit})` });
      }
    }
  })
  .describe("A container's CPU and memory, as Kubernetes requests and limits; a key left out keeps the default.");
export type ContainerResources = z.infer<typeof ContainerResources>;
const Toleration = z
  .strictObject({
    key: labelKey.optional().describe("The taint key it matches; unset with operator Exists, every taint."),
    operator: z.enum(["Exists", "Equal"]).optional().describe("Equal matches the taint's value, Exists any value; unset, Equal."),
    value: labelValue.optional().describe("The taint value it matches, with operator Equal."),
    effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional().describe("The taint effect it matches; unset, every effect."),
    tolerationSeconds: z
      .number()
      .int()
      .optional()
      .describe("With effect NoExecute: the seconds a pod stays on a node after the taint appears; unset, for good."),
  })
  .describe("A Kubernetes toleration of the serving pods, as in a pod spec: the node taints they may run on.");
const PodSecurity = z
  .strictObject({
    runAsNonRoot: z
      .boolean()
      .default(true)
      .describe("The pods run as a user other than root; false runs them as root. Non-root needs the NPU device nodes to be reachable by that user."),
    runAsUser: unixId.default(10001).describe("The UID the containers run as; not 0 while runAsNonRoot is true."),
    runAsGroup: unixId.default(10001).describe("The primary GID the containers run as."),
    fsGroup: unixId.default(10001).describe("The group that owns the mounted volumes (weights and compile caches), so the containers can write them."),
    supplementalGroups: z.array(unixId).default([]).describe("More groups for the containers, such as the GID that owns `/dev/rbln*` on the nodes."),
    readOnlyRootFilesystem: z.boolean().default(true).describe("The containers' root filesystem is read-only; vLLM writes only to the mounted volumes."),
  })
  .refine((s) => !s.runAsNonRoot || s.runAsUser !== 0, { path: ["runAsUser"], message: "0 is root: set a non-zero UID, or runAsNonRoot: false" })
  .describe("Who the serving pods run as, and what they may write.");

/** Namespaces of the cluster itself (Kubernetes reserves the kube- prefix): the package creates its namespace and sets its Pod Security labels. */
const isClusterNamespace = (namespace: string) => namespace === "default" || namespace.startsWith("kube-");

const Kubernetes = z
  .strictObject({
    namespace: dnsLabel
      .refine(
        (namespace) => !isClusterNamespace(namespace),
        "a namespace of the deployment's own, such as rbln-serving: default and kube-* belong to the cluster, and the package labels its namespace with Pod Security levels",
      )
      .default("rbln-serving")
      .describe(
        "The namespace the package creates for the deployment and labels with Pod Security levels; it may not be monitoring.namespace. Changing it replaces every namespaced resource.",
      ),
    image: imageReference
      .optional()
      .describe(
        "The vllm-rbln image the serving pods run, built from this project's Dockerfile (there is no public one): `[registry[:port]/]name[:tag][@digest]`, no user:password@. Required on Kubernetes; with compile.registry, pinned by digest (`name@sha256:...`).",
      ),
    npuResource: z
      .string()
      .regex(/^[a-z0-9.-]+\/[A-Za-z0-9._-]+$/, "an extended resource name such as rebellions.ai/npu")
      .default("rebellions.ai/npu")
      .describe("The extended resource the NPU device plugin offers; each pod requests all of its node's NPUs of it."),
    nodeSelector: z
      .record(labelKey, labelValue)
      .default({ "rebellions.ai/npu.product": "RBLN-CR13" })
      .describe("Node labels the serving pods must match: the nodes with the NPU product the recipe was verified on."),
    storageClass: dnsLabel
      .optional()
      .describe(
        "The storage class of the weights and compile-cache claims; it must offer ReadWriteMany, so pods on several nodes share one download. Unset, the cluster's default class.",
      ),
    weightsVolumeSize: volumeSize("500Gi")
      .default(`${DEFAULT_WEIGHTS_STORAGE_GIB}Gi`)
      .describe("The size of the weights claim (a Kubernetes quantity such as 500Gi): the model's weights plus 25% at least."),
    compileCacheVolumeSize: volumeSize("200Gi")
      .default("200Gi")
      .describe("The size of each role's compile-cache claim, where the compiled graphs live (a Kubernetes quantity such as 200Gi)."),
    gateway: z
      .strictObject({
        name: dnsLabel.describe("The Gateway's name."),
        namespace: dnsLabel.optional().describe("The Gateway's namespace; unset, kubernetes.namespace."),
      })
      .optional()
      .describe("The Gateway API Gateway the llm-d router's HTTPRoute attaches to; the stack's endpoint is its address. Unset, clients reach the Service."),
    provider: z
      .enum(["none", "istio", "gke"])
      .default("none")
      .describe("The llm-d router chart's gateway provider: none, istio, or gke, as the cluster's Gateway implementation."),
    resources: z
      .record(roleName, ContainerResources)
      .default({})
      .describe("Per role (main, prefill, decode): the vLLM container's CPU and memory, over the defaults (32 CPUs and 384Gi requested, no CPU limit)."),
    sidecarResources: ContainerResources.default({}).describe(
      "The routing sidecar's CPU and memory on the decode pods, over the defaults (250m and 256Mi requested, a 1Gi memory limit).",
    ),
    shmSizeLimit: quantity
      .default("16Gi")
      .describe("The size limit of the memory-backed `/dev/shm` each serving pod mounts (a Kubernetes quantity); it counts against the pod's memory."),
    tolerations: z.array(Toleration).default([]).describe("Tolerations of the serving pods, as in a pod spec: the taints of the NPU nodes they may run on."),
    affinity: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        "The serving pods' affinity, a Kubernetes Affinity object as written in a pod spec, in place of the default (one pod of a role per node, since each takes the node's NPUs). Free-form: the package passes it on as it is.",
      ),
    topologySpreadConstraints: z
      .array(z.record(z.string(), z.unknown()))
      .default([])
      .describe("Topology spread constraints of the serving pods, Kubernetes objects as written in a pod spec, passed on as they are."),
    priorityClassName: dnsSubdomain.optional().describe("The PriorityClass of the serving pods; unset, the cluster's default priority."),
    imagePullSecrets: z
      .array(dnsSubdomain)
      .default([])
      .describe("Names of Secrets in kubernetes.namespace that pull the image, such as a login to repo.rebellions.ai."),
    securityContext: PodSecurity.default(PodSecurity.parse({})),
    clients: z
      .strictObject({
        namespaces: z
          .array(dnsLabel)
          .min(1)
          .optional()
          .describe("The namespaces whose pods may connect; unset, the gateway's namespace and kubernetes.namespace itself."),
        podLabels: z
          .record(labelKey, labelValue)
          .optional()
          .describe("Only the pods with these labels, in those namespaces, may connect; unset, every pod there."),
      })
      .default({})
      .describe(
        "The aggregated strategies: who may reach the serving pods' ports, through the network policies (the disaggregated ones admit the router alone).",
      ),
  })
  .describe("Platform kubernetes: the namespace, the image, where and how the serving pods run, and who may reach them.");

const ROUTER_HOST_FORMS = "a router host {name, address, user, port, hostKey, proxy, listenAddress}, or {name} (or the name alone) of an entry of hosts";

const RouterHostFields = z
  .strictObject(
    {
      name: dnsLabel.describe(
        "With address, the router host's name (its resources are named after it), which no entry of hosts may have; without address, the name of the entry of hosts whose server the front door shares.",
      ),
      address: address
        .optional()
        .describe(
          "Where SSH and clients reach a router host of its own: a host name, an IPv4 or an IPv6 address. Unset, name is an entry of hosts, and no other key may be set.",
        ),
      user: posixUser
        .default("root")
        .describe("The SSH user on the router host. A user other than root runs the scripts through `sudo -n`, so it needs password-less sudo."),
      port: port.default(22).describe("The SSH port of the router host."),
      hostKey: sshHostKey("the router host"),
      proxy: proxyOf("the router host"),
      listenAddress: listenAddress.optional().describe("The address the front door listens on (Envoy's port, the picker's metrics); unset, all interfaces."),
    },
    { error: ROUTER_HOST_FORMS },
  )
  // One type in the component package for router.host and each of router.hosts.
  .meta({
    id: "RouterHost",
    description: "The front door's server: a server of its own (with address), or an entry of hosts named alone ({name}) whose server it shares.",
  });
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
const Router = z
  .strictObject({
    requestTimeout: duration
      .default("1h")
      .describe(
        "How long one request may run before the router cuts it: Envoy's route timeout on hosts, the HTTPRoute's on Kubernetes (the chart's own 300s cuts long generations). A Gateway API duration: 1h, 90m, 3600s, 1h30m.",
      ),
    pickerResources: ContainerResources.optional().describe(
      "Kubernetes: the endpoint picker's CPU and memory (the chart's router.epp.resources); unset, the chart's (8 CPUs and 8Gi requested, a 16Gi limit).",
    ),
    host: RouterHost.optional().describe(
      "Hosts: the front door's server, where the llm-d endpoint picker and Envoy run before every replica and role: a server of its own ({name, address, user, port, hostKey, proxy, listenAddress}), or an entry of hosts named alone to share its server ({name}, or the name as a string). The same as router.hosts with one entry. Required (or router.hosts) for prefill-decode-disaggregated on hosts; unset, each replica is an endpoint of its own.",
    ),
    hosts: z
      .array(RouterHost)
      .min(1)
      .max(8)
      .optional()
      .describe(
        "Hosts: the front door's servers, each in one of router.host's forms; two or more make it highly available (each runs the endpoint picker and Envoy, and each Envoy falls back to its peer's picker). With virtualAddress, clients use that address, which keepalived moves to a peer whose Envoy is ready; without one, clients (or DNS) must be given every router host's address. Not together with router.host, which is a list of one.",
      ),
    virtualAddress: virtualAddress
      .optional()
      .describe(
        "Hosts: the front door's floating service address, held by keepalived (VRRP, unicast between the router hosts) on the router host whose Envoy is ready, and moved to a peer when that Envoy stops being ready or its host dies; the stack's endpoint. An unused IPv4 or IPv6 address of the router hosts' own network, of their addresses' family; needs two router hosts (router.hosts) with IP addresses and no listenAddress.",
      ),
    runtime: z
      .enum(["podman", "docker"])
      .default("podman")
      .describe(
        "Hosts: the container runtime the front door (the picker and Envoy) and the routing sidecars run under; it must be installed on those servers.",
      ),
    images: z
      .strictObject({
        endpointPicker: imageReference.optional().describe("The llm-d endpoint picker's image; unset, the release the package pins."),
        proxy: imageReference.optional().describe("Envoy's image; unset, the release the package pins."),
        sidecar: imageReference.optional().describe("The routing sidecar's image on the decode hosts; unset, the release the package pins."),
      })
      .default({})
      .describe(
        "Hosts: the images of the front door and the routing sidecars, such as a mirror for an air-gapped site: OCI references without user:password@.",
      ),
    port: port
      .default(8080)
      .describe(
        "Hosts: the port clients send every request to on the router host (Envoy's); it may not be one the ranks, the sidecars or the front door's own services take there.",
      ),
  })
  .describe("The llm-d router: on hosts, the front door (the endpoint picker and Envoy) on a router host; on Kubernetes, the router chart.");

const AutoscalingRole = z
  .strictObject({
    minReplicas: replicaLimit.optional().describe("The fewest replicas of this role; unset, autoscaling.minReplicas."),
    maxReplicas: replicaLimit.optional().describe("The most replicas of this role; unset, autoscaling.maxReplicas; not below the role's minReplicas."),
    target: z
      .number()
      .min(MIN_THRESHOLD, `at least ${MIN_THRESHOLD}: the scaler writes its threshold with ${THRESHOLD_DECIMALS} decimals, and a smaller one would be 0`)
      .max(10000)
      .optional()
      .describe("The waiting requests per replica the scaler keeps to: more waiting adds replicas. Unset, 1."),
  })
  .describe("One role's replica limits and target, over the stack-wide ones.");
const Autoscaling = z
  .strictObject({
    enabled: z
      .boolean()
      .default(false)
      .describe(
        "Kubernetes: a KEDA ScaledObject per role, so its replicas follow the load; needs monitoring.enabled, and KEDA in the cluster. Refused on hosts, whose servers are fixed.",
      ),
    minReplicas: replicaLimit
      .optional()
      .describe("The fewest replicas of every role; 0 only with scaleToZero. Unset, each role's replicas (replicas, prefillReplicas, decodeReplicas)."),
    maxReplicas: replicaLimit
      .optional()
      .describe("The most replicas of every role; required with enabled, here or per role, and not below a role's minReplicas."),
    scaleToZero: z
      .boolean()
      .default(false)
      .describe("Lets minReplicas be 0, so a role with nothing to serve gives its NPUs back; only behind the llm-d router."),
    prometheusAddress: prometheusUrl
      .optional()
      .describe("The Prometheus KEDA queries; unset, the operator's prometheus-operated Service in monitoring.namespace."),
    roles: z
      .record(roleName, AutoscalingRole)
      .default({})
      .describe("Per role (main, prefill, decode): limits and target over the stack-wide ones; a role the strategy lacks is refused."),
  })
  .describe("Replicas that follow the load on Kubernetes: a KEDA ScaledObject per role (docs/kubernetes-autoscaling.md).");
export type Autoscaling = z.infer<typeof Autoscaling>;

const Compile = z
  .strictObject({
    host: Host.omit({ listenAddress: true })
      .optional()
      .describe(
        "Hosts: a CPU server (no NPU) that compiles every compile key before any NPU unit changes, with the same installRoot and cacheRoot as the NPU hosts; it also seeds the weights. A server of its own, never one of hosts.",
      ),
    enabled: z
      .boolean()
      .default(false)
      .describe("Kubernetes: a compile Job per compile key, on CPU nodes without NPUs, fills the role's compile cache before its Deployment changes."),
    nodeSelector: z.record(labelKey, labelValue).default({}).describe("Kubernetes: node labels the compile Jobs must match (CPU nodes)."),
    resources: ContainerResources.default({}).describe("Kubernetes: the compile Job's CPU and memory, over the defaults (32 CPUs and 384Gi requested)."),
    registry: z
      .strictObject({
        repository: ociRepository.describe(
          "The OCI repository of the compiled caches, `host[:port]/path` without scheme or tag: each cache is pushed and pulled under its compile key as the tag.",
        ),
        username: userName(/^[^\s:]+$/, "a user name without spaces or ':'")
          .optional()
          .describe("The registry user, without spaces or ':'; the password is the registryPassword secret, and each needs the other."),
      })
      .optional()
      .describe(
        "A registry that keeps compiled caches across stacks, tagged by compile key: a stack pulls a key another compiled. Needs revision pinned, and on Kubernetes kubernetes.image pinned by digest.",
      ),
  })
  .describe("Compile ahead, off the NPUs, and a registry of compiled caches (docs/compile-ahead.md).");
export type CompileSettings = z.infer<typeof Compile>;

const replicaCount = z.number().int().min(1).max(1024);

/**
 * The keys of one model deployment: the top level has them for a stack of one model, each entry of
 * `models` for several (core/config/models.ts).
 */
const modelSettings = {
  model: z.string().min(1).default(DEFAULT_MODEL).describe("The model to serve: the id of a recipe in the package's recipes/ folder (its Hugging Face id)."),
  revision: z
    .string()
    .regex(COMMIT_HASH, "a 40-hex commit hash such as 0123456789abcdef0123456789abcdef01234567 (a branch or tag moves)")
    .optional()
    .describe(
      "The model's commit on the Hugging Face hub, used for the download and passed to vLLM; unset, the first download resolves and records it. Required with compile.registry.",
    ),
  strategy: z
    .string()
    .min(1)
    .describe(
      "How the model is split over NPUs and servers, as the recipe names it: aggregated-data-expert-parallel, aggregated-pipeline-parallel or prefill-decode-disaggregated. Required; a strategy the recipe does not verify is refused, listing the ones it does.",
    ),
  target: z.string().min(1).describe("What the strategy is tuned for: Latency or Throughput, as the recipe verifies it for the strategy. Required."),
  preset: z
    .literal("recommended")
    .optional()
    .describe("recommended starts the axes from the recipe's recommended values; the axes given override them. Unset, each axis's default."),
  axes: z
    .record(z.string(), z.string())
    .default({})
    .describe(
      "Axis values over the preset, such as spec_decode: suffix or lmcache: cpu; a value the recipe does not verify for the strategy and target is refused, listing the verified ones.",
    ),
  versions: z
    .record(z.string(), packageVersion)
    .default({})
    .describe("Hosts: package versions over the recipe's pins (rebelCompiler, vllmRbln, arcticInference), each an exact PEP 440 version; they name the venv."),
  replicas: replicaCount.default(1).describe("Copies of the strategy, each on its own servers or pods; on hosts, hosts lists one server per node and replica."),
  prefillReplicas: replicaCount.optional().describe("prefill-decode-disaggregated: the prefill copies; unset, replicas."),
  decodeReplicas: replicaCount.optional().describe("prefill-decode-disaggregated: the decode copies; unset, replicas."),
  extraArgs: extraArgs
    .default({})
    .describe(
      "Per role (main, prefill, decode): extra `vllm serve` flags, as words (`--max-log-len`, `100`), replacing the recipe's flag of that name. Flags that define the topology (`--port`, `--data-parallel-*`, `--tensor-parallel-size`, ...) are refused in every spelling; a role the strategy lacks is refused.",
    ),
  compile: Compile.default(Compile.parse({})),
  extraEnv: extraEnv
    .default({})
    .describe(
      "Per role (main, prefill, decode): extra environment variables for vLLM, name to value, as literal text. Refused: the topology's and the package's own variables, names that hold credentials (use the secrets), names bash keeps, and a role the strategy lacks.",
    ),
  autoscaling: Autoscaling.default(Autoscaling.parse({})),
};

/** The longest models[].name: it prefixes Kubernetes object names (at most 40 characters with the instance's) and the router release. */
export const MAX_MODEL_NAME_LENGTH = 24;

/** A name clients send in a request's model field: it lands in HTTP headers, Envoy's routes and YAML, so printable ASCII without spaces, quotes or backslashes. */
const servedName = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[!#-&(-[\]-~]+$/, "printable ASCII without spaces, quotes or backslashes, such as MiniMaxAI/MiniMax-M2.7 or tiny-chat");

export const ModelEntry = z
  .strictObject({
    name: dnsLabel
      .max(MAX_MODEL_NAME_LENGTH, `at most ${MAX_MODEL_NAME_LENGTH} characters: it prefixes Kubernetes object names and the router release`)
      .describe(
        "The model deployment's name, unique among models: its resources, unit and env files, Kubernetes objects, router release and pool are named after it, and every metric series and scrape target carries it as the model label. Renaming it replaces them.",
      ),
    servedNames: z
      .array(servedName)
      .min(1)
      .optional()
      .describe(
        "The names clients may send in a request's model field for this model; aliases route to the same pool, and the first is the name vLLM reports. Unset, the model id. No name may be served by two models; the front door answers any other with 404.",
      ),
    ...modelSettings,
    hosts: z
      .array(dnsLabel)
      .min(1)
      .optional()
      .describe(
        "Hosts: the names of the entries of the top-level hosts this model runs on, one per node and replica, in the order hosts would list them for a stack of this model alone (prefill servers before decode servers). No host may serve two models. Required with platform hosts.",
      ),
  })
  .describe("One model deployment of the stack: its name, the names clients call it by, and the per-model keys of a stack of one model.");
export type ModelEntry = z.infer<typeof ModelEntry>;

/** Every key of the stack config, without the checks across keys (StackSettings adds them). */
export const SettingsSchema = z.strictObject({
  model: modelSettings.model,
  revision: modelSettings.revision,
  strategy: modelSettings.strategy
    .optional()
    .describe(
      "How the model is split over NPUs and servers, as the recipe names it: aggregated-data-expert-parallel, aggregated-pipeline-parallel or prefill-decode-disaggregated. Required unless models is given; a strategy the recipe does not verify is refused, listing the ones it does.",
    ),
  target: modelSettings.target
    .optional()
    .describe("What the strategy is tuned for: Latency or Throughput, as the recipe verifies it for the strategy. Required unless models is given."),
  preset: modelSettings.preset,
  axes: modelSettings.axes,
  versions: modelSettings.versions,
  platform: z
    .enum(["hosts", "kubernetes"])
    .default("hosts")
    .describe("Where to serve: hosts (systemd units on SSH servers) or kubernetes (Deployments, the llm-d router chart)."),
  replicas: modelSettings.replicas,
  prefillReplicas: modelSettings.prefillReplicas,
  decodeReplicas: modelSettings.decodeReplicas,
  models: z
    .array(ModelEntry)
    .min(1)
    .optional()
    .describe(
      "Several model deployments in one stack, behind one front door that routes each request by its model field (docs/models.md). Each entry has its own name, servedNames, hosts and the per-model keys (model, revision, strategy, target, preset, axes, versions, replicas, prefillReplicas, decodeReplicas, extraArgs, extraEnv, compile, autoscaling), which the top level may then not set. Unset, the top level is the stack's one model.",
    ),
  hosts: z
    .array(Host)
    .default([])
    .describe(
      "Hosts: the NPU servers, exactly one per node and replica; for prefill-decode-disaggregated the prefill servers first (prefillReplicas), then the decode servers (decodeReplicas). Required with platform hosts; a wrong count is refused, saying how many of each are needed.",
    ),
  sshProxy: SshProxy.optional().describe("Hosts: a bastion every server is reached through, unless a host names its own proxy."),
  insecureSkipHostKeyCheck: z
    .boolean()
    .default(false)
    .describe("Hosts: connect without checking the servers' SSH host keys, trusting whatever answers at their addresses; the stack's warnings say so."),
  pip: Pip.default({}),
  installRoot: absolutePath
    .default("/opt/rbln-serving")
    .describe("Hosts: where the venvs, env files and rollout state live on each server; not a system directory, nor inside, around or equal to cacheRoot."),
  cacheRoot: absolutePath
    .default("/var/lib/rbln-serving")
    .describe(
      "Hosts: where the weights (HF_HOME), compiled graphs (VLLM_CACHE_ROOT) and offload files live on each server; kept by destroy. Not a system directory, nor inside, around or equal to installRoot.",
    ),
  minFreeDiskGb: z
    .number()
    .int()
    .min(0)
    .default(DEFAULT_WEIGHTS_STORAGE_GIB)
    .describe(
      "Hosts: the free disk, in GiB as df counts, preflight wants under cacheRoot until the weights are cached: the model's weights plus 25% at least. The same default as kubernetes.weightsVolumeSize.",
    ),
  minFreeDiskGbToRestart: z
    .number()
    .int()
    .min(0)
    .default(DEFAULT_RESTART_FREE_GIB)
    .describe(
      "Hosts: the free disk, in GiB, the unit step wants under cacheRoot before every (re)start of a rank, since a start grows the compile cache; 0 turns the check off.",
    ),
  cache: z
    .strictObject({
      shared: absolutePath
        .optional()
        .describe(
          "A folder on a filesystem every host mounts (NFS): the weights and compiled graphs live there once, instead of being copied between hosts. Not a system directory, and apart from installRoot and cacheRoot.",
        ),
    })
    .default({})
    .describe("Hosts: a cache every server shares."),
  kubernetes: Kubernetes.default(Kubernetes.parse({})),
  extraArgs: modelSettings.extraArgs,
  compile: modelSettings.compile,
  extraEnv: modelSettings.extraEnv,
  router: Router.default(Router.parse({})),
  monitoring: z
    .strictObject({
      enabled: z
        .boolean()
        .default(false)
        .describe(
          "Kubernetes: PodMonitors, alert rules and a Grafana dashboard for the serving pods (the Prometheus operator's kinds); on hosts, `render` writes the files.",
        ),
      namespace: dnsLabel.default("monitoring").describe("The namespace where Prometheus and Grafana run; it may not be kubernetes.namespace."),
    })
    .default({ enabled: false, namespace: "monitoring" })
    .describe("Prometheus scraping, dashboard and alerts (Kubernetes objects; on hosts, files from `render`)."),
  autoscaling: modelSettings.autoscaling,
  rollout: z
    .strictObject({
      maxUnavailable: MaxUnavailable.default(DEFAULT_MAX_UNAVAILABLE).describe(
        "The replicas a change may take down at once: a count (1), or a percentage of the replicas (25%), rounded up. Hosts change in waves of that size; on Kubernetes it is the Deployments' and PodDisruptionBudgets' setting.",
      ),
      shutdownTimeoutSeconds: z
        .number()
        .int()
        .min(0)
        .max(MAX_SHUTDOWN_TIMEOUT_SECONDS)
        .optional()
        .describe(
          "vLLM's --shutdown-timeout, in seconds: how long a stopping rank lets its in-flight requests finish. Unset, router.requestTimeout, so no request the front door allows is cut.",
        ),
      allowEmptyFrontDoor: z
        .boolean()
        .default(false)
        .describe(
          "Hosts with the front door: let a change take a role's last server out of the front door while it restarts (an outage of that role); without it, such a change is refused.",
        ),
    })
    .default({ maxUnavailable: DEFAULT_MAX_UNAVAILABLE, allowEmptyFrontDoor: false })
    .describe("How a change reaches the replicas: at most maxUnavailable of them down at once."),
});
export type Settings = z.infer<typeof SettingsSchema>;
