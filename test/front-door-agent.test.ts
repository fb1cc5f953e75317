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
    writeDesired({ allowEmpty: true, drainLeaseSeconds: 4 });
    expect((await ctl(["drain", dir, "a-main-0"])).status).toBe(0);
    // Renewed while its step runs: out for longer than one lease.
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, 500));
      expect((await ctl(["renew", dir, "a-main-0"])).status).toBe(0);
      expect(listed()).not.toContain("a-main-0");
    }
    // The step is gone: back once the lease has run out, though it was never seen down.
    await until(() => listed().includes("a-main-0"), "a back after its lease", 15);
    // A renewal after the rejoin (one in flight as the step ended) drains nothing.
    expect((await ctl(["renew", dir, "a-main-0"])).status).toBe(0);
    expect(fs.existsSync(path.join(dir, "drains", "a-main-0.json"))).toBe(false);
    // A drain an agent of before leases wrote lasts one lease from its start.
    fs.writeFileSync(path.join(dir, "drains", "b-main-0.json"), JSON.stringify({ since: Date.now() / 1000 - 10, seenDown: false }));
    await until(() => !fs.existsSync(path.join(dir, "drains", "b-main-0.json")), "the old drain ended", 10);
    expect(listed()).toContain("b-main-0");
  });

  /** Host e's data-parallel decode group of two ranks, and a decode endpoint of its own on host f. */
  const decode = [
    { name: "e-decode-0", host: "e", role: "decode", wave: 0, group: "e-decode" },
    { name: "e-decode-1", host: "e", role: "decode", wave: 0, group: "e-decode" },
    { name: "f-decode-0", host: "f", role: "decode", wave: 0 },
  ];

  it("lists a data-parallel group's ranks together: one that fails or is drained takes the group out, which comes back once every rank serves undrained", async () => {
    for (const name of ["e-decode-0", "e-decode-1", "f-decode-0"]) ranks[name] = await rank();
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

  it("drains a group whole with its own host's key, never another's, and keeps it out over a drain it cannot read", async () => {
    writeDesired({}, decode);
    const group: (string | undefined)[] = ["e-decode-0", "e-decode-1"];
    const key = (host: string, command: string) => ctl(["ssh", dir, host], { SSH_ORIGINAL_COMMAND: command });
    await until(() => group.every((n) => listed().includes(n)), "the group listed");
    const refused = await key("f", "drain e-decode-1");
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe("front door: e-decode-1 is an endpoint of e; the key of f drains only its own: f-decode-0\n");
    expect(listed()).toEqual(expect.arrayContaining(group));
    // Host e's key, for one rank: the whole group leaves, host f's endpoint stays.
    expect((await key("e", "drain e-decode-1")).status).toBe(0);
    expect(listed().filter((n) => group.includes(n))).toEqual([]);
    expect(listed()).toContain("f-decode-0");
    // Rank 0's drain file cut to nothing (a crash mid-write): a drain from now, so rank 1's rejoin leaves the group out.
    fs.writeFileSync(path.join(dir, "drains", "e-decode-0.json"), "");
    // Every listing while the rejoin runs and after it: the agent's next pass would hide one the rejoin wrote.
    const seen = new Set<string>();
    const watch = setInterval(() => seen.add(listed().join()), 5);
    const rejoined = await key("e", "rejoin e-decode-1");
    await new Promise((r) => setTimeout(r, 600));
    clearInterval(watch);
    expect(rejoined.status).toBe(0);
    expect([...seen].filter((l) => l.includes("e-decode"))).toEqual([]);
    expect(listed().filter((n) => group.includes(n))).toEqual([]);
    expect(JSON.parse(fs.readFileSync(path.join(dir, "drains", "e-decode-0.json"), "utf8")).until).toBeGreaterThan(Date.now() / 1000);
    expect((await key("e", "rejoin e-decode-0")).status).toBe(0);
    expect(listed().filter((n) => group.includes(n))).toEqual(group);
    // A group across two hosts would let one host's key take another's endpoint out: such a desired.json is not read.
    writeDesired(
      {},
      decode.map((e) => ({ ...e, group: "e-decode" })),
    );
    const across = await key("e", "drain e-decode-0");
    expect(across.status).toBe(1);
    expect(across.stdout).toContain("names a group of another host");
    expect(listed()).toEqual(expect.arrayContaining([...group, "f-decode-0"]));
    writeDesired();
  });

  it("as a host's forced SSH command, runs only drain, renew or rejoin of one of its endpoints", async () => {
    for (const command of ["rm -rf /", "drain", "drain a-main-0 b-main-0", "drain ../../etc", "drain nobody"]) {
      const result = await ctl(["ssh", dir, "a"], { SSH_ORIGINAL_COMMAND: command });
      expect(result.status, command).toBe(1);
      expect(result.stderr, command).toMatch(
        /^front door: (this key runs `drain NAME`, `renew NAME` or `rejoin NAME` only|'[^']*' is no endpoint of this front door)/,
      );
    }
    for (const command of ["renew a-main-0", "rejoin a-main-0"])
      expect((await ctl(["ssh", dir, "a"], { SSH_ORIGINAL_COMMAND: command })).status, command).toBe(0);
  });

  it("as host a's forced SSH command, refuses every command on another host's endpoint, and leaves it listed", async () => {
    for (const action of ["drain", "renew", "rejoin"]) {
      for (const other of ["b-main-0", "c-prefill-0"]) {
        const result = await ctl(["ssh", dir, "a"], { SSH_ORIGINAL_COMMAND: `${action} ${other}` });
        expect(result.status, `${action} ${other}`).toBe(1);
        expect(result.stderr).toBe(`front door: ${other} is an endpoint of ${other[0]}; the key of a drains only its own: a-main-0\n`);
      }
    }
    expect(fs.existsSync(path.join(dir, "drains", "b-main-0.json"))).toBe(false);
    expect(listed()).toEqual(expect.arrayContaining(["b-main-0", "c-prefill-0"]));
    // A key line without its host (the one shared key of before) runs nothing.
    expect((await ctl(["ssh", dir], { SSH_ORIGINAL_COMMAND: "renew a-main-0" })).stderr).toBe("front door: usage: front-door.py ssh DIR HOST\n");
  });

  it("as the forced SSH command, refuses any other command word, even with an endpoint's name", async () => {
    for (const command of ["ssh a-main-0", "Drain a-main-0"]) {
      const result = await ctl(["ssh", dir, "a"], { SSH_ORIGINAL_COMMAND: command });
      expect(result.status, command).toBe(1);
      expect(result.stderr, command).toMatch(/^front door: this key runs `drain NAME`.* only/);
    }
  });

  it("writes each state file whole: fsynced, renamed over the old one, then its folder fsynced", () => {
    // The agent's own write_whole and write_drain, with os.fsync and os.replace recording what they are given.
    const script = [
      "import importlib.util, json, os, sys, tempfile",
      "spec = importlib.util.spec_from_file_location('front_door', sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)",
      "calls = []; fsync, replace = os.fsync, os.replace",
      "def recorded_fsync(fd):",
      "    calls.append(('fsync', 'folder' if os.path.isdir(os.readlink(f'/proc/self/fd/{fd}')) else 'file')); fsync(fd)",
      "def recorded_replace(a, b):",
      "    calls.append(('replace', os.path.basename(b))); replace(a, b)",
      "os.fsync, os.replace = recorded_fsync, recorded_replace",
      "d = tempfile.mkdtemp(); os.makedirs(f'{d}/drains')",
      "json.dump({'namespace': 'n', 'endpoints': [], 'allowEmpty': False, 'drainWaitSeconds': 1, 'settleSeconds': 0, 'drainLeaseSeconds': 9, 'intervalSeconds': 1, 'probeTimeoutSeconds': 1}, open(f'{d}/desired.json', 'w'))",
      "m.write_whole(f'{d}/x.yaml', 'text')",
      "m.FrontDoor(d).write_drain('a-main-0', {'since': 1, 'until': 2})",
      "print(json.dumps(calls))",
    ].join("\n");
    const result = spawnSync("python3", ["-c", script, AGENT], { encoding: "utf8" });
    expect(result.stderr).toBe("");
    expect(JSON.parse(result.stdout)).toEqual([
      ["fsync", "file"],
      ["replace", "x.yaml"],
      ["fsync", "folder"],
      ["fsync", "file"],
      ["replace", "a-main-0.json"],
      ["fsync", "folder"],
    ]);
  });

  it("is valid Python a host's python3 compiles", () => {
    expect(spawnSync("python3", ["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", AGENT], { encoding: "utf8" }).status).toBe(0);
  });
});

