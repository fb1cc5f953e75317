import { z } from "zod";
import type { RankState, StateReading } from "./states";

const epoch = z.number().finite().nullable();

/** A systemd unit as `systemctl show` gives it: LoadState, ActiveState, SubState, when it entered them, NRestarts, Result. */
const UnitFacts = z.object({
  load: z.string(),
  active: z.string(),
  sub: z.string(),
  /** StateChangeTimestamp: when ActiveState last changed. */
  since: epoch,
  /** ExecMainStartTimestamp: when its process last started (its journal since then is this start's). */
  started: epoch,
  restarts: z.number().int().nonnegative(),
  result: z.string(),
});

/**
 * What the host reader (core/render/hosts/scripts/status-read.py) finds for one rank: its unit, its
 * data-parallel group's restart unit, its journal since its process started, and the markers the
 * install, weights and compile steps write when they are done, with any of their processes running.
 * It reads systemd and files only, never the steps' own output.
 */
export const HostRankFacts = z.object({
  unit: UnitFacts,
  /** The restart unit of the rank's data-parallel group; null for a rank that restarts alone. */
  group: UnitFacts.nullable(),
  log: z.object({
    /** The rank's last journal line (`journalctl -u UNIT -n 1 -o cat`), cut to 200 characters. */
    last: z.string().nullable(),
    /** Since its process started: vllm-rbln loaded a compiled cache, or ran a warm-up (compiles without a hit). */
    hit: z.boolean(),
    warmUp: z.boolean(),
  }),
  /** The deployment's venv is complete, or (epoch) when the process installing it started. */
  venv: z.object({ complete: z.boolean(), installing: epoch }),
  /** Every model of the plan is in HF_HOME, or when the process downloading or copying one started. */
  weights: z.object({ complete: z.boolean(), downloading: epoch }),
  /** The model's compiled-cache bundles: any at all, and any saved since the process started (vllm-rbln saves after every warm-up). */
  bundles: z.object({ any: z.boolean(), savedSinceStart: z.boolean() }),
  /** The compiled cache of the rank's compile key was placed ahead (compiled, pulled or copied). */
  compiled: z.boolean(),
});
export type HostRankFacts = z.infer<typeof HostRankFacts>;

/** A drain the front door holds for an endpoint (drains/NAME.json on the router host): since, and its lease's end. */
export const DrainFacts = z.object({ since: z.number().finite(), until: z.number().finite().optional() });
export type DrainFacts = z.infer<typeof DrainFacts>;

/** What `status` has read of a rank: its HTTP answer, and what its host says (null when the host could not be read). */
export interface RankReading {
  http: { up: boolean; problem: string | null };
  host: HostRankFacts | null;
  /** Why the host could not be read. */
  hostError?: string;
  drain: DrainFacts | null;
  /** Epoch seconds of the reading. */
  now: number;
}

const reading = (state: RankState, since: number | null, detail: string | null): StateReading => ({ state, since, detail });
const ACTIVE = new Set(["active", "activating", "reloading"]);

/**
 * A running unit not serving yet. Its bundle files decide first, as the unit step's do (cache-hit.sh):
 * one saved since the start means its warm-up is over; with none of the model's at all it compiles.
 * With a bundle there, vllm-rbln's log says which (a load line; a warm-up without one compiles),
 * and without either line (a quiet log, or no warm-up yet) it is loading.
 */
function starting(host: HostRankFacts): StateReading {
  const since = host.unit.started ?? host.unit.since;
  if (host.bundles.savedSinceStart) return reading("LOADING", since, "warmed up; its compiled cache is saved");
  if (host.compiled) return reading("LOADING", since, "loading its compiled cache, placed ahead");
  if (!host.bundles.any) return reading("COMPILING", since, "no compiled cache of its model here: compiling");
  if (host.log.hit) return reading("LOADING", since, "loading its compiled cache");
  if (host.log.warmUp) return reading("COMPILING", since, "a warm-up with no compiled cache loaded: compiling");
  return reading("LOADING", since, "loading; a compiled cache of its model is here");
}

/** A rank whose unit does not run: being installed, its weights downloading, or down for a reason named. */
function notRunning(host: HostRankFacts): StateReading {
  if (!host.venv.complete && host.venv.installing !== null) return reading("INSTALLING", host.venv.installing, "installing the packages");
  if (!host.weights.complete && host.weights.downloading !== null) return reading("DOWNLOADING", host.weights.downloading, "downloading the weights");
  if (!host.venv.complete) return reading("DOWN", null, "not installed: its venv is incomplete and nothing installs it");
  if (!host.weights.complete) return reading("DOWN", null, "its weights are missing and nothing downloads them");
  if (host.unit.load !== "loaded") return reading("DOWN", null, `no unit (${host.unit.load})`);
  return reading("DOWN", host.unit.since, `unit ${host.unit.active}/${host.unit.sub}`);
}

/**
 * A rank's state on a host, from what was read of it. The HTTP port decides when it answers (READY,
 * or DRAINING while the front door holds it out); otherwise systemd and the files on the host say
 * how far it got, and which of those it is: FAILED is a unit that failed or crashed, DOWN one that
 * is stopped, missing, or could not be read.
 */
export function classifyHostRank(rank: RankReading): StateReading {
  const { http, host, drain, now } = rank;
  const drained = drain !== null && (drain.until === undefined || now < drain.until);
  // A stopping vLLM answers /health while its requests finish: the unit says it is on its way out.
  if (host?.unit.active === "deactivating") return reading("DRAINING", host.unit.since, "stopping: its requests finish");
  if (http.up) {
    if (http.problem !== null) return reading("FAILED", host?.unit.started ?? null, http.problem);
    if (drained) return reading("DRAINING", drain.since, "out of the front door");
    return reading("READY", host?.unit.started ?? null, null);
  }
  if (host === null) return reading("DOWN", null, [http.problem, rank.hostError && `host not read: ${rank.hostError}`].filter(Boolean).join("; ") || null);
  const { unit, group } = host;
  // A data-parallel rank that failed is started again with its group: starting, not failed.
  if (!ACTIVE.has(unit.active) && group !== null && ACTIVE.has(group.active)) return reading("LOADING", group.since, "its data-parallel group restarts");
  if (unit.active === "failed") return reading("FAILED", unit.since, `unit failed (${unit.result})`);
  if (group?.active === "failed") return reading("FAILED", group.since, `its group's restart failed (${group.result})`);
  if (ACTIVE.has(unit.active) && unit.sub === "auto-restart")
    return reading("FAILED", unit.since, `exited (${unit.result}); systemd starts it again (${unit.restarts} restarts)`);
  if (ACTIVE.has(unit.active)) return starting(host);
  return notRunning(host);
}
