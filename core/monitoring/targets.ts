import { hostPort, listeningAddress } from "../address";
import type { Deployment } from "../plan/deployment";
import { modelLabel } from "../plan/stack";

/** The labels every rank's series carry, so dashboards and alerts can group by them. */
export interface RankLabels {
  /** The host's name (hosts[].name). */
  host: string;
  /** The role: main, prefill or decode. */
  role: string;
  /** The rank's index in its role. */
  rank: string;
  /** The model deployment: its entry's name in models, else (a stack of one model) the model id. */
  model: string;
  /** The strategy served. */
  strategy: string;
}

/** One Prometheus file-based discovery group: a rank's metrics endpoint and its labels. */
export interface ScrapeTarget {
  /** The rank's metrics endpoint, as host:port. */
  targets: string[];
  /** The labels its series carry. */
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
          labels: { host: placement.host.name, role: role.role, rank: String(rank.rank), model: modelLabel(deployment), strategy: plan.strategy },
        })),
      ),
  );
}
