import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readStackFile } from "../../core/config/stackFile";
import { parseStackSettings } from "../../core/config/stackConfig";
import { planDeployment } from "../../core/plan/deployment";
import { renderDeployment } from "../../core/render/deployment";
import type { RenderedRouterHost } from "../../core/render/hosts/frontDoor/frontDoor";
import { DEFAULT_INSTANCE } from "../../core/render/hosts/names";
import { shippedCatalog } from "../helpers/recipes";
import { startSshd, type TestSshServer } from "../helpers/sshd";

/**
 * Each host's key to the front door, against a stock sshd: the router host's access steps (the
 * rendered scripts, run as the router host runs them) write one authorized_keys line per host, and
 * a host's key drains, renews and rejoins its own endpoints only. Hosts a and b connect from the
 * loopback addresses the stack gives them (`ssh -b`), as sshd sees a host connect from its address.
 */
const work = fs.mkdtempSync(path.join(os.tmpdir(), "front-door-keys-"));
const AGENT = path.resolve(__dirname, "../../core/render/hosts/scripts/front-door.py");
const HOSTS = { a: "127.0.0.2", b: "127.0.0.3" };
let sshd: TestSshServer;
let door: RenderedRouterHost;
const keys: Record<string, string> = {};

/** A setting the renderer wrote into a script's settings block. */
const setting = (script: string, name: string) => script.match(new RegExp(`^${name}=(.*)$`, "m"))![1]!.replace(/^'|'$/g, "");
const bash = (script: string) => spawnSync("bash", ["-c", script], { encoding: "utf8", cwd: work });
const access = (host: string) => door.access.find((a) => a.host === host)!;

