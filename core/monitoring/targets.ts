import { hostPort, listeningAddress } from "../address";
import type { Deployment } from "../plan/deployment";

/** The labels every rank's series carry, so dashboards and alerts can group by them. */
export interface RankLabels {
  host: string;
  role: string;
  rank: string;
  model: string;
  strategy: string;
}

/** One Prometheus file-based discovery group: a rank's metrics endpoint and its labels. */
export interface ScrapeTarget {
  targets: string[];
  labels: RankLabels;
}

/**
 * Every rank's metrics endpoint on platform hosts, as `file_sd_configs` groups (the contents of
 * `targets.json`). Empty on Kubernetes, where the PodMonitor finds the pods.
 */
export function scrapeTargets(deployment: Deployment): ScrapeTarget[] {
  const { plan } = deployment;
  return deployment.placements.flatMap((placement) =>
    plan.roles
      .filter((role) => role.node === placement.node)
      .flatMap((role) =>
        role.ranks.map((rank) => ({
          targets: [hostPort(listeningAddress(placement.host), rank.ports[0]!)],
          labels: { host: placement.host.name, role: role.role, rank: String(rank.rank), model: plan.model, strategy: plan.strategy },
        })),
      ),
  );
}
