import { createHash } from "node:crypto";
import { secretEnvironment, type SecretKey } from "../../config/stackConfig";
import type { Deployment } from "../../plan/deployment";
import { bindRank } from "../../plan/bind";
import type { RolePlan } from "../../plan/types";
import type { RouterIntent } from "../../plan/types";
import { ConfigError } from "../../errors";
import { commandWords, engineReadyTimeoutSeconds } from "../../plan/argv";
import { shellComment } from "../../shell";
import { shellCommandLines } from "../shellCommand";
import { unavailableCount } from "../../rollout/waves";
import { compileLock } from "../../cache/kubernetesCompile";
import { waitForWeights, weightsJob } from "../../cache/kubernetesWeights";
import type * as k8s from "./objects";
import { DEFAULT_SIDECAR_RESOURCES, DEFAULT_VLLM_RESOURCES, containerSecurity, mergeResources, placement, podSecurity, rankProbe } from "./pod";
import { podDisruptionBudget, roleNetworkPolicy } from "./policies";

export type { KubeObject } from "./objects";

export const DATA_ROOT = "/var/lib/rbln-serving";
const LAUNCH_DIR = "/etc/rbln-serving";
/**
 * Budget for a start on top of the engine's ready timeout: a pod may first wait for another pod's
 * compile of the same key, then load (the weights are already there: the Job fetched them).
 */
const START_MARGIN_S = 3600;
/** How long the weights Job may download (about 230 GB). */
const WEIGHTS_JOB_DEADLINE_S = 8 * 3600;
const PROBE_PERIOD_S = 60;
/** Rollouts may run this long past the startup budget before Kubernetes and Pulumi call them failed. */
const ROLLOUT_MARGIN_S = 1800;
/** The processes' home and temporary files, with a read-only root filesystem. */
const SCRATCH_DIR = "/tmp";

export interface KubernetesNames {
  instance: string;
  namespace: string;
}

export interface RoleWorkload {
  role: string;
  replicas: number;
  /** Pods of the role that may be down at once: in a rollout (maxSurge 0) and in a drain. */
  maxUnavailable: number;
  /** How long a rollout may take: every wave's startup budget (compilation, download) and a margin. */
  rolloutTimeoutSeconds: number;
  /** The vLLM processes in each pod of the role. */
  ranks: { rank: number; port: number; devices: number[] }[];
  launchScript: string;
  configMap: k8s.Named<k8s.ConfigMap>;
  deployment: k8s.Named<k8s.Deployment>;
  service: k8s.Named<k8s.Service> | null;
  podDisruptionBudget: k8s.Named<k8s.PodDisruptionBudget>;
  networkPolicy: k8s.Named<k8s.NetworkPolicy>;
  ports: number[];
}

export interface KubernetesWorkloads {
  namespace: k8s.Named<k8s.Namespace>;
  /** The pods' identity: no API token mounted, since nothing in them talks to the API server. */
  serviceAccount: k8s.Named<k8s.ServiceAccount>;
  secret: k8s.Named<k8s.Secret> | null;
  /** Volumes by a stable id (`weights`, `<role>-compile-cache`). */
  volumes: { id: string; object: k8s.Named<k8s.PersistentVolumeClaim> }[];
  /** Fills the weights volume once per model and revision; the Deployments start after it. */
  weightsJob: ReturnType<typeof weightsJob>;
  /** How long the weights Job may take. */
  weightsJobTimeoutSeconds: number;
  roles: RoleWorkload[];
  router: RouterIntent | null;
  /** The EPP Service the ranks' `<EPP_HOST>` resolves to. */
  eppHost: string | null;
}

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 10);
}

export function secretName(names: KubernetesNames): string {
  return `${names.instance}-secrets`;
}

/** The launch script of a role: `exec` one rank, or supervise several and stop them all when one ends. */
export function launchScript(role: RolePlan, model: string, eppHost: string | null): string {
  const ranks = role.ranks.map((rank) => {
    const bound = bindRank(rank, { ...(eppHost ? { EPP_HOST: eppHost } : {}), POD_IP: "<POD_IP>" }, "kubernetes");
    return shellCommandLines({ command: commandWords(bound.argv, bound.flags), flags: bound.flags, env: bound.env }, { POD_IP: "POD_IP" });
  });
  const header = ["#!/usr/bin/env bash", shellComment(`rbln-serving: ${role.role} of ${model}, ${role.ranks.length} rank(s)`), "set -euo pipefail", `: "\${POD_IP:?POD_IP comes from the downward API}"`];
  if (ranks.length === 1) return [...header, `exec ${ranks[0]!.join("\n")}`, ""].join("\n");
  return [
    ...header,
    "# The ranks form one data-parallel group: when one ends, end the rest so the pod restarts whole.",
    "pids=()",
    'trap \'kill "${pids[@]}" 2>/dev/null || true\' TERM INT',
    ...role.ranks.flatMap((rank, i) => [`# rank ${rank.rank}`, `${ranks[i]!.join("\n")} &`, "pids+=($!)"]),
    "status=0",
    "wait -n || status=$?",
    'kill "${pids[@]}" 2>/dev/null || true',
    "wait || true",
    'exit "$(( status == 0 ? 1 : status ))"',
    "",
  ].join("\n");
}


