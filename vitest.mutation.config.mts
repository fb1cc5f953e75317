import { defineConfig } from "vitest/config";
import base from "./vitest.config.mts";

// The suites Stryker runs per mutant: the ones that check the mutated files directly and run in
// seconds. The fuzzer, the OpenSSH suite and the mock-runtime program suites take minutes and would
// run for nearly every mutant. MUTATION_TESTS (comma-separated files) scopes a run to fewer suites,
// so that its initial test run, which covers every suite listed, stays short on 2 cores.
const ALL = [
  "test/config.test.ts",
  "test/cli.test.ts",
  "test/secrets.test.ts",
  "test/quoting.test.ts",
  "test/unit-apply.test.ts",
  "test/preflight.test.ts",
  "test/hosts-render.test.ts",
  "test/deployment-id.test.ts",
  "test/rollout-waves.test.ts",
  // The front door, compile ahead and KEDA renderers (issue 26).
  "test/front-door.test.ts",
  "test/front-door-agent.test.ts",
  "test/compile-ahead.test.ts",
  "test/autoscaling.test.ts",
  "test/keda-scaledobject.test.ts",
];

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: process.env.MUTATION_TESTS ? process.env.MUTATION_TESTS.split(",") : ALL,
  },
});
