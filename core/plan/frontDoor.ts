import * as net from "node:net";
import { specificListenAddress } from "../address";
import type { StackSettings } from "../config/stackConfig";
import type { Host } from "../config/schema";
import { servingAddress } from "../config/fields";
import { ConfigError } from "../errors";
import { isDataParallelGroup } from "./dataParallel";
import { frontDoorPortClaims, type PortClaim, portClash, portInventory } from "./ports";
import { routerHostEntries, type RouterHostSetting } from "../config/routerHosts";
import type { FrontDoorEndpoint, FrontDoorPlan, HostPlacement, LaunchPlan, RolePlan, RouterIntent, RouterPlacement } from "./types";

/**
 * The front door on hosts: the llm-d router's endpoint picker (EPP) in file-discovery mode and
 * Envoy on a router host, the routing sidecar on each decode host, and the endpoints the EPP may
 * route to. Planned here (where it runs, which endpoints, which ports); rendered in core/render/hosts/frontDoor/.
 */

/** The EPP image the recipe pins, or the version this package targets when the strategy's recipe has no router. */
export const DEFAULT_IMAGES = {
  endpointPicker: "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
  /**
   * The newest Envoy 1.37 patch release (v1.37.11; it carries the ext_proc fixes of CVE-2026-47207
   * and envoy #46836), distroless: the entry point is envoy itself. By tag: its digest could not be
   * read here (test/fixtures/envoy-v1.37.11/facts.json, image.digest; docs/upstream-facts.md).
   */
  proxy: "docker.io/envoyproxy/envoy:distroless-v1.37.11",
} as const;

/** The disaggregated roles' label the EPP's role filters read. */
export const ROLE_LABEL = "llm-d.ai/role";

/** The disaggregation sidecar's image: released with the picker, under the same tag. */
export function sidecarImage(pickerImage: string): string {
  return pickerImage.replace(/\/[^/:]+:/, "/llm-d-router-disagg-sidecar:");
}

/** The ports a role is reached on through the router: its ranks' own, or (ranks off the pool's ports, as decode's) its routing sidecar's. */
export function servingPorts(router: RouterIntent | null, role: Pick<RolePlan, "ranks">): { ports: number[]; sidecar: boolean } {
  const rankPorts = role.ranks.flatMap((r) => r.ports);
  const targetPorts = router?.values.inference_pool.target_ports ?? [];
  const sidecar = router !== null && rankPorts.some((p) => !targetPorts.includes(p));
  return { ports: sidecar ? targetPorts.slice(0, role.ranks.length) : rankPorts, sidecar };
}

/** A router host as a host: an entry of `hosts` it shares, or its own server (reached through the stack's bastion unless it names its own). */
function routerHost(settings: StackSettings, placements: readonly HostPlacement[], configured: RouterHostSetting): { host: Host; sharedWith: string | null } {
  if (typeof configured === "string") return { host: placements.find((p) => p.host.name === configured)!.host, sharedWith: configured };
  const proxy = configured.proxy ?? settings.sshProxy;
  return { host: proxy ? { ...configured, proxy } : configured, sharedWith: null };
}

/**
 * Each router host: where its Envoy listens and is reached. With a virtual address Envoy listens on
 * every interface, so the address reaches it on whichever host holds it; keepalived's priorities fall
 * with the list's order, so the first router host holds the address when both start.
 */
function routerPlacements(settings: StackSettings, placements: readonly HostPlacement[]): RouterPlacement[] {
  const virtual = settings.router.virtualAddress;
  return routerHostEntries(settings.router).map(({ host: configured }, i) => {
    const { host, sharedWith } = routerHost(settings, placements, configured);
    const listen = virtual === undefined ? specificListenAddress(host) : undefined;
    const everywhere = virtual !== undefined && net.isIPv6(virtual) ? "::" : "0.0.0.0";
    return {
      host,
      sharedWith,
      listenAddress: listen ?? everywhere,
      address: listen ?? host.address,
      priority: ROUTER_PRIORITIES.first - i * ROUTER_PRIORITIES.step,
    };
  });
}

/** keepalived's priorities (1-254): the first router host's, and how much lower each next one's is. */
export const ROUTER_PRIORITIES = { first: 150, step: 10 } as const;

/**
 * The front door of a hosts deployment, or null without a router host (`router.host`, `router.hosts`). Refuses what file
 * discovery cannot take (host names: it reads literal IPv4 addresses only), decode hosts whose
 * ranks listen off localhost (the sidecar forwards to localhost), and a front-door port another
 * port on the router host already takes.
 */