/**
 * State files the agent cannot read, by class: each way a file can be unreadable, for each kind of
 * state file it reads. None stops the loop; each stands for what the agent's doc says (a drain
 * from now, the last desired.json, a file written again), and is logged.
 */
describe("state files the agent cannot read", () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "front-door-state-"));
  const endpointsFile = path.join(home, "epp", "endpoints.yaml");
  const own: Record<string, Rank> = {};
  let running: { child: ChildProcess; output: () => string } | undefined;
  const names = () => {
    try {
      return [...fs.readFileSync(endpointsFile, "utf8").matchAll(/^- name: "([^"]+)"$/gm)].map((m) => m[1]);
    } catch {
      return []; // missing, or spoilt by the test (a folder)
    }
  };

  const desired = () => ({
    namespace: "rbln-serving",
    endpoints: ["x", "y"].map((host) => ({
      name: `${host}-main-0`,
      host,
      role: "main",
      rank: 0,
      address: "127.0.0.1",
      port: own[`${host}-main-0`]!.port,
      rankPort: own[`${host}-main-0`]!.port,
      labels: { "llm-d.ai/role": "main" },
      wave: 0,
    })),
    allowEmpty: false,
    drainWaitSeconds: 5,
    settleSeconds: 0,
    drainLeaseSeconds: 3600,
    intervalSeconds: 0.1,
    probeTimeoutSeconds: 1,
  });
  const writeGoodDesired = () => fs.writeFileSync(path.join(home, "desired.json"), JSON.stringify(desired()));

  /** The classes: what each does to a file's path, with each kind's own wrong types and missing keys. */
  interface Kind {
    wrongTypes: string;
    missingKeys: string;
  }
  const CLASSES: Record<string, (file: string, kind: Kind) => void> = {
    "an empty file": (file) => fs.writeFileSync(file, ""),
    "JSON cut short": (file) => fs.writeFileSync(file, '{"since": 17'),
    "wrong types": (file, kind) => fs.writeFileSync(file, kind.wrongTypes),
    "missing keys": (file, kind) => fs.writeFileSync(file, kind.missingKeys),
    "a folder in its place": (file) => fs.mkdirSync(file),
    "bytes that are not UTF-8": (file) => fs.writeFileSync(file, Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
  };
  const spoil = (file: string, how: string, kind: Kind) => {
    fs.rmSync(file, { recursive: true, force: true });
    CLASSES[how]!(file, kind);
  };

  const startAgent = () => {
    let output = "";
    const child = spawn("python3", [AGENT, "agent", home]);
    child.stdout!.on("data", (d) => (output += d));
    child.stderr!.on("data", (d) => (output += d));
    running = { child, output: () => output };
    return running;
  };
  const stopAgent = async () => {
    if (!running || running.child.exitCode !== null) return;
    const exited = new Promise((resolve) => running!.child.on("exit", resolve));
    running.child.kill("SIGKILL");
    await exited;
  };
  const alive = () => running!.child.exitCode === null && running!.child.signalCode === null;
  const wait = async (what: () => boolean, label: string, seconds = 10) => {
    const deadline = Date.now() + seconds * 1000;
    while (!what()) {
      if (Date.now() > deadline) throw new Error(`${label}: still not so after ${seconds}s; listed: ${names().join(", ")}; agent said:\n${running?.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const run = (args: string[]) => ctl([args[0]!, home, ...args.slice(1)]);

  beforeAll(async () => {
    for (const name of ["x-main-0", "y-main-0"]) own[name] = await rank();
    fs.mkdirSync(path.join(home, "epp"), { recursive: true });
    writeGoodDesired();
  });
  afterAll(async () => {
    await stopAgent();
    await Promise.all(Object.values(own).map((r) => r.close()));
    fs.rmSync(home, { recursive: true, force: true });
  });

  const DRAIN: Kind = { wrongTypes: '{"since": "yesterday", "until": [1]}', missingKeys: '{"until": 1}' };
  for (const how of Object.keys(CLASSES)) {
    it(`starts over a drain that is ${how}: a drain from now, written again, until its step rejoins`, async () => {
      await stopAgent();
      const drainFile = path.join(home, "drains", "x-main-0.json");
      fs.mkdirSync(path.dirname(drainFile), { recursive: true });
      spoil(drainFile, how, DRAIN);
      const before = Date.now() / 1000;
      startAgent();
      await wait(() => names().join() === "y-main-0", "only y listed");
      expect(alive()).toBe(true);
      const drain = JSON.parse(fs.readFileSync(drainFile, "utf8"));
      expect(drain.since).toBeGreaterThanOrEqual(before);
      expect(drain.until).toBeGreaterThan(drain.since + 3000);
      expect(running!.output()).toContain(`front door: x-main-0: ${drainFile} could not be read (`);
      expect((await run(["rejoin", "x-main-0"])).status).toBe(0);
      await wait(() => names().includes("x-main-0"), "x back after its rejoin");
    });
  }

  it("keeps an endpoint whose drain is a folder it cannot remove out, says so once, and runs on", async () => {
    const drainFile = path.join(home, "drains", "x-main-0.json");
    fs.mkdirSync(drainFile);
    fs.writeFileSync(path.join(drainFile, "something"), "");
    await wait(() => !names().includes("x-main-0"), "x out");
    expect((await run(["rejoin", "x-main-0"])).status).toBe(0);
    await new Promise((r) => setTimeout(r, 1000));
    expect(names()).toEqual(["y-main-0"]);
    expect(alive()).toBe(true);
    expect(running!.output().split(`${drainFile} cannot be read`).length - 1).toBe(1);
    fs.rmSync(drainFile, { recursive: true });
    await wait(() => names().includes("x-main-0"), "x back once it is removed");
  });

  const DESIRED: Kind = { wrongTypes: '{"namespace": "rbln-serving", "endpoints": "x-main-0"}', missingKeys: '{"endpoints": []}' };
  for (const how of Object.keys(CLASSES)) {
    it(`keeps the last desired.json over one that is ${how}, and refuses drains until it is good`, async () => {
      const file = path.join(home, "desired.json");
      await wait(() => names().length === 2, "both listed");
      spoil(file, how, DESIRED);
      // Still at work with the last one: y leaves when it stops serving, and comes back.
      own["y-main-0"]!.up = false;
      await wait(() => !names().includes("y-main-0"), "y out");
      own["y-main-0"]!.up = true;
      await wait(() => names().includes("y-main-0"), "y back");
      expect(running!.output()).toContain(`front door: ${file} cannot be read (`);
      const drain = await run(["drain", "x-main-0"]);
      expect(drain.status).toBe(1);
      expect(drain.stderr).toBe(`front door: ${file} cannot be read (see above); run the front door's apply step again\n`);
      expect(alive()).toBe(true);
      fs.rmSync(file, { recursive: true, force: true });
      writeGoodDesired();
    });
  }

  it("starts over a desired.json it cannot read: leaves the endpoints file as it is, and keeps it once it can", async () => {
    await stopAgent();
    fs.writeFileSync(path.join(home, "desired.json"), "");
    const kept = fs.readFileSync(endpointsFile, "utf8");
    startAgent();
    await new Promise((r) => setTimeout(r, 1500));
    expect(alive()).toBe(true);
    expect(fs.readFileSync(endpointsFile, "utf8")).toBe(kept);
    own["x-main-0"]!.up = false;
    writeGoodDesired();
    await wait(() => names().length === 1, "x out once desired.json is good");
    own["x-main-0"]!.up = true;
    await wait(() => names().length === 2, "x back");
  });

  const ENDPOINTS: Kind = { wrongTypes: "endpoints: 5\n", missingKeys: "{}\n" };
  for (const how of Object.keys(CLASSES)) {
    it(`writes again an endpoints file that is ${how}`, async () => {
      spoil(endpointsFile, how, ENDPOINTS);
      await wait(() => names().length === 2, "the file written again");
      expect(validateEndpointsFile(fs.readFileSync(endpointsFile, "utf8"), { refuseDuplicateNames: true })).toEqual([]);
      expect(alive()).toBe(true);
    });
  }

  it("drains and rejoins over an endpoints file it cannot read, deciding on what the agent writes next", async () => {
    fs.writeFileSync(endpointsFile, Buffer.from([0xff, 0xfe]));
    expect((await run(["drain", "x-main-0"])).status).toBe(0);
    expect(names()).toEqual(["y-main-0"]);
    fs.writeFileSync(endpointsFile, Buffer.from([0xff, 0xfe]));
    expect((await run(["rejoin", "x-main-0"])).status).toBe(0);
    await wait(() => names().length === 2, "x back");
  });

  it("counts only the presence of a served marker, whatever it holds, and starts with a file where its folder belongs", async () => {
    for (const how of Object.keys(CLASSES)) spoil(path.join(home, "served", "x-main-0"), how, DESIRED);
    await new Promise((r) => setTimeout(r, 500));
    expect(names()).toEqual(["x-main-0", "y-main-0"]);
    await stopAgent();
    fs.rmSync(path.join(home, "served"), { recursive: true });
    fs.writeFileSync(path.join(home, "served"), "");
    fs.writeFileSync(endpointsFile, "endpoints: []\n");
    startAgent();
    await wait(() => names().length === 2, "both listed");
    expect(alive()).toBe(true);
    expect(running!.output()).toContain(`${path.join(home, "served")} is not a folder`);
    fs.rmSync(path.join(home, "served"));
    fs.mkdirSync(path.join(home, "served"));
  });

  it("takes a lock file's place back from an empty folder, and refuses a drain in one line while a full one holds it", async () => {
    const lock = path.join(home, "lock");
    fs.rmSync(lock, { force: true });
    fs.mkdirSync(lock);
    expect((await run(["renew", "x-main-0"])).status).toBe(0);
    expect(fs.statSync(lock).isFile()).toBe(true);
    // A full folder put in the lock's place in one rename: the running agent takes an empty one back
    // at once, so a folder made first and filled after may be gone before it is filled.
    const full = path.join(home, "lock-full");
    fs.mkdirSync(full);
    fs.writeFileSync(path.join(full, "something"), "");
    for (;;) {
      fs.rmSync(lock, { force: true });
      try {
        fs.renameSync(full, lock);
        break;
      } catch {
        // The agent made its lock file again in between: remove it and try again.
      }
    }
    const refused = await run(["drain", "x-main-0"]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^front door: drain x-main-0: IsADirectoryError: .*\n$/);
    own["x-main-0"]!.up = false;
    await new Promise((r) => setTimeout(r, 500));
    expect(alive()).toBe(true);
    fs.rmSync(lock, { recursive: true });
    await wait(() => names().length === 1, "the agent at work again");
    own["x-main-0"]!.up = true;
    await wait(() => names().length === 2, "x back");
  });
});
