import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "node",
    include: ["test/**/*.test.ts"],
    // Pulumi's mock runtime keeps global state per process: one fork per file keeps files apart.
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
