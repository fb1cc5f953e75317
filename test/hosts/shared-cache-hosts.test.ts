import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportedRevision } from "../../components/modelServing";
import type { FakeEngine, UpResult } from "../helpers/engine";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { hubStubSource } from "../helpers/hubStub";
import { startPackageIndex, type PackageIndex } from "../helpers/packageIndex";
import type { Registration } from "../helpers/pulumiHarness";
import { prepareStandInServer } from "../helpers/standInServer";

/**
 * `cache.shared` for real: three fake NPU hosts (real systemd and sshd each) that all see one
 * folder, as hosts see an NFS mount. Two replicas start together in the first wave, so without the
 * leases two hosts would download at once and two units would compile into one cache at once.
 */
const INSTALL_ROOT = "/opt/rbln-shared-test";
const CACHE_ROOT = "/var/lib/rbln-shared-test";
const VENV = `${INSTALL_ROOT}/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`;
const DOWNLOADER = `${INSTALL_ROOT}/venvs/test/huggingface_hub-0.35.3`;
const MODEL = "MiniMaxAI/MiniMax-M2.7";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const COMMIT = "c0ffee0000000000000000000000000000000002";
// Outside the hosts' private paths: every host sees the same folder.
const SHARED = fs.mkdtempSync("/var/lib/rbln-shared-test-nfs-");
const LOGS = fs.mkdtempSync("/var/lib/rbln-shared-test-logs-");
const HUB_LOG = `${LOGS}/hub-downloads`;
const COMPILE_LOG = `${LOGS}/compiles`;

let hosts: TestHost[];
let index: PackageIndex;
let engine: FakeEngine;

function settings() {
  return fakeHostsSettings(
    hosts,
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    {
      // Waves [npu-0, npu-1], [npu-2].
      rollout: { maxUnavailable: 2 },
      cache: { shared: SHARED },
      pip: { indexUrl: index.url, extraIndexUrls: [] },
      // Ready (and compiled) 8 s after start: the two first-wave units overlap whatever the order.
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: "8", FAKE_VLLM_COMPILE_LOG: COMPILE_LOG } },
    },
  );
}

const register = () =>
  registerServing(settings(), { hostOptions: { readinessIntervalSeconds: 1, restartSeconds: 1, pipRetries: 0, pipTimeoutSeconds: 5, devRoot: FAKE_DEV } });

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []);

beforeAll(async () => {
  fs.chmodSync(LOGS, 0o1777);
  // A mount point the operator made: the service user may enter it.
  fs.chmodSync(SHARED, 0o755);
  [hosts, index] = await Promise.all([
    startHosts(3, { privatePaths: [INSTALL_ROOT, CACHE_ROOT] }),
    // A download that takes 2 s: the three weights steps run side by side.
    startPackageIndex([
      { name: "huggingface_hub", version: "0.35.3", module: "huggingface_hub", source: hubStubSource({ commit: COMMIT, log: HUB_LOG, seconds: 2 }) },
    ]),
  ]);
  // Three venvs and pip installs, one host after another: minutes on a loaded machine.
  for (const host of hosts) {
    await prepareStandInServer(host, { venv: VENV, devRoot: FAKE_DEV });
    // The downloader runs as the service user here. This machine's root finds a python3 under
    // /root that no other user may run; an NPU host's is the system one, so build it from that.
    const downloader = await host.run(
      `/usr/bin/python3 -m venv ${DOWNLOADER} && PIP_CONFIG_FILE=/dev/null ${DOWNLOADER}/bin/pip install -q --disable-pip-version-check --index-url ${index.url} huggingface_hub==0.35.3 && touch ${DOWNLOADER}/.rbln-serving-complete`,
    );
    expect(downloader.status, downloader.stderr).toBe(0);
  }
  engine = fakeHostsEngine(hosts);
}, 300_000);

afterAll(async () => {
  await Promise.all((hosts ?? []).map((h) => h.stop()));
  index?.stop();
  for (const dir of [LOGS, SHARED]) fs.rmSync(dir, { recursive: true, force: true });
});

