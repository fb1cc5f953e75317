import type { StackSettings } from "../../config/stackConfig";
import type * as k8s from "./objects";

/** Keeps a node drain from taking more of a role down than a rollout would. */
export function podDisruptionBudget(
  name: string,
  namespace: string,
  labels: Record<string, string>,
  selector: Record<string, string>,
  maxUnavailable: number,
): k8s.Named<k8s.PodDisruptionBudget> {
  return {
    apiVersion: "policy/v1",
    kind: "PodDisruptionBudget",
    metadata: { name, namespace, labels },
    spec: { maxUnavailable, selector: { matchLabels: selector } },
  };
}

export interface RolePolicyInput {
  name: string;
  namespace: string;
  labels: Record<string, string>;
  /** The role's pods. */
  selector: Record<string, string>;
  instance: string;
  /** The vLLM ports (metrics are served there too). */
  rankPorts: number[];
  /** The ports requests arrive on: the rank ports and, with a routing sidecar, its ports. */
  servingPorts: number[];
  /** With the llm-d router: the endpoint picker's pod labels. */
  router: { eppLabels: Record<string, string> } | null;
  gatewayNamespace: string;
  clients: StackSettings["kubernetes"]["clients"];
  monitoring: StackSettings["monitoring"];
}

function inNamespace(namespace: string): k8s.NetworkPolicyPeer {
  return { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": namespace } } };
}

function tcp(ports: number[]) {
  return ports.map((port) => ({ protocol: "TCP", port }));
}

/**
 * Who reaches a role's pods, and nothing else. With the router: the deployment's own pods (KV
 * transfer, the routing sidecar, data-parallel RPC), the endpoint picker and the gateway's namespace
 * on the serving ports. Without: the Service's clients on the rank ports. Both: monitoring, when on.
 */
export function roleNetworkPolicy(input: RolePolicyInput): k8s.Named<k8s.NetworkPolicy> {
  const ingress = input.router
    ? [
        { from: [{ podSelector: { matchLabels: { "app.kubernetes.io/instance": input.instance } } }] },
        { from: [{ podSelector: { matchLabels: input.router.eppLabels } }, inNamespace(input.gatewayNamespace)], ports: tcp(input.servingPorts) },
      ]
    : [
        {
          from: [...new Set(input.clients.namespaces ?? [input.gatewayNamespace, input.namespace])].map((namespace) => ({
            ...inNamespace(namespace),
            ...(input.clients.podLabels ? { podSelector: { matchLabels: input.clients.podLabels } } : {}),
          })),
          ports: tcp(input.rankPorts),
        },
      ];
  if (input.monitoring.enabled) ingress.push({ from: [inNamespace(input.monitoring.namespace)], ports: tcp(input.rankPorts) });
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: input.name, namespace: input.namespace, labels: input.labels },
    spec: { podSelector: { matchLabels: input.selector }, policyTypes: ["Ingress"], ingress },
  };
}
