import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportedDigest } from "../../core/render/compileCache";
import type { UpResult } from "../helpers/engine";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { hubStubSource } from "../helpers/hubStub";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { startRegistry, type TestRegistry } from "../helpers/ociRegistry";
import { startPackageIndex, type PackageIndex } from "../helpers/packageIndex";
import { prepareStandInServer } from "../helpers/standInServer";
import { freePort } from "../helpers/sshd";

/**
 * Issue 28's faults of compile ahead, on fake hosts (real systemd and sshd each), with a real OCI
 * registry on loopback (docker-registry, TLS, basic auth) and the stand-in vllm:
 * - the registry is down at deploy: the step that needs it fails in one line naming it, on the
 *   compile host and on an NPU host that pulls, and nothing is half-written (no marker, no files
 *   list, no folder of the key's); no unit of the key starts;
 * - the compile host dies mid-compile (a power loss, kill()): the step fails, nothing is pushed;
 *   after reboot() the next `up` runs the step again, which compiles from the start and pushes one
 *   whole artifact, and the NPU host loads it.
 */
const INSTALL_ROOT = "/opt/rbln-faults-test";
const CACHE_ROOT = "/var/lib/rbln-faults-test";
const CERTS = "/etc/containers/certs.d";
const VENV = `${INSTALL_ROOT}/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`;
const AUTHORIZED_KEYS = "/run/rbln-host/ssh/authorized_keys";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const COMMIT = "c0ffee0000000000000000000000000000000003";
const LOGS = fs.mkdtempSync("/var/lib/rbln-faults-test-logs-");
const COMPILE_LOG = `${LOGS}/compiles`;

let hosts: TestHost[];
let index: PackageIndex;
let registry: TestRegistry;
const [COMPILER, NPU] = [0, 1];

function settings(repository: string, { compiler = true, readyAfter = "1", extraArgs = [] as string[] } = {}) {
  return fakeHostsSettings(
    [hosts[NPU]!],
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    {
      revision: COMMIT,
      pip: { indexUrl: index.url, extraIndexUrls: [] },
      extraArgs: { main: extraArgs },
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: readyAfter, FAKE_VLLM_COMPILE_LOG: COMPILE_LOG } },
      compile: {
        ...(compiler
          ? { host: { name: "cpu-0", address: hosts[COMPILER]!.address, port: hosts[COMPILER]!.port, hostKey: hosts[COMPILER]!.hostPublicKey } }
          : {}),
        registry: { repository, username: registry.user },
      },
    },
  );
}

const register = (s: ReturnType<typeof settings>) =>
  registerServing(s, {
    hostOptions: {
      readinessIntervalSeconds: 1,
      restartSeconds: 1,
      pipRetries: 0,
      pipTimeoutSeconds: 5,
      devRoot: FAKE_DEV,
      compileListenAddress: hosts[COMPILER]!.address,
    },
    copyOptions: { authorizedKeysFile: AUTHORIZED_KEYS },
    secrets: { registryPassword: registry.password },
  });

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []);
const keyStep = (up: UpResult) => up.runs.find((r) => /-(compile|pull-compile)-[0-9a-f]{16}$/.test(r.name) && !r.name.includes("copy"))!;
const keyOf = (name: string) => /([0-9a-f]{16})$/.exec(name)![1]!;
/** What a key left on a host: its marker, files list and the folders of its own, under the cache root. */
const traces = (host: TestHost, key: string) =>
  host.run(`cd ${CACHE_ROOT}/vllm 2>/dev/null && find . -path '*${key}*' -o -name '.rbln-serving-*' | sort`).then((r) => r.stdout.trim());
/** Asks the registry for the key's tag from this process (skopeo, trusting the registry's CA for this call only). */
function registryHas(key: string): boolean {
  const ca = `${LOGS}/ca.pem`;
  fs.writeFileSync(ca, registry.caCert);
  const auth = `${LOGS}/auth.json`;
  fs.writeFileSync(auth, '{"auths":{}}\n');
  const env = { PATH: process.env.PATH, SSL_CERT_FILE: ca };
  spawnSync("skopeo", ["login", "--authfile", auth, "--username", registry.user, "--password-stdin", registry.host], { input: registry.password, env });
  const inspect = spawnSync("skopeo", ["inspect", "--raw", "--authfile", auth, `docker://${registry.host}/ml/faults:${key}`], { env, encoding: "utf8" });
  if (inspect.status !== 0 && !inspect.stderr.includes("manifest unknown")) throw new Error(inspect.stderr);
  return inspect.status === 0;
}

