import { createHash } from "node:crypto";
import { compileLock } from "./compileLock";
import { waitForWeights } from "./weights";
import { engineReadyTimeoutSeconds } from "../../plan/argv";
import { ROLE_LABEL, servingPorts, sidecarImage } from "../../plan/frontDoor";
import { roleReplicas } from "../../plan/replicas";
import type { Deployment, RolePlan, RoleScaling, RouterIntent } from "../../plan/types";
import { unavailableCount } from "../../rollout/waves";
import { routingSidecar, vllmContainer } from "./containers";
import { KUBERNETES_DEFAULTS } from "./defaults";
import { launchScript } from "./launch";
import type * as k8s from "./objects";
import { mergeResources, placement, podSecurity } from "./pod";
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

/** One role's objects: its launch ConfigMap, Deployment, PodDisruptionBudget, NetworkPolicy and (without the router) Service. */
export function renderRoleWorkload(context: RoleContext, role: RolePlan): RoleWorkload {
  const { deployment, instance, namespace, router } = context;
  const { plan, settings } = deployment;
  const k8sSettings = settings.kubernetes;
  const { paths, budgets } = KUBERNETES_DEFAULTS;
  const labels = { ...context.baseLabels, "app.kubernetes.io/component": role.role };
  const selector = { "app.kubernetes.io/instance": instance, "app.kubernetes.io/component": role.role };
  const compileCacheRoot = `${paths.dataRoot}/vllm`;
  const compileCache = context.claim(`${instance}-${role.role}-compile-cache`, labels, k8sSettings.compileCacheVolumeSize);
  const script = launchScript(role, plan.model, context.eppHost);
  const rankPorts = role.ranks.flatMap((r) => r.ports);
  // Replicas starting together share the compile cache: one compiles per compile key, the rest load.
  const lock = compileLock(role.compileKey, compileCacheRoot, rankPorts, paths.launchDir, KUBERNETES_DEFAULTS.compileLock);
  const configMap: k8s.Named<k8s.ConfigMap> = {
    apiVersion: "v1",
    kind: "ConfigMap",
    // Named after its content: a changed command is a new ConfigMap, and the Deployment rolls to it.
    metadata: { name: `${instance}-${role.role}-launch-${digest(script + lock.text)}`, namespace, labels },
    data: { "launch.sh": script, [lock.file]: lock.text },
  };
  // A role whose ranks listen off the pool's ports is reached through the routing sidecar.
  const serving = servingPorts(router, role);
  const needsSidecar = serving.sidecar;
  const sidecarPorts = needsSidecar ? serving.ports : [];
  const activePorts = router ? serving.ports : [];
  const scaling = deployment.autoscaling?.roles.find((r) => r.role === role.role) ?? null;
  const replicas = scaling ? scaling.minReplicas : roleReplicas(settings, role.role);
  // The unit of rollout is the pod (a decode pod holds its 4 ranks); each role rolls on its own replicas.
  // Under KEDA, the count at the floor: the rollout and a drain then take no more pods at any count
  // than at the fewest, and the Deployment and the PodDisruptionBudget agree on one integer.
  const maxUnavailable = unavailableCount(Math.max(replicas, 1), settings.rollout.maxUnavailable);
  const mostReplicas = scaling ? scaling.maxReplicas : replicas;
  const waves = Math.ceil(mostReplicas / maxUnavailable);
  const node = plan.nodes[role.node]!;
  const budget = engineReadyTimeoutSeconds(role.ranks[0]!.env) + budgets.startMarginSeconds;
  const { preStopSleepSeconds, teardownSeconds } = KUBERNETES_DEFAULTS.termination;
  // A pod stops in this order: preStop (the router and the Service drop it), vLLM's drain, teardown.
  const gracePeriod = preStopSleepSeconds + deployment.shutdownTimeoutSeconds + teardownSeconds;
  const podLabels = {
    ...labels,
    ...(router ? { ...router.values.inference_pool.match_labels, [ROLE_LABEL]: role.role } : {}),
    ...(scaling ? { [COMPILE_KEY_LABEL]: role.compileKey } : {}),
  };
  const env = [
    { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    { name: "HOME", value: paths.scratchDir },
    { name: "HF_HOME", value: context.hfHome },
    { name: "VLLM_CACHE_ROOT", value: compileCacheRoot },
    { name: "RBLN_OFFLOAD_DIR", value: `${paths.dataRoot}/offload` },
    ...context.secretEnv,
  ];
  const vllm = vllmContainer({
    image: k8sSettings.image!,
    command: lock.command,
    env,
    rankPorts,
    npus: { [k8sSettings.npuResource]: String(node.npus) },
    resources: mergeResources(KUBERNETES_DEFAULTS.resources.vllm, k8sSettings.resources[role.role]),
    security: k8sSettings.securityContext,
    apiKey: context.apiKey,
    startupBudgetSeconds: budget,
    preStopSleepSeconds,
    mounts: { launchDir: paths.launchDir, hfHome: context.hfHome, compileCache: compileCacheRoot, offload: `${paths.dataRoot}/offload`, scratch: paths.scratchDir },
  });
  const sidecar = router
    ? routingSidecar({
        image: sidecarImage(router.values.endpoint_picker.image),
        ports: sidecarPorts,
        rankPorts,
        resources: mergeResources(KUBERNETES_DEFAULTS.resources.sidecar, k8sSettings.sidecarResources),
        security: k8sSettings.securityContext,
      })
    : null;
  const deploymentObject: k8s.Named<k8s.Deployment> = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: `${instance}-${role.role}`, namespace, labels },
    spec: {
      // Under KEDA the HPA it owns sets replicas: declaring them here would reset its count on every `pulumi up`.
      ...(scaling ? {} : { replicas }),
      // maxSurge 0: NPUs cannot be held by an old and a new pod at once, so a new pod takes the NPUs an
      // old one gave back. A single replica has nothing to keep serving: Recreate.
      strategy: mostReplicas > 1 ? { type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable } } : { type: "Recreate" },
      // A wave waits for the old pods' drain, then for the new pods' start.
      progressDeadlineSeconds: gracePeriod + budget + budgets.rolloutMarginSeconds,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: podLabels, ...(router ? { annotations: { "llm-d.ai/active-ports": activePorts.join(",") } } : {}) },
        spec: {
          serviceAccountName: context.serviceAccountName,
          automountServiceAccountToken: false,
          ...context.imagePullSecrets,
          ...placement(k8sSettings, selector),
          securityContext: podSecurity(k8sSettings.securityContext),
          terminationGracePeriodSeconds: gracePeriod,
          initContainers: [waitForWeights(k8sSettings.image!, context.hfHome, plan.models, vllm.securityContext), ...(needsSidecar && sidecar ? [sidecar] : [])],
          containers: [vllm],
          volumes: [
            { name: "launch", configMap: { name: configMap.metadata.name, defaultMode: 0o555 } },
            { name: "weights", persistentVolumeClaim: { claimName: context.weightsClaim } },
            { name: "compile-cache", persistentVolumeClaim: { claimName: compileCache.metadata.name } },
            { name: "offload", emptyDir: {} },
            { name: "scratch", emptyDir: {} },
            { name: "dshm", emptyDir: { medium: "Memory", sizeLimit: k8sSettings.shmSizeLimit } },
          ],
        },
      },
    },
  };
  const service: k8s.Named<k8s.Service> | null = router
    ? null
    : {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: `${instance}-${role.role}`, namespace, labels },
        spec: { type: "ClusterIP", selector, ports: rankPorts.map((port, i) => ({ name: `http-${i}`, port, targetPort: port, protocol: "TCP" })) },
      };
  const objectName = `${instance}-${role.role}`;
  return {
    role: role.role,
    replicas,
    scaling,
    maxUnavailable,
    rolloutTimeoutSeconds: waves * (gracePeriod + budget) + budgets.rolloutMarginSeconds,
    ranks: role.ranks.map((r) => ({ rank: r.rank, port: r.ports[0]!, devices: r.devices })),
    launchScript: script,
    configMap,
    deployment: deploymentObject,
    service,
    podDisruptionBudget: podDisruptionBudget(objectName, namespace, labels, selector, maxUnavailable),
    networkPolicy: roleNetworkPolicy({
      name: objectName,
      namespace,
      labels,
      selector,
      instance,
      rankPorts,
      servingPorts: [...new Set([...activePorts, ...rankPorts])].sort((a, b) => a - b),
      router: router ? { eppLabels: { "llm-d-router-gateway": `${router.release}-epp` } } : null,
      gatewayNamespace: k8sSettings.gateway?.namespace ?? namespace,
      clients: k8sSettings.clients,
      monitoring: settings.monitoring,
    }),
    compileCache,
    ports: rankPorts,
  };
}
