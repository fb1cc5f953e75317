import type { StackSettings } from "../config/stackConfig";
import type { CompileSettings, Host } from "../config/schema";
import type { PlanMessage } from "./messages";

/** A choice of what to serve: the input of the resolver. */
export interface Selection {
  model: string;
  strategy: string;
  target: string;
  /** `recommended` starts from the grid's recommended axis values. */
  preset?: "recommended";
  /** Axis → value; axes left out take their defaults. */
  axes?: Readonly<Record<string, string>>;
  /** Package version overrides keyed by the camelCase package name, e.g. `vllmRbln`. */
  versions?: Readonly<Record<string, string>>;
}

/** One recipe flag with its values, in command-line order. */
export interface Flag {
  name: string;
  values: string[];
}

export interface RankPlan {
  rank: number;
  /** `["vllm", "serve", <model>, ...flags]`; placeholders such as `<POD_IP>` are still in it. */
  argv: string[];
  env: Record<string, string>;
  /** TCP ports this rank's HTTP server listens on. */
  ports: number[];
  /** NPU indices on the node that this rank uses. */
  devices: number[];
  /** Placeholder names (`POD_IP`, `EPP_HOST`) the platform must bind before launch. */
  placeholders: string[];
  /** The flags of `argv` after the model, grouped. */
  flags: Flag[];
}

export interface RolePlan {
  role: string;
  /** Index into `nodes`. */
  node: number;
  ranks: RankPlan[];
  /** Short hash of the settings RBLN's compile cache is keyed on, and the package versions (core/plan/compileKey.ts). */
  compileKey: string;
}

export interface NodePlan {
  index: number;
  roles: string[];
  npus: number;
  skus: string[];
}

export interface PackagePlan {
  name: string;
  version: string;
  extras: string[];
  /** The key of `versions` that overrides this package's version. */
  versionKey: string;
  /** pip requirement, e.g. `vllm-rbln[kv_connectors]==0.12.0`. */
  requirement: string;
  extraIndexUrls: string[];
  /** Python module whose import checks the install. */
  importName: string;
}

/** A model the plan serves or drafts with: every one is downloaded before a unit starts (serving runs offline). */
export interface ModelRef {
  id: string;
  /** `model` is served; `draft` is a speculative-decoding draft named in `--speculative-config`. */
  use: "model" | "draft";
  /** The pinned commit, or null: the first download resolves the hub's current commit and records it. */
  revision: string | null;
  /** Roles whose command line names it. */
  roles: string[];
}

export interface LaunchPlan {
  model: string;
  strategy: string;
  target: string;
  preset: "recommended" | null;
  /** The date the recipe was verified on hardware for this strategy and target. */
  verified: string;
  /** Every axis of the grid with its resolved value. */
  selection: Record<string, string>;
  nodes: NodePlan[];
  roles: RolePlan[];
  packages: PackagePlan[];
  /** The model's pinned commit (`revision` setting); null until the first download resolves it. */
  revision: string | null;
  /** The served model and its draft models: what the download steps fetch. */
  models: ModelRef[];
  /** Index URLs that take the package-index credentials. */
  credentialedIndexUrls: string[];
  /** The recipe's router intent, read once from its router block, for strategies that have one. */
  router: RouterIntent | null;
  /** The recipe's example request, against http://localhost:8000. */
  client: string;
  /** For people to read: warnings ask for an action, notes state facts (core/plan/messages.ts). */
  messages: PlanMessage[];
}

/** A recipe's router block as the recipe writes it: shell steps (a values heredoc, a `helm install`). */
export interface RecipeRouterBlock {
  role: string;
  nodes: { node: string; cmd: string }[];
}

/** One endpoint-picker plugin of the recipe: its type, an optional name and its parameters. */
export interface RecipePickerPlugin {
  type: string;
  name?: string;
  parameters?: Record<string, unknown>;
  [key: string]: unknown;
}

/** The recipe's router values heredoc, in the recipe's own keys (not the chart's). */
export interface RecipeRouterValues {
  endpoint_picker: {
    image: string;
    ext_proc_port: number;
    plugins: RecipePickerPlugin[];
    scheduling_profiles: { name: string; plugins: { ref: string; weight?: number }[] }[];
  };
  inference_pool: {
    failure_mode: "FailOpen" | "FailClose";
    match_labels: Record<string, string>;
    target_ports: number[];
  };
}

/** What the recipe's router block means: the chart release, chart, version and values it installs. */
export interface RouterIntent {
  release: string;
  chart: string;
  version: string;
  values: RecipeRouterValues;
}

/** One line of a flag-level plan comparison. */
export interface PlanChange {
  /** `selection`, `settings`, `packages`, `nodes` or `<role> rank <n>`. */
  scope: string;
  kind: "added" | "removed" | "changed" | "unchanged";
  /** A flag (`--port`), `env NAME`, an axis, a package name, or `compileKey` (scope: the role). */
  item: string;
  before?: string;
  after?: string;
  /** On `compileKey` items: whether the role compiles again (core/plan/compileKey.ts). */
  recompile?: boolean;
}

/** One node of one replica, placed on a host (platform hosts only). */
export interface HostPlacement {
  /** The replica of the node's role: roles of the disaggregated strategy count their replicas apart. */
  replica: number;
  node: number;
  host: Host;
}

