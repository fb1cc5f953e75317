/**
 * The states `status` tells apart, as `sky serve status` does: where a rank is on its way to
 * serving, or why it is not. Read from the HTTP port where it answers, else from the host (systemd,
 * the rank's journal, the install and weights markers) or the cluster (pods, Jobs).
 */
export const RANK_STATES = ["INSTALLING", "DOWNLOADING", "COMPILING", "LOADING", "READY", "DRAINING", "FAILED", "DOWN"] as const;
export type RankState = (typeof RANK_STATES)[number];

/** On its way to READY: `status` exits 1 while a rank is in one and none has failed. */
const STARTING: ReadonlySet<RankState> = new Set(["INSTALLING", "DOWNLOADING", "COMPILING", "LOADING", "DRAINING"]);

/** What `status` exits with (2 is a bad command line or stack, before anything is read). */
export const STATUS_EXIT = { ready: 0, starting: 1, failed: 3 } as const;

/** One rank's state, since when (epoch seconds, null when unknown), and why, in a few words. */
export interface StateReading {
  state: RankState;
  since: number | null;
  /** What the state rests on: the unit's state, a marker missing, a pod's reason. */
  detail: string | null;
}

/** 0 when every rank serves, 1 while some are still on their way and none failed, 3 when one failed or is down. */
export function exitCodeOf(states: readonly RankState[]): number {
  if (states.some((s) => s === "FAILED" || s === "DOWN")) return STATUS_EXIT.failed;
  if (states.some((s) => STARTING.has(s))) return STATUS_EXIT.starting;
  return STATUS_EXIT.ready;
}

/** How long since `since`, as `sky serve status` writes it: 42s, 17m, 2h 40m, 3d 4h; "-" when unknown. */
export function formatAge(since: number | null, now: number): string {
  if (since === null || !Number.isFinite(since)) return "-";
  const seconds = Math.max(0, Math.floor(now - since));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours}h ${minutes % 60}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

/** One role's line, as `kubectl rollout status` sums a rollout up: `decode: 3 of 4 ranks ready (1 COMPILING)`. */
export function roleSummaries(ranks: readonly { role: string; state: RankState }[], noun = "ranks"): string[] {
  const roles = [...new Set(ranks.map((r) => r.role))];
  return roles.map((role) => {
    const states = ranks.filter((r) => r.role === role).map((r) => r.state);
    const ready = states.filter((s) => s === "READY").length;
    const others = RANK_STATES.filter((s) => s !== "READY")
      .map((s) => [s, states.filter((t) => t === s).length] as const)
      .filter(([, n]) => n > 0)
      .map(([s, n]) => `${n} ${s}`);
    return `${role}: ${ready} of ${states.length} ${noun} ready${others.length > 0 ? ` (${others.join(", ")})` : ""}`;
  });
}
