import type { StackSettings } from "../../config/stackConfig";
import type { ContainerResources } from "../../config/schema";
import { quantityValue } from "../../config/fields";
import { probeCommand } from "../../probe";
import { KUBERNETES_DEFAULTS } from "./defaults";
import type { Container, PodSpec, Probe } from "./objects";

type ResourceName = "cpu" | "memory";
type Resources = { requests: Record<string, string>; limits: Record<string, string> };

/**
 * The defaults under the settings, field by field. A value set on one side moves the default on the
 * other side only as far as Kubernetes needs (requests never above limits).
 */
export function mergeResources(defaults: ContainerResources, settings: ContainerResources | undefined): Resources {
  const merged: Resources = { requests: {}, limits: {} };
  for (const name of ["cpu", "memory"] as ResourceName[]) {
    const setRequest = settings?.requests?.[name];
    const setLimit = settings?.limits?.[name];
    let request = setRequest ?? defaults.requests?.[name];
    let limit = setLimit ?? defaults.limits?.[name];
    if (request && limit && quantityValue(request) > quantityValue(limit)) {
      if (setRequest) limit = request;
      else request = limit;
    }
    if (request) merged.requests[name] = request;
    if (limit) merged.limits[name] = limit;
  }
  return merged;
}

/** Per-port timeout of the exec probe; the probe's own timeout covers every port in turn. */
const PROBE_PORT_TIMEOUT_S = KUBERNETES_DEFAULTS.probes.portTimeoutSeconds;

/**
 * A probe on a path of every rank port. vLLM's API key guards only the API paths (/v1, ...), never
 * /health, so one port and no key is a plain httpGet; several ports (a probe has one) or /v1/models
 * under the key take the exec probe, whose timeout covers all its ports.
 */
export function rankProbe(path: "/health" | "/v1/models", ports: number[], apiKey: boolean): Probe {
  if (ports.length === 1 && !(apiKey && path !== "/health")) return { httpGet: { path, port: ports[0]! }, timeoutSeconds: PROBE_PORT_TIMEOUT_S };
  return {
    exec: { command: probeCommand("127.0.0.1", PROBE_PORT_TIMEOUT_S, ports, [path]) },
    timeoutSeconds: PROBE_PORT_TIMEOUT_S * ports.length + PROBE_PORT_TIMEOUT_S,
  };
}

/** Whom a pod runs as: the stack's service account with no API token mounted (nothing in the pods calls the API server), and the image pull secrets. */
export function podAccount(
  serviceAccountName: string,
  imagePullSecrets: Pick<PodSpec, "imagePullSecrets">,
): Pick<PodSpec, "serviceAccountName" | "automountServiceAccountToken" | "imagePullSecrets"> {
  return { serviceAccountName, automountServiceAccountToken: false, ...imagePullSecrets };
}

/** The container security context every container gets: no privilege escalation, no capabilities. */
export function containerSecurity(security: StackSettings["kubernetes"]["securityContext"]): NonNullable<Container["securityContext"]> {
  return {
    runAsNonRoot: security.runAsNonRoot,
    ...(security.runAsNonRoot ? {} : { runAsUser: 0, runAsGroup: 0 }),
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
    readOnlyRootFilesystem: security.readOnlyRootFilesystem,
  };
}

/** The pod security context: who the processes run as and which groups reach the volumes and devices. */
export function podSecurity(security: StackSettings["kubernetes"]["securityContext"]): NonNullable<PodSpec["securityContext"]> {
  return {
    ...(security.runAsNonRoot ? { runAsNonRoot: true, runAsUser: security.runAsUser, runAsGroup: security.runAsGroup } : {}),
    fsGroup: security.fsGroup,
    // The weights volume holds ~230 GB: chown it only when its root's group is not fsGroup yet.
    fsGroupChangePolicy: "OnRootMismatch",
    ...(security.supplementalGroups.length > 0 ? { supplementalGroups: security.supplementalGroups } : {}),
    seccompProfile: { type: "RuntimeDefault" },
  };
}

/** Scheduling: the settings, or by default one pod of a role per node, since each takes the node's NPUs. */
export function placement(
  k8s: StackSettings["kubernetes"],
  roleSelector: Record<string, string>,
): Pick<PodSpec, "nodeSelector" | "tolerations" | "affinity" | "topologySpreadConstraints" | "priorityClassName"> {
  return {
    nodeSelector: k8s.nodeSelector,
    ...(k8s.tolerations.length > 0 ? { tolerations: k8s.tolerations } : {}),
    affinity: (k8s.affinity as PodSpec["affinity"]) ?? {
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: roleSelector }, topologyKey: "kubernetes.io/hostname" }],
      },
    },
    ...(k8s.topologySpreadConstraints.length > 0 ? { topologySpreadConstraints: k8s.topologySpreadConstraints as PodSpec["topologySpreadConstraints"] } : {}),
    ...(k8s.priorityClassName ? { priorityClassName: k8s.priorityClassName } : {}),
  };
}
