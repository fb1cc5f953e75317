import * as net from "node:net";
import * as path from "node:path";
import { valid as isPep440Version } from "@renovatebot/pep440";
import { z } from "zod";
import { DEFAULT_MODEL, MAX_JSON_DEPTH } from "../recipe/catalog";
import { ConfigError, formatPath, issueMessage, maskedUrl, maskUrlCredentials } from "../errors";
import { COMMIT_HASH, DEFAULT_MAX_UNAVAILABLE, OFFLINE_ENV, DEFAULT_RESTART_FREE_GIB, DEFAULT_WEIGHTS_STORAGE_GIB } from "./defaults";

/** The project's config namespace: stack keys are `rbln-serving:<key>`. */
export const CONFIG_NAMESPACE = "rbln-serving";

/** Keys that must be set with `pulumi config set --secret`; they never pass through the plain schema. */
export const SECRET_KEYS = ["sshPrivateKey", "hfToken", "pipPassword", "apiKey", "registryPassword"] as const;
export type SecretKey = (typeof SECRET_KEYS)[number];

/** Secrets that reach vLLM as environment variables (EnvironmentFile on hosts, a Secret on Kubernetes). */
export const SECRET_ENV: Readonly<Partial<Record<SecretKey, string>>> = { hfToken: "HF_TOKEN", apiKey: "VLLM_API_KEY" };

/** The environment variables of the secrets that are set (in SECRET_ENV's order), each with `value(key)`. */
export function secretEnvironment<K extends SecretKey, T>(present: readonly K[], value: (key: K) => T): Record<string, T> {
  return Object.fromEntries((Object.keys(SECRET_ENV) as K[]).filter((key) => present.includes(key)).map((key) => [SECRET_ENV[key]!, value(key)]));
}

/** What offline output shows in place of a secret's value. */
export function secretPlaceholder(key: SecretKey): string {
  return `<secret:${key}>`;
}

const dnsLabel = z.string().regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, "a DNS label: 1-63 lower-case letters, digits or '-', not starting or ending with '-'");
const absolutePath = z
  .string()
  .regex(/^\/[A-Za-z0-9._/-]*$/, "an absolute path of letters, digits, '.', '_', '-' and '/'")
  .refine((p) => !p.split("/").includes(".."), "a path without '..'")
  .transform((p) => path.posix.normalize(p).replace(/(.)\/$/, "$1"));

/** Directories the system owns: the scripts chown what they use, and destroy keeps cacheRoot, so neither may be one of these. */
const SYSTEM_DIRECTORIES = ["/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/sbin", "/usr/share", "/var", "/var/cache", "/var/lib", "/var/log", "/var/opt", "/var/run", "/var/spool", "/var/tmp"];
/** Kernel and runtime file systems: nothing there survives a reboot or is meant for files. */
const VIRTUAL_TREES = ["/dev/", "/proc/", "/run/", "/sys/", "/var/run/"];

/** Why a directory may not be an install or cache root, or undefined when it may. */
function systemDirectoryRefusal(dir: string): string | undefined {
  if (SYSTEM_DIRECTORIES.includes(dir)) return `"${dir}" is a system directory; give the project a directory of its own, such as /var/lib/rbln-serving`;
  if (VIRTUAL_TREES.some((tree) => dir.startsWith(tree))) return `"${dir}" is on a kernel or runtime file system; give a directory on disk, such as /var/lib/rbln-serving`;
  return undefined;
}
const within = (inner: string, outer: string) => inner === outer || inner.startsWith(outer === "/" ? "/" : `${outer}/`);
const port = z.number().int().min(1).max(65535);

/**
 * How many replicas may be down at once during a change: a count, or a percentage of the replicas
 * rounded up. Both platforms share it: host waves and Deployment/PodDisruptionBudget settings.
 */
export const MaxUnavailable = z.union([
  z.number().int().min(1),
  z.string().regex(/^([1-9][0-9]?|100)%$/, "a count such as 1 or a percentage such as 25% (1%-100%)"),
]);
export type MaxUnavailable = z.infer<typeof MaxUnavailable>;

/** A server's public host key as `ssh-keyscan` prints it, without the host name: `ssh-ed25519 AAAA...`. */
const hostKey = z
  .string()
  .regex(
    // The comment goes into known_hosts files, scripts and logs: printable text only.
    /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) AAAA[A-Za-z0-9+/]+={0,3}( [^\p{Cc}]*)?$/u,
    "a public host key line such as \"ssh-ed25519 AAAAC3...\" (ssh-keyscan's output without the host name), then an optional comment without control characters",
  );