describe("cache.shared on three hosts over SSH", { timeout: 240_000 }, () => {
  let registrations: Registration[];
  let first: UpResult;

  it("registers no copies: every host's weights step takes the download's lease instead", async () => {
    registrations = await register();
    const names = registrations.filter((r) => r.type === "command:remote:Command").map((r) => r.name);
    expect(names.filter((n) => /-(allow|copy|revoke)-/.test(n))).toEqual([]);
    expect(names.filter((n) => n.endsWith("-weights")).sort()).toEqual([
      "rbln-serving-npu-0-weights",
      "rbln-serving-npu-1-weights",
      "rbln-serving-npu-2-weights",
    ]);
  });

  it("first up: exactly one host downloads and exactly one unit compiles, into the shared folder", async () => {
    first = await engine.up(registrations);
    expect(first.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    expect(lines(HUB_LOG)).toEqual([MODEL]);
    expect(lines(COMPILE_LOG)).toHaveLength(1);
    const weights = first.runs.filter((r) => r.name.endsWith("-weights"));
    expect(weights.filter((r) => r.stdout.includes(`downloading ${MODEL}`))).toHaveLength(1);
    // Every host reports the one commit, read from the shared marker.
    for (const run of weights) expect(reportedRevision(run.stdout, MODEL)).toBe(COMMIT);
    expect(fs.readFileSync(`${SHARED}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7`, "utf8")).toBe(`${COMMIT}\n`);
    const bundles = fs.readdirSync(`${SHARED}/vllm/rbln`, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith("mega_cache.bin"));
    expect(bundles.map((f) => fs.readFileSync(`${SHARED}/vllm/rbln/${f}`, "utf8"))).toEqual([`compiled for ${MODEL} on RBLN-CR13\n`]);
    // Written as the service user, never as root (which an NFS export may squash).
    const serviceUid = fs.statSync(`${SHARED}/vllm`).uid;
    expect(serviceUid).not.toBe(0);
    for (const file of [
      `${SHARED}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7`,
      `${SHARED}/huggingface/hub/models--MiniMaxAI--MiniMax-M2.7/refs/main`,
    ])
      expect(fs.statSync(file).uid, file).toBe(serviceUid);
    // The first wave's other unit waited for the compile's marker, then loaded.
    const journals = await Promise.all(hosts.slice(0, 2).map((h) => h.run("journalctl -u 'rbln-serving-*' -o cat --no-pager")));
    const text = journals.map((j) => j.stdout).join("\n");
    expect(text).toMatch(/lease-lock compile-[0-9a-f]+: writing as /);
    expect(text).toMatch(/lease-lock compile-[0-9a-f]+: complete; starting, loading what the writer made/);
    // Units read and write the shared folder; a start never reaches the hub.
    const env = (await hosts[2]!.run(`cat ${INSTALL_ROOT}/env/test.main-0.env`)).stdout;
    expect(env).toContain(`HF_HOME='${SHARED}/huggingface'`);
    expect(env).toContain(`VLLM_CACHE_ROOT='${SHARED}/vllm'`);
    expect(env).toMatch(/^HF_HUB_OFFLINE='1'$/m);
  });

  it("the second up changes nothing", async () => {
    const again = await engine.up(await register());
    expect(again.runs.map((r) => r.name)).toEqual([]);
  });

  it("refuses a shared folder that belongs to another uid than the service user's here, with one line", async () => {
    const install = registrations.find((r) => r.name === "rbln-serving-npu-1-install")!;
    const owner = fs.statSync(`${SHARED}/vllm`);
    fs.chownSync(`${SHARED}/vllm`, owner.uid + 1, owner.gid);
    try {
      const run = await hosts[1]!.run(install.inputs.create, String(install.inputs.stdin));
      expect(run.status).not.toBe(0);
      expect(run.stderr.trim().split("\n").pop()).toBe(
        `cache.shared npu-1: ${SHARED}/vllm belongs to uid ${owner.uid + 1}, but rbln-serving is uid ${owner.uid} here; the service user needs the same uid on every host (see docs/caches.md, A shared cache)`,
      );
    } finally {
      fs.chownSync(`${SHARED}/vllm`, owner.uid, owner.gid);
    }
  });

  it("weights removed from the shared folder are downloaded again, once, despite the lease's old marker", async () => {
    fs.rmSync(`${SHARED}/huggingface/rbln-serving-complete`, { recursive: true });
    const weights = registrations.filter((r) => r.name.endsWith("-weights"));
    const runs = await Promise.all(weights.map((r, i) => hosts[i]!.run(r.inputs.create, String(r.inputs.stdin))));
    expect(runs.map((r) => r.status)).toEqual([0, 0, 0]);
    expect(lines(HUB_LOG)).toEqual([MODEL, MODEL]);
  });
});
