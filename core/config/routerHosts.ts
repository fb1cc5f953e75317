// The front door's servers as one list: router.hosts, or router.host as a list of one (the form stacks
// used first), each with the key path a refusal names.
import type { Settings } from "./schema";

/** A router host as configured: the name of the entry of hosts whose server it shares, or a server of its own. */
export type RouterHostSetting = NonNullable<Settings["router"]["host"]>;

export interface RouterHostEntry {
  host: RouterHostSetting;
  /** Its key path: ["router", "host"] or ["router", "hosts", i]. */
  path: (string | number)[];
}

export function routerHostEntries(router: Pick<Settings["router"], "host" | "hosts">): RouterHostEntry[] {
  if (router.hosts) return router.hosts.map((host, i) => ({ host, path: ["router", "hosts", i] }));
  return router.host === undefined ? [] : [{ host: router.host, path: ["router", "host"] }];
}