/** One endpoint the front door routes to: a rank (an aggregated replica's rank 0, each prefill and decode rank). */
export interface FrontDoorEndpoint {
  /** Unique in the endpoints file: `<host>-<role>-<rank>`. */
  name: string;
  /** The host's name. */
  host: string;
  role: string;
  rank: number;
  /** The literal IPv4 address the EPP and Envoy reach it at. */
  address: string;
  /** Where requests go: the rank's port, or its routing sidecar's. */
  port: number;
  /** The rank's own vLLM port, where the front door reads its health. */
  rankPort: number;
  /** `llm-d.ai/role: prefill|decode` for the disaggregated strategy's roles. */
  labels: Record<string, string>;
  /** The data-parallel group it belongs to (`<host>-<role>`, core/plan/dataParallel.ts): its endpoints are listed together or not at all. */
  group?: string;
}

/** One of the front door's router hosts: the EPP, Envoy and the endpoints agent run on each. */
export interface RouterPlacement {
  /** The router host, reached over SSH like the NPU hosts. */
  host: Host;
  /** The entry of `hosts` whose server it shares, or null for a server of its own. */
  sharedWith: string | null;
  /** Where Envoy and the picker's metrics listen: the router host's listenAddress, or all interfaces (always with a virtual address). */
  listenAddress: string;
  /** Where clients (without a virtual address) and the peer router hosts reach it: the listen address when it names one, else the host's address. */
  address: string;
  /** keepalived's VRRP priority: the first router host's is the highest. */
  priority: number;
}

/** The front door on hosts (core/plan/frontDoor.ts): where it runs, its images, and every endpoint behind it. */
export interface FrontDoorPlan {
  /** Its router hosts, in the stack's order: one, or two and more for a front door that survives one. */
  routers: RouterPlacement[];
  /** router.virtualAddress: the address keepalived keeps on one router host whose Envoy is ready; null without. */
  virtualAddress: string | null;
  /** The front door's port: clients send every request there. */
  port: number;
  runtime: "podman" | "docker";
  images: { endpointPicker: string; proxy: string; sidecar: string };
  endpoints: FrontDoorEndpoint[];
  /** The decode hosts' routing sidecars: listening on port..port+N-1, forwarding to modelServerPort..+N-1. */
  sidecars: { host: string; port: number; modelServerPort: number; dataParallelSize: number }[];
}

/** A role's replica limits under KEDA; `target` unset takes the platform's default. */
export interface RoleScaling {
  role: string;
  minReplicas: number;
  maxReplicas: number;
  /** Requests a pod runs at once at most (max_num_seqs per engine, compiled by RBLN). */
  compiledBatch: number;
  /** Waiting requests per replica the scaler keeps to. */
  target?: number;
}

/** Autoscaling as the stack asks for it, checked against the plan's roles. */
export interface AutoscalingPlan {
  /** The Prometheus KEDA queries. */
  prometheusAddress: string;
  scaleToZero: boolean;
  roles: RoleScaling[];
}

/**
 * Compile ahead, off the NPUs (issue 22). With `compile.host` (hosts) or `compile.enabled`
 * (Kubernetes), every compile key of the plan is compiled before any NPU unit or pod of that key
 * changes: on a CPU server, or in a Job with no NPU request, in vllm-rbln's compile-only mode. With
 * `compile.registry`, a key the registry has is pulled instead, and a key compiled here is pushed.
 */
export interface CompileKeyPlan {
  key: string;
  /** The roles that run with it (one per key on the aggregated strategies). */
  roles: string[];
  /** The NPU it is compiled for (RBLN's NPU name). */
  targetSoc: string;
}

export interface CompileAheadPlan {
  /** `host`: compile.host compiles; `job`: a Kubernetes Job per key; `off`: the first wave compiles on its NPUs, as without compile ahead. */
  mode: "off" | "host" | "job";
  keys: CompileKeyPlan[];
  registry: NonNullable<CompileSettings["registry"]> | null;
}

/** Which model deployment of the stack a Deployment is (core/config/models.ts). */
export interface ModelEntryRef {
  /** models[].name; null for a stack without `models`, whose names stay as they were. */
  name: string | null;
  /** The names clients may send in the request's model field. */
  servedNames: string[];
}

/** One model deployment of the stack: its launch plan with the stack's own additions, and where each node runs. */
export interface Deployment {
  /** The settings of a stack of this model alone: the shared keys with the entry's own over them. */
  settings: StackSettings;
  entry: ModelEntryRef;
  plan: LaunchPlan;
  /** hosts[i] runs node (i mod nodes) of replica floor(i / nodes). Empty on Kubernetes. */
  placements: HostPlacement[];
  /** vLLM's --shutdown-timeout on every rank: how long a stopping rank lets its in-flight requests finish. */
  shutdownTimeoutSeconds: number;
  /** Hosts with `router.host`: the front door. */
  frontDoor: FrontDoorPlan | null;
  /** Per role the replica limits KEDA keeps to; null with autoscaling off (fixed replicas). */
  autoscaling: AutoscalingPlan | null;
  /** What compile ahead does (core/plan/compileAhead.ts): the keys, the mode, the registry. */
  compile: CompileAheadPlan;
}
