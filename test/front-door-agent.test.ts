import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateEndpointsFile } from "./helpers/eppConfig";

/**
 * The front door's agent and its drain and rejoin (core/render/hosts/scripts/front-door.py) under real
 * Python, against ranks on loopback that serve or not as the test says: the endpoints file it keeps
 * passes the EPP's own rules, lists exactly what serves and is not drained, and a drain never
 * leaves a role without an endpoint on another server, and ends only when told: by its step's
 * rejoin, or when the step stops renewing its lease.
 */
const AGENT = path.resolve(__dirname, "../core/render/hosts/scripts/front-door.py");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "front-door-agent-"));
const file = path.join(dir, "epp", "endpoints.yaml");

interface Rank {
  up: boolean;
  port: number;
  close(): Promise<void>;
}

async function rank(): Promise<Rank> {
  const state = { up: true };
  const server = http.createServer((request, response) => response.writeHead(state.up && request.url === "/health" ? 200 : 503).end());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(state, { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
}

const ranks: Record<string, Rank> = {};
let agent: ChildProcess;

/** desired.json with endpoints a-main-0, b-main-0 and c-prefill-0 (all in rollout wave 0), `added` ones after them. */
function writeDesired(extra: Record<string, unknown> = {}, added: { name: string; host: string; role: string; wave: number; group?: string }[] = []) {
  const endpoint = (name: string, host: string, role: string, wave = 0, group?: string) => ({
    name,
    host,
    role,
    rank: 0,
    address: "127.0.0.1",
    port: ranks[name]!.port,
    rankPort: ranks[name]!.port,
    labels: { "llm-d.ai/role": role },
    wave,
    ...(group ? { group } : {}),
  });
  const desired = {
    namespace: "rbln-serving",
    endpoints: [
      endpoint("a-main-0", "a", "main"),
      endpoint("b-main-0", "b", "main"),
      endpoint("c-prefill-0", "c", "prefill"),
      ...added.map((e) => endpoint(e.name, e.host, e.role, e.wave, e.group)),
    ],
    allowEmpty: false,
    drainWaitSeconds: 20,
    settleSeconds: 0,
    drainLeaseSeconds: 3600,
    intervalSeconds: 0.2,
    probeTimeoutSeconds: 1,
    ...extra,
  };
  fs.writeFileSync(path.join(dir, "desired.json"), JSON.stringify(desired));
}

const listed = () => [...fs.readFileSync(file, "utf8").matchAll(/^- name: "([^"]+)"$/gm)].map((m) => m[1]);

async function until(what: () => boolean, label: string, seconds = 10): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!what()) {
    if (Date.now() > deadline) throw new Error(`${label}: still not so after ${seconds}s; listed: ${listed().join(", ")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Ctl extends Promise<{ status: number | null; stdout: string; stderr: string }> {
  /** What it printed so far. */
  output(): string;
}

function ctl(args: string[], env: Record<string, string> = {}): Ctl {
  let stdout = "";
  let stderr = "";
  const done = new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn("python3", [AGENT, ...args], { env: { ...process.env, ...env } });
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("exit", (status) => resolve({ status, stdout, stderr }));
  });
  return Object.assign(done, { output: () => stdout });
}

beforeAll(async () => {
  for (const name of ["a-main-0", "b-main-0", "c-prefill-0"]) ranks[name] = await rank();
  fs.mkdirSync(path.join(dir, "epp"), { recursive: true });
  fs.writeFileSync(file, "endpoints: []\n");
  writeDesired();
  agent = spawn("python3", [AGENT, "agent", dir], { stdio: "ignore" });
});
afterAll(async () => {
  agent.kill("SIGKILL");
  await Promise.all(Object.values(ranks).map((r) => r.close()));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("the front door's agent", () => {
  it("lists every endpoint that serves, in a file the EPP's file discovery takes", async () => {
    await until(() => listed().length === 3, "all three listed");
    expect(listed()).toEqual(["a-main-0", "b-main-0", "c-prefill-0"]);
    expect(validateEndpointsFile(fs.readFileSync(file, "utf8"), { refuseDuplicateNames: true })).toEqual([]);
  });

  it("takes out an endpoint that stops serving, and lists it again once it serves", async () => {
    ranks["a-main-0"]!.up = false;
    await until(() => !listed().includes("a-main-0"), "a out");
    ranks["a-main-0"]!.up = true;
    await until(() => listed().includes("a-main-0"), "a back");
  });

  it("drains at once while another server of the role is listed, and waits while none is", async () => {
    ranks["a-main-0"]!.up = false;
    await until(() => !listed().includes("a-main-0"), "a out");
    const drain = ctl(["drain", dir, "b-main-0"]);
    await until(() => drain.output().includes("b-main-0: waiting for another main server to serve before taking it out"), "the drain waits");
    expect(listed()).toContain("b-main-0");
    ranks["a-main-0"]!.up = true;
    const result = await drain;
    expect(result.status, result.stderr).toBe(0);
    expect(listed()).toEqual(["a-main-0", "c-prefill-0"]);
  });

  it("refuses at once where the role's other server never served and changes only after this one (it is new), and waits for one that has served", async () => {
    ranks["d-prefill-0"] = Object.assign(await rank(), { up: false });
    writeDesired({}, [{ name: "d-prefill-0", host: "d", role: "prefill", wave: 1 }]);
    const refused = await ctl(["drain", dir, "c-prefill-0"]);
    expect(refused.status).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "front door: draining c-prefill-0 would leave role prefill with no endpoint in the front door (d never served and changes only after c); deploy d first with role prefill unchanged, or set rollout.allowEmptyFrontDoor: true to accept the outage",
    );
    expect(listed()).toContain("c-prefill-0");
    // Once d has served it may come back by itself, whatever its wave: the drain waits for it.
    ranks["d-prefill-0"]!.up = true;
    await until(() => listed().includes("d-prefill-0"), "d listed");
    ranks["d-prefill-0"]!.up = false;
    await until(() => !listed().includes("d-prefill-0"), "d out");
    const drain = ctl(["drain", dir, "c-prefill-0"]);
    await until(() => drain.output().includes("c-prefill-0: waiting for another prefill server to serve before taking it out"), "the drain waits");
    ranks["d-prefill-0"]!.up = true;
    expect((await drain).status).toBe(0);
    expect((await ctl(["rejoin", dir, "c-prefill-0"])).status).toBe(0);
    writeDesired();
    await until(() => listed().includes("c-prefill-0") && !listed().includes("d-prefill-0"), "d gone from the stack, c back");
  });

  it("keeps a drained endpoint out while it restarts and serves again, by its step or by systemd, until its step rejoins", async () => {
    // b is drained (above), and its rank restarts: the agent sees it down, then serving.
    ranks["b-main-0"]!.up = false;
    await new Promise((r) => setTimeout(r, 600));
    ranks["b-main-0"]!.up = true;
    await new Promise((r) => setTimeout(r, 1000));
    expect(listed()).toEqual(["a-main-0", "c-prefill-0"]);
    expect((await ctl(["rejoin", dir, "b-main-0"])).status).toBe(0);
    expect(listed()).toContain("b-main-0");
  });

  it("holds a drain asked again (a step resumed after a cut one) until its rejoin, whatever restarts it saw before", async () => {
    expect((await ctl(["drain", dir, "b-main-0"])).status).toBe(0);
    // The cut step restarted the rank; the next run drains again while that restart is still loading.
    ranks["b-main-0"]!.up = false;
    await new Promise((r) => setTimeout(r, 600));
    expect((await ctl(["drain", dir, "b-main-0"])).status).toBe(0);
    // The cut step's restart serves: the resumed step has not restarted the rank yet, let alone decided.
    ranks["b-main-0"]!.up = true;
    await new Promise((r) => setTimeout(r, 1000));
    expect(listed()).not.toContain("b-main-0");
    expect((await ctl(["rejoin", dir, "b-main-0"])).status).toBe(0);
    expect(listed()).toContain("b-main-0");
  });

  it("refuses at once to drain a role's only server, unless rollout.allowEmptyFrontDoor lets it", async () => {
    const refused = await ctl(["drain", dir, "c-prefill-0"]);
    expect(refused.status).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "front door: draining c-prefill-0 would leave role prefill with no endpoint in the front door (c is its only server); add a replica, or set rollout.allowEmptyFrontDoor: true to accept the outage",
    );
    expect(listed()).toContain("c-prefill-0");
    writeDesired({ allowEmpty: true });
    expect((await ctl(["drain", dir, "c-prefill-0"])).status).toBe(0);
    expect(listed()).not.toContain("c-prefill-0");
  });

  it("rejoins a drained endpoint that serves at once; a drain its step stops renewing ends when its lease runs out", async () => {
    const rejoined = await ctl(["rejoin", dir, "c-prefill-0"]);
    expect(rejoined.status, rejoined.stderr).toBe(0);
    expect(listed()).toContain("c-prefill-0");
    writeDesired({ allowEmpty: true, drainLeaseSeconds: 1.5 });
    expect((await ctl(["drain", dir, "a-main-0"])).status).toBe(0);
    // Renewed while its step runs: out for longer than one lease.
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setTimeout(r, 500));
      expect((await ctl(["renew", dir, "a-main-0"])).status).toBe(0);
      expect(listed()).not.toContain("a-main-0");
    }
    // The step is gone: back once the lease has run out, though it was never seen down.
    await until(() => listed().includes("a-main-0"), "a back after its lease", 5);
    // A renewal after the rejoin (one in flight as the step ended) drains nothing.
    expect((await ctl(["renew", dir, "a-main-0"])).status).toBe(0);
    expect(fs.existsSync(path.join(dir, "drains", "a-main-0.json"))).toBe(false);
    // A drain an agent of before leases wrote lasts one lease from its start.
    fs.writeFileSync(path.join(dir, "drains", "b-main-0.json"), JSON.stringify({ since: Date.now() / 1000 - 10, seenDown: false }));
    await until(() => !fs.existsSync(path.join(dir, "drains", "b-main-0.json")), "the old drain ended", 5);
    expect(listed()).toContain("b-main-0");
  });

  it("lists a data-parallel group's ranks together: one that fails or is drained takes the group out, which comes back once every rank serves undrained", async () => {
    for (const name of ["e-decode-0", "e-decode-1", "f-decode-0"]) ranks[name] = await rank();
    const decode = [
      { name: "e-decode-0", host: "e", role: "decode", wave: 0, group: "e-decode" },
      { name: "e-decode-1", host: "e", role: "decode", wave: 0, group: "e-decode" },
      { name: "f-decode-0", host: "f", role: "decode", wave: 0 },
    ];
    writeDesired({}, decode);
    const group: (string | undefined)[] = ["e-decode-0", "e-decode-1"];
    await until(() => group.every((n) => listed().includes(n)), "the group listed");
    // Rank 1 dies: rank 0 still answers /health (its requests would hang), and leaves with it.
    ranks["e-decode-1"]!.up = false;
    await until(() => !group.some((n) => listed().includes(n)), "the group out");
    expect(listed()).toContain("f-decode-0");
    ranks["e-decode-1"]!.up = true;
    await until(() => group.every((n) => listed().includes(n)), "the group back");
    // A drain of one rank takes the group out; it comes back only once every drain of it is over.
    expect((await ctl(["drain", dir, "e-decode-0"])).status).toBe(0);
    expect(listed().filter((n) => group.includes(n))).toEqual([]);
    expect((await ctl(["drain", dir, "e-decode-1"])).status).toBe(0);
    expect((await ctl(["rejoin", dir, "e-decode-0"])).status).toBe(0);
    await new Promise((r) => setTimeout(r, 600));
    expect(listed().filter((n) => group.includes(n))).toEqual([]);
    expect((await ctl(["rejoin", dir, "e-decode-1"])).status).toBe(0);
    expect(listed().filter((n) => group.includes(n))).toEqual(group);
    writeDesired();
  });

  it("as the hosts' forced SSH command, runs only drain, renew or rejoin of one of its endpoints", async () => {
    for (const command of ["rm -rf /", "drain", "drain a-main-0 b-main-0", "drain ../../etc", "drain nobody"]) {
      const result = await ctl(["ssh", dir], { SSH_ORIGINAL_COMMAND: command });
      expect(result.status, command).toBe(1);
      expect(result.stderr, command).toMatch(
        /^front door: (this key runs `drain NAME`, `renew NAME` or `rejoin NAME` only|'[^']*' is no endpoint of this front door)/,
      );
    }
    for (const command of ["renew a-main-0", "rejoin a-main-0"]) expect((await ctl(["ssh", dir], { SSH_ORIGINAL_COMMAND: command })).status, command).toBe(0);
  });

  it("as the forced SSH command, refuses any other command word, even with an endpoint's name", async () => {
    for (const command of ["ssh a-main-0", "Drain a-main-0"]) {
      const result = await ctl(["ssh", dir], { SSH_ORIGINAL_COMMAND: command });
      expect(result.status, command).toBe(1);
      expect(result.stderr, command).toMatch(/^front door: this key runs `drain NAME`.* only/);
    }
  });

  it("is valid Python a host's python3 compiles", () => {
    expect(spawnSync("python3", ["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", AGENT], { encoding: "utf8" }).status).toBe(0);
  });
});
