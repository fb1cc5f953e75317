import { describe, expect, it } from "vitest";
import { classifyHostRank, HostRankFacts, type RankReading } from "../core/status/hostRank";
import { exitCodeOf, formatAge, RANK_STATES, roleSummaries, type RankState } from "../core/status/states";

/**
 * `status`'s states on hosts, from what it read of a rank (core/status/hostRank.ts): one reading
 * for each state, as the host reader (core/render/hosts/scripts/status-read.py) reports it. The
 * same states on fake hosts, read for real over SSH: test/hosts/status-hosts.test.ts.
 */
const NOW = 1_800_000_000;
const unit = (active: string, sub: string, more: Partial<HostRankFacts["unit"]> = {}): HostRankFacts["unit"] => ({
  load: "loaded",
  active,
  sub,
  since: NOW - 600,
  started: NOW - 600,
  restarts: 0,
  result: "success",
  ...more,
});

/** A rank whose host is done installing and downloading, its unit stopped. */
function facts(more: Partial<HostRankFacts> = {}): HostRankFacts {
  return HostRankFacts.parse({
    unit: unit("inactive", "dead"),
    group: null,
    log: { last: null, hit: false, warmUp: false },
    bundles: { any: false, savedSinceStart: false },
    venv: { complete: true, installing: null },
    weights: { complete: true, downloading: null },
    compiled: false,
    ...more,
  });
}

const notAnswering = { up: false, problem: "connect ECONNREFUSED 10.0.0.5:8000" };
const read = (host: HostRankFacts | null, more: Partial<RankReading> = {}): RankReading => ({ http: notAnswering, host, drain: null, now: NOW, ...more });

const CASES: [string, RankReading, RankState, RegExp | null][] = [
  [
    "a venv without its marker while a process runs from it: INSTALLING",
    read(facts({ unit: unit("inactive", "dead", { load: "not-found" }), venv: { complete: false, installing: NOW - 120 } })),
    "INSTALLING",
    /installing/,
  ],
  [
    "the weights' marker missing while a download or copy into HF_HOME runs: DOWNLOADING",
    read(facts({ unit: unit("inactive", "dead", { load: "not-found" }), weights: { complete: false, downloading: NOW - 3600 } })),
    "DOWNLOADING",
    /downloading/,
  ],
  [
    "a running unit with no compiled bundle of its model on the host: COMPILING",
    read(facts({ unit: unit("active", "running") })),
    "COMPILING",
    /no compiled cache of its model here/,
  ],
  [
    "a running unit whose log shows its compiled cache loaded: LOADING",
    read(facts({ unit: unit("active", "running"), bundles: { any: true, savedSinceStart: false }, log: { last: "x", hit: true, warmUp: true } })),
    "LOADING",
    /loading its compiled cache$/,
  ],
  ["a running unit with its cache placed ahead: LOADING", read(facts({ unit: unit("active", "running"), compiled: true })), "LOADING", /placed ahead/],
  ["an answering rank: READY", read(facts({ unit: unit("active", "running") }), { http: { up: true, problem: null } }), "READY", null],
  [
    "an answering rank the front door holds out: DRAINING",
    read(facts({ unit: unit("active", "running") }), { http: { up: true, problem: null }, drain: { since: NOW - 5, until: NOW + 295 } }),
    "DRAINING",
    /front door/,
  ],
  ["a unit stopping (its requests finishing): DRAINING", read(facts({ unit: unit("deactivating", "stop-sigterm") })), "DRAINING", /stopping/],
  ["a failed unit: FAILED", read(facts({ unit: unit("failed", "failed", { result: "exit-code" }) })), "FAILED", /unit failed \(exit-code\)/],
  [
    "a crashed unit systemd restarts: FAILED",
    read(facts({ unit: unit("activating", "auto-restart", { restarts: 2, result: "exit-code" }) })),
    "FAILED",
    /2 restarts/,
  ],
  [
    "a rank that answers with another model: FAILED",
    read(facts({ unit: unit("active", "running") }), { http: { up: true, problem: 'serves "x", planned "y"' } }),
    "FAILED",
    /serves/,
  ],
  ["a stopped unit: DOWN", read(facts()), "DOWN", /unit inactive\/dead/],
  ["a venv without its marker and nothing installing: DOWN", read(facts({ venv: { complete: false, installing: null } })), "DOWN", /venv is incomplete/],
  ["a host that could not be read: DOWN", read(null, { hostError: "Connection refused" }), "DOWN", /host not read: Connection refused/],
];