beforeAll(async () => {
  sshd = await startSshd();
  const raw = {
    ...readStackFile("dev").raw,
    replicas: 2,
    installRoot: `${work}/install`,
    cacheRoot: `${work}/cache`,
    hosts: Object.entries(HOSTS).map(([name, address]) => ({ name, address, hostKey: sshd.hostKey })),
    router: { host: { name: "door", address: "127.0.0.1", port: sshd.port, hostKey: sshd.hostKey } },
    rollout: { allowEmptyFrontDoor: true },
  };
  const deployment = planDeployment(parseStackSettings(raw), shippedCatalog);
  door = renderDeployment(deployment, {
    stack: "keys",
    instance: DEFAULT_INSTANCE,
    secrets: [],
    copyOptions: { authorizedKeysFile: sshd.authorizedKeys },
  }).hosts!.frontDoor!.routers[0]!;
  // What the apply step puts on the router host, as far as the forced command needs it: the agent and desired.json.
  const script = access("a").accessScript;
  const stateDir = setting(script, "state_dir");
  const agentPath = setting(script, "agent_path");
  fs.mkdirSync(path.join(stateDir, "epp"), { recursive: true });
  fs.mkdirSync(path.dirname(agentPath), { recursive: true });
  fs.copyFileSync(AGENT, agentPath);
  const desired = JSON.parse(door.files["desired.json"]!);
  fs.writeFileSync(path.join(stateDir, "desired.json"), JSON.stringify({ ...desired, settleSeconds: 0 }));
  for (const host of Object.keys(HOSTS)) {
    const made = bash(access(host).accessScript);
    expect(made.status, made.stderr).toBe(0);
    keys[host] = path.join(work, `key-${host}`);
    fs.writeFileSync(keys[host]!, made.stdout, { mode: 0o600 });
  }
});
afterAll(() => {
  sshd?.stop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe("each host's key to the front door, against a stock sshd", () => {
  it("makes one key and one authorized_keys line per host with endpoints, each from that host's address only", () => {
    expect(door.access.map((a) => a.host)).toEqual(["a", "b"]);
    const lines = fs
      .readFileSync(sshd.authorizedKeys, "utf8")
      .split("\n")
      .filter((l) => l.includes("rbln-serving-front-door-drain"));
    expect(lines).toHaveLength(2);
    for (const [host, address] of Object.entries(HOSTS)) {
      const line = lines.find((l) => l.endsWith(` rbln-serving-front-door-drain keys ${host}`))!;
      expect(line).toMatch(new RegExp(`^from="${address.replace(/\./g, "\\.")}",restrict,command="/usr/bin/env python3 \\S+ ssh \\S+ ${host}" ssh-ed25519 `));
    }
    expect(keys.a).not.toBe(keys.b);
    expect(fs.readFileSync(keys.a!, "utf8")).not.toBe(fs.readFileSync(keys.b!, "utf8"));
  });

  it("lets a host drain, renew and rejoin its own endpoint", async () => {
    for (const action of ["drain", "renew", "rejoin"]) {
      const result = await sshd.runAs(keys.a!, `${action} a-main-0`, HOSTS.a);
      expect(result.status, `${action}: ${result.stderr}`).toBe(0);
    }
  });

  it("refuses host a's key every command on host b's endpoint: the forced command says whose it is", async () => {
    for (const action of ["drain", "renew", "rejoin"]) {
      const result = await sshd.runAs(keys.a!, `${action} b-main-0`, HOSTS.a);
      expect(result.status, action).toBe(1);
      expect(result.stderr).toBe("front door: b-main-0 is an endpoint of b; the key of a drains only its own: a-main-0\n");
    }
    const stateDir = setting(access("a").accessScript, "state_dir");
    expect(fs.existsSync(path.join(stateDir, "drains", "b-main-0.json"))).toBe(false);
    // And no other command: the forced command replaces it.
    const shell = await sshd.runAs(keys.a!, "cat /etc/hostname", HOSTS.a);
    expect(shell.status).toBe(1);
    expect(shell.stderr).toBe("front door: this key runs `drain NAME`, `renew NAME` or `rejoin NAME` only\n");
  });

  it("refuses host a's key from host b's address, before any command", async () => {
    const result = await sshd.runAs(keys.a!, "renew a-main-0", HOSTS.b);
    expect(result.status).toBe(255);
    expect(result.stdout).toBe("");
  });

  it("changes nothing when the access steps run again: the same line, the same key", () => {
    const before = fs.readFileSync(sshd.authorizedKeys, "utf8");
    for (const host of Object.keys(HOSTS)) {
      const again = bash(access(host).accessScript);
      expect(again.status, again.stderr).toBe(0);
      expect(again.stdout).toBe(fs.readFileSync(keys[host]!, "utf8"));
    }
    expect(fs.readFileSync(sshd.authorizedKeys, "utf8")).toBe(before);
  });

  it("leaves each host's line alone when the one shared key of before is revoked (its tag is no part of theirs)", () => {
    // What the old access step's delete ran: its tag's lines out, and none may be left.
    const lib = path.resolve(__dirname, "../../core/render/hosts/scripts");
    const before = fs.readFileSync(sshd.authorizedKeys, "utf8");
    fs.appendFileSync(sshd.authorizedKeys, `from="127.0.0.2",restrict ssh-ed25519 AAAAold rbln-serving-front-door keys\n`);
    const old = bash(
      `cd ${lib} && authorized_keys=${sshd.authorizedKeys} tag='rbln-serving-front-door keys' grant_label=old; . authorized-keys.sh; edit_authorized_keys ""`,
    );
    expect(old.status, old.stderr).toBe(0);
    expect(fs.readFileSync(sshd.authorizedKeys, "utf8")).toBe(before);
  });

  it("revokes one host's key alone: its line and key go, the other host still drains", async () => {
    const revoked = bash(access("a").revokeScript);
    expect(revoked.status, revoked.stderr).toBe(0);
    expect(fs.readFileSync(sshd.authorizedKeys, "utf8")).not.toContain("rbln-serving-front-door-drain keys a\n");
    expect((await sshd.runAs(keys.a!, "renew a-main-0", HOSTS.a)).status).toBe(255);
    expect((await sshd.runAs(keys.b!, "renew b-main-0", HOSTS.b)).status).toBe(0);
    expect(bash(access("a").revokeScript).status).toBe(0);
  });
});