beforeAll(async () => {
  fs.chmodSync(LOGS, 0o1777);
  [hosts, index, registry] = await Promise.all([
    startHosts(2, { privatePaths: [INSTALL_ROOT, CACHE_ROOT, CERTS] }),
    startPackageIndex([
      { name: "huggingface_hub", version: "0.35.3", module: "huggingface_hub", source: hubStubSource({ commit: COMMIT, log: `${LOGS}/hub` }) },
    ]),
    startRegistry(),
  ]);
  for (const host of hosts) {
    await prepareStandInServer(host, { venv: VENV, devRoot: FAKE_DEV });
    const trust = await host.run(`install -d ${CERTS}/${registry.host} && cat > ${CERTS}/${registry.host}/ca.crt`, registry.caCert);
    if (trust.status !== 0) throw new Error(trust.stderr);
  }
}, 180_000);

afterAll(async () => {
  await Promise.all((hosts ?? []).map((h) => h.stop()));
  index?.stop();
  registry?.stop();
  fs.rmSync(LOGS, { recursive: true, force: true });
});

describe("compile ahead's faults, on fake hosts", { timeout: 300_000 }, () => {
  it("the registry is down at deploy: the compile host's step, and an NPU host's pull, fail in one line naming it; nothing is half-written, no unit starts", async () => {
    const down = `127.0.0.1:${await freePort()}`;
    for (const compiler of [true, false]) {
      const up = await fakeHostsEngine(hosts).up(await register(settings(`${down}/ml/faults`, { compiler })));
      const step = keyStep(up);
      const key = keyOf(step.name);
      const host = hosts[compiler ? COMPILER : NPU]!;
      expect(up.failed.map((f) => f.name)).toEqual([step.name]);
      const errors = step.stderr.trim().split("\n");
      expect(errors).toEqual([
        expect.stringMatching(new RegExp(`^compile (cpu-0|npu-0) ${key}: login to ${down} as ${registry.user} failed: .*connection refused$`)),
      ]);
      expect(step.stdout + step.stderr).not.toContain(registry.password);
      expect(await traces(host, key)).toBe("");
      expect(up.runs.some((r) => r.name.endsWith("-main-0"))).toBe(false);
    }
  });

  it("the compile host dies mid-compile: nothing is pushed; after its reboot the next up compiles from the start, pushes one whole artifact, and the NPU host loads it", async () => {
    const repository = `${registry.host}/ml/faults`;
    const registrations = await register(settings(repository, { readyAfter: "20" }));
    const engine = fakeHostsEngine(hosts);
    const compiler = hosts[COMPILER]!;
    const first = engine.up(registrations);
    // Wait until the compile-only unit runs, then cut the power.
    for (let i = 0; ; i++) {
      const running = await compiler.run("systemctl list-units --state=active --no-legend 'rbln-serving-test.compile-*' | grep -c compile || true");
      if (running.stdout.trim() === "1") break;
      if (i > 600) throw new Error("the compile never started");
      await new Promise((r) => setTimeout(r, 500));
    }
    await compiler.kill();
    const cut = await first;
    const step = cut.failed.find((f) => /-cpu-0-compile-[0-9a-f]{16}$/.test(f.name))!;
    expect(step).toBeDefined();
    const key = keyOf(step.name);
    expect(cut.runs.some((r) => r.name.endsWith("-main-0"))).toBe(false);
    expect(registryHas(key)).toBe(false);
    expect(lines(COMPILE_LOG)).toEqual([]);

    await compiler.reboot();
    const resumed = await engine.up(registrations);
    expect(resumed.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const again = keyStep(resumed);
    expect(again.name).toBe(step.name);
    expect(again.stdout).toContain(`compile cpu-0 ${key}: compiled 1 file(s) in `);
    const digest = reportedDigest(again.stdout, key)!;
    expect(again.stdout).toContain(`pushed to ${repository}@${digest}`);
    expect(registryHas(key)).toBe(true);
    expect(lines(COMPILE_LOG)).toEqual([`${compiler.address} compile-only`]);
    // Nothing of the run cut short is left; the NPU host copied the cache and loaded it.
    expect((await compiler.run(`ls -A ${CACHE_ROOT}/vllm`)).stdout.split("\n").filter((f) => f.startsWith(".rbln-serving"))).toEqual([]);
    expect((await hosts[NPU]!.run("journalctl -u rbln-serving-test.main-0.service -o cat --no-pager")).stdout).toContain("Loaded rbln mega-cache bundle from");
  });
});
