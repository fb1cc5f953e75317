import { defineConfig } from "vitest/config";
import base from "./vitest.config.mts";

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
  },
});
