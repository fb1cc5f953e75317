import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { publishSpec, socketAddress } from "../core/address";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { shippedCatalog } from "./helpers/recipes";
import { renderStackFiles } from "./helpers/render";
import { systemdExecArgv } from "./helpers/systemdOracle";

// Each tool reads an address in its own syntax: ssh bare, rsync's host:path and --publish bracketed,
// Envoy's socket_address bare. What the scripts and units hand each tool, read back by the tool.
const PEER_SSH = path.join(__dirname, "..", "core", "render", "hosts", "scripts", "peer-ssh.sh");

/** peer_ssh_setup's remotes for an address, as bash sets them. */
function peerRemotes(address: string): { ssh: string; rsync: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "peer-"));
  const run = spawnSync(
    "bash",
    ["-c", `. "$1"; peer_ssh_setup "$2" "$3" 22 "" 10.0.0.1; printf '%s\\n%s\\n' "$peer_remote" "$peer_rsync_remote"`, "-", PEER_SSH, dir, address],
    {
      encoding: "utf8",
    },
  );
  fs.rmSync(dir, { recursive: true });
  expect(run.status, run.stderr).toBe(0);
  const [ssh, rsync] = run.stdout.trimEnd().split("\n");
  return { ssh: ssh!, rsync: rsync! };
}

describe("addresses in each tool's syntax", () => {
  it("ssh gets an IPv6 peer bare (it would look [v6] up as a name), as `ssh -G` reads it", () => {
    for (const address of ["fd00::10", "10.0.0.10"]) {
      const { ssh } = peerRemotes(address);
      const config = spawnSync("ssh", ["-G", ssh], { encoding: "utf8" }).stdout;
      expect(/^hostname (.*)$/m.exec(config)?.[1], address).toBe(address);
      expect(/^user (.*)$/m.exec(config)?.[1]).toBe("root");
    }
  });

  it("rsync gets it bracketed in host:path, and hands ssh the bare address", () => {
    for (const address of ["fd00::10", "10.0.0.10"]) {
      const { rsync } = peerRemotes(address);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rsync-"));
      // The remote shell rsync would start: record its words, then fail.
      fs.writeFileSync(path.join(dir, "rsh"), `#!/bin/sh\nprintf '%s\\n' "$@" > ${dir}/argv\nexit 1\n`, { mode: 0o755 });
      spawnSync("rsync", ["-e", path.join(dir, "rsh"), "-r", `${rsync}:/var/lib/x/`, path.join(dir, "to")], { encoding: "utf8" });
      const argv = fs.readFileSync(path.join(dir, "argv"), "utf8").split("\n");
      fs.rmSync(dir, { recursive: true });
      expect(argv.slice(0, 3), address).toEqual(["-l", "root", address]);
    }
  });

  it("--publish gets IPv6 bracketed and Envoy's socket_address bare, as the router host's units and bootstrap carry them", () => {
    expect([publishSpec("fd00::10", 9090), publishSpec("10.0.0.10", 9090, 9091), socketAddress("[fd00::10]"), socketAddress("fd00::10")]).toEqual([
      "[fd00::10]:9090:9090",
      "10.0.0.10:9090:9091",
      "fd00::10",
      "fd00::10",
    ]);
    const edge = readStackFile("edge").raw as Record<string, any>;
    const router = { name: "edge-router", address: "10.30.0.10", listenAddress: "fd00::10", hostKey: EXAMPLE_HOST_KEY };
    const deployment = planDeployment(parseStackSettings({ ...edge, router: { ...edge.router, host: router } }), shippedCatalog);
    const files = renderStackFiles(deployment, ["sshPrivateKey"], "edge");
    const unit = Object.entries(files).find(([name]) => name.endsWith("front-door-epp.service"))![1];
    const argv = systemdExecArgv(unit);
    expect(argv.filter((_, i) => argv[i - 1] === "--publish")).toEqual(["127.0.0.1:9002:9002", "127.0.0.1:9003:9003", "[fd00::10]:9090:9090"]);
    const envoy = parse(Object.entries(files).find(([name]) => name.endsWith("envoy/envoy.yaml"))![1]);
    expect(envoy.static_resources.listeners[0].address.socket_address).toEqual({ address: "fd00::10", port_value: 8080 });
  });
});
