import { FLAG_REFUSED_AT_START } from "../helpers/fakeVllm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelServing } from "../../components/modelServing";
import { parseStackSettings } from "../../core/config/stackConfig";
import { planDeployment } from "../../core/plan/deployment";
import { renderHost } from "../../core/render/hosts/bundle";
import { FakeEngine, type UpResult } from "../helpers/engine";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { runUnderMocks, type Registration } from "../helpers/pulumiHarness";
import { shippedCatalog } from "../helpers/recipes";
import { prepareStandInServer } from "../helpers/standInServer";

/**
 * Deployment ids on a real host (a fake NPU host: real systemd and sshd, the stand-in vllm): a
 * stack deployed by the version before ids runs `rbln-serving-main-0.service`; `pulumi up` with
 * this version moves it to `rbln-serving-test.main-0.service` (the mock runtime's stack is "test")
 * with one stretch down, or puts the old unit back when the new one fails. Then a second
 * ModelServing instance on the same host runs beside the first without touching it.
 */
const INSTALL_ROOT = "/opt/rbln-migration-test";
const CACHE_ROOT = "/var/lib/rbln-migration-test";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const VERSIONS = "rebel-compiler-0.12.0_vllm-rbln-0.12.0";
const UNIT_DIR = "/etc/systemd/system";
const LEGACY = "rbln-serving-main-0.service";
const LEGACY_FILES = [
  `${UNIT_DIR}/${LEGACY}`,
  `${INSTALL_ROOT}/env/main-0.env`,
  ...["previous", "previous-env"].map((s) => `${INSTALL_ROOT}/rollout/${LEGACY}.${s}`),
];
const UNIT = "rbln-serving-test.main-0.service";
const UNIT_FILES = [`${UNIT_DIR}/${UNIT}`, `${INSTALL_ROOT}/env/test.main-0.env`];
const TEAM_B = "rbln-serving-test.team-b.main-0.service";

const HOST_OPTIONS = { readinessIntervalSeconds: 1, restartSeconds: 1, startLimitBurst: 3, startLimitIntervalSeconds: 120, devRoot: FAKE_DEV };

let host: TestHost;
/** A second loopback address of the host's own network, for the second instance to listen on. */
let otherAddress: string;
/** A stack's engine on the one host, whichever of its addresses a stack names (preflight steps skipped). */
const oneHostEngine = () =>
  new FakeEngine(
    (_, command, stdin) => host.run(command, stdin),
    (name) => name.endsWith("-preflight"),
  );
let engine: FakeEngine;

function settings(listenAddress: string, extraArgs: string[] = [], extraEnv: Record<string, string> = {}) {
  return {
    strategy: "aggregated-data-expert-parallel",
    target: "Latency",
    hosts: [{ name: "npu-0", address: host.address, port: host.port, listenAddress, hostKey: host.hostPublicKey }],
    installRoot: INSTALL_ROOT,
    cacheRoot: CACHE_ROOT,
    extraArgs: { main: extraArgs },
    extraEnv: { main: { FAKE_VLLM_READY_AFTER: "2", ...extraEnv } },
  };
}

async function registrations(instance: string, config: ReturnType<typeof settings>): Promise<Registration[]> {
  const run = await runUnderMocks(
    () =>
      new ModelServing(instance, {
        settings: config,
        secrets: { sshPrivateKey: "unused: the engine stand-in uses the host's own client key" },
        hostOptions: HOST_OPTIONS,
      }),
  );
  if (run.error) throw run.error;
  return run.registrations;
}