const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/;

/** The Pod Security level the namespace enforces: what every pod in it meets, the router chart's included. */
function podSecurityLevel(deployment: Deployment, router: RouterIntent | null): "restricted" | "baseline" {
  // The chart's endpoint picker sets no security context, so it meets only `baseline`.
  return deployment.settings.kubernetes.securityContext.runAsNonRoot && router === null ? "restricted" : "baseline";
}

export function renderKubernetesWorkloads(deployment: Deployment, names: KubernetesNames, secrets: readonly SecretKey[]): KubernetesWorkloads {
  if (!DNS_LABEL.test(names.instance)) {
    throw new ConfigError("name", `"${names.instance}" cannot prefix Kubernetes object names: use 1-40 lower-case letters, digits or '-'`);
  }
  const { plan, settings } = deployment;
  const k8sSettings = settings.kubernetes;
  const ns = names.namespace;
  const baseLabels = { "app.kubernetes.io/name": "rbln-serving", "app.kubernetes.io/instance": names.instance, "app.kubernetes.io/managed-by": "pulumi" };
  const router = plan.router;
  const eppHost = router ? `${router.release}-epp.${ns}.svc.cluster.local` : null;
  const targetPorts = router?.values.inference_pool.target_ports ?? [];
  const secretEnv = Object.keys(secretEnvironment(secrets, () => true));
  const apiKey = secrets.includes("apiKey");
  const serviceAccount: k8s.Named<k8s.ServiceAccount> = {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: `${names.instance}-vllm`, namespace: ns, labels: baseLabels },
    automountServiceAccountToken: false,
  };

  const weights = pvc(`${names.instance}-weights`, ns, baseLabels, k8sSettings.weightsVolumeSize, k8sSettings.storageClass);
  const volumes = [{ id: "weights", object: weights }];
  const hfHome = `${DATA_ROOT}/huggingface`;
  const imagePullSecrets = k8sSettings.imagePullSecrets.length > 0 ? { imagePullSecrets: k8sSettings.imagePullSecrets.map((name) => ({ name })) } : {};
  const secretRef = (name: string) => ({ name, valueFrom: { secretKeyRef: { name: secretName(names), key: name } } });
  // One download per model and revision, before any pod starts; the pods never reach the hub.
  const weightsDownload = weightsJob({
    instance: names.instance,
    namespace: ns,
    labels: baseLabels,
    image: k8sSettings.image!,
    models: plan.models,
    hfHome,
    weightsClaim: weights.metadata.name,
    env: secretEnv.filter((name) => name === "HF_TOKEN").map(secretRef),
    pod: { serviceAccountName: serviceAccount.metadata.name, automountServiceAccountToken: false, ...imagePullSecrets, securityContext: podSecurity(k8sSettings.securityContext) },
    securityContext: containerSecurity(k8sSettings.securityContext),
    activeDeadlineSeconds: WEIGHTS_JOB_DEADLINE_S,
  });

  const roles: RoleWorkload[] = plan.roles.map((role) => {
    const labels = { ...baseLabels, "app.kubernetes.io/component": role.role };
    const selector = { "app.kubernetes.io/instance": names.instance, "app.kubernetes.io/component": role.role };
    const compileCache = pvc(`${names.instance}-${role.role}-compile-cache`, ns, labels, k8sSettings.compileCacheVolumeSize, k8sSettings.storageClass);
    volumes.push({ id: `${role.role}-compile-cache`, object: compileCache });
    const script = launchScript(role, plan.model, eppHost);
    const rankPorts = role.ranks.flatMap((r) => r.ports);
    // Replicas starting together share the compile cache: one compiles per compile key, the rest load.
    const lock = compileLock(role.compileKey, `${DATA_ROOT}/vllm`, rankPorts, LAUNCH_DIR);
    const configMap: k8s.Named<k8s.ConfigMap> = {
      apiVersion: "v1",
      kind: "ConfigMap",
      // Named after its content: a changed command is a new ConfigMap, and the Deployment rolls to it.
      metadata: { name: `${names.instance}-${role.role}-launch-${digest(script + lock.text)}`, namespace: ns, labels },
      data: { "launch.sh": script, [lock.file]: lock.text },
    };
    // A role whose ranks listen off the pool's ports is reached through the routing sidecar.
    const needsSidecar = router !== null && rankPorts.some((p) => !targetPorts.includes(p));
    const sidecarPorts = needsSidecar ? targetPorts.slice(0, role.ranks.length) : [];
    const activePorts = needsSidecar ? sidecarPorts : rankPorts.filter((p) => targetPorts.includes(p));
    const replicas = (role.role === "prefill" ? settings.prefillReplicas : role.role === "decode" ? settings.decodeReplicas : undefined) ?? settings.replicas;
    // The unit of rollout is the pod (a decode pod holds its 4 ranks); each role rolls on its own replicas.
    const maxUnavailable = unavailableCount(replicas, settings.rollout.maxUnavailable);
    const waves = Math.ceil(replicas / maxUnavailable);
    const node = plan.nodes[role.node]!;
    const budget = engineReadyTimeoutSeconds(role.ranks[0]!.env) + START_MARGIN_S;
    const podLabels = { ...labels, ...(router ? { ...router.values.inference_pool.match_labels, "llm-d.ai/role": role.role } : {}) };
    const env = [
      { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
      { name: "HOME", value: SCRATCH_DIR },
      { name: "HF_HOME", value: hfHome },
      { name: "VLLM_CACHE_ROOT", value: `${DATA_ROOT}/vllm` },
      { name: "RBLN_OFFLOAD_DIR", value: `${DATA_ROOT}/offload` },
      ...secretEnv.map(secretRef),
    ];
    const sidecarImage = router ? router.values.endpoint_picker.image.replace(/\/[^/:]+:/, "/llm-d-router-disagg-sidecar:") : "";
    const npus = { [k8sSettings.npuResource]: String(node.npus) };
    const vllmResources = mergeResources(DEFAULT_VLLM_RESOURCES, k8sSettings.resources[role.role]);
    const security = containerSecurity(k8sSettings.securityContext);
    const sidecar: k8s.Container = {
      name: "routing-proxy",
      image: sidecarImage,
      // A native sidecar: starts before vLLM and lives as long as the pod.
      restartPolicy: "Always",
      args: [`--port=${targetPorts[0]}`, `--model-server-port=${rankPorts[0]}`, `--data-parallel-size=${role.ranks.length}`, "--kv-connector=nixlv2", "--secure-proxy=false"],
      ports: sidecarPorts.map((port, i) => ({ name: `proxy-${i}`, containerPort: port, protocol: "TCP" })),
      resources: mergeResources(DEFAULT_SIDECAR_RESOURCES, k8sSettings.sidecarResources),
      securityContext: { ...security, readOnlyRootFilesystem: true },
    };
    const vllm: k8s.Container = {
      name: "vllm",
      image: k8sSettings.image,
      command: lock.command,
      env,
      ports: rankPorts.map((port, i) => ({ name: `vllm-${i}`, containerPort: port, protocol: "TCP" })),
      resources: { requests: { ...vllmResources.requests, ...npus }, limits: { ...vllmResources.limits, ...npus } },
      securityContext: security,
      volumeMounts: [
        { name: "launch", mountPath: LAUNCH_DIR, readOnly: true },
        { name: "weights", mountPath: hfHome },
        { name: "compile-cache", mountPath: `${DATA_ROOT}/vllm` },
        { name: "offload", mountPath: `${DATA_ROOT}/offload` },
        { name: "scratch", mountPath: SCRATCH_DIR },
        { name: "dshm", mountPath: "/dev/shm" },
      ],
      // Compilation takes hours on a cold cache: the startup probe holds the others off until then.
      startupProbe: { ...rankProbe("/health", rankPorts, apiKey), periodSeconds: PROBE_PERIOD_S, failureThreshold: Math.ceil(budget / PROBE_PERIOD_S) },
      readinessProbe: { ...rankProbe("/v1/models", rankPorts, apiKey), periodSeconds: 10, failureThreshold: 3 },
      livenessProbe: { ...rankProbe("/health", rankPorts, apiKey), periodSeconds: 30, failureThreshold: 5 },
    };
    const deploymentObject: k8s.Named<k8s.Deployment> = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: `${names.instance}-${role.role}`, namespace: ns, labels },
      spec: {
        replicas,
        // maxSurge 0: NPUs cannot be held by an old and a new pod at once, so a new pod takes the NPUs an
        // old one gave back. A single replica has nothing to keep serving: Recreate.
        strategy: replicas > 1 ? { type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable } } : { type: "Recreate" },
        progressDeadlineSeconds: budget + ROLLOUT_MARGIN_S,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels: podLabels, ...(router ? { annotations: { "llm-d.ai/active-ports": activePorts.join(",") } } : {}) },
          spec: {
            serviceAccountName: serviceAccount.metadata.name,
            automountServiceAccountToken: false,
            ...imagePullSecrets,
            ...placement(k8sSettings, selector),
            securityContext: podSecurity(k8sSettings.securityContext),
            terminationGracePeriodSeconds: 120,
            initContainers: [waitForWeights(k8sSettings.image!, hfHome, plan.models, security), ...(needsSidecar ? [sidecar] : [])],
            containers: [vllm],
            volumes: [
              { name: "launch", configMap: { name: configMap.metadata.name, defaultMode: 0o555 } },
              { name: "weights", persistentVolumeClaim: { claimName: weights.metadata.name } },
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
          metadata: { name: `${names.instance}-${role.role}`, namespace: ns, labels },
          spec: {
            type: "ClusterIP",
            selector,
            ports: rankPorts.map((port, i) => ({ name: `http-${i}`, port, targetPort: port, protocol: "TCP" })),
          },
        };
    const objectName = `${names.instance}-${role.role}`;
    return {
      role: role.role,
      replicas,
      maxUnavailable,
      rolloutTimeoutSeconds: waves * budget + ROLLOUT_MARGIN_S,
      ranks: role.ranks.map((r) => ({ rank: r.rank, port: r.ports[0]!, devices: r.devices })),
      launchScript: script,
      configMap,
      deployment: deploymentObject,
      service,
      podDisruptionBudget: podDisruptionBudget(objectName, ns, labels, selector, maxUnavailable),
      networkPolicy: roleNetworkPolicy({
        name: objectName,
        namespace: ns,
        labels,
        selector,
        instance: names.instance,
        rankPorts,
        servingPorts: [...new Set([...activePorts, ...rankPorts])].sort((a, b) => a - b),
        router: router ? { eppLabels: { "llm-d-router-gateway": `${router.release}-epp` } } : null,
        gatewayNamespace: k8sSettings.gateway?.namespace ?? ns,
        clients: k8sSettings.clients,
        monitoring: settings.monitoring,
      }),
      ports: rankPorts,
    };
  });

  const objects = [serviceAccount, weightsDownload, ...volumes.map((v) => v.object), ...roles.flatMap((r) => [r.configMap, r.deployment, r.podDisruptionBudget, r.networkPolicy, ...(r.service ? [r.service] : [])])];
  for (const object of objects) {
    if (object.metadata.name.length > 63) {
      throw new ConfigError("name", `"${names.instance}" makes the ${object.kind} name "${object.metadata.name}" longer than 63 characters; use a shorter name`);
    }
  }

  const level = podSecurityLevel(deployment, router);
  return {
    namespace: {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: ns,
        labels: {
          "app.kubernetes.io/managed-by": "pulumi",
          "pod-security.kubernetes.io/enforce": level,
          // Say where the namespace falls short of `restricted`, without refusing its pods.
          "pod-security.kubernetes.io/warn": "restricted",
          "pod-security.kubernetes.io/audit": "restricted",
        },
      },
    },
    serviceAccount,
    secret: secretEnv.length > 0 ? { apiVersion: "v1", kind: "Secret", metadata: { name: secretName(names), namespace: ns, labels: baseLabels }, type: "Opaque", stringData: {} } : null,
    volumes,
    weightsJob: weightsDownload,
    weightsJobTimeoutSeconds: WEIGHTS_JOB_DEADLINE_S,
    roles,
    router,
    eppHost,
  };
}

function pvc(name: string, namespace: string, labels: Record<string, string>, size: string, storageClass: string | undefined): k8s.Named<k8s.PersistentVolumeClaim> {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace, labels },
    spec: {
      // Replicas of a role share the weights and compiled graphs: the volume must be mountable from several nodes.
      accessModes: ["ReadWriteMany"],
      resources: { requests: { storage: size } },
      ...(storageClass ? { storageClassName: storageClass } : {}),
    },
  };
}