/** A host name, an IPv4 address, or an IPv6 address (`::1`, `fd00::5`). */
const address = z
  .string()
  .max(253)
  .refine((value) => /^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(value) || net.isIPv6(value), "a host name or IP address");

/** One spelling per address, as a URL writes it: host names in lower case, IPv6 in its compressed form. */
export function normalAddress(address: string): string {
  const host = net.isIPv6(address) ? `[${address}]` : address;
  return URL.canParse(`http://${host}`) ? new URL(`http://${host}`).hostname : address.toLowerCase();
}

/** Where a host's ranks serve: its listenAddress, unless that is every interface (then its address). */
export function servingAddress(host: Pick<Host, "address" | "listenAddress">): string {
  const listen = host.listenAddress === undefined ? undefined : normalAddress(host.listenAddress);
  return listen === undefined || listen === "0.0.0.0" || listen === "[::]" ? normalAddress(host.address) : listen;
}
const posixUser = z.string().regex(/^[a-z_][a-z0-9_-]{0,31}$/, "a POSIX user name");

/** A bastion (jump host) the SSH connection goes through; it gets the same private key. */
const SshProxy = z.strictObject({
  address,
  user: posixUser.default("root"),
  port: port.default(22),
  hostKey: hostKey.optional(),
});
export type SshProxy = z.infer<typeof SshProxy>;

export const Host = z.strictObject({
  name: dnsLabel,
  address,
  user: posixUser.default("root"),
  port: port.default(22),
  /** The address vLLM listens on (`--host`); all interfaces when unset. */
  listenAddress: z.union([z.ipv4(), z.ipv6()], { error: "an IPv4 or IPv6 address" }).optional(),
  /** The server's public SSH host key; the connection refuses any other server. */
  hostKey: hostKey.optional(),
  /** A bastion for this host; overrides the stack-wide `sshProxy`. */
  proxy: SshProxy.optional(),
});
export type Host = z.infer<typeof Host>;

/** An http(s) index URL without credentials, which would sit in the stack file in plain text; a refusal shows it masked. */
const indexUrl = z.string().superRefine((value, ctx) => {
  const parsed = URL.canParse(value) && !/[\s\p{Cc}]/u.test(value) ? new URL(value) : undefined;
  if (parsed === undefined || !["http:", "https:"].includes(parsed.protocol)) {
    ctx.addIssue({ code: "custom", message: `an http:// or https:// URL such as https://mirror.example.com/simple (got ${JSON.stringify(maskedUrl(value))})`, params: { hideValue: true } });
  } else if (parsed.username !== "" || parsed.password !== "") {
    ctx.addIssue({ code: "custom", message: "a URL without user:password@; give the user as pip.username and the password as the pipPassword secret (pulumi config set --secret pipPassword)", params: { hideValue: true } });
  }
});

/** A user name for an index's or registry's basic auth; a refusal masks what follows a ':', most likely the password typed with it. */
const userName = (pattern: RegExp, wanted: string) =>
  z.string().superRefine((value, ctx) => {
    if (!pattern.test(value)) ctx.addIssue({ code: "custom", message: `${wanted} (got ${JSON.stringify(value.replace(/:.*/s, ":***"))})`, params: { hideValue: true } });
  });

const Pip = z.strictObject({
  /** Replaces PyPI, e.g. a mirror for air-gapped sites. */
  indexUrl: indexUrl.optional(),
  /** Replaces the recipe's extra index URLs when set. */
  extraIndexUrls: z.array(indexUrl).optional(),
  /** The user name for the index's basic auth; the password is the `pipPassword` secret. */
  username: userName(/^[^\s:@/]+$/, "a user name without spaces, ':', '@' or '/'").optional(),
});

const labelKey = z.string().regex(/^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/, "a Kubernetes label key");
const labelValue = z.string().regex(/^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$/, "a Kubernetes label value");

