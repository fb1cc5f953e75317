import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportedDigest } from "../../core/render/compileCache";
import type { UpResult } from "../helpers/engine";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { hubStubSource } from "../helpers/hubStub";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { startRegistry, type TestRegistry } from "../helpers/ociRegistry";
import { startPackageIndex, type PackageIndex } from "../helpers/packageIndex";
import type { Registration } from "../helpers/pulumiHarness";
import { prepareStandInServer, SLOW_NETWORK_DIR, slowCompiledCaches } from "../helpers/standInServer";

/**
 * Compile ahead and the compiled-cache registry, for real (issue 22): five fake hosts (real systemd
 * and sshd each), a real OCI registry on loopback (docker-registry, TLS and basic auth), skopeo on
 * the hosts, the stand-in vllm compiling in compile-only mode on a compile host that has no NPU.
 * "staging" compiles on its compile host and pushes; its NPU host copies the cache and loads it;
 * "prod", with the same key, pulls it and compiles nothing; a changed key compiles once and pushes;
 * two compile hosts pushing one key at once leave one good artifact; a corrupted blob is refused.
 */
const INSTALL_ROOT = "/opt/rbln-registry-test";
const CACHE_ROOT = "/var/lib/rbln-registry-test";
const CERTS = "/etc/containers/certs.d";
const VENV = `${INSTALL_ROOT}/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`;
const AUTHORIZED_KEYS = "/run/rbln-host/ssh/authorized_keys";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const COMMIT = "c0ffee0000000000000000000000000000000002";
const LOGS = fs.mkdtempSync("/var/lib/rbln-registry-test-logs-");
const COMPILE_LOG = `${LOGS}/compiles`;
const HUB_LOG = `${LOGS}/hub`;

let hosts: TestHost[];
let index: PackageIndex;
let registry: TestRegistry;

/** hosts[0]: staging's compile host; hosts[1]: staging's NPU host; hosts[2]: prod's NPU host; hosts[3]: a second compile host. */
const [STAGING_COMPILER, STAGING_NPU, PROD_NPU, OTHER_COMPILER] = [0, 1, 2, 3];

function settings(npu: number, compiler: number | null, extraArgs: string[] = [], extraEnv: Record<string, string> = {}) {
  return fakeHostsSettings(
    [hosts[npu]!],
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    {
      revision: COMMIT,
      pip: { indexUrl: index.url, extraIndexUrls: [] },
      extraArgs: { main: extraArgs },
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: "1", FAKE_VLLM_COMPILE_LOG: COMPILE_LOG, ...extraEnv } },
      compile: {
        ...(compiler === null
          ? {}
          : { host: { name: "cpu-0", address: hosts[compiler]!.address, port: hosts[compiler]!.port, hostKey: hosts[compiler]!.hostPublicKey } }),
        registry: { repository: `${registry.host}/ml/rbln-compile-cache`, username: registry.user },
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
      compileListenAddress: hosts[0]!.address,
    },
    copyOptions: { authorizedKeysFile: AUTHORIZED_KEYS },
    secrets: { registryPassword: registry.password },
  });

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []);
const runOf = (up: UpResult, suffix: string) => up.runs.find((r) => r.name.endsWith(suffix));
const compileRun = (up: UpResult) => up.runs.find((r) => /-(compile|pull-compile)-[0-9a-f]{16}$/.test(r.name) && !r.name.includes("copy"))!;
const keyOf = (name: string) => /([0-9a-f]{16})$/.exec(name)![1]!;
const journal = (host: TestHost) => host.run("journalctl -u rbln-serving-test.main-0.service -o cat --no-pager").then((r) => r.stdout);
/** What a host holds in its compiled cache: the bundles' paths under vllm/rbln. */
const bundles = (host: TestHost) => host.run(`cd ${CACHE_ROOT}/vllm/rbln 2>/dev/null && find . -name mega_cache.bin | sort`).then((r) => r.stdout.trim());

