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
