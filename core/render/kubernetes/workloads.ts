import { monitoringIngress } from "../../monitoring/kubernetes";
import { createHash } from "node:crypto";
import { secretEnvironment, type SecretKey } from "../../config/stackConfig";
import type { Deployment } from "../../plan/deployment";
import { bindRank } from "../../plan/bind";
import type { RolePlan } from "../../plan/types";
import { readRouterIntent, type RouterIntent } from "../../router/chartValues";
import { ConfigError } from "../../errors";
import { commandWords, engineReadyTimeoutSeconds } from "../../plan/argv";
import { shellComment } from "../../shell";
import { shellCommandLines } from "../shellCommand";

/** A Kubernetes object as plain data: what `render` writes as YAML and the components pass to Pulumi. */
export type KubeObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> } } & Record<string, unknown>;

export const DATA_ROOT = "/var/lib/rbln-serving";
const LAUNCH_DIR = "/etc/rbln-serving";
/** Budget for the first start on top of the engine's ready timeout: the weights download. */
const DOWNLOAD_BUDGET_S = 3600;
const PROBE_PERIOD_S = 60;
/** Rollouts may run this long past the startup budget before Kubernetes and Pulumi call them failed. */
const ROLLOUT_MARGIN_S = 1800;

/** `python3 -c PROBE <path> <port>...`: 0 when every port answers 200 on the path (with the API key, if any). */
const PROBE = [
  "import os, sys, urllib.request",
  "key = os.environ.get('VLLM_API_KEY')",
  "headers = {'Authorization': 'Bearer ' + key} if key else {}",
  "for port in sys.argv[2:]:",
  "    request = urllib.request.Request(f'http://127.0.0.1:{port}{sys.argv[1]}', headers=headers)",
  "    with urllib.request.urlopen(request, timeout=10) as response:",
  "        assert response.status == 200",
].join("\n");

export interface KubernetesNames {
  instance: string;
  namespace: string;
}

export interface RoleWorkload {
  role: string;
  replicas: number;
  /** How long a rollout may take: the startup budget (compilation, download) and a margin. */
  rolloutTimeoutSeconds: number;
  /** The vLLM processes in each pod of the role. */
  ranks: { rank: number; port: number; devices: number[] }[];
  launchScript: string;
  configMap: KubeObject;
  deployment: KubeObject;
  service: KubeObject | null;
  ports: number[];
}