beforeAll(async () => {
  fs.chmodSync(LOGS, 0o1777);
  [hosts, index, registry] = await Promise.all([
    startHosts(4, { privatePaths: [INSTALL_ROOT, CACHE_ROOT, CERTS, SLOW_NETWORK_DIR] }),
    startPackageIndex([{ name: "huggingface_hub", version: "0.35.3", module: "huggingface_hub", source: hubStubSource({ commit: COMMIT, log: HUB_LOG }) }]),
    startRegistry(),
  ]);
  for (const host of hosts) {
    await prepareStandInServer(host, { venv: VENV, devRoot: FAKE_DEV });
    // Compiled caches arrive slowly (copies and pulls): a unit that did not wait for its cache would compile (COMPILE_LOG).
    // 5 s was not enough for a pull: it ran beside the prod host's hub download and still landed first.
    await slowCompiledCaches(host, { copySeconds: 5, pullSeconds: 20 });
    // Each host trusts the registry's CA the way containers/image reads it: certs.d/<host:port>/ca.crt.
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

describe("compile ahead with a registry, on fake hosts", { timeout: 300_000 }, () => {
  let stagingDigest: string;
  let stagingKey: string;
  let stagingRegistrations: Registration[];
  // Each stack has its own state: one engine per stack, kept across its runs.
  let staging: ReturnType<typeof fakeHostsEngine>;

  it("staging: the compile host compiles in compile-only mode and pushes; the NPU host copies the cache and loads it", async () => {
    stagingRegistrations = await register(settings(STAGING_NPU, STAGING_COMPILER));
    staging = fakeHostsEngine(hosts);
    const up = await staging.up(stagingRegistrations);
    expect(up.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const compile = compileRun(up);
    stagingKey = keyOf(compile.name);
    stagingDigest = reportedDigest(compile.stdout, stagingKey)!;
    expect(stagingDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(compile.stdout).toContain(`pushed to ${registry.host}/ml/rbln-compile-cache@${stagingDigest}`);
    // One compile, on the compile host, in compile-only mode; the NPU host's unit only loaded.
    expect(lines(COMPILE_LOG)).toEqual([`${hosts[0]!.address} compile-only`]);
    expect(runOf(up, "npu-0-main-0")!.startedAt).toBeGreaterThanOrEqual(compile.endedAt);
    expect(await journal(hosts[STAGING_NPU]!)).toContain("Loaded rbln mega-cache bundle from");
    expect(await bundles(hosts[STAGING_NPU]!)).toBe(await bundles(hosts[STAGING_COMPILER]!));
    // The hub was asked once, by the compile host (the seed); the NPU host copied the weights.
    expect(lines(HUB_LOG)).toEqual(["MiniMaxAI/MiniMax-M2.7"]);
    // The password reached skopeo on stdin and nothing printed it.
    for (const run of up.runs) expect(`${run.stdout}${run.stderr}`).not.toContain(registry.password);
  });

  it("prod: the same key is pulled by digest, checked, and loaded; nothing compiles", async () => {
    const up = await fakeHostsEngine(hosts).up(await register(settings(PROD_NPU, null)));
    expect(up.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const pull = compileRun(up);
    expect(pull.name).toBe(`rbln-serving-npu-0-pull-compile-${stagingKey}`);
    expect(pull.stdout).toContain(`pulled ${registry.host}/ml/rbln-compile-cache@${stagingDigest} and checked it: nothing to compile`);
    expect(lines(COMPILE_LOG)).toHaveLength(1);
    expect(runOf(up, "npu-0-main-0")!.startedAt).toBeGreaterThanOrEqual(pull.endedAt);
    expect(await journal(hosts[PROD_NPU]!)).toContain("Loaded rbln mega-cache bundle from");
    expect(await bundles(hosts[PROD_NPU]!)).toBe(await bundles(hosts[STAGING_COMPILER]!));
  });

  it("staging again with nothing changed runs nothing; a changed key compiles once, pushes, and the NPU host loads it", async () => {
    expect((await staging.up(stagingRegistrations)).runs).toEqual([]);
    const up = await staging.up(await register(settings(STAGING_NPU, STAGING_COMPILER, ["--max-num-seqs", "2"])));
    expect(up.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const compile = compileRun(up);
    expect(keyOf(compile.name)).not.toBe(stagingKey);
    expect(compile.stdout).toMatch(/pushed to .*@sha256:[0-9a-f]{64}/);
    expect(lines(COMPILE_LOG)).toEqual([`${hosts[0]!.address} compile-only`, `${hosts[0]!.address} compile-only`]);
    expect((await journal(hosts[STAGING_NPU]!)).match(/Loaded rbln mega-cache bundle from/g)).toHaveLength(2);
  });

  it("two compile hosts pushing one key at once leave one good artifact, the same digest for both", async () => {
    const registrations = await register(settings(STAGING_NPU, STAGING_COMPILER, ["--max-num-batched-tokens", "256"]));
    const step = registrations.find((r) => /-cpu-0-compile-[0-9a-f]{16}$/.test(r.name))!;
    const key = keyOf(step.name);
    // The other compile host needs the service user and the venv (its install step would make them).
    await hosts[OTHER_COMPILER]!.run(
      `id -u rbln-serving >/dev/null 2>&1 || useradd --system --no-create-home rbln-serving; install -d -o rbln-serving ${CACHE_ROOT}/vllm`,
    );
    // The same step on the other host, listening on that host's own address (the hosts share loopback here).
    const onOther = step.inputs.create.replaceAll(hosts[STAGING_COMPILER]!.address, hosts[OTHER_COMPILER]!.address);
    const [a, b] = await Promise.all([
      hosts[STAGING_COMPILER]!.run(step.inputs.create, `${registry.password}\n`),
      hosts[OTHER_COMPILER]!.run(onOther, `${registry.password}\n`),
    ]);
    expect([a!.status, b!.status, a!.stderr + b!.stderr]).toEqual([0, 0, ""]);
    const [digestA, digestB] = [reportedDigest(a!.stdout, key), reportedDigest(b!.stdout, key)];
    expect(digestA).toMatch(/^sha256:/);
    expect(digestB).toBe(digestA);
    // Pushing a key that exists is a no-op: run again, it finds its cache here and the tag there.
    const again = await hosts[OTHER_COMPILER]!.run(onOther, `${registry.password}\n`);
    expect(again.stdout).toContain(`already here (${registry.host}/ml/rbln-compile-cache@${digestA}); nothing to do`);
    // The artifact behind the tag pulls and checks on a third host.
    const pull = await hosts[PROD_NPU]!.run(step.inputs.create.replace("compile_here=yes", "compile_here=no"), `${registry.password}\n`);
    expect(pull.stdout).toContain(`pulled ${registry.host}/ml/rbln-compile-cache@${digestA} and checked it`);
  });

  it("with vLLM's logging silenced, the compile host still sees its compile saved and the NPU host's load is still told from a compile", async () => {
    // VLLM_LOGGING_LEVEL is not keyed: the same key, a restart that must load. VLLM_CONFIGURE_LOGGING is: a compile too.
    for (const [n, env] of [
      [1, { VLLM_LOGGING_LEVEL: "WARNING" }],
      [2, { VLLM_CONFIGURE_LOGGING: "0" }],
    ] as const) {
      const before = lines(COMPILE_LOG).length;
      const up = await staging.up(await register(settings(STAGING_NPU, STAGING_COMPILER, ["--max-num-seqs", "2"], env)));
      expect(up.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
      expect(runOf(up, "npu-0-main-0")).toBeDefined();
      // The log said nothing of the bundle: the decisions came from its files.
      const log = await hosts[STAGING_NPU]!.run(
        "journalctl _SYSTEMD_INVOCATION_ID=$(systemctl show -p InvocationID --value rbln-serving-test.main-0.service) -o cat --no-pager",
      ).then((r) => r.stdout);
      expect(log).toContain("fake vllm MiniMaxAI/MiniMax-M2.7");
      expect(log).not.toMatch(/mega-cache/);
      expect(lines(COMPILE_LOG).length - before).toBe(n === 1 ? 0 : 1);
    }
  });

  it("two compiles of two keys at once on one compile host: each in its own folder and on its own port, each key's list only its own files", async () => {
    // One after the other: Pulumi's mock runtime is one per process.
    const steps: Registration[] = [];
    for (const extra of [
      ["--max-num-seqs", "3"],
      ["--max-num-seqs", "5"],
    ])
      steps.push((await register(settings(STAGING_NPU, STAGING_COMPILER, extra))).find((r) => /-cpu-0-compile-[0-9a-f]{16}$/.test(r.name))!);
    expect(keyOf(steps[0]!.name)).not.toBe(keyOf(steps[1]!.name));
    const host = hosts[STAGING_COMPILER]!;
    const runs = await Promise.all(steps.map((step) => host.run(step.inputs.create, `${registry.password}\n`)));
    expect(runs.map((r) => [r.status, r.stderr])).toEqual([
      [0, ""],
      [0, ""],
    ]);
    const lists = await Promise.all(steps.map((step) => host.run(`cat ${CACHE_ROOT}/vllm/rbln-serving-complete/compile-${keyOf(step.name)}.files`)));
    const [a, b] = lists.map((l) => l.stdout.trim().split("\n"));
    expect([a!.length, b!.length]).toEqual([1, 1]);
    expect(a).not.toEqual(b);
    // Both ran on the same role's port (8000 in their commands); each compile-only server got a free one.
    const ports = runs.map((r) => /on port (\d+)/.exec(r.stdout)?.[1]);
    expect(ports[0]).not.toBe(ports[1]);
    expect((await host.run(`ls -A ${CACHE_ROOT}/vllm`)).stdout.split("\n").filter((f) => f.startsWith(".rbln-serving"))).toEqual([]);
  });

  it("an artifact whose tar holds a link is refused before anything is extracted", async () => {
    const evilKey = "deadbeefdeadbeef";
    const step = stagingRegistrations.find((r) => r.name.includes("-cpu-0-compile-"))!.inputs.create.replaceAll(stagingKey, evilKey);
    // A "compiled cache" of one symlink pointing out of the cache, pushed as if compiled here.
    const other = hosts[OTHER_COMPILER]!;
    const done = `${CACHE_ROOT}/vllm/rbln-serving-complete/compile-${evilKey}`;
    await other.run(
      `set -e; install -d ${CACHE_ROOT}/vllm/rbln ${CACHE_ROOT}/vllm/rbln-serving-complete; ln -sfn /etc/passwd ${CACHE_ROOT}/vllm/rbln/evil; echo evil > ${done}.files; echo local > ${done}`,
    );
    const push = await other.run(step.replaceAll(hosts[STAGING_COMPILER]!.address, other.address), `${registry.password}\n`);
    expect(push.stdout).toContain("already compiled here; pushed to");
    const host = hosts[PROD_NPU]!;
    const before = await host.run(`find ${CACHE_ROOT}/vllm | sort`);
    const pull = await host.run(step.replace("compile_here=yes", "compile_here=no"), `${registry.password}\n`);
    expect(pull.status).not.toBe(0);
    expect(pull.stderr.trim()).toMatch(
      new RegExp(
        `^compile cpu-0 ${evilKey}: ${registry.host}/ml/rbln-compile-cache@sha256:[0-9a-f]{64}: its layer holds links, devices, sparse files or paths outside the cache \\('evil'\\); refused, nothing changed$`,
      ),
    );
    expect((await host.run(`find ${CACHE_ROOT}/vllm | sort`)).stdout).toBe(before.stdout);
  });

  it("a corrupted blob is refused with one line and nothing changes", async () => {
    const manifest = JSON.parse(fs.readFileSync(registry.blobPath(stagingDigest), "utf8"));
    const layer = registry.blobPath(manifest.layers[0].digest);
    const bytes = fs.readFileSync(layer);
    const flipped = bytes.length - 2048;
    bytes[flipped] = bytes.readUInt8(flipped) ^ 0xff;
    fs.writeFileSync(layer, bytes);
    const pull = stagingRegistrations.find((r) => r.name.includes("-cpu-0-compile-"))!.inputs.create.replace("compile_here=yes", "compile_here=no");
    const host = hosts[OTHER_COMPILER]!;
    await host.run(`rm -rf ${CACHE_ROOT}/vllm/rbln ${CACHE_ROOT}/vllm/rbln-serving-complete/compile-${stagingKey}*`);
    const before = await bundles(host);
    const result = await host.run(pull, `${registry.password}\n`);
    expect(result.status).not.toBe(0);
    const errorLines = result.stderr.trim().split("\n");
    expect(errorLines).toHaveLength(1);
    expect(errorLines[0]).toMatch(
      new RegExp(`^compile cpu-0 ${stagingKey}: pulling ${registry.host}/ml/rbln-compile-cache@${stagingDigest} failed: .*; nothing changed$`),
    );
    expect(await bundles(host)).toBe(before);
    expect((await host.run(`test -e ${CACHE_ROOT}/vllm/rbln-serving-complete/compile-${stagingKey}`)).status).not.toBe(0);
  });
});
