import * as path from "node:path";
import { packageRoot } from "../packageRoot";
import { probeShellText } from "../probe";
import { renderScript } from "../template";

/** The script as shipped, under the package root: shellcheck reads the file itself; renderLeaseLock only fills its settings. */
export const LEASE_LOCK_FILE = "core/cache/scripts/lease-lock.sh";
export const LEASE_LOCK_PATH = path.join(packageRoot(), LEASE_LOCK_FILE);

export interface LeaseLockSettings {
  /** A directory on the shared filesystem (NFS, a ReadWriteMany volume) holding leases and markers. */
  lockRoot: string;
  /** The resource: `weights-<model>-<revision>` or `compile-<key>`; letters, digits, `.`, `_`, `-`. */
  lockName: string;
  /** A writer whose heartbeat is older than this is taken over. Default 120 s. */
  leaseSeconds?: number;
  /** How often the writer renews its lease; well under leaseSeconds. Default 20 s. */
  heartbeatSeconds?: number;
  /** How often waiters look for the marker. Default 5 s. */
  pollSeconds?: number;
  /** How long a waiter waits for a marker before it gives up (exit 3). Default 12 h. */
  waitLimitSeconds?: number;
}

export const LEASE_DEFAULTS = { leaseSeconds: 120, heartbeatSeconds: 20, pollSeconds: 5, waitLimitSeconds: 43_200 } as const;

const LOCK_NAME = /^[A-Za-z0-9._-]{1,200}$/;

/** A lock name from parts such as a model id: `/` and other characters become `-`. */
export function lockNameOf(...parts: string[]): string {
  return parts
    .map((p) => p.replace(/[^A-Za-z0-9._-]+/g, "-"))
    .join("-")
    .slice(0, 200);
}

/**
 * `bash -c` text for `run --ready`: 0 when every port answers /health with 200 on `host`. /health
 * is not behind vLLM's API key, and it answers once the engine is up, after the compiled graphs
 * are saved.
 */
export function healthCheck(host: string, ports: readonly number[]): string {
  return probeShellText(host, 5, ports, ["/health"]);
}

/** The lease-lock script with its settings block filled in; the body stays the shipped file's. */
export function renderLeaseLock(settings: LeaseLockSettings): string {
  const s = { ...LEASE_DEFAULTS, ...settings };
  if (!LOCK_NAME.test(s.lockName)) throw new Error(`lease lock name ${JSON.stringify(s.lockName)}: letters, digits, '.', '_' and '-' only`);
  if (!(s.heartbeatSeconds * 2 <= s.leaseSeconds))
    throw new Error(`lease lock ${s.lockName}: heartbeatSeconds ${s.heartbeatSeconds} must be at most half of leaseSeconds ${s.leaseSeconds}`);
  return renderScript(LEASE_LOCK_FILE, `lease lock on ${s.lockRoot}`, {
    LOCK_ROOT: s.lockRoot,
    LOCK_NAME: s.lockName,
    LEASE_SECONDS: s.leaseSeconds,
    HEARTBEAT_SECONDS: s.heartbeatSeconds,
    POLL_SECONDS: s.pollSeconds,
    WAIT_LIMIT_SECONDS: s.waitLimitSeconds,
  });
}
