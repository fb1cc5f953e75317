import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reportedRevision } from "../../components/modelServing";
import { deploymentId } from "../../core/render/hosts/names";
import { copyAllowScript, remoteCommand } from "../../core/render/hosts/scripts";
import type { FakeEngine, UpResult } from "../helpers/engine";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { hubStubSource } from "../helpers/hubStub";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { startPackageIndex, type PackageIndex } from "../helpers/packageIndex";
import type { Registration } from "../helpers/pulumiHarness";
import { prepareStandInServer, SLOW_NETWORK_DIR, slowCompiledCaches } from "../helpers/standInServer";
import { parseProgressLine, type ParsedProgressLine } from "../../core/render/progress";

/**
 * Download once, compile once, for real: three fake NPU hosts (real systemd and sshd each), the
 * program's commands run over SSH in the order of its graph. A stub huggingface_hub (from a package
 * index on loopback, test/helpers/hubStub.ts) logs each download; the stand-in `vllm` saves a
 * "compiled" graph once ready and logs each compile.
 */
const INSTALL_ROOT = "/opt/rbln-copy-test";
const CACHE_ROOT = "/var/lib/rbln-copy-test";
const VENV = `${INSTALL_ROOT}/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`;
const AUTHORIZED_KEYS = "/run/rbln-host/ssh/authorized_keys";
const MODEL = "MiniMaxAI/MiniMax-M2.7";
/** The hosts' NPU device nodes: plain files, which is all the units' device wait looks for. */
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const COMMIT = "c0ffee0000000000000000000000000000000001";
// Shared by every host (the namespaces share this machine's root filesystem outside their private paths).
const LOGS = fs.mkdtempSync("/var/lib/rbln-copy-test-logs-");
const HUB_LOG = `${LOGS}/hub-downloads`;
const COMPILE_LOG = `${LOGS}/compiles`;

const HUB_STUB = hubStubSource({ commit: COMMIT, log: HUB_LOG });

let hosts: TestHost[];
let index: PackageIndex;
let engine: FakeEngine;
let registrations: Registration[];

function settings() {
  return fakeHostsSettings(
    hosts,
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    {
      pip: { indexUrl: index.url, extraIndexUrls: [] },
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: "1", FAKE_VLLM_COMPILE_LOG: COMPILE_LOG } },
    },
  );
}

const register = (instance?: string) =>
  registerServing(settings(), {
    hostOptions: { readinessIntervalSeconds: 1, progressSeconds: 1, restartSeconds: 1, pipRetries: 0, pipTimeoutSeconds: 5, devRoot: FAKE_DEV },
    copyOptions: { authorizedKeysFile: AUTHORIZED_KEYS, progressSeconds: 1 },
    instance,
  });

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []);
const command = (name: string) => registrations.find((r) => r.name === name)!;
const on = (i: number, r: Registration, stdin = "") => hosts[i]!.run(r.inputs.create, stdin);
/** rsync on npu-1 with a grant's private key, from `bind` (a destination's address: the loopback network is shared). */
const withGrant = (grant: string, bind: string, args: string) =>
  hosts[1]!.run(
    `k=$(mktemp); trap 'rm -f $k' EXIT; cat > $k; rsync -e "ssh -i $k -p ${hosts[0]!.port} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BindAddress=${bind}" ${args}`,
    `${grant.trimEnd()}\n`,
  );
const grantLines = () => hosts[0]!.run(`grep rbln-serving-copy ${AUTHORIZED_KEYS} || true`).then((r) => r.stdout.split("\n").filter(Boolean));
const copyGrants = () => hosts[0]!.run(`grep -c rbln-serving-copy ${AUTHORIZED_KEYS} || true`).then((r) => Number(r.stdout.trim()));
const keysLeft = (host: TestHost) =>
  host
    .run(
      "ls /run/rbln-serving-copy.* /dev/shm/rbln-serving-allow.* 2>/dev/null; grep -rls 'OPENSSH PRIVATE KEY' /run /dev/shm /tmp /var/tmp 2>/dev/null | grep -v '^/run/rbln-host/' || true",
    )
    .then((r) => r.stdout.trim());

