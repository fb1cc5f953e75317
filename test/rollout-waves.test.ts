import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { rolloutWaves, unavailableCount } from "../core/rollout/waves";

describe("rollout waves", () => {
  it("default 25% rounds up, at least 1", () => {
    expect([1, 2, 4, 5, 8, 64].map((n) => unavailableCount(n, "25%"))).toEqual([1, 1, 1, 2, 2, 16]);
    expect(rolloutWaves(4, "25%")).toEqual([[0], [1], [2], [3]]);
    expect(rolloutWaves(5, "25%")).toEqual([[0, 1], [2, 3], [4]]);
    expect(rolloutWaves(3, "100%")).toEqual([[0, 1, 2]]);
    expect(rolloutWaves(3, 2)).toEqual([[0, 1], [2]]);
    expect(rolloutWaves(2, 9)).toEqual([[0, 1]]);
  });

  it("every replica is in exactly one wave, waves never exceed the budget, and at most 4 waves with 25%", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1024 }), fc.oneof(fc.integer({ min: 1, max: 2000 }), fc.integer({ min: 1, max: 100 }).map((p) => `${p}%`)), (replicas, max) => {
        const waves = rolloutWaves(replicas, max);
        expect(waves.flat()).toEqual(Array.from({ length: replicas }, (_, i) => i));
        for (const wave of waves) expect(wave.length).toBeLessThanOrEqual(unavailableCount(replicas, max));
        expect(rolloutWaves(replicas, "25%").length).toBeLessThanOrEqual(4);
      }),
    );
  });

  it("the stack key defaults to 25% and refuses what is not a count or percentage", () => {
    const base = { strategy: "s", target: "t", platform: "kubernetes", kubernetes: { image: "r/i:1" } };
    expect(parseStackSettings(base).rollout.maxUnavailable).toBe("25%");
    expect(parseStackSettings({ ...base, rollout: { maxUnavailable: 2 } }).rollout.maxUnavailable).toBe(2);
    for (const bad of [0, "0%", "101%", "25", -1, 1.5]) {
      expect(() => parseStackSettings({ ...base, rollout: { maxUnavailable: bad } })).toThrow(/^rollout\.maxUnavailable: /);
    }
  });
});
