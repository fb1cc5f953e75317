import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(__dirname, "..");
const SCRIPT = path.join(ROOT, "scripts/provision-test-tools.sh");

describe("npm test and npm run test:hosts provision what the suites need", () => {
  it("runs the provisioning script before the tests", () => {
    const { scripts } = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
    expect(scripts.pretest).toBe("bash scripts/provision-test-tools.sh");
    expect(scripts["pretest:hosts"]).toBe("bash scripts/provision-test-tools.sh");
    // CI runs both tiers: the fast one, then the suites that boot systemd and sshd.
    expect(fs.readFileSync(path.join(ROOT, ".ci/run"), "utf8")).toMatch(/^npm test\nnpm run test:hosts$/m);
  });

  it("as a user other than root, prints the one apt-get line for what is missing, and fails", () => {
    // A PATH with none of the tools, and an `id` that says uid 1000.
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), "provision-"));
    fs.writeFileSync(path.join(bin, "id"), "#!/bin/sh\necho 1000\n", { mode: 0o755 });
    const run = spawnSync("/bin/bash", [SCRIPT], { env: { PATH: bin }, encoding: "utf8" });
    expect(run.status).toBe(1);
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(run.stderr).toMatch(
      /^npm test needs: systemd shellcheck (openssh-server )?openssh-client util-linux iproute2 prometheus( rsync)?( docker-registry)?( skopeo)?( python3-venv)?( python3-yaml)? curl( keepalived)? luajit; run as root: apt-get update && apt-get install -y --no-install-recommends systemd shellcheck /,
    );
  });

  it("does nothing when every tool is there", () => {
    const run = spawnSync("/bin/bash", [SCRIPT], { encoding: "utf8" });
    expect(run.status).toBe(0);
    expect(run.stdout + run.stderr).toBe("");
  });
});
