import { FLAG_REFUSED_AT_START } from "../helpers/fakeVllm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseProgressLine } from "../../core/render/progress";
import type { FakeEngine, UpResult } from "../helpers/engine";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { prepareStandInServer } from "../helpers/standInServer";

/**
 * Safe rollouts on three replicas, for real: three fake NPU hosts (real systemd as PID 1 and a real
 * sshd each, test/helpers/hostNamespace.ts), the program's commands run over SSH in the order of its
 * dependency graph (test/helpers/engine.ts), and a stand-in `vllm` (test/fixtures/fake-vllm) that
 * serves after a delay, crashes, hangs, or refuses an unknown flag as vLLM's argparse does.
 */
const INSTALL_ROOT = "/opt/rbln-rollout-test";
const CACHE_ROOT = "/var/lib/rbln-rollout-test";
const VENV = `${INSTALL_ROOT}/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`;
/** The hosts' NPU device nodes: plain files, which is all the units' device wait looks for. */
const FAKE_DEV = `${INSTALL_ROOT}/dev`;

let hosts: TestHost[];
let engine: FakeEngine;

function settings(main: { extraArgs?: string[]; extraEnv?: Record<string, string> } = {}) {
  return fakeHostsSettings(
    hosts,
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    {
      extraArgs: main.extraArgs ? { main: main.extraArgs } : {},
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: "2", ...main.extraEnv } },
    },
  );
}

const register = (config: ReturnType<typeof settings>) =>
  registerServing(config, {
    hostOptions: { readinessIntervalSeconds: 1, restartSeconds: 1, startLimitBurst: 3, startLimitIntervalSeconds: 120, devRoot: FAKE_DEV },
    copyOptions: { authorizedKeysFile: "/run/rbln-host/ssh/authorized_keys" },
  });

const up = async (config: ReturnType<typeof settings>): Promise<UpResult> => engine.up(await register(config));

