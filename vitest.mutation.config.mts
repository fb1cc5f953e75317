import { defineConfig } from "vitest/config";
import base from "./vitest.config.mts";

// The suites Stryker runs per mutant: the ones that check the mutated files directly and run in
// seconds. The fuzzer, the OpenSSH suite and the mock-runtime program suites take minutes and would
// run for nearly every mutant.
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: [
      "test/config.test.ts",
      "test/cli.test.ts",
      "test/secrets.test.ts",
      "test/quoting.test.ts",
      "test/unit-apply.test.ts",
      "test/preflight.test.ts",
      "test/hosts-render.test.ts",
      "test/deployment-id.test.ts",
      "test/rollout-waves.test.ts",
    ],
  },
});
