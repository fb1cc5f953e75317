import { nodeReplicas } from "../plan/deployment";
import type { Deployment, HostPlacement } from "../plan/types";
import { rolloutWaves } from "./waves";

/**
 * The hosts of each rollout wave, in order: every node of a replica is in its replica's wave. The
 * disaggregated roles roll on their own replica counts side by side, as their Deployments do on
 * Kubernetes: wave k holds each role's k-th wave.
 */
export function hostWaves(deployment: Deployment): HostPlacement[][] {
  const { settings, plan, placements } = deployment;
  const perNode = plan.nodes.map((node) => rolloutWaves(nodeReplicas(settings, plan, node.index), settings.rollout.maxUnavailable));
  const count = Math.max(...perNode.map((waves) => waves.length));
  return Array.from({ length: count }, (_, k) => placements.filter((p) => perNode[p.node]![k]?.includes(p.replica)));
}
