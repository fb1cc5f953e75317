import { createHash } from "node:crypto";
import { compileLock } from "./compileLock";
import { waitForWeights } from "./weights";
import { engineReadyTimeoutSeconds } from "../../plan/argv";
import { ROLE_LABEL, servingPorts, sidecarImage } from "../../plan/frontDoor";
import { roleReplicas } from "../../plan/replicas";
import type { Deployment, RolePlan, RoleScaling, RouterIntent } from "../../plan/types";
import { unavailableCount } from "../../rollout/waves";
import { routingSidecar, vllmContainer } from "./containers";
import { eppPodLabels } from "./chartValues";
import { KUBERNETES_DEFAULTS } from "./defaults";
import { launchScript } from "./launch";
import type * as k8s from "./objects";
import { mergeResources, placement, podAccount, podSecurity } from "./pod";
import { podDisruptionBudget, roleNetworkPolicy } from "./policies";

/** The pod label naming the role's compile key: the scaler's queries tell pods of the current key apart by it. */
export const COMPILE_KEY_LABEL = "rbln-serving.io/compile-key";

export interface RoleWorkload {
  role: string;
  /** The replicas the Deployment sets; with autoscaling, KEDA's minimum (the Deployment sets none). */
  replicas: number;
  /** KEDA's limits for the role; null with fixed replicas. */
  scaling: RoleScaling | null;
  /** Pods of the role that may be down at once: in a rollout (maxSurge 0) and in a drain. */
  maxUnavailable: number;
  /** How long a rollout may take: every wave's drain of its old pods and startup budget (compilation, download), and a margin. */
  rolloutTimeoutSeconds: number;
  /** The vLLM processes in each pod of the role. */
  ranks: { rank: number; port: number; devices: number[] }[];
  launchScript: string;
  configMap: k8s.Named<k8s.ConfigMap>;
  deployment: k8s.Named<k8s.Deployment>;
  service: k8s.Named<k8s.Service> | null;
  podDisruptionBudget: k8s.Named<k8s.PodDisruptionBudget>;
  networkPolicy: k8s.Named<k8s.NetworkPolicy>;
  /** The compile-cache volume of the role. */
  compileCache: k8s.Named<k8s.PersistentVolumeClaim>;
  ports: number[];
}

/** What every role's objects share: names, labels, the service account, the weights, the secrets. */
export interface RoleContext {
  deployment: Deployment;
  instance: string;
  namespace: string;
  baseLabels: Record<string, string>;
  router: RouterIntent | null;
  eppHost: string | null;
  serviceAccountName: string;
  weightsClaim: string;
  hfHome: string;
  imagePullSecrets: Pick<k8s.PodSpec, "imagePullSecrets">;
  /** Environment variables read from the stack's Secret. */
  secretEnv: NonNullable<k8s.Container["env"]>;
  apiKey: boolean;
  /** A ReadWriteMany claim of the stack's storage class. */
  claim: (name: string, labels: Record<string, string>, size: string) => k8s.Named<k8s.PersistentVolumeClaim>;
}

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 10);
}

/** Where a role's pods (and its compile Job) keep what vLLM writes: the compiled graphs on the role's volume, offload files in the pod. */
export const ROLE_DIRS = { compileCache: `${KUBERNETES_DEFAULTS.paths.dataRoot}/vllm`, offload: `${KUBERNETES_DEFAULTS.paths.dataRoot}/offload` } as const;

/**
 * The environment vLLM runs with in a role's pods, and so in its compile Job: the compiled bundle's
 * signature hashes environment variables (vllm-rbln's RBLN_COMPILE_ENV, earlier vLLM's
 * compile_factors(): test/fixtures/vllm-rbln-cache-signature.json), so a Job that compiled under
 * another environment would fill a cache the pods do not read.
 */
