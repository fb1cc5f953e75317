import { defineConfig } from "vitest/config";

/** `npm test`: the pure core, rendered artifacts under real tools, and the program under Pulumi's mock runtime. */
export default defineConfig({
  test: {
    environment: "node",
    include: ["test/**/*.test.ts"],
    // The suites that boot systemd and sshd (npm run test:hosts, vitest.hosts.config.mts).
    exclude: ["test/hosts/**", "**/node_modules/**"],
    // Pulumi's mock runtime keeps global state per process: one fork per file keeps files apart.
    pool: "forks",
    // Vitest's default is one worker less than the cores: one at a time on CI's 2. Many files here wait
    // on child processes (bash, shellcheck, systemd-analyze) or timers, so two at once take less time.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
