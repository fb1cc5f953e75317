import { defineConfig } from "vitest/config";
import base from "./vitest.config.mts";
import { HOST_TIER_LONGEST, longestFirst } from "./test/helpers/longestFirst";

/** `npm run test:hosts`: the fake hosts (real systemd and sshd in namespaces), OpenSSH, the registry and the stand-ins. */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/hosts/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    // These files mostly wait (units starting, SSH round trips, budgets polled), not compute:
    // three at once on 2 cores take about a third of the time. Each draws its own hosts and ports.
    maxWorkers: 3,
    // The longest files first (test/helpers/longestFirst.ts).
    sequence: { sequencer: longestFirst(HOST_TIER_LONGEST) },
  },
});