export interface KubernetesWorkloads {
  namespace: KubeObject;
  secret: KubeObject | null;
  /** Volumes by a stable id (`weights`, `<role>-compile-cache`). */
  volumes: { id: string; object: KubeObject }[];
  roles: RoleWorkload[];
  router: RouterIntent | null;
  /** With a router: only the gateway, the endpoint picker and the peer role reach the vLLM pods. */
  networkPolicy: KubeObject | null;
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

export function renderKubernetesWorkloads(deployment: Deployment, names: KubernetesNames, secrets: readonly SecretKey[]): KubernetesWorkloads {
  if (!DNS_LABEL.test(names.instance)) {
    throw new ConfigError("name", `"${names.instance}" cannot prefix Kubernetes object names: use 1-40 lower-case letters, digits or '-'`);
  }
  const { plan, settings } = deployment;
  const k8s = settings.kubernetes;
  const ns = names.namespace;
  const baseLabels = { "app.kubernetes.io/name": "rbln-serving", "app.kubernetes.io/instance": names.instance, "app.kubernetes.io/managed-by": "pulumi" };
  const router = plan.router ? readRouterIntent(plan.router) : null;
  const eppHost = router ? `${router.release}-epp.${ns}.svc.cluster.local` : null;
  const targetPorts = router?.values.inference_pool.target_ports ?? [];
  const secretEnv = Object.keys(secretEnvironment(secrets, () => true));

  const weights: KubeObject = pvc(`${names.instance}-weights`, ns, baseLabels, k8s.weightsVolumeSize, k8s.storageClass);
  const volumes = [{ id: "weights", object: weights }];

  const roles: RoleWorkload[] = plan.roles.map((role) => {
    const labels = { ...baseLabels, "app.kubernetes.io/component": role.role };
    const compileCache = pvc(`${names.instance}-${role.role}-compile-cache`, ns, labels, k8s.compileCacheVolumeSize, k8s.storageClass);
    volumes.push({ id: `${role.role}-compile-cache`, object: compileCache });
    const script = launchScript(role, plan.model, eppHost);
    const configMap: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      // Named after its content: a changed command is a new ConfigMap, and the Deployment rolls to it.
      metadata: { name: `${names.instance}-${role.role}-launch-${digest(script)}`, namespace: ns, labels },
      data: { "launch.sh": script },
    };
    const rankPorts = role.ranks.flatMap((r) => r.ports);
    // A role whose ranks listen off the pool's ports is reached through the routing sidecar.
    const needsSidecar = router !== null && rankPorts.some((p) => !targetPorts.includes(p));
    const sidecarPorts = needsSidecar ? targetPorts.slice(0, role.ranks.length) : [];
    const activePorts = needsSidecar ? sidecarPorts : rankPorts.filter((p) => targetPorts.includes(p));
    const replicas = (role.role === "prefill" ? settings.prefillReplicas : role.role === "decode" ? settings.decodeReplicas : undefined) ?? settings.replicas;
    const node = plan.nodes[role.node]!;
    const budget = engineReadyTimeoutSeconds(role.ranks[0]!.env) + DOWNLOAD_BUDGET_S;
    const probe = (path: string) => ({ exec: { command: ["python3", "-c", PROBE, path, ...rankPorts.map(String)] } });
    const podLabels = { ...labels, ...(router ? { ...router.values.inference_pool.match_labels, "llm-d.ai/role": role.role } : {}) };
    const env = [
      { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
      { name: "HF_HOME", value: `${DATA_ROOT}/huggingface` },
      { name: "VLLM_CACHE_ROOT", value: `${DATA_ROOT}/vllm` },
      { name: "RBLN_OFFLOAD_DIR", value: `${DATA_ROOT}/offload` },
      ...secretEnv.map((name) => ({ name, valueFrom: { secretKeyRef: { name: secretName(names), key: name } } })),
    ];
    const sidecarImage = router ? router.values.endpoint_picker.image.replace(/\/[^/:]+:/, "/llm-d-router-disagg-sidecar:") : "";
    const deploymentObject: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: `${names.instance}-${role.role}`, namespace: ns, labels },
      spec: {
        replicas,
        // NPUs cannot be held by an old and a new pod at once.
        strategy: { type: "Recreate" },
        progressDeadlineSeconds: budget + ROLLOUT_MARGIN_S,
        selector: { matchLabels: { "app.kubernetes.io/instance": names.instance, "app.kubernetes.io/component": role.role } },
        template: {
          metadata: { labels: podLabels, ...(router ? { annotations: { "llm-d.ai/active-ports": activePorts.join(",") } } : {}) },
          spec: {
            nodeSelector: k8s.nodeSelector,
            terminationGracePeriodSeconds: 120,
            ...(needsSidecar
              ? {
                  initContainers: [
                    {
                      name: "routing-proxy",
                      image: sidecarImage,
                      // A native sidecar: starts before vLLM and lives as long as the pod.
                      restartPolicy: "Always",
                      args: [`--port=${targetPorts[0]}`, `--model-server-port=${rankPorts[0]}`, `--data-parallel-size=${role.ranks.length}`, "--kv-connector=nixlv2", "--secure-proxy=false"],
                      ports: sidecarPorts.map((port, i) => ({ name: `proxy-${i}`, containerPort: port, protocol: "TCP" })),
                    },
                  ],
                }
              : {}),
            containers: [
              {
                name: "vllm",
                image: k8s.image,
                command: ["bash", `${LAUNCH_DIR}/launch.sh`],
                env,
                ports: rankPorts.map((port, i) => ({ name: `vllm-${i}`, containerPort: port, protocol: "TCP" })),
                resources: { requests: { [k8s.npuResource]: String(node.npus) }, limits: { [k8s.npuResource]: String(node.npus) } },
                volumeMounts: [
                  { name: "launch", mountPath: LAUNCH_DIR, readOnly: true },
                  { name: "weights", mountPath: `${DATA_ROOT}/huggingface` },
                  { name: "compile-cache", mountPath: `${DATA_ROOT}/vllm` },
                  { name: "offload", mountPath: `${DATA_ROOT}/offload` },
                  { name: "dshm", mountPath: "/dev/shm" },
                ],
                // Compilation takes hours on a cold cache: the startup probe holds the others off until then.
                startupProbe: { ...probe("/health"), periodSeconds: PROBE_PERIOD_S, timeoutSeconds: 30, failureThreshold: Math.ceil(budget / PROBE_PERIOD_S) },
                readinessProbe: { ...probe("/v1/models"), periodSeconds: 10, timeoutSeconds: 30, failureThreshold: 3 },
                livenessProbe: { ...probe("/health"), periodSeconds: 30, timeoutSeconds: 30, failureThreshold: 5 },
              },
            ],
            volumes: [
              { name: "launch", configMap: { name: configMap.metadata.name, defaultMode: 0o555 } },
              { name: "weights", persistentVolumeClaim: { claimName: weights.metadata.name } },
              { name: "compile-cache", persistentVolumeClaim: { claimName: compileCache.metadata.name } },
              { name: "offload", emptyDir: {} },
              { name: "dshm", emptyDir: { medium: "Memory" } },
            ],
          },
        },
      },
    };
    const service: KubeObject | null = router
      ? null
      : {
          apiVersion: "v1",
          kind: "Service",
          metadata: { name: `${names.instance}-${role.role}`, namespace: ns, labels },
          spec: {
            type: "ClusterIP",
            selector: { "app.kubernetes.io/instance": names.instance, "app.kubernetes.io/component": role.role },
            ports: rankPorts.map((port, i) => ({ name: `http-${i}`, port, targetPort: port, protocol: "TCP" })),
          },
        };
    return {
      role: role.role,
      replicas,
      rolloutTimeoutSeconds: budget + ROLLOUT_MARGIN_S,
      ranks: role.ranks.map((r) => ({ rank: r.rank, port: r.ports[0]!, devices: r.devices })),
      launchScript: script,
      configMap,
      deployment: deploymentObject,
      service,
      ports: rankPorts,
    };
  });

  const servingPorts = [...new Set([...targetPorts, ...roles.flatMap((r) => r.ports)])].sort((a, b) => a - b);
  const gatewayNamespace = k8s.gateway?.namespace ?? ns;
  const networkPolicy: KubeObject | null = router
    ? {
        apiVersion: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        metadata: { name: `${names.instance}-vllm`, namespace: ns, labels: baseLabels },
        spec: {
          podSelector: { matchLabels: { "app.kubernetes.io/instance": names.instance } },
          policyTypes: ["Ingress"],
          ingress: [
            // Peer roles: KV transfer (NIXL side channels), the routing sidecar, data-parallel RPC.
            { from: [{ podSelector: { matchLabels: { "app.kubernetes.io/instance": names.instance } } }] },
            // The endpoint picker (metrics) and the gateway (requests), on the serving ports only.
            {
              from: [
                { podSelector: { matchLabels: { "llm-d-router-gateway": `${router.release}-epp` } } },
                { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": gatewayNamespace } } },
              ],
              ports: servingPorts.map((port) => ({ protocol: "TCP", port })),
            },
            ...monitoringIngress(deployment, roles.flatMap((r) => r.ports)),
          ],
        },
      }
    : null;

  const objects = [...volumes.map((v) => v.object), ...roles.flatMap((r) => [r.configMap, r.deployment, ...(r.service ? [r.service] : [])]), ...(networkPolicy ? [networkPolicy] : [])];
  for (const object of objects) {
    if (object.metadata.name.length > 63) {
      throw new ConfigError("name", `"${names.instance}" makes the ${object.kind} name "${object.metadata.name}" longer than 63 characters; use a shorter name`);
    }
  }

  return {
    namespace: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { "app.kubernetes.io/managed-by": "pulumi" } } },
    secret: secretEnv.length > 0 ? { apiVersion: "v1", kind: "Secret", metadata: { name: secretName(names), namespace: ns, labels: baseLabels }, type: "Opaque", stringData: {} } : null,
    volumes,
    roles,
    router,
    networkPolicy,
    eppHost,
  };
}

function pvc(name: string, namespace: string, labels: Record<string, string>, size: string, storageClass: string | undefined): KubeObject {
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
