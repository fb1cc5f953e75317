import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * A sequencer that starts the named files first, in the order given, and the others after them in
 * vitest's own order (on a fresh clone, the larger file first). With a few workers and files of very
 * different lengths, the longest started first end the tier soonest (longest processing time first);
 * vitest's order by size started the 6-minute front door suite among the last.
 */
export function longestFirst(first: readonly string[]) {
  return class LongestFirst extends BaseSequencer {
    override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
      const ordered = await super.sort(files);
      const rank = (file: TestSpecification) => {
        const i = first.findIndex((name) => file.moduleId.endsWith(`/${name}`));
        return i < 0 ? first.length : i;
      };
      return [...ordered].sort((a, b) => rank(a) - rank(b));
    }
  };
}

/**
 * The host tier's longest files, longest first (seconds each, measured 2026-12-06 on 2 cores with
 * other work beside): 352, 196, 187, 147, 129, 95, 94, 92; the other 16 take 1 to 90 s.
 * test/docs-links.test.ts checks that each still exists.
 */
export const HOST_TIER_LONGEST = [
  "test/hosts/front-door-hosts.test.ts",
  "test/hosts/compile-registry-hosts.test.ts",
  "test/hosts/front-door-ha-hosts.test.ts",
  "test/hosts/status-hosts.test.ts",
  "test/hosts/front-door-pd-hosts.test.ts",
  "test/hosts/network.test.ts",
  "test/hosts/faults-hosts.test.ts",
  "test/hosts/rollout-hosts.test.ts",
];