/** Polls every replica's /health while `during` runs; returns the most replicas down at one time. */
async function mostDownDuring(during: Promise<UpResult>): Promise<{ result: UpResult; mostDown: number }> {
  let finished = false;
  let mostDown = 0;
  const watch = (async () => {
    while (!finished) {
      // A stopped replica refuses at once; a slow answer from a loaded machine is still an answer.
      const up = await Promise.all(
        hosts.map((h) =>
          fetch(`http://${h.address}:8000/health`, { signal: AbortSignal.timeout(10_000) }).then(
            (r) => r.ok,
            () => false,
          ),
        ),
      );
      mostDown = Math.max(mostDown, up.filter((ok) => !ok).length);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const result = await during;
  finished = true;
  await watch;
  return { result, mostDown };
}

const unitText = (host: TestHost) => host.run("cat /etc/systemd/system/rbln-serving-test.main-0.service").then((r) => r.stdout);

beforeAll(async () => {
  hosts = await startHosts(3, { privatePaths: [INSTALL_ROOT, CACHE_ROOT] });
  // A complete venv holding the stand-in vllm, and cached weights: install and weights have nothing to do.
  const marker = `${CACHE_ROOT}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7`;
  for (const host of hosts) {
    await prepareStandInServer(host, { venv: VENV, devRoot: FAKE_DEV });
    expect((await host.run(`install -d $(dirname ${marker}) && touch ${marker}`)).status).toBe(0);
  }
  engine = fakeHostsEngine(hosts);
}, 120_000);

afterAll(async () => {
  await Promise.all((hosts ?? []).map((h) => h.stop()));
});

describe("rolling out to three replicas over SSH", { timeout: 180_000 }, () => {
  it("first deploy: one replica at a time, each after the previous serves", async () => {
    const result = await up(settings());
    expect(result.failed.map((f) => f.stderr)).toEqual([]);
    const unit = (i: number) => result.runs.find((r) => r.name === `rbln-serving-npu-${i}-main-0`)!;
    expect(unit(1).startedAt).toBeGreaterThanOrEqual(unit(0).endedAt);
    expect(unit(2).startedAt).toBeGreaterThanOrEqual(unit(1).endedAt);
    for (const i of [0, 1, 2]) expect(unit(i).stdout).toMatch(/ready npu-\d: main rank 0 serves on port 8000/);
  });

  it("a one-flag change rolls one replica at a time: never more than one down", async () => {
    const { result, mostDown } = await mostDownDuring(up(settings({ extraArgs: ["--max-log-len", "100"] })));
    expect(result.failed).toEqual([]);
    expect(result.runs.map((r) => r.name).sort()).toEqual(["rbln-serving-npu-0-main-0", "rbln-serving-npu-1-main-0", "rbln-serving-npu-2-main-0"]);
    expect(mostDown).toBe(1);
    for (const host of hosts) expect(await unitText(host)).toContain("--max-log-len 100");
  });

  it("a bad flag rolls the first replica back; it serves the old config, the others are untouched, and the step fails with one line", async () => {
    const before = await Promise.all(hosts.map(unitText));
    const { result, mostDown } = await mostDownDuring(
      up(settings({ extraArgs: ["--max-log-len", "100", FLAG_REFUSED_AT_START.arg], extraEnv: FLAG_REFUSED_AT_START.env })),
    );
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
      /^npu-0 main rank 0: the new config failed \(unit exited 2(, restarted \d+ times)?: unrecognized arguments: --rbln-use-custom-kernel\); the previous config is restored and serving$/,
    );
    expect(result.failed[0]!.stderr).toContain("last journal lines of rbln-serving-test.main-0.service:");
    // The flag is part of the compile key: the later waves' compiled-cache copies wait too.
    expect(result.notStarted.filter((n) => n.endsWith("-main-0")).sort()).toEqual(["rbln-serving-npu-1-main-0", "rbln-serving-npu-2-main-0"]);
    expect(await Promise.all(hosts.map(unitText))).toEqual(before);
    expect(mostDown).toBe(1);
    for (const host of hosts) expect((await fetch(`http://${host.address}:8000/health`)).status).toBe(200);
  });

  it("running up again with the same bad config tries the change again; it never claims to be unchanged", async () => {
    const result = await up(settings({ extraArgs: ["--max-log-len", "100", FLAG_REFUSED_AT_START.arg], extraEnv: FLAG_REFUSED_AT_START.env }));
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    expect(result.failed[0]!.stdout).not.toContain("unchanged and running");
    expect(result.failed[0]!.stderr).toMatch(/the previous config is restored and serving\n$/);
  });

  it("a crash loop is reported as the crash, not at the end of the 9,600 s budget, and rolled back", async () => {
    const result = await up(settings({ extraArgs: ["--max-log-len", "100"], extraEnv: { FAKE_VLLM_MODE: "crash" } }));
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
      /^npu-0 main rank 0: the new config failed \(unit exited 1(, restarted \d+ times)?: fake engine core failed to start\); the previous config is restored and serving$/,
    );
  });

  it("a rank that never answers is waited for until its budget, then rolled back", async () => {
    const result = await up(settings({ extraArgs: ["--max-log-len", "100"], extraEnv: { FAKE_VLLM_MODE: "hang", VLLM_ENGINE_READY_TIMEOUT_S: "6" } }));
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    const stdout = result.failed[0]!.stdout;
    // Alive and logging: waited for, never called failed before the budget.
    expect(
      stdout
        .split("\n")
        .map(parseProgressLine)
        .find((p) => p !== null),
    ).toMatchObject({ host: "npu-0", who: "main/0", budget: "6 s" });
    expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
      /^npu-0 main rank 0: the new config failed \(no ready answer within 6s, unit active\/running\); the previous config is restored and serving$/,
    );
  });

  it("a change cut off midway (a reboot, a lost connection) is resumed by the next run and still rolled back", async () => {
    const registrations = await register(settings({ extraArgs: ["--max-log-len", "100", FLAG_REFUSED_AT_START.arg], extraEnv: FLAG_REFUSED_AT_START.env }));
    const step = registrations.find((r) => r.name === "rbln-serving-npu-0-main-0")!;
    const serving = await unitText(hosts[0]!);
    const cut = await hosts[0]!.run(`timeout -s KILL 3 ${step.inputs.create}`, step.inputs.stdin);
    expect(cut.status).not.toBe(0);
    expect(await unitText(hosts[0]!)).toContain(FLAG_REFUSED_AT_START.arg);
    const resumed = await hosts[0]!.run(step.inputs.create, step.inputs.stdin);
    expect(resumed.stdout).toContain("resuming the unfinished change of rbln-serving-test.main-0.service");
    expect(resumed.stderr.trim().split("\n").pop()).toMatch(/the previous config is restored and serving$/);
    expect(await unitText(hosts[0]!)).toBe(serving);
  });

  it("after a reboot a unit waits for its NPU device nodes before vLLM starts", async () => {
    const host = hosts[1]!;
    const unit = "rbln-serving-test.main-0.service";
    await host.run(`rm ${FAKE_DEV}/rbln3; systemctl restart --no-block ${unit}`);
    await new Promise((r) => setTimeout(r, 3000));
    expect((await host.run(`systemctl show -p SubState --value ${unit}`)).stdout.trim()).toBe("start-pre");
    expect(
      await fetch(`http://${host.address}:8000/health`).then(
        (r) => r.status,
        () => 0,
      ),
    ).not.toBe(200);
    await host.run(`touch ${FAKE_DEV}/rbln3`);
    let status = 0;
    for (let i = 0; i < 60 && status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 500));
      status = await fetch(`http://${host.address}:8000/health`).then(
        (r) => r.status,
        () => 0,
      );
    }
    expect(status).toBe(200);
  });
});
