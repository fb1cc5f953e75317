// Every port the stack binds on a server, and who binds it: the one inventory the port checks read.
import { createHash } from "node:crypto";
import type { Host } from "../config/schema";
import { normalAddress } from "../config/fields";
import type { FrontDoorPlan, HostPlacement, LaunchPlan, RankPlan, RolePlan } from "./types";

/** The ports the front door takes on the router host besides `router.port`. */
export const FRONT_DOOR_PORTS = {
  /** The EPP's ext_proc gRPC server: published on loopback only, for Envoy. */
  eppGrpc: 9002,
  /** The EPP's gRPC health server, on loopback. */
  eppHealth: 9003,
  /** The EPP's Prometheus metrics, on the router host's address. */
  eppMetrics: 9090,
  /** Envoy's admin server, on loopback. */
  envoyAdmin: 9901,
} as const;

/** The EPP ports of one deployment on the router host. */
export interface EppPorts {
  eppGrpc: number;
  eppHealth: number;
  eppMetrics: number;
}

/** A router host's EPP slots for a stack of models, and where their ports start: gRPC and health 20000-20999, metrics 21000-21499. */
const MODEL_EPP_SLOTS = 500;
const MODEL_EPP_BASE = { grpc: 20000, metrics: 21000 } as const;

/**
 * The EPP ports on the router host of the one EPP (`slot` null: 9002, 9003, 9090), or of the model of
 * a stack of models in `slot` (modelEppSlots): gRPC 20000+2*slot, health one higher, metrics 21000+slot.
 */
export function modelEppPorts(slot: number | null): EppPorts {
  if (slot === null) return { eppGrpc: FRONT_DOOR_PORTS.eppGrpc, eppHealth: FRONT_DOOR_PORTS.eppHealth, eppMetrics: FRONT_DOOR_PORTS.eppMetrics };
  return { eppGrpc: MODEL_EPP_BASE.grpc + 2 * slot, eppHealth: MODEL_EPP_BASE.grpc + 2 * slot + 1, eppMetrics: MODEL_EPP_BASE.metrics + slot };
}

/**
 * Each model's EPP slot, in the models' order: the one its name hashes to, or the next free one. A
 * model's ports follow its name, not its place in the list: adding or removing another model moves
 * no other model's EPP (which would restart it under its requests), but for the rare model whose
 * slot a removed one's name had taken first.
 */
export function modelEppSlots(names: readonly string[]): number[] {
  const taken = new Set<number>();
  return names.map((name) => {
    let slot = Number.parseInt(createHash("sha256").update(name).digest("hex").slice(0, 8), 16) % MODEL_EPP_SLOTS;
    while (taken.has(slot)) slot = (slot + 1) % MODEL_EPP_SLOTS;
    taken.add(slot);
    return slot;
  });
}

/** Where a router host's Envoy serves its local EPP to the other router hosts' Envoys, over mutual TLS. */
export const PEER_EPP_PORT = 9443;

/** One port bound on one server, and what binds it, as a refusal names it. */
export interface PortClaim {
  /** The server, as its normal address (two entries of one address are one server). */
  server: string;
  port: number;
  owner: string;
}

const flagValue = (rank: RankPlan, flag: string) => rank.flags.find((f) => f.name === flag)?.values[0];
const portOf = (endpoint: string) => Number(/:(\d+)$/.exec(endpoint)?.[1] ?? Number.NaN);

/**
 * What one rank binds on its own host besides its serving ports: the data-parallel coordinator's RPC
 * port where the rank's --data-parallel-address is its own host, the NIXL side channel, and the
 * KV-event publisher's endpoints where it binds them (a wildcard endpoint, and the replay endpoint;
 * vLLM's ZmqEventPublisher connects to any other).
 */
function rankPorts(role: RolePlan, rank: RankPlan, host: Host): { port: number; what: string }[] {
  const label = `${role.role} rank ${rank.rank}`;
  const ports = rank.ports.map((port) => ({ port, what: `${label}'s serving port` }));
  const rpc = flagValue(rank, "--data-parallel-rpc-port");
  const dpAddress = flagValue(rank, "--data-parallel-address");
  if (rpc !== undefined && (dpAddress === "<POD_IP>" || (dpAddress !== undefined && normalAddress(dpAddress) === normalAddress(host.address))))
    ports.push({ port: Number(rpc), what: `${role.role}'s data-parallel RPC port` });
  const nixl = rank.env.VLLM_NIXL_SIDE_CHANNEL_PORT;
  if (nixl !== undefined) ports.push({ port: Number(nixl), what: `${label}'s NIXL side channel` });
  let events: { endpoint?: unknown; replay_endpoint?: unknown } = {};
  try {
    events = JSON.parse(flagValue(rank, "--kv-events-config") ?? "{}");
  } catch {
    // Not JSON: vLLM refuses it at start; nothing is bound.
  }
  if (typeof events.endpoint === "string" && /^tcp:\/\/(\*|\[?::\]?):/.test(events.endpoint))
    ports.push({ port: portOf(events.endpoint), what: `${label}'s KV-event publisher` });
  if (typeof events.replay_endpoint === "string") ports.push({ port: portOf(events.replay_endpoint), what: `${label}'s KV-event replay endpoint` });
  return ports.filter((p) => Number.isInteger(p.port));
}

