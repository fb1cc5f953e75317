import * as fs from "node:fs";
import * as path from "node:path";
import { quoteShellWord } from "../shell";
import { packageRoot } from "../packageRoot";

/** The script as shipped: shellcheck reads this file itself; renderLeaseLock only replaces its settings. */
export const LEASE_LOCK_PATH = path.join(packageRoot(), "core", "cache", "scripts", "lease-lock.sh");

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
  return parts.map((p) => p.replace(/[^A-Za-z0-9._-]+/g, "-")).join("-").slice(0, 200);
}

/**
 * `bash -c` text for `run --ready`: 0 when every port answers /health with 200 on `host`. /health
 * is not behind vLLM's API key, and it answers once the engine is up, after the compiled graphs
 * are saved.
 */
export function healthCheck(host: string, ports: readonly number[]): string {
  const probe = "import sys, urllib.request\nhost = sys.argv[1]\nfor port in sys.argv[2:]:\n    urllib.request.urlopen(f'http://{host}:{port}/health', timeout=5)";
  const address = host.includes(":") ? `[${host}]` : host;
  return `python3 -c "${probe.replace(/"/g, '\\"')}" ${address} ${ports.join(" ")}`;
}

/** The lease-lock script with its settings block filled in; the body stays the shipped file's. */
export function renderLeaseLock(settings: LeaseLockSettings): string {
  const s = { ...LEASE_DEFAULTS, ...settings };
  if (!LOCK_NAME.test(s.lockName)) throw new Error(`lease lock name ${JSON.stringify(s.lockName)}: letters, digits, '.', '_' and '-' only`);
  if (!(s.heartbeatSeconds * 2 <= s.leaseSeconds)) throw new Error(`lease lock ${s.lockName}: heartbeatSeconds ${s.heartbeatSeconds} must be at most half of leaseSeconds ${s.leaseSeconds}`);
  const values: Record<string, string> = {
    LOCK_ROOT: quoteShellWord(s.lockRoot),
    LOCK_NAME: quoteShellWord(s.lockName),
    LEASE_SECONDS: String(s.leaseSeconds),
    HEARTBEAT_SECONDS: String(s.heartbeatSeconds),
    POLL_SECONDS: String(s.pollSeconds),
    WAIT_LIMIT_SECONDS: String(s.waitLimitSeconds),
  };
  const text = fs.readFileSync(LEASE_LOCK_PATH, "utf8");
  let replaced = 0;
  const rendered = text.replace(/^([A-Z_]+)=.*$/gm, (line, name: string) => {
    if (!(name in values)) return line;
    replaced++;
    return `${name}=${values[name]}`;
  });
  if (replaced !== Object.keys(values).length) throw new Error(`${LEASE_LOCK_PATH}: expected one line for each of ${Object.keys(values).join(", ")}`);
  return rendered;
}
