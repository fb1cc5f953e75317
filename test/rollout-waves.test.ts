import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { rolloutWaves, unavailableCount } from "../core/rollout/waves";
import { hostWaves } from "../core/rollout/hostWaves";
import { planDeployment } from "../core/plan/deployment";
import { copySources, weightsHosts } from "../core/render/hosts/copies";
import { compileLockWords, hostCacheLayout, weightsLockName } from "../core/render/hosts/cacheLayout";
import { healthCheck } from "../core/cache/leaseLock";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { shippedCatalog } from "./helpers/recipes";

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
      fc.property(
        fc.integer({ min: 1, max: 1024 }),
        fc.oneof(
          fc.integer({ min: 1, max: 2000 }),
          fc.integer({ min: 1, max: 100 }).map((p) => `${p}%`),
        ),
        (replicas, max) => {
          const waves = rolloutWaves(replicas, max);
          expect(waves.flat()).toEqual(Array.from({ length: replicas }, (_, i) => i));
          for (const wave of waves) expect(wave.length).toBeLessThanOrEqual(unavailableCount(replicas, max));
          expect(rolloutWaves(replicas, "25%").length).toBeLessThanOrEqual(4);
        },
      ),
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

describe("who copies a compiled cache from whom", () => {
  const hosts = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `npu-${i}`, address: `10.0.0.${i + 1}`, hostKey: EXAMPLE_HOST_KEY }));
  const compileCopies = (raw: Record<string, unknown>) => {
    const deployment = planDeployment(parseStackSettings({ strategy: "aggregated-data-expert-parallel", target: "Throughput", ...raw }), shippedCatalog);
    return copySources(deployment, hostWaves(deployment))
      .filter((c) => c.kind === "compile")
      .map((c) => `${c.source.host.name} -> ${c.dest.host.name}${c.compileKeys.length === 1 ? "" : ` (${c.compileKeys.length} keys)`}`);
  };

  it("one compile per key: the first host of the first wave compiles, every other host copies, from the nearest earlier wave", () => {
    // 8 replicas, 25%: waves [0,1] [2,3] [4,5] [6,7]; npu-1 waits for npu-0's compile instead of compiling too.
    expect(compileCopies({ replicas: 8, hosts: hosts(8) })).toEqual([
      "npu-0 -> npu-1",
      "npu-0 -> npu-2",
      "npu-1 -> npu-3",
      "npu-2 -> npu-4",
      "npu-3 -> npu-5",
      "npu-4 -> npu-6",
      "npu-5 -> npu-7",
    ]);
    expect(compileCopies({ replicas: 3, hosts: hosts(3), rollout: { maxUnavailable: 3 } })).toEqual(["npu-0 -> npu-1", "npu-0 -> npu-2"]);
    // A shared cache copies nothing: the compile lease makes one writer.
    expect(compileCopies({ replicas: 8, hosts: hosts(8), cache: { shared: "/mnt/rbln-cache" } })).toEqual([]);
  });
});

describe("who downloads the weights, and where the caches live", () => {
  const hosts = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `npu-${i}`, address: `10.0.0.${i + 1}`, hostKey: EXAMPLE_HOST_KEY }));
  const deploy = (raw: Record<string, unknown>) =>
    planDeployment(
      parseStackSettings({ strategy: "aggregated-data-expert-parallel", target: "Throughput", replicas: 3, hosts: hosts(3), ...raw }),
      shippedCatalog,
    );
  const names = (placements: readonly { host: { name: string } }[]) => placements.map((p) => p.host.name);

  it("copies: the seed downloads, every other host copies the weights from it", () => {
    const deployment = deploy({});
    const waves = hostWaves(deployment);
    expect(names(weightsHosts(deployment, waves))).toEqual(["npu-0"]);
    const weights = copySources(deployment, waves).filter((c) => c.kind === "weights");
    expect(weights.map((c) => `${c.source.host.name} -> ${c.dest.host.name} ${c.compileKeys.length}`)).toEqual(["npu-0 -> npu-1 0", "npu-0 -> npu-2 0"]);
    expect(hostCacheLayout(deployment.settings)).toEqual({ root: "/var/lib/rbln-serving", leaseLock: null });
    expect(compileLockWords(hostCacheLayout(deployment.settings), "abc", "127.0.0.1", 8000)).toEqual([]);
  });

  it("shared: every host runs the weights step under a lease; the caches live in the shared folder", () => {
    const deployment = deploy({ cache: { shared: "/mnt/rbln-cache" } });
    expect(names(weightsHosts(deployment, hostWaves(deployment)))).toEqual(["npu-0", "npu-1", "npu-2"]);
    const layout = hostCacheLayout(deployment.settings);
    expect(layout.root).toBe("/mnt/rbln-cache");
    expect(layout.leaseLock!.path).toMatch(/^\/opt\/rbln-serving\/bin\/lease-lock-[0-9a-f]{12}\.sh$/);
    expect(layout.leaseLock!.text).toMatch(/^LOCK_ROOT=\/mnt\/rbln-cache\/rbln-serving-locks$/m);
    expect(compileLockWords(layout, "abc", "10.0.0.1", 8000)).toEqual([
      "/bin/bash",
      layout.leaseLock!.path,
      "run",
      "--name",
      "compile-abc",
      "--ready",
      healthCheck("10.0.0.1", [8000]),
      "--",
    ]);
    expect(healthCheck("10.0.0.1", [8000])).toMatch(/ 10\.0\.0\.1 5 8000 \/health$/);
    expect(weightsLockName("MiniMaxAI/MiniMax-M2.7", undefined)).toBe("weights-MiniMaxAI-MiniMax-M2.7-latest");
    expect(weightsLockName("MiniMaxAI/MiniMax-M2.7", "0123456789abcdef0123456789abcdef01234567")).toBe(
      "weights-MiniMaxAI-MiniMax-M2.7-0123456789abcdef0123456789abcdef01234567",
    );
  });
});