/** What each EPP port is, as a refusal names a model's. */
const EPP_PORT_NAMES = { eppGrpc: "gRPC", eppHealth: "health", eppMetrics: "metrics" } as const;

/**
 * The ports the front door takes on each router host besides its listener and the SSH server: each
 * model's EPP's (`eppModels`, the models' names in their order, each EPP on its slot's ports:
 * modelEppSlots; [null] for a stack of one model, whose one EPP's keep the names they had), Envoy's admin port, and
 * the peer EPP port of a front door of several router hosts.
 */
export function frontDoorPortClaims(routerHosts: number, eppModels: readonly (string | null)[]): { port: number; owner: string }[] {
  const slots = modelEppSlots(eppModels.map((name) => name ?? ""));
  const epps = eppModels.flatMap((name, i) =>
    Object.entries(modelEppPorts(name === null ? null : slots[i]!)).map(([key, port]) => ({
      port,
      owner: name === null ? `the front door's ${key} port` : `model ${name}'s endpoint picker (${EPP_PORT_NAMES[key as keyof typeof EPP_PORT_NAMES]})`,
    })),
  );
  const claims = [...epps, { port: FRONT_DOOR_PORTS.envoyAdmin, owner: "the front door's envoyAdmin port" }];
  // Only a front door of several router hosts serves its EPP to the peers.
  return routerHosts > 1 ? [...claims, { port: PEER_EPP_PORT, owner: "the front door's peer EPP port (TLS)" }] : claims;
}

/** One model's part of the inventory: its ranks where they run, and its front door (the router hosts, the sidecars' endpoints). */
interface ModelPorts {
  plan: Pick<LaunchPlan, "roles">;
  placements: readonly HostPlacement[];
  frontDoor: Pick<FrontDoorPlan, "routers" | "port" | "endpoints"> | null;
}

/** Claims one model's ports into `claims`, an owner's claim of a port on a server once. */
function claimModelPorts(claims: PortClaim[], { plan, placements, frontDoor }: ModelPorts, eppModels: readonly (string | null)[]): void {
  const claim = (host: Host, port: number, owner: string) => {
    const server = normalAddress(host.address);
    if (!claims.some((c) => c.server === server && c.port === port && c.owner === owner)) claims.push({ server, port, owner });
  };
  for (const { host, node } of placements) {
    claim(host, host.port, `the SSH server of ${host.name}`);
    for (const role of plan.roles.filter((r) => r.node === node))
      for (const rank of role.ranks) for (const { port, what } of rankPorts(role, rank, host)) claim(host, port, `${what} on ${host.name}`);
  }
  if (!frontDoor) return;
  for (const { host } of frontDoor.routers) {
    claim(host, host.port, `the SSH server of ${host.name}`);
    claim(host, frontDoor.port, "the front door's listener (router.port)");
    for (const { port, owner } of frontDoorPortClaims(frontDoor.routers.length, eppModels)) claim(host, port, owner);
  }
  // An endpoint served off its rank's port is the routing sidecar's, on the rank's host.
  for (const endpoint of frontDoor.endpoints.filter((e) => e.port !== e.rankPort)) {
    const host = placements.find((p) => p.host.name === endpoint.host)!.host;
    claim(host, endpoint.port, `the routing sidecar's port on ${endpoint.host}`);
  }
}

/** Every port one model's deployment binds on each server it runs on, with its owner: the ranks', the SSH servers', the front door's and the routing sidecars'. */
export function portInventory(
  plan: Pick<LaunchPlan, "roles">,
  placements: readonly HostPlacement[],
  frontDoor: Pick<FrontDoorPlan, "routers" | "port" | "endpoints"> | null,
): PortClaim[] {
  const claims: PortClaim[] = [];
  claimModelPorts(claims, { plan, placements, frontDoor }, [null]);
  return claims;
}

/**
 * Every port a stack binds: each model's (portInventory), the router host's once, with every
 * model's EPP's there under the model's name. A stack without models is its one model's inventory.
 */
export function stackPortInventory(models: readonly (ModelPorts & { entry: { name: string | null } })[]): PortClaim[] {
  const claims: PortClaim[] = [];
  const eppModels = models.map((m) => m.entry.name);
  for (const model of models) claimModelPorts(claims, model, eppModels);
  return claims;
}

/** The first port two owners would both bind on one server, with both, if any. */
export function portClash(claims: readonly PortClaim[], involving: (claim: PortClaim) => boolean): [PortClaim, PortClaim] | undefined {
  for (const mine of claims.filter(involving)) {
    const other = claims.find((c) => c !== mine && c.server === mine.server && c.port === mine.port);
    if (other) return [mine, other];
  }
  return undefined;
}