export function planFrontDoor(settings: StackSettings, plan: LaunchPlan, placements: readonly HostPlacement[]): FrontDoorPlan | null {
  if (routerHostEntries(settings.router).length === 0) return null;
  const routers = routerPlacements(settings, placements);
  const endpoints: FrontDoorEndpoint[] = [];
  const sidecars: FrontDoorPlan["sidecars"] = [];
  for (const placement of placements) {
    const index = settings.hosts.findIndex((h) => h.name === placement.host.name);
    for (const role of plan.roles.filter((r) => r.node === placement.node)) {
      const { ports, sidecar } = servingPorts(plan.router, role);
      const address = servingAddress(placement.host);
      if (!net.isIPv4(address)) {
        const key = placement.host.listenAddress ? `hosts[${index}].listenAddress` : `hosts[${index}].address`;
        throw new ConfigError(
          key,
          `"${address}" is not a literal IPv4 address; the router's file discovery reaches endpoints by IPv4 address only: give the host's IPv4 address (or listenAddress)`,
        );
      }
      if (sidecar && specificListenAddress(placement.host) !== undefined) {
        throw new ConfigError(
          `hosts[${index}].listenAddress`,
          `"${placement.host.listenAddress}": the ${role.role} ranks of this host are reached through the routing sidecar, which forwards to localhost; leave listenAddress unset (all interfaces)`,
        );
      }
      // Aggregated replicas take requests on rank 0; a data-parallel decode host on every rank, through the sidecar.
      const served = plan.router ? role.ranks : role.ranks.slice(0, 1);
      for (const [i, rank] of served.entries()) {
        endpoints.push({
          name: `${placement.host.name}-${role.role}-${rank.rank}`,
          host: placement.host.name,
          role: role.role,
          rank: rank.rank,
          address,
          port: ports[i]!,
          rankPort: rank.ports[0]!,
          labels: plan.router ? { [ROLE_LABEL]: role.role } : {},
          ...(isDataParallelGroup(role) ? { group: `${placement.host.name}-${role.role}` } : {}),
        });
      }
      if (sidecar)
        sidecars.push({ host: placement.host.name, port: ports[0]!, modelServerPort: role.ranks[0]!.ports[0]!, dataParallelSize: role.ranks.length });
    }
  }
  refuseRouterPortClash(portInventory(plan, placements, { routers, port: settings.router.port, endpoints }), settings.router.port);
  const image = plan.router?.values.endpoint_picker.image ?? DEFAULT_IMAGES.endpointPicker;
  return {
    routers,
    virtualAddress: settings.router.virtualAddress ?? null,
    port: settings.router.port,
    runtime: settings.router.runtime,
    images: {
      endpointPicker: settings.router.images.endpointPicker ?? image,
      proxy: settings.router.images.proxy ?? DEFAULT_IMAGES.proxy,
      sidecar: settings.router.images.sidecar ?? sidecarImage(image),
    },
    endpoints,
    sidecars,
  };
}

/** Refuses router.port where another owner binds it on a router host. */
function refuseRouterPortClash(claims: readonly PortClaim[], port: number): void {
  const clash = portClash(claims, (c) => c.owner.endsWith("(router.port)"));
  if (clash) {
    const [, other] = clash;
    throw new ConfigError("router.port", `${port} would be both the front door's listener and ${other.owner}, on ${other.server}; choose another port`);
  }
}

/**
 * Refuses a port the front door binds on its router host that another owner binds there too, in the
 * stack's inventory (stackPortInventory: every model's ranks, and every model's EPP on its own ports):
 * router.port first, then the EPPs' and Envoy's fixed ports, which the other owner must leave free.
 */
export function refuseFrontDoorPortClashes(settings: Pick<StackSettings, "router">, claims: readonly PortClaim[], eppModels: readonly (string | null)[]): void {
  refuseRouterPortClash(claims, settings.router.port);
  const routerHosts = routerHostEntries(settings.router).length;
  const fixed = new Set(frontDoorPortClaims(routerHosts, eppModels).map((c) => c.owner));
  const clash = portClash(claims, (c) => fixed.has(c.owner));
  if (clash) {
    const [mine, other] = clash;
    throw new ConfigError(
      settings.router.hosts === undefined ? "router.host" : "router.hosts",
      `${mine.port} on ${mine.server} would be both ${mine.owner} and ${other.owner}; the front door's own ports are fixed: give that a port the front door leaves free, or the front door a server of its own`,
    );
  }
}

/** Where clients reach the front door: its virtual address, else each router host's address (clients or DNS are given them all). */
export function frontDoorAddresses(frontDoor: Pick<FrontDoorPlan, "routers" | "virtualAddress">): string[] {
  return frontDoor.virtualAddress ? [frontDoor.virtualAddress] : frontDoor.routers.map((r) => r.address);
}
