import { defineConfig } from "vitest/config";
import base from "./vitest.config.mts";

/** `npm run test:hosts`: the fake hosts (real systemd and sshd in namespaces), OpenSSH, the registry and the stand-ins. */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/hosts/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
  },
});
