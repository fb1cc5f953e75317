import * as net from "node:net";

// One helper per syntax a tool reads an address in: URLs and `host:port` (bracketed), podman's and
// Docker's --publish (bracketed), Envoy's socket_address (bare). ssh takes an IPv6 address bare and
// rsync's `host:path` bracketed: those two are peer-ssh.sh's, in bash.

/**
 * One spelling per IP address, the one the kernel and sshd compare and print: an IPv4-mapped IPv6
 * address (`::ffff:10.0.0.9`) as its IPv4 address, IPv6 compressed in lower case (RFC 5952, as
 * WHATWG URLs write it); an IPv4 address, a host name or an address with a zone as it is.
 */
export function canonicalIp(address: string): string {
  if (!net.isIPv6(address) || address.includes("%")) return address;
  const compressed = new URL(`http://[${address}]`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(compressed);
  if (!mapped) return compressed;
  const [high, low] = [Number.parseInt(mapped[1]!, 16), Number.parseInt(mapped[2]!, 16)];
  return [high >> 8, high & 255, low >> 8, low & 255].join(".");
}

/** An address as URLs and `host:port` write it: an IPv6 address in brackets. */
export function bracketed(address: string): string {
  return address.includes(":") ? `[${address}]` : address;
}

/** `address:port`, an IPv6 address in brackets (as Prometheus and URLs want it). */
export function hostPort(address: string, port: number): string {
  return `${bracketed(address)}:${port}`;
}

/** `http://address:port`, or `http://address` without a port. */
export function httpUrl(address: string, port?: number): string {
  return `http://${port === undefined ? bracketed(address) : hostPort(address, port)}`;
}

/** The address a server listens on when it names one; undefined for all interfaces (unset, 0.0.0.0 or ::). */
export function specificListenAddress(server: { listenAddress?: string }): string | undefined {
  return server.listenAddress && !["0.0.0.0", "::"].includes(server.listenAddress) ? server.listenAddress : undefined;
}

/** Where a server's ranks or front door are reached: the address it listens on when that names one, else its own address. */
export function listeningAddress(server: { address: string; listenAddress?: string }): string {
  return specificListenAddress(server) ?? server.address;
}

/** podman's (and Docker's) `--publish address:port:containerPort`: an IPv6 address in brackets, or the runtime refuses it. */
export function publishSpec(address: string, port: number, containerPort: number = port): string {
  return `${hostPort(address, port)}:${containerPort}`;
}

/** An address as Envoy's socket_address takes it: bare, an IPv6 address without brackets. */
export function socketAddress(address: string): string {
  return address.replace(/^\[(.*)\]$/, "$1");
}