const roleName = z.string().regex(/^[a-z][a-z0-9-]*$/, "a role name such as main, prefill or decode");
const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$/;
/** Zero reserves nothing: a container without a real request makes its pod BestEffort, the first evicted. */
const notZero = (quantity: string) => !QUANTITY.test(quantity) || quantityValue(quantity) > 0;
const quantity = z.string().regex(QUANTITY, "a Kubernetes quantity such as 8, 500m or 64Gi").refine(notZero, "more than 0 (a zero request reserves nothing)");
const volumeSize = (example: string) => z.string().regex(/^[0-9]+(Ki|Mi|Gi|Ti)$/, `a quantity such as ${example}`).refine(notZero, "more than 0");
const dnsSubdomain = z.string().regex(/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/, "a DNS subdomain name: lower-case letters, digits, '-' and '.'");
const QUANTITY_SUFFIX: Record<string, number> = { "": 1, m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
/** A quantity's value (cores or bytes), to compare requests with limits. */
export function quantityValue(quantity: string): number {
  const [, number, suffix] = /^([0-9.]+)(.*)$/.exec(quantity)!;
  return Number(number) * QUANTITY_SUFFIX[suffix!]!;
}
const ResourceList = z.strictObject({ cpu: quantity.optional(), memory: quantity.optional() });
const ContainerResources = z
  .strictObject({ requests: ResourceList.optional(), limits: ResourceList.optional() })
  .superRefine((r, ctx) => {
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
const unixId = z.number().int().min(0).max(2147483647);
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

/**
 * An image reference in the grammar of the OCI distribution reference (distribution/reference's
 * regexp.go): an optional registry host[:port] (a DNS name, or an IPv6 address in brackets), name
 * components of lower-case letters and digits joined by '.', '_', '__' or dashes, an optional tag
 * and an optional digest; the name at most 255 characters.
 */
const IMAGE_REFERENCE = (() => {
  const component = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
  const domainLabel = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
  const registry = `(?:${domainLabel}(?:\\.${domainLabel})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
  const tag = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}";
  const digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
  return new RegExp(`^(?<name>(?:${registry}/)?${component}(?:/${component})*)(?::${tag})?(?:@${digest})?$`);
})();
// Longer than any reference can be (a 255-character name, a tag, a long digest), checked before the pattern runs.
const MAX_IMAGE_REFERENCE = 1024;
const imageReference = z.string().superRefine((value, ctx) => {
  if (value.length <= MAX_IMAGE_REFERENCE && (IMAGE_REFERENCE.exec(value)?.groups?.["name"]?.length ?? Infinity) <= 255) return;
  // `user:password@registry/...` is no reference; a refusal does not repeat the password.
  const shown = value.replace(/^[^/@]*:[^/@]*@/, "***@").slice(0, 80);
  ctx.addIssue({ code: "custom", message: `an image reference such as registry.example.com/vllm-rbln:0.12.0 ([registry[:port]/]name[:tag][@digest], the name in lower case) (got ${JSON.stringify(shown)})`, params: { hideValue: true } });
});

const Kubernetes = z.strictObject({
  namespace: dnsLabel
    .refine((namespace) => !isClusterNamespace(namespace), "a namespace of the deployment's own, such as rbln-serving: default and kube-* belong to the cluster, and the package labels its namespace with Pod Security levels")
    .default("rbln-serving"),
  /** A vllm-rbln image built from this project's Dockerfile; there is no public one. */
  image: imageReference.optional(),
  npuResource: z.string().regex(/^[a-z0-9.-]+\/[A-Za-z0-9._-]+$/, "an extended resource name such as rebellions.ai/npu").default("rebellions.ai/npu"),
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

/** A server of the front door on hosts: no NPU needed, podman or docker. */
export const RouterHost = z.strictObject({
  name: dnsLabel,
  address,
  user: posixUser.default("root"),
  port: port.default(22),
  hostKey: hostKey.optional(),
  proxy: SshProxy.optional(),
  /** The address the front door listens on (Envoy, the picker's metrics); all interfaces when unset. */
  listenAddress: z.union([z.ipv4(), z.ipv6()], { error: "an IPv4 or IPv6 address" }).optional(),
});
export type RouterHost = z.infer<typeof RouterHost>;

const Router = z.strictObject({
  /** How long a request may run: the HTTPRoute's (Kubernetes) or Envoy's route timeout (hosts). The chart's own default, 300s, cuts long generations. */
  requestTimeout: z.string().regex(/^([0-9]{1,5}(h|m|s|ms)){1,4}$/, "a Gateway API duration such as 1h, 90m or 3600s").default("1h"),
  /** The endpoint picker's container resources (the chart's router.epp.resources); unset keeps the chart's. */
  pickerResources: ContainerResources.optional(),
  /** Hosts: where the front door (the llm-d endpoint picker and Envoy) runs: a server of its own, or the name of an entry of `hosts` to share it. */
  host: z.union([dnsLabel, RouterHost], { error: "a host {name, address, user, port, hostKey, proxy}, or the name of an entry of hosts" }).optional(),
  /** Hosts: the container runtime the front door and the routing sidecars run under. */
  runtime: z.enum(["podman", "docker"]).default("podman"),
  /** Hosts: the images of the front door and the sidecars, for a mirror or an air-gapped site; unset, the pinned defaults. */
  images: z.strictObject({ endpointPicker: imageReference.optional(), proxy: imageReference.optional(), sidecar: imageReference.optional() }).default({}),
  /** Hosts: the front door's port. */
  port: port.default(8080),
});

const replicaLimit = z.number().int().min(0).max(1024);
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
    .refine((url) => !URL.canParse(url) || (new URL(url).username === "" && new URL(url).password === ""), { message: "a URL without user:password@: the stack file and the ScaledObject would hold the password in plain text; give KEDA its credentials through a TriggerAuthentication of your own", params: { hideValue: true } })
    .optional(),
  roles: z.record(roleName, AutoscalingRole).default({}),
});
export type Autoscaling = z.infer<typeof Autoscaling>;
/** A compiled-cache registry's repository: `host[:port]/path`, no scheme, no tag (the tags are the compile keys). */
const ociRepository = z
  .string()
  .regex(/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(\/[a-z0-9]+([._-][a-z0-9]+)*)+$/, "an OCI repository such as registry.example.com/ml/rbln-compile-cache: host[:port]/path, no scheme, no tag")
  .refine((repository) => {
    const port = Number(/^[^/:]+:(\d+)\//.exec(repository)?.[1] ?? 443);
    return port >= 1 && port <= 65535;
  }, "a registry port from 1 to 65535");

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

/**
 * Flags and variables that define the topology; `extraArgs`/`extraEnv` may not touch them. The
 * list follows vLLM's own parser (vllm/engine/arg_utils.py, vllm/entrypoints/cli/serve.py):
 * parallelism, ranks, addresses, ports, connectors, and `--config`, which reads any flag from a file.
 */
export const TOPOLOGY_FLAGS = [
  "--data-parallel-rank",
  "--data-parallel-size",
  "--data-parallel-size-local",
  "--data-parallel-address",
  "--data-parallel-rpc-port",
  "--data-parallel-start-rank",
  "--data-parallel-backend",
  "--data-parallel-hybrid-lb",
  "--data-parallel-external-lb",
  "--data-parallel-multi-port-external-lb",
  "--pipeline-parallel-size",
  "--tensor-parallel-size",
  "--decode-context-parallel-size",
  "--prefill-context-parallel-size",
  "--distributed-executor-backend",
  "--enable-expert-parallel",
  "--api-server-count",
  "--headless",
  "--nnodes",
  "--node-rank",
  "--port",
  "--host",
  "--uds",
  "--kv-transfer-config",
  "--kv-events-config",
  "--api-key",
  "--config",
] as const;

/** vLLM's short aliases of long flags (argparse multi-character single-dash options). */
export const VLLM_SHORT_ALIASES: Readonly<Record<string, string>> = {
  "-pp": "--pipeline-parallel-size",
  "-tp": "--tensor-parallel-size",
  "-dcp": "--decode-context-parallel-size",
  "-pcp": "--prefill-context-parallel-size",
  "-dp": "--data-parallel-size",
  "-dpn": "--data-parallel-rank",
  "-dpr": "--data-parallel-start-rank",
  "-dpl": "--data-parallel-size-local",
  "-dpa": "--data-parallel-address",
  "-dpp": "--data-parallel-rpc-port",
  "-dpb": "--data-parallel-backend",
  "-dph": "--data-parallel-hybrid-lb",
  "-dpe": "--data-parallel-external-lb",
  "-dpm": "--data-parallel-multi-port-external-lb",
  "-ep": "--enable-expert-parallel",
  "-asc": "--api-server-count",
  "-n": "--nnodes",
  "-r": "--node-rank",
  "-cc": "--compilation-config",
  "-ac": "--attention-config",
};

export const TOPOLOGY_ENVS = ["RBLN_VISIBLE_DEVICES", "RBLN_DEVICES", "VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_API_KEY", "HF_TOKEN"] as const;

/**
 * The variables the package itself sets for vLLM on either platform (hosts: the env file;
 * Kubernetes: the container's env), each with what it is for. extraEnv may not set them: on hosts
 * the package's value would win, on Kubernetes the stack's, and `plan` could show neither.
 */
export const PACKAGE_ENV: Readonly<Record<string, string>> = {
  HF_HOME: "the weights cache",
  VLLM_CACHE_ROOT: "the compiled graphs",
  RBLN_OFFLOAD_DIR: "the offload folder",
  ...Object.fromEntries(Object.keys(OFFLINE_ENV).map((name) => [name, "the ranks load the cached weights and never reach the hub"])),
  HOME: "a writable scratch folder on Kubernetes",
  POD_IP: "the pod's address on Kubernetes",
};

/** Variable names that hold credentials (`HUGGING_FACE_HUB_TOKEN`, `*_PASSWORD`, `*_SECRET*`, `AWS_SECRET_ACCESS_KEY`, ...). */
const CREDENTIAL_NAME = /(^|_)(TOKEN|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)(_|$)|(^|_)SECRET/i;

/** Why a credential variable may not be set in plain text, and the secret that carries it instead. */
function credentialRefusal(name: string): string {
  const secret = /HF|HUGGING/i.test(name) ? "hfToken" : /API_?KEY/i.test(name) ? "apiKey" : /PIP|PYPI|INDEX/i.test(name) ? "pipPassword" : undefined;
  const instead = secret
    ? `set the ${secret} secret instead: pulumi config set --secret ${secret}`
    : `the project's secrets are ${SECRET_KEYS.filter((k) => k !== "sshPrivateKey").join(", ")} (pulumi config set --secret); keep other credentials in the host's or cluster's own secret store`;
  return `holds a credential, which would sit in the stack config in plain text; ${instead}`;
}

/**
 * Names bash keeps read-only or gives a meaning of its own (assignments fail, are ignored, or run
 * code, as BASH_ENV does): the unit step reads env files with bash, after the unit has restarted.
 */
const BASH_SPECIAL_NAMES = new Set(["UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "GROUPS", "FUNCNAME", "HISTCMD", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "EPOCHSECONDS", "EPOCHREALTIME", "DIRSTACK", "PIPESTATUS", "OPTIND", "OPTARG", "OPTERR", "IFS", "PS4", "CDPATH", "GLOBIGNORE", "ENV", "POSIXLY_CORRECT", "SHELL", "_"]);
const isBashSpecial = (name: string) => BASH_SPECIAL_NAMES.has(name) || name.startsWith("BASH_") || name === "BASH";

/** What an environment value may hold so every platform can carry it: no control characters but newline and tab. */
export function isPortableEnvValue(value: string): boolean {
  return !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(value);
}

/** The longest version a stack may pin: the venv's folder name joins every package's name and version, and a name is at most 255 bytes. */
const MAX_VERSION_LENGTH = 64;
/** A version pip reads as one exact version (PEP 440), short enough for the venv's name. */
export function isPackageVersion(version: string): boolean {
  return version.length <= MAX_VERSION_LENGTH && isPep440Version(version) !== null;
}
const packageVersion = z.string().refine(isPackageVersion, `a PEP 440 version such as 0.12.1 or 0.13.0rc1, at most ${MAX_VERSION_LENGTH} characters`);

const extraArgs = z.record(roleName, z.array(z.string().max(4096).refine((word) => !word.includes("\0"), "a word without NUL bytes")));
const extraEnv = z.record(
  roleName,
  z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name"), z.string().max(65536).refine(isPortableEnvValue, "a value without control characters other than newline and tab")),
);

export const StackSettings = z
  .strictObject({
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
    monitoring: z.strictObject({ enabled: z.boolean().default(false), namespace: dnsLabel.default("monitoring") }).default({ enabled: false, namespace: "monitoring" }),
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
  })
  .superRefine((s, ctx) => {
    // One SSH server is one host: the address as normalAddress spells it, with the port.
    const seen = new Map<string, { index: number; shown: string }>();
    s.hosts.forEach((host, i) => {
      const sshAddress = `${net.isIPv6(host.address) ? `[${host.address}]` : host.address}:${host.port}`;
      for (const [field, key, shown] of [["name", host.name, host.name], ["address", `${normalAddress(host.address)} ${host.port}`, sshAddress]] as const) {
        const earlier = seen.get(`${field}=${key}`);
        if (earlier) ctx.addIssue({ code: "custom", path: ["hosts", i, field], message: `duplicate of hosts[${earlier.index}].${field} "${earlier.shown}"${field === "address" ? " (the same SSH server: host names compare without case, IPv6 addresses in one form)" : ""}` });
        else seen.set(`${field}=${key}`, { index: i, shown });
      }
    });
    const compileHost = s.compile.host;
    if (compileHost) {
      for (const [field, key] of [["name", compileHost.name], ["address", `${normalAddress(compileHost.address)} ${compileHost.port}`]] as const) {
        const host = seen.get(`${field}=${key}`);
        if (host) ctx.addIssue({ code: "custom", path: ["compile", "host", field], message: `the compile host must be a server of its own, but hosts[${host.index}].${field} is "${host.shown}" too`, params: { hideValue: true } });
      }
    }
    // A key must name one compiled cache everywhere: an unpinned model resolves whatever the hub has then, and a tag moves.
    if (s.compile.registry && s.revision === undefined) {
      ctx.addIssue({ code: "custom", path: ["revision"], message: "required with compile.registry: the compile key names the model's commit, so every stack that pulls a key serves the weights it was compiled for" });
    }
    if (s.compile.registry && s.platform === "kubernetes" && s.kubernetes.image && !/@sha256:[0-9a-f]{64}$/.test(s.kubernetes.image)) {
      ctx.addIssue({ code: "custom", path: ["kubernetes", "image"], message: `with compile.registry, an image pinned by digest (name@sha256:<64 hex>): the compile key covers the image, and a tag can move (got ${JSON.stringify(s.kubernetes.image)})`, params: { hideValue: true } });
    }
    if (s.platform === "kubernetes" && !s.kubernetes.image) {
      ctx.addIssue({ code: "custom", path: ["kubernetes", "image"], message: "required with platform: kubernetes (build it from the project's Dockerfile)" });
    }
    // The package creates its namespace and labels it with Pod Security levels: never one Prometheus already lives in.
    if (s.platform === "kubernetes" && s.monitoring.enabled && s.kubernetes.namespace === s.monitoring.namespace) {
      ctx.addIssue({ code: "custom", path: ["kubernetes", "namespace"], message: `"${s.kubernetes.namespace}" is monitoring.namespace too, where Prometheus runs; the package creates its namespace and labels it with Pod Security levels: give the deployment a namespace of its own`, params: { hideValue: true } });
    }
    if (s.platform === "hosts" && s.hosts.length === 0) {
      ctx.addIssue({ code: "custom", path: ["hosts"], message: "required with platform: hosts: a list of {name, address, user, port, hostKey}" });
    }
    for (const [role, variables] of Object.entries(s.extraEnv)) {
      for (const name of Object.keys(variables)) {
        if (Object.hasOwn(PACKAGE_ENV, name)) ctx.addIssue({ code: "custom", path: ["extraEnv", role, name], message: `the package sets it (${PACKAGE_ENV[name]}); choose another name` });
        else if (isBashSpecial(name)) ctx.addIssue({ code: "custom", path: ["extraEnv", role, name], message: "a name bash keeps read-only or special, and the hosts' env files are read by bash; choose another name" });
        else if (CREDENTIAL_NAME.test(name)) ctx.addIssue({ code: "custom", path: ["extraEnv", role, name], message: credentialRefusal(name), params: { hideValue: true } });
      }
    }
    for (const key of ["installRoot", "cacheRoot"] as const) {
      const refusal = systemDirectoryRefusal(s[key]);
      if (refusal) ctx.addIssue({ code: "custom", path: [key], message: refusal, params: { hideValue: true } });
    }
    if (s.cache.shared !== undefined) {
      const shared = s.cache.shared;
      const refusal = systemDirectoryRefusal(shared);
      const overlaps = (["installRoot", "cacheRoot"] as const).find((key) => within(shared, s[key]) || within(s[key], shared));
      if (refusal) ctx.addIssue({ code: "custom", path: ["cache", "shared"], message: refusal.replace("such as /var/lib/rbln-serving", "such as /mnt/rbln-cache, where the shared filesystem is mounted"), params: { hideValue: true } });
      else if (overlaps) ctx.addIssue({ code: "custom", path: ["cache", "shared"], message: `"${shared}" overlaps ${overlaps} "${s[overlaps]}"; the shared cache must be a folder of its own, apart from the hosts' local roots`, params: { hideValue: true } });
    }
    if (within(s.cacheRoot, s.installRoot) || within(s.installRoot, s.cacheRoot)) {
      const relation = s.cacheRoot === s.installRoot ? "the same directory as" : within(s.cacheRoot, s.installRoot) ? "inside" : "around";
      ctx.addIssue({ code: "custom", path: ["cacheRoot"], message: `"${s.cacheRoot}" is ${relation} installRoot "${s.installRoot}"; the two must be separate directories (cacheRoot outlives installs and destroy)`, params: { hideValue: true } });
    }
    if (typeof s.router.host === "string" && s.platform === "hosts" && !s.hosts.some((host) => host.name === s.router.host)) {
      ctx.addIssue({ code: "custom", path: ["router", "host"], message: `names no entry of hosts; allowed: ${s.hosts.map((h) => JSON.stringify(h.name)).join(", ") || "(none)"}, or a host {name, address, user, port, hostKey}` });
    }
    const routerHost = s.router.host;
    if (typeof routerHost === "object" && s.hosts.some((host) => host.name === routerHost.name)) {
      ctx.addIssue({ code: "custom", path: ["router", "host", "name"], message: `"${routerHost.name}" is the name of an entry of hosts; to share that server give its name alone (router.host: ${routerHost.name}), else another name` });
    }
    if (s.platform === "hosts" && !s.insecureSkipHostKeyCheck) {
      const unchecked = [
        ...s.hosts.flatMap((host, i) => [...(host.hostKey ? [] : [["hosts", i, "hostKey"]]), ...(host.proxy && !host.proxy.hostKey ? [["hosts", i, "proxy", "hostKey"]] : [])]),
        ...(s.sshProxy && !s.sshProxy.hostKey ? [["sshProxy", "hostKey"]] : []),
        ...(typeof s.router.host === "object" ? [...(s.router.host.hostKey ? [] : [["router", "host", "hostKey"]]), ...(s.router.host.proxy && !s.router.host.proxy.hostKey ? [["router", "host", "proxy", "hostKey"]] : [])] : []),
        ...(s.compile.host && !s.compile.host.hostKey ? [["compile", "host", "hostKey"]] : []),
        ...(s.compile.host?.proxy && !s.compile.host.proxy.hostKey ? [["compile", "host", "proxy", "hostKey"]] : []),
      ];
      for (const path of unchecked) {
        ctx.addIssue({ code: "custom", path, message: `required: the server's public SSH host key, read with ssh-keyscan and checked out of band (or set insecureSkipHostKeyCheck: true to connect to whatever answers)` });
      }
    }
  });
export type StackSettings = z.infer<typeof StackSettings>;

/**
 * Warnings for config keys under another namespace that the project would have read under its
 * own (`rbln_serving:strategy`, `rbln:hosts`): Pulumi keeps them, and nothing reads them.
 */
export function foreignKeyWarnings(fullKeys: readonly string[]): string[] {
  const ours = new Set<string>([...Object.keys(StackSettings.shape), ...SECRET_KEYS]);
  return fullKeys.flatMap((fullKey) => {
    const colon = fullKey.indexOf(":");
    if (colon < 0) return [];
    const [namespace, key] = [fullKey.slice(0, colon), fullKey.slice(colon + 1)];
    if (namespace === CONFIG_NAMESPACE) return [];
    const lookalike = namespace.toLowerCase().replace(/[_.\s]/g, "-") === CONFIG_NAMESPACE;
    if (!lookalike && !ours.has(key)) return [];
    return [`${fullKey}: not read: the project reads keys under "${CONFIG_NAMESPACE}:" only; did you mean ${CONFIG_NAMESPACE}:${key}?`];
  });
}

/** Settings that only one platform reads: on the other they do nothing. */
export const PLATFORM_ONLY_KEYS: Readonly<Record<StackSettings["platform"], readonly (keyof StackSettings)[]>> = {
  hosts: ["hosts", "sshProxy", "insecureSkipHostKeyCheck", "pip", "versions", "installRoot", "cacheRoot", "minFreeDiskGb", "minFreeDiskGbToRestart", "cache"],
  kubernetes: ["kubernetes", "autoscaling"],
};

/** The keys the chosen platform ignores. */
export function otherPlatformKeys(platform: StackSettings["platform"]): readonly string[] {
  return platform === "hosts" ? PLATFORM_ONLY_KEYS.kubernetes : PLATFORM_ONLY_KEYS.hosts;
}

/** The keys the object schema at `at` (a config path such as `["hosts", 0, "proxy"]`) takes, through zod's wrappers. */
function objectKeysAt(schema: z.ZodType, at: readonly PropertyKey[]): string[] {
  let current: z.core.$ZodType | undefined = schema;
  let rest = [...at];
  while (current) {
    const def = current._zod.def as unknown as Record<string, unknown> & { type: string };
    if (def.type === "pipe") current = def.out as z.core.$ZodType;
    else if (def.type === "default" || def.type === "optional" || def.type === "nullable") current = def.innerType as z.core.$ZodType;
    else if (def.type === "array" && typeof rest[0] === "number") [current, rest] = [def.element as z.core.$ZodType, rest.slice(1)];
    else if (def.type === "record" && rest.length > 0) [current, rest] = [def.valueType as z.core.$ZodType, rest.slice(1)];
    else if (def.type === "object" && rest.length > 0) [current, rest] = [(def.shape as Record<string, z.core.$ZodType>)[String(rest[0])], rest.slice(1)];
    else if (def.type === "object") return Object.keys(def.shape as object);
    else return [];
  }
  return [];
}

/** pip's strings are index URLs, which may carry a user and password even without a scheme. */
function maskUrls(value: unknown): unknown {
  if (typeof value === "string") return maskedUrl(value);
  if (Array.isArray(value)) return value.map(maskUrls);
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, maskUrls(inner)]));
  return value;
}

function describeIssue(issue: z.core.$ZodIssue, raw: Record<string, unknown>): ConfigError {
  if (issue.code === "unrecognized_keys") {
    const at = formatPath(issue.path);
    const allowed = at ? `; allowed: ${objectKeysAt(StackSettings, issue.path).join(", ")}` : `; allowed: ${Object.keys(StackSettings.shape).join(", ")} and the secrets ${SECRET_KEYS.join(", ")}`;
    return new ConfigError(at ? `${at}.${issue.keys[0]}` : issue.keys[0]!, `unknown key${allowed}`);
  }
  const at = formatPath(issue.path) || "(config)";
  let value: unknown = raw;
  for (const part of issue.path) value = value !== null && typeof value === "object" && Object.hasOwn(value, part) ? (value as Record<PropertyKey, unknown>)[part] : undefined;
  // A refused credential is not repeated in the error, which ends up in terminals and CI logs; other
  // messages with this mark name the value themselves.
  if (issue.code === "custom" && issue.params?.["hideValue"]) return new ConfigError(at, issueMessage(issue));
  const text = JSON.stringify(issue.path[0] === "pip" ? maskUrls(value) : value);
  // Masked before it is cut, so no cut hides the `@` that marks a password.
  const shown = value === undefined ? "missing" : `got ${maskUrlCredentials(text).slice(0, 80)}`;
  return new ConfigError(at, `${issueMessage(issue)} (${shown})`);
}

/**
 * Refuses `__proto__` keys at any depth: JSON and YAML make them ordinary keys, but an object
 * built from them (zod's records, a spread) would take them as its prototype, or drop them. Also
 * refuses nesting deeper than any setting goes (as in a recipe), before anything recurses through it.
 */
function refusePrototypeKeys(value: unknown, path: PropertyKey[] = []): void {
  if (value === null || typeof value !== "object") return;
  if (path.length >= MAX_JSON_DEPTH) throw new ConfigError(String(path[0]), `nested more than ${MAX_JSON_DEPTH} levels deep; allowed: at most ${MAX_JSON_DEPTH} levels of maps and lists`);
  if (Object.hasOwn(value, "__proto__")) throw new ConfigError(formatPath([...path, "__proto__"]), "not a key any setting takes (JavaScript reads it as an object's prototype)");
  for (const [key, inner] of Object.entries(value)) refusePrototypeKeys(inner, [...path, Array.isArray(value) ? Number(key) : key]);
}

/**
 * Validates the project's stack config (keys without the `rbln-serving:` prefix). Secret keys are
 * taken out first: they are read as secrets by the program and never validated as plain text.
 * Throws one ConfigError naming the key path, the value and what is allowed.
 */
export function parseStackSettings(raw: Record<string, unknown>): StackSettings {
  const plain = Object.fromEntries(Object.entries(raw).filter(([key]) => !(SECRET_KEYS as readonly string[]).includes(key)));
  refusePrototypeKeys(plain);
  const result = StackSettings.safeParse(plain);
  if (!result.success) throw describeIssue(result.error.issues[0]!, plain);
  return result.data;
}

/**
 * Refuses two hosts whose ranks would serve on one address and port (servingAddress): their rank
 * URLs would be one, and the second rank could not bind. `ports[i]` are hosts[i]'s rank ports.
 */
export function checkServingAddresses(hosts: readonly Host[], ports: readonly (readonly number[])[]): void {
  const claimed = new Map<string, number>();
  hosts.forEach((host, i) => {
    const address = servingAddress(host);
    const field = host.listenAddress !== undefined && normalAddress(host.listenAddress) === address ? "listenAddress" : "address";
    for (const port of ports[i] ?? []) {
      const earlier = claimed.get(`${address} ${port}`);
      if (earlier !== undefined) {
        throw new ConfigError(`hosts[${i}].${field}`, `"${host[field]}" would serve port ${port} on ${address}, as hosts[${earlier}] does; give each host an address of its own (host names compare without case, IPv6 addresses in one form)`);
      }
      claimed.set(`${address} ${port}`, i);
    }
  });
}