/** `up` while polling the rank: how many separate stretches it was down. */
async function upWatching(instance: string, config: ReturnType<typeof settings>, address: string): Promise<{ result: UpResult; downStretches: number }> {
  let finished = false;
  let downStretches = 0;
  let wasUp = true;
  const watch = (async () => {
    while (!finished) {
      const up = await fetch(`http://${address}:8000/health`, { signal: AbortSignal.timeout(5000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (wasUp && !up) downStretches++;
      wasUp = up;
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const result = await engine.up(await registrations(instance, config));
  finished = true;
  await watch;
  return { result, downStretches };
}

const sh = async (command: string) => (await host.run(command)).stdout.trim();
const exists = async (file: string) => (await host.run(`test -e ${file}`)).status === 0;
const health = (address: string) =>
  fetch(`http://${address}:8000/health`, { signal: AbortSignal.timeout(5000) }).then(
    (r) => r.status,
    () => 0,
  );

beforeAll(async () => {
  [host] = await startHosts(1, { privatePaths: [INSTALL_ROOT, CACHE_ROOT] });
  otherAddress = host!.address.replace(/\.\d+$/, ".250");
  const deployment = planDeployment(parseStackSettings(settings(host!.address)), shippedCatalog);
  // The venv of the version before ids, and the two deployments' own.
  for (const venv of [`${INSTALL_ROOT}/venvs/${VERSIONS}`, `${INSTALL_ROOT}/venvs/test/${VERSIONS}`, `${INSTALL_ROOT}/venvs/test.team-b/${VERSIONS}`]) {
    await prepareStandInServer(host!, { venv, devRoot: FAKE_DEV });
  }
  const marker = `${CACHE_ROOT}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7`;
  expect((await host!.run(`install -d $(dirname ${marker}) && touch ${marker}`)).status).toBe(0);
  engine = oneHostEngine();

  // What the version before ids left: its unit (this unit under the old names, on the old venv),
  // env file and rollback state, serving. The install step makes the service user and folders.
  const install = (await registrations("rbln-serving", settings(host!.address))).find((r) => r.name.endsWith("-install"))!;
  expect((await host!.run(install.inputs.create, install.inputs.stdin)).status).toBe(0);
  const [rank] = renderHost(deployment, deployment.placements[0]!, "test", HOST_OPTIONS).ranks;
  const legacyUnit = rank!.unitText
    .replaceAll(`${INSTALL_ROOT}/env/test.main-0.env`, `${INSTALL_ROOT}/env/main-0.env`)
    .replaceAll(`${INSTALL_ROOT}/venvs/test/`, `${INSTALL_ROOT}/venvs/`);
  expect(legacyUnit).toContain(`ExecStart=${INSTALL_ROOT}/venvs/${VERSIONS}/bin/vllm`);
  expect((await host!.run(`cat > ${UNIT_DIR}/${LEGACY}`, legacyUnit)).status).toBe(0);
  expect(
    (await host!.run(`install -d -m 0700 ${INSTALL_ROOT}/env ${INSTALL_ROOT}/rollout && (umask 077; cat > ${INSTALL_ROOT}/env/main-0.env)`, rank!.envText))
      .status,
  ).toBe(0);
  expect(
    (
      await host!.run(
        `cp ${UNIT_DIR}/${LEGACY} ${LEGACY_FILES[2]} && cp ${LEGACY_FILES[1]} ${LEGACY_FILES[3]} && systemctl daemon-reload && systemctl enable --now ${LEGACY}`,
      )
    ).status,
  ).toBe(0);
  let status = 0;
  for (let i = 0; i < 120 && status !== 200; i++) {
    await new Promise((r) => setTimeout(r, 500));
    status = await health(host!.address);
  }
  expect(status).toBe(200);
}, 180_000);

afterAll(async () => {
  await host?.stop();
});

describe("moving a running stack to the names with deployment ids", { timeout: 180_000 }, () => {
  it("a new config that fails: the old unit serves again, enabled, and nothing of the new one stays", async () => {
    const { result, downStretches } = await upWatching(
      "rbln-serving",
      settings(host.address, [FLAG_REFUSED_AT_START.arg], FLAG_REFUSED_AT_START.env),
      host.address,
    );
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
      /^npu-0 main rank 0: the new config failed \(unit exited 2(, restarted \d+ times)?: unrecognized arguments: --rbln-use-custom-kernel\); the previous config is restored and serving$/,
    );
    expect(result.failed[0]!.stdout).toContain(`unit npu-0: stopped ${LEGACY}; ${UNIT} takes its place`);
    expect(await sh(`systemctl is-active ${LEGACY}; systemctl is-enabled ${LEGACY}`)).toBe("active\nenabled");
    expect(await health(host.address)).toBe(200);
    expect(downStretches).toBe(1);
    for (const file of LEGACY_FILES) expect(await exists(file), file).toBe(true);
    for (const file of UNIT_FILES) expect(await exists(file), file).toBe(false);
    expect(await sh(`systemctl is-active ${UNIT}`)).not.toBe("active");
  });

  it("a new unit whose start fails outright (its vllm cannot run): the old unit serves again too", async () => {
    const vllm = `${INSTALL_ROOT}/venvs/test/${VERSIONS}/bin/vllm`;
    expect((await host.run(`chmod a-x ${vllm}`)).status).toBe(0);
    try {
      const result = await engine.up(await registrations("rbln-serving", settings(host.address)));
      expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
      expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
        /^npu-0 main rank 0: the new config failed \(unit exited \d+.*\); the previous config is restored and serving$/,
      );
      expect(await sh(`systemctl is-active ${LEGACY}; systemctl is-enabled ${LEGACY}`)).toBe("active\nenabled");
      for (const file of UNIT_FILES) expect(await exists(file), file).toBe(false);
    } finally {
      await host.run(`chmod a+x ${vllm}`);
    }
  });

  it("a new config that serves: the new unit takes the port in one stretch down, and the old unit, env file and state are gone", async () => {
    const { result, downStretches } = await upWatching("rbln-serving", settings(host.address), host.address);
    expect(result.failed).toEqual([]);
    const step = result.runs.find((r) => r.name === "rbln-serving-npu-0-main-0")!;
    expect(step.stdout).toMatch(
      new RegExp(
        `stopped ${LEGACY}; ${UNIT} takes its place[\\s\\S]*ready npu-0: main rank 0 serves on port 8000[\\s\\S]*removed ${LEGACY}, which ${UNIT} replaced`,
      ),
    );
    expect(await sh(`systemctl is-active ${UNIT}; systemctl is-enabled ${UNIT}`)).toBe("active\nenabled");
    expect(await health(host.address)).toBe(200);
    expect(downStretches).toBe(1);
    for (const file of LEGACY_FILES) expect(await exists(file), file).toBe(false);
    expect(await sh(`systemctl is-active ${LEGACY}`)).not.toBe("active");
    // The two never fought over the port.
    expect(await sh(`journalctl -u ${UNIT} -o cat --no-pager`)).not.toContain("Address already in use");
  });

  it("a second instance on the host runs beside the first, which it leaves as it was", async () => {
    const before = await sh(`systemctl show -p MainPID --value ${UNIT}; cat ${UNIT_FILES.join(" ")} | sha256sum`);
    // Another Pulumi stack, so a state of its own: one engine for both would delete the first's commands.
    const teamB = oneHostEngine();
    const result = await teamB.up(await registrations("team-b", settings(otherAddress)));
    expect(result.failed.map((f) => f.stderr)).toEqual([]);
    expect(result.runs.find((r) => r.name === "team-b-npu-0-main-0")!.stdout).toMatch(/ready npu-0: main rank 0 serves on port 8000/);
    expect(await sh(`systemctl is-active ${UNIT} ${TEAM_B}`)).toBe("active\nactive");
    expect([await health(host.address), await health(otherAddress)]).toEqual([200, 200]);
    expect(await sh(`readlink ${INSTALL_ROOT}/venvs/test/current ${INSTALL_ROOT}/venvs/test.team-b/current`)).toBe(
      `${INSTALL_ROOT}/venvs/test/${VERSIONS}\n${INSTALL_ROOT}/venvs/test.team-b/${VERSIONS}`,
    );
    expect(await sh(`systemctl show -p MainPID --value ${UNIT}; cat ${UNIT_FILES.join(" ")} | sha256sum`)).toBe(before);
    // The first deployment's step still finds its unit unchanged.
    const first = (await registrations("rbln-serving", settings(host.address))).find((r) => r.name === "rbln-serving-npu-0-main-0")!;
    expect((await host.run(first.inputs.create, first.inputs.stdin)).stdout).toContain(`unit npu-0: ${UNIT} unchanged and running`);
  });
});
