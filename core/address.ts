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