describe("a rank's state on a host", () => {
  it.each(CASES)("%s", (_, reading, state, detail) => {
    const result = classifyHostRank(reading);
    expect(result.state).toBe(state);
    if (detail === null) expect(result.detail).toBeNull();
    else expect(result.detail).toMatch(detail);
  });

  it("has a case for every state", () => {
    expect(new Set(CASES.map(([, , state]) => state))).toEqual(new Set(RANK_STATES));
  });

  it("dates each state from what started it: the process, the install, the download, the drain", () => {
    const since = (reading: RankReading) => classifyHostRank(reading).since;
    expect(since(CASES[0]![1])).toBe(NOW - 120);
    expect(since(CASES[1]![1])).toBe(NOW - 3600);
    expect(since(read(facts({ unit: unit("active", "running", { started: NOW - 42 }) }), { http: { up: true, problem: null } }))).toBe(NOW - 42);
    expect(since(CASES[6]![1])).toBe(NOW - 5);
  });

  it("a running rank's bundle files decide before its log, which extraEnv can silence", () => {
    const running = (bundles: HostRankFacts["bundles"], log: Partial<HostRankFacts["log"]> = {}) =>
      classifyHostRank(read(facts({ unit: unit("active", "running"), bundles, log: { last: null, hit: false, warmUp: false, ...log } }))).state;
    // Saved since the start: the warm-up is over, whatever the log says.
    expect(running({ any: true, savedSinceStart: true }, { warmUp: true })).toBe("LOADING");
    // None at all: nothing to load, even with a (stray) load line.
    expect(running({ any: false, savedSinceStart: false }, { hit: true })).toBe("COMPILING");
    // A bundle there: a warm-up with no load line compiles; a quiet log is loading.
    expect(running({ any: true, savedSinceStart: false }, { warmUp: true })).toBe("COMPILING");
    expect(running({ any: true, savedSinceStart: false })).toBe("LOADING");
  });

  it("a drain whose lease ran out no longer counts", () => {
    const reading = read(facts({ unit: unit("active", "running") }), { http: { up: true, problem: null }, drain: { since: NOW - 400, until: NOW - 100 } });
    expect(classifyHostRank(reading).state).toBe("READY");
  });

  it("a data-parallel rank whose group restarts is LOADING; whose group's restart failed, FAILED", () => {
    const group = (active: string) => unit(active, active === "failed" ? "failed" : "start", { result: active === "failed" ? "exit-code" : "success" });
    expect(classifyHostRank(read(facts({ unit: unit("inactive", "dead"), group: group("activating") }))).state).toBe("LOADING");
    expect(classifyHostRank(read(facts({ unit: unit("inactive", "dead"), group: group("failed") }))).state).toBe("FAILED");
  });
});

describe("the exit status, the ages and the role lines", () => {
  it("exits 0 when every rank is READY, 1 while any is on its way, 3 when any failed or is down", () => {
    expect(exitCodeOf(["READY", "READY"])).toBe(0);
    for (const starting of ["INSTALLING", "DOWNLOADING", "COMPILING", "LOADING", "DRAINING"] as const) expect(exitCodeOf(["READY", starting])).toBe(1);
    expect(exitCodeOf(["COMPILING", "FAILED"])).toBe(3);
    expect(exitCodeOf(["READY", "DOWN"])).toBe(3);
  });

  it("writes ages as sky serve status does", () => {
    expect([0, 42, 60, 17 * 60 + 5, 2 * 3600 + 40 * 60, 3 * 86400 + 4 * 3600].map((s) => formatAge(NOW - s, NOW))).toEqual([
      "0s",
      "42s",
      "1m",
      "17m",
      "2h 40m",
      "3d 4h",
    ]);
    expect(formatAge(null, NOW)).toBe("-");
  });

  it("sums each role up as kubectl rollout status does", () => {
    const ranks = (role: string, states: RankState[]) => states.map((state) => ({ role, state }));
    expect(roleSummaries([...ranks("prefill", ["READY"]), ...ranks("decode", ["READY", "READY", "READY", "COMPILING"])])).toEqual([
      "prefill: 1 of 1 ranks ready",
      "decode: 3 of 4 ranks ready (1 COMPILING)",
    ]);
  });
});
