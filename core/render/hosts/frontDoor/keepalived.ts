import { createHash } from "node:crypto";
import * as net from "node:net";

/**
 * keepalived's config for router.virtualAddress (VRRP, keepalived 2.x as Debian and RHEL package it),
 * checked with `keepalived -t` in test/front-door.test.ts. Every router host starts as BACKUP with
 * `nopreempt`: the highest priority takes the address when none holds it, and a host that comes back
 * never takes it from a holder that serves. Adverts go unicast between the router hosts' addresses,
 * so no multicast is needed and no other VRRP group on the network hears them. A `vrrp_script` asks
 * Envoy's admin /ready every second: two failures put the instance in FAULT, which gives the address
 * up at once (the peer takes over after its skew), two successes make it a BACKUP again.
 */
export interface KeepalivedInput {
  /** The deployment id: the instance's name and virtual router id come from it. */
  id: string;
  routerName: string;
  /** This router host's address: the adverts' source, and how the interface is found. */
  ownAddress: string;
  peerAddresses: string[];
  virtualAddress: string;
  priority: number;
  /** Envoy's admin port on loopback, where /ready answers 200 LIVE. */
  adminPort: number;
  /** The file that defines $INTERFACE, the interface holding ownAddress (the front door's step finds it with `ip`). */
  interfaceFile: string;
}

/** VRRP's virtual router id (1-255), from the deployment id: two stacks on one network rarely share one, and unicast adverts reach only the peers anyway. */
export function virtualRouterId(id: string): number {
  return 1 + (createHash("sha256").update(id).digest().readUInt16BE(0) % 255);
}

export function keepalivedConfig(input: KeepalivedInput): string {
  const v6 = net.isIPv6(input.virtualAddress);
  const name = `rbln_serving_${input.id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  return [
    "global_defs {",
    `  router_id ${input.routerName}`,
    // Scripts run as root, and only scripts no other user can change (keepalived refuses the others).
    "  enable_script_security",
    "  script_user root",
    "}",
    `include ${input.interfaceFile}`,
    `vrrp_script ${name}_envoy_ready {`,
    `  script "/usr/bin/curl -fsS -o /dev/null --max-time 1 http://127.0.0.1:${input.adminPort}/ready"`,
    "  interval 1",
    "  timeout 1",
    "  fall 2",
    "  rise 2",
    "}",
    `vrrp_instance ${name} {`,
    "  state BACKUP",
    "  nopreempt",
    ...(v6 ? ["  version 3"] : []),
    "  interface $INTERFACE",
    `  virtual_router_id ${virtualRouterId(input.id)}`,
    `  priority ${input.priority}`,
    "  advert_int 1",
    `  unicast_src_ip ${input.ownAddress}`,
    "  unicast_peer {",
    ...input.peerAddresses.map((peer) => `    ${peer}`),
    "  }",
    "  virtual_ipaddress {",
    `    ${input.virtualAddress}/${v6 ? 128 : 32} dev $INTERFACE`,
    "  }",
    "  track_script {",
    `    ${name}_envoy_ready`,
    "  }",
    "}",
    "",
  ].join("\n");
}
