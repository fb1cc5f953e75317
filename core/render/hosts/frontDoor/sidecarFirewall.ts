import { createHash } from "node:crypto";
import * as net from "node:net";
import { specificListenAddress } from "../../../address";
import type { FrontDoorPlan } from "../../../plan/types";

/**
 * The routing sidecar's guard on a decode host. The sidecar (llm-d-router v0.10.0) listens on all
 * interfaces, has no flag to bind an address, and sends a request's prefill hop to whatever its
 * x-prefiller-host-port header says; its SSRF protection needs Kubernetes
 * (test/fixtures/llm-d-router-v0.10.0/sidecar-flags.json). So its ports take connections only from
 * the router hosts (Envoy, the agent's probes, the EPP's scrapes) and from the host itself, by an
 * nftables table of its own that the sidecar's unit loads before every start: a reboot loads it
 * again with the unit, and nothing else of the host's firewall is touched. Anyone else gets a
 * TCP reset.
 */
export interface SidecarFirewall {
  /** The table's name (`inet` family): one per deployment, so two deployments on a host keep theirs. */
  table: string;
  /** The whole table, as one `nft` argument: made again from scratch each time it is loaded. */
  ruleset: string;
  /** Removes the table, and nothing when it is not there. */
  removal: string;
}

/**
 * Who may reach the sidecar's ports besides the host itself: each router host, by every address it
 * may connect from (its own, the one it listens on, and the virtual address it may hold).
 */
export function sidecarAllowedSources(frontDoor: FrontDoorPlan): string[] {
  return [
    ...new Set([
      ...frontDoor.routers.flatMap((router) => [router.host.address, specificListenAddress(router) ?? router.host.address]),
      ...(frontDoor.virtualAddress ? [frontDoor.virtualAddress] : []),
    ]),
  ];
}

export function sidecarFirewall(id: string, frontDoor: FrontDoorPlan, ports: readonly number[]): SidecarFirewall {
  // nft names: letters, digits and `_`; the hash keeps ids that clean alike apart.
  const table = `rbln_serving_sidecar_${createHash("sha256").update(id).digest("hex").slice(0, 12)}`;
  const range = ports.length === 1 ? `${ports[0]}` : `${Math.min(...ports)}-${Math.max(...ports)}`;
  const sources = sidecarAllowedSources(frontDoor);
  const byFamily = (v6: boolean) => sources.filter((a) => net.isIPv6(a) === v6);
  const allow = [
    ...(byFamily(false).length ? [`tcp dport ${range} ip saddr { ${byFamily(false).join(", ")} } accept`] : []),
    ...(byFamily(true).length ? [`tcp dport ${range} ip6 saddr { ${byFamily(true).join(", ")} } accept`] : []),
  ];
  const rules = [`tcp dport ${range} iif lo accept`, ...allow, `tcp dport ${range} reject with tcp reset`];
  const chain = `chain input { type filter hook input priority filter; policy accept; ${rules.join("; ")}; }`;
  // `table` first, so the delete finds one: the load replaces the table whole, in one transaction.
  return {
    table,
    ruleset: `table inet ${table}; delete table inet ${table}; table inet ${table} { ${chain}; }`,
    removal: `table inet ${table}; delete table inet ${table}`,
  };
}