beforeAll(async () => {
  fs.chmodSync(LOGS, 0o1777);
  [hosts, index] = await Promise.all([
    startHosts(3, { privatePaths: [INSTALL_ROOT, CACHE_ROOT, SLOW_NETWORK_DIR] }),
    startPackageIndex([{ name: "huggingface_hub", version: "0.35.3", module: "huggingface_hub", source: HUB_STUB }]),
  ]);
  // A complete venv holding the stand-in vllm: install has nothing to do. No weights anywhere.
  for (const host of hosts) await prepareStandInServer(host, { venv: VENV, devRoot: FAKE_DEV });
  // Compiled caches arrive slowly: a unit that did not wait for its copy would compile (COMPILE_LOG).
  for (const host of hosts) await slowCompiledCaches(host, { copySeconds: 5, pullSeconds: 5 });
  engine = fakeHostsEngine(hosts);
  registrations = await register();
}, 120_000);

afterAll(async () => {
  await Promise.all((hosts ?? []).map((h) => h.stop()));
  index?.stop();
  fs.rmSync(LOGS, { recursive: true, force: true });
});

describe("download once, compile once, on three hosts over SSH", { timeout: 240_000 }, () => {
  let first: UpResult;

  it("first up: the seed downloads from the hub, the others copy from it; only the first wave compiles", async () => {
    first = await engine.up(registrations);
    expect(first.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    // Every model of the plan (the served model; this recipe names no draft), exactly once, on the seed.
    expect(lines(HUB_LOG)).toEqual([MODEL]);
    expect(lines(COMPILE_LOG)).toEqual([hosts[0]!.address]);
    const run = (name: string) => first.runs.find((r) => r.name === `rbln-serving-${name}`)!;
    expect(reportedRevision(run("npu-0-weights").stdout, MODEL)).toBe(COMMIT);
    for (const i of [1, 2]) {
      // Grant after the seed's download, copy after the grant, revoke after the copy.
      expect(run(`npu-0-allow-npu-${i}`).startedAt).toBeGreaterThanOrEqual(run("npu-0-weights").endedAt);
      expect(run(`npu-${i}-copy-npu-0`).startedAt).toBeGreaterThanOrEqual(run(`npu-0-allow-npu-${i}`).endedAt);
      expect(run(`npu-0-revoke-npu-${i}`).startedAt).toBeGreaterThanOrEqual(run(`npu-${i}-copy-npu-0`).endedAt);
      expect(run(`npu-${i}-copy-npu-0`).stdout).toContain(`copy npu-${i} <- npu-0: weights ${MODEL} copied and checked`);
      const marker = await hosts[i]!.run(
        `cat ${CACHE_ROOT}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7; readlink ${CACHE_ROOT}/huggingface/hub/models--MiniMaxAI--MiniMax-M2.7/snapshots/${COMMIT}/model.safetensors`,
      );
      expect(marker.stdout).toMatch(new RegExp(`^${COMMIT}\\n\\.\\./\\.\\./blobs/[0-9a-f]{64}\\n$`));
    }
    // Compiled caches come from the previous wave once its unit serves.
    expect(run("npu-1-copy-compile-npu-0").startedAt).toBeGreaterThanOrEqual(run("npu-0-main-0").endedAt);
    expect(run("npu-2-copy-compile-npu-1").startedAt).toBeGreaterThanOrEqual(run("npu-1-main-0").endedAt);
    expect(run("npu-2-main-0").startedAt).toBeGreaterThanOrEqual(run("npu-2-copy-compile-npu-1").endedAt);
    // The compiled cache's copy starts 5 s late (slowCompiledCaches): at a line a second, its step
    // reports the copy's phase and bytes done of the source's total (docs/progress.md).
    for (const [step, from] of [
      ["npu-1-copy-compile-npu-0", "npu-0"],
      ["npu-2-copy-compile-npu-1", "npu-1"],
    ] as const) {
      const progress = run(step)
        .stdout.split("\n")
        .map(parseProgressLine)
        .filter((p): p is ParsedProgressLine => p !== null);
      expect(progress.length, run(step).stdout).toBeGreaterThanOrEqual(2);
      for (const line of progress) {
        expect([line.host, line.who, line.phase]).toEqual([step.split("-copy")[0], `from:${from}`, "copy"]);
        expect(line.amount).toMatch(/ of \d/);
      }
    }
    expect((await hosts[2]!.run(`cat ${CACHE_ROOT}/vllm/rbln/*/*/rank0/mega_cache.bin`)).stdout).toBe(`compiled for ${MODEL} on RBLN-CR13\n`);
    // The hosts that got the compiled cache loaded it: their unit steps check the rank's log for the load.
    for (const i of [1, 2])
      expect((await hosts[i]!.run("journalctl -u rbln-serving-test.main-0.service -o cat --no-pager")).stdout).toContain("Loaded rbln mega-cache bundle from");
    // A unit start never reaches the hub.
    expect((await hosts[2]!.run(`cat ${INSTALL_ROOT}/env/test.main-0.env`)).stdout).toMatch(/^HF_HUB_OFFLINE='1'$/m);
  });

  it("leaves no private key on any host and no grant in authorized_keys", async () => {
    expect(await copyGrants()).toBe(0);
    for (const host of hosts) expect(await keysLeft(host)).toBe("");
  });

  it("the second up changes nothing", async () => {
    const again = await engine.up(await register());
    expect(again.runs.map((r) => r.name)).toEqual([]);
  });

  it("a grant is read-only, only for the cache root, only from its destination", async () => {
    const grant = await on(0, command("rbln-serving-npu-0-allow-npu-1"));
    expect(grant.status).toBe(0);
    expect(await copyGrants()).toBe(1);
    const rsync = (bind: string, args: string) => withGrant(grant.stdout, bind, args);
    const seed = `root@${hosts[0]!.address}`;
    expect(await rsync(hosts[1]!.address, `${seed}:huggingface/rbln-serving-complete/ /tmp/read/`)).toMatchObject({ status: 0 });
    const write = await rsync(hosts[1]!.address, `/etc/hostname ${seed}:huggingface/`);
    expect(write.status).not.toBe(0);
    expect(write.stderr).toMatch(/sending to read-only server is not allowed/);
    const outside = await rsync(hosts[1]!.address, `${seed}:../../../etc/passwd /tmp/passwd`);
    expect(outside.status).not.toBe(0);
    expect((await hosts[1]!.run("test -e /tmp/passwd")).status).not.toBe(0);
    const otherHost = await rsync(hosts[2]!.address, `${seed}:huggingface/rbln-serving-complete/ /tmp/read2/`);
    expect(otherHost.status).not.toBe(0);
    expect(otherHost.stderr).toMatch(/Permission denied/);
    expect(await on(0, command("rbln-serving-npu-0-revoke-npu-1"))).toMatchObject({ status: 0 });
    expect(await copyGrants()).toBe(0);
    expect((await rsync(hosts[1]!.address, `${seed}:huggingface/rbln-serving-complete/ /tmp/read3/`)).status).not.toBe(0);
  });

  it("tags a grant with the cleaned deployment id, never the instance name: one with quotes and backslashes grants and revokes", async () => {
    // `\n` and `\\` as text: awk -v read them as a newline and one backslash, and the revoke missed the line.
    const name = `team "a" \\n 'b' \\\\`;
    const hostile = await register(name);
    const step = (suffix: string) => hostile.find((r) => r.name === `${name}-npu-0-${suffix}`)!;
    const grant = await on(0, step("allow-npu-1"));
    expect(grant.status, grant.stderr).toBe(0);
    const id = deploymentId("test", name).replace(/\./g, "\\.");
    expect(await grantLines()).toEqual([
      expect.stringMatching(
        new RegExp(
          `^from="${hosts[1]!.address}",restrict,expiry-time="\\d{14}",command="/usr/bin/rrsync -ro ${CACHE_ROOT}" ssh-ed25519 \\S+ rbln-serving-copy ${id} weights-npu-1$`,
        ),
      ),
    ]);
    expect(await withGrant(grant.stdout, hosts[1]!.address, `root@${hosts[0]!.address}:huggingface/rbln-serving-complete/ /tmp/hostile/`)).toMatchObject({
      status: 0,
    });
    const revoke = await on(0, step("revoke-npu-1"));
    expect(revoke.status, revoke.stderr).toBe(0);
    expect(revoke.stdout).toMatch(/^copy access npu-0 -> npu-1: revoked/);
    expect(await grantLines()).toEqual([]);
  });

  it("a grant's tag of other characters never reaches authorized_keys: a newline would start a key line of its own", async () => {
    const before = await hosts[0]!.run(`cat ${AUTHORIZED_KEYS}`);
    const tag = "rbln-serving-copy x\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostile attacker weights-npu-1";
    const script = copyAllowScript({
      sourceName: "npu-0",
      destName: "npu-1",
      destAddress: hosts[1]!.address,
      cacheRoot: CACHE_ROOT,
      authorizedKeys: AUTHORIZED_KEYS,
      tag,
      expiryHours: 1,
      copyId: "0".repeat(16),
    });
    const grant = await hosts[0]!.run(remoteCommand(script, true));
    expect(grant.status).toBe(1);
    expect(grant.stderr.trim().split("\n").pop()).toBe(
      `copy access npu-0 -> npu-1: the grant's tag $'rbln-serving-copy x\\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostile attacker weights-npu-1' may hold only letters, digits, spaces, '.', '_' and '-'`,
    );
    expect(grant.stdout).toBe("");
    expect(await hosts[0]!.run(`cat ${AUTHORIZED_KEYS}`)).toEqual(before);
  });

  it("the revoke fails, naming the file, while a line with the grant's tag is left", async () => {
    const grant = await on(0, command("rbln-serving-npu-0-allow-npu-2"));
    // Saved by an editor with CRLF: the line no longer ends in the tag, and its key still lets npu-2 in.
    await hosts[0]!.run(`sed -i '/rbln-serving-copy/ s/$/\\r/' ${AUTHORIZED_KEYS}`);
    expect(await withGrant(grant.stdout, hosts[2]!.address, `root@${hosts[0]!.address}:huggingface/rbln-serving-complete/ /tmp/crlf/`)).toMatchObject({
      status: 0,
    });
    const revoke = await on(0, command("rbln-serving-npu-0-revoke-npu-2"));
    expect(revoke.status).toBe(1);
    expect(revoke.stderr.trim().split("\n").pop()).toBe(
      `copy access npu-0 -> npu-2: ${AUTHORIZED_KEYS} still holds 1 line(s) with "rbln-serving-copy test weights-npu-2" that are not this grant's; remove them by hand`,
    );
    expect(revoke.stdout).not.toContain("revoked");
    // Removed by hand, as the line says.
    await hosts[0]!.run(`sed -i '/rbln-serving-copy/d' ${AUTHORIZED_KEYS}`);
    expect(await on(0, command("rbln-serving-npu-0-revoke-npu-2"))).toMatchObject({ status: 0 });
  });

  it("a corrupt blob on the seed is caught by the check, and no marker is written", async () => {
    const repo = `${CACHE_ROOT}/huggingface/hub/models--MiniMaxAI--MiniMax-M2.7`;
    // Same size, other bytes: only the hash can tell.
    await hosts[0]!.run(
      `for b in ${repo}/blobs/*; do n=$(basename "$b"); [ \${#n} -eq 64 ] && printf X | dd of="$b" bs=1 seek=3 conv=notrunc status=none; done; true`,
    );
    await hosts[2]!.run(`rm -rf ${repo} ${CACHE_ROOT}/huggingface/rbln-serving-complete`);
    const grant = await on(0, command("rbln-serving-npu-0-allow-npu-2"));
    const copy = await on(2, command("rbln-serving-npu-2-copy-npu-0"), grant.stdout);
    await on(0, command("rbln-serving-npu-0-revoke-npu-2"));
    expect(copy.status).not.toBe(0);
    expect(copy.stderr).toMatch(/blobs\/[0-9a-f]{64}: sha256 [0-9a-f]{64} does not match its name \(corrupt on npu-0, or in transit; removed here\)/);
    expect((await hosts[2]!.run(`test -e ${CACHE_ROOT}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7`)).status).not.toBe(0);
    expect(await keysLeft(hosts[2]!)).toBe("");
  });
});