export function roleEnvironment(context: RoleContext): NonNullable<k8s.Container["env"]> {
  return [
    { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    { name: "HOME", value: KUBERNETES_DEFAULTS.paths.scratchDir },
    { name: "HF_HOME", value: context.hfHome },
    { name: "VLLM_CACHE_ROOT", value: ROLE_DIRS.compileCache },
    { name: "RBLN_OFFLOAD_DIR", value: ROLE_DIRS.offload },
    ...context.secretEnv,
  ];
}

/** The volumes a role's pods and its compile Job both mount: the launch ConfigMap, the weights, the role's compile cache, and scratch space. */
export function roleVolumes(context: RoleContext, launchConfigMap: string, compileCacheClaim: string): NonNullable<k8s.PodSpec["volumes"]> {
  return [
    { name: "launch", configMap: { name: launchConfigMap, defaultMode: 0o555 } },
    { name: "weights", persistentVolumeClaim: { claimName: context.weightsClaim } },
    { name: "compile-cache", persistentVolumeClaim: { claimName: compileCacheClaim } },
    { name: "offload", emptyDir: {} },
    { name: "scratch", emptyDir: {} },
  ];
}

/** The role's launch script and compile lock, in a ConfigMap named after its content: a changed command is a new ConfigMap, and the Deployment rolls to it. */
function launchConfigMap(context: RoleContext, role: RolePlan, labels: Record<string, string>) {
  const { paths } = KUBERNETES_DEFAULTS;
  const script = launchScript(role, context.deployment.plan.model, context.eppHost);
  const rankPorts = role.ranks.flatMap((r) => r.ports);
  // Replicas starting together share the compile cache: one compiles per compile key, the rest load.
  const lock = compileLock(role.compileKey, ROLE_DIRS.compileCache, rankPorts, paths.launchDir, KUBERNETES_DEFAULTS.compileLock);
  const configMap: k8s.Named<k8s.ConfigMap> = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${context.instance}-${role.role}-launch-${digest(script + lock.text)}`, namespace: context.namespace, labels },
    data: { "launch.sh": script, [lock.file]: lock.text },
  };
  return { script, command: lock.command, configMap };
}

/** How the role's pods roll: replicas (or KEDA's floor), how many may be down at once, and the time a start and a stop may take. */
function rolloutTimings(context: RoleContext, role: RolePlan) {
  const { deployment } = context;
  const { settings } = deployment;
  const scaling = deployment.autoscaling?.roles.find((r) => r.role === role.role) ?? null;
  const replicas = scaling ? scaling.minReplicas : roleReplicas(settings, role.role);
  // The unit of rollout is the pod (a decode pod holds its 4 ranks); each role rolls on its own replicas.
  // Under KEDA, the count at the floor: the rollout and a drain then take no more pods at any count
  // than at the fewest, and the Deployment and the PodDisruptionBudget agree on one integer.
  const maxUnavailable = unavailableCount(Math.max(replicas, 1), settings.rollout.maxUnavailable);
  const mostReplicas = scaling ? scaling.maxReplicas : replicas;
  const startupBudgetSeconds = engineReadyTimeoutSeconds(role.ranks[0]!.env) + KUBERNETES_DEFAULTS.budgets.startMarginSeconds;
  const { preStopSleepSeconds, teardownSeconds } = KUBERNETES_DEFAULTS.termination;
  // A pod stops in this order: preStop (the router and the Service drop it), vLLM's drain, teardown.
  const gracePeriodSeconds = preStopSleepSeconds + deployment.shutdownTimeoutSeconds + teardownSeconds;
  const waves = Math.ceil(mostReplicas / maxUnavailable);
  const rolloutTimeoutSeconds = waves * (gracePeriodSeconds + startupBudgetSeconds) + KUBERNETES_DEFAULTS.budgets.rolloutMarginSeconds;
  return { scaling, replicas, maxUnavailable, mostReplicas, startupBudgetSeconds, preStopSleepSeconds, gracePeriodSeconds, rolloutTimeoutSeconds };
}

type RolloutTimings = ReturnType<typeof rolloutTimings>;

/** The role's vLLM container and, where its ranks listen off the pool's ports, the routing sidecar in front of them. */
function roleContainers(context: RoleContext, role: RolePlan, command: string[], timings: RolloutTimings) {
  const { router } = context;
  const { paths } = KUBERNETES_DEFAULTS;
  const k8sSettings = context.deployment.settings.kubernetes;
  const rankPorts = role.ranks.flatMap((r) => r.ports);
  const serving = servingPorts(router, role);
  const vllm = vllmContainer({
    image: k8sSettings.image!,
    command,
    env: roleEnvironment(context),
    rankPorts,
    npus: { [k8sSettings.npuResource]: String(context.deployment.plan.nodes[role.node]!.npus) },
    resources: mergeResources(KUBERNETES_DEFAULTS.resources.vllm, k8sSettings.resources[role.role]),
    security: k8sSettings.securityContext,
    apiKey: context.apiKey,
    startupBudgetSeconds: timings.startupBudgetSeconds,
    preStopSleepSeconds: timings.preStopSleepSeconds,
    mounts: { launchDir: paths.launchDir, hfHome: context.hfHome, compileCache: ROLE_DIRS.compileCache, offload: ROLE_DIRS.offload, scratch: paths.scratchDir },
  });
  // A role whose ranks listen off the pool's ports is reached through the routing sidecar.
  const sidecar =
    router && serving.sidecar
      ? routingSidecar({
          image: sidecarImage(router.values.endpoint_picker.image),
          ports: serving.ports,
          rankPorts,
          resources: mergeResources(KUBERNETES_DEFAULTS.resources.sidecar, k8sSettings.sidecarResources),
          security: k8sSettings.securityContext,
        })
      : null;
  return { vllm, sidecar, activePorts: router ? serving.ports : [] };
}

/** The role's Deployment: its pods, their labels for the router and the scaler, and how they roll. */
function roleDeployment(
  context: RoleContext,
  role: RolePlan,
  parts: {
    labels: Record<string, string>;
    selector: Record<string, string>;
    timings: RolloutTimings;
    containers: ReturnType<typeof roleContainers>;
    volumes: NonNullable<k8s.PodSpec["volumes"]>;
  },
): k8s.Named<k8s.Deployment> {
  const { router, deployment } = context;
  const { labels, selector, timings, containers } = parts;
  const k8sSettings = deployment.settings.kubernetes;
  const podLabels = {
    ...labels,
    ...(router ? { ...router.values.inference_pool.match_labels, [ROLE_LABEL]: role.role } : {}),
    ...(timings.scaling ? { [COMPILE_KEY_LABEL]: role.compileKey } : {}),
  };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: `${context.instance}-${role.role}`, namespace: context.namespace, labels },
    spec: {
      // Under KEDA the HPA it owns sets replicas: declaring them here would reset its count on every `pulumi up`.
      ...(timings.scaling ? {} : { replicas: timings.replicas }),
      // maxSurge 0: NPUs cannot be held by an old and a new pod at once, so a new pod takes the NPUs an
      // old one gave back. A single replica has nothing to keep serving: Recreate.
      strategy:
        timings.mostReplicas > 1 ? { type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: timings.maxUnavailable } } : { type: "Recreate" },
      // A wave waits for the old pods' drain, then for the new pods' start.
      progressDeadlineSeconds: timings.gracePeriodSeconds + timings.startupBudgetSeconds + KUBERNETES_DEFAULTS.budgets.rolloutMarginSeconds,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: podLabels, ...(router ? { annotations: { "llm-d.ai/active-ports": containers.activePorts.join(",") } } : {}) },
        spec: {
          ...podAccount(context.serviceAccountName, context.imagePullSecrets),
          ...placement(k8sSettings, selector),
          securityContext: podSecurity(k8sSettings.securityContext),
          terminationGracePeriodSeconds: timings.gracePeriodSeconds,
          initContainers: [
            waitForWeights(k8sSettings.image!, context.hfHome, deployment.plan.models, containers.vllm.securityContext),
            ...(containers.sidecar ? [containers.sidecar] : []),
          ],
          containers: [containers.vllm],
          volumes: parts.volumes,
        },
      },
    },
  };
}

/** One role's objects: its launch ConfigMap, Deployment, PodDisruptionBudget, NetworkPolicy and (without the router) Service. */
export function renderRoleWorkload(context: RoleContext, role: RolePlan): RoleWorkload {
  const { deployment, instance, namespace, router } = context;
  const k8sSettings = deployment.settings.kubernetes;
  const objectName = `${instance}-${role.role}`;
  const labels = { ...context.baseLabels, "app.kubernetes.io/component": role.role };
  const selector = { "app.kubernetes.io/instance": instance, "app.kubernetes.io/component": role.role };
  const rankPorts = role.ranks.flatMap((r) => r.ports);
  const compileCache = context.claim(`${instance}-${role.role}-compile-cache`, labels, k8sSettings.compileCacheVolumeSize);
  const launch = launchConfigMap(context, role, labels);
  const timings = rolloutTimings(context, role);
  const containers = roleContainers(context, role, launch.command, timings);
  const volumes = [
    ...roleVolumes(context, launch.configMap.metadata.name, compileCache.metadata.name),
    { name: "dshm", emptyDir: { medium: "Memory", sizeLimit: k8sSettings.shmSizeLimit } },
  ];
  const service: k8s.Named<k8s.Service> | null = router
    ? null
    : {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: objectName, namespace, labels },
        spec: { type: "ClusterIP", selector, ports: rankPorts.map((port, i) => ({ name: `http-${i}`, port, targetPort: port, protocol: "TCP" })) },
      };
  return {
    role: role.role,
    replicas: timings.replicas,
    scaling: timings.scaling,
    maxUnavailable: timings.maxUnavailable,
    rolloutTimeoutSeconds: timings.rolloutTimeoutSeconds,
    ranks: role.ranks.map((r) => ({ rank: r.rank, port: r.ports[0]!, devices: r.devices })),
    launchScript: launch.script,
    configMap: launch.configMap,
    deployment: roleDeployment(context, role, { labels, selector, timings, containers, volumes }),
    service,
    podDisruptionBudget: podDisruptionBudget(objectName, namespace, labels, selector, timings.maxUnavailable),
    networkPolicy: roleNetworkPolicy({
      name: objectName,
      namespace,
      labels,
      selector,
      instance,
      rankPorts,
      servingPorts: [...new Set([...containers.activePorts, ...rankPorts])].sort((a, b) => a - b),
      router: router ? { eppLabels: eppPodLabels(router.release) } : null,
      gatewayNamespace: k8sSettings.gateway?.namespace ?? namespace,
      clients: k8sSettings.clients,
      monitoring: deployment.settings.monitoring,
    }),
    compileCache,
    ports: rankPorts,
  };
}
