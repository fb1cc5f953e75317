import { FLAG_REFUSED_AT_START } from "../helpers/fakeVllm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseStackSettings } from "../../core/config/stackConfig";
import { planDeployment } from "../../core/plan/deployment";
import { weightsMarker } from "../../core/cache/markers";
import { DEFAULT_INSTANCE, deploymentId, venvPath } from "../../core/render/hosts/names";
import type { FakeEngine, UpResult } from "../helpers/engine";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { fakeHostsEngine, fakeHostsSettings, registerServing } from "../helpers/hostStack";
import { shippedCatalog } from "../helpers/recipes";
import { prepareStandInServer } from "../helpers/standInServer";

/**
 * What a rank's unit step hands vLLM and what it probes with, for real: two fake NPU hosts (real
 * systemd and sshd each), the program's commands run over SSH in its graph's order, the stand-in
 * vllm asking for VLLM_API_KEY on /v1 paths as vLLM does. `preset: recommended` (lmcache: rds, whose
 * LMCACHE_EXTRA_CONFIG spans lines) with an extraEnv value over several lines, API keys made of
 * every printable ASCII character, and a failed change of key that goes back to the old one.
 */
const INSTALL_ROOT = "/opt/rbln-unit-step-test";
const CACHE_ROOT = "/var/lib/rbln-unit-step-test";
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
const UNIT = "rbln-serving-test.main-0.service";
/** Quotes, `$`, backticks, backslashes and `%` over three lines: what an extraEnv value may hold. */
const NOTE = 'first line\nit\'s `$HOME` \\ "quoted" 100%\nlast line';
/** Every printable ASCII character; the space inside, since HTTP drops it at either end of a header value. */
const PRINTABLE = Array.from({ length: 94 }, (_, i) => String.fromCharCode(0x21 + i)).join("");
const KEY = `${PRINTABLE.slice(0, 47)} ${PRINTABLE.slice(47)}`;
const OTHER_KEY = [...KEY].reverse().join("");

let hosts: TestHost[];
let engine: FakeEngine;

function settings(extraArgs: string[] = [], extraEnv: Record<string, string> = {}) {
  return fakeHostsSettings(
    hosts,
    { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT },
    {
      preset: "recommended",
      extraArgs: { main: extraArgs },
      // A bounded wait: a probe that never gets in fails in seconds, not after the recipe's 9,600.
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: "1", VLLM_ENGINE_READY_TIMEOUT_S: "30", NOTE, ...extraEnv } },
    },
  );
}

const up = async (config: ReturnType<typeof settings>, apiKey?: string): Promise<UpResult> =>
  engine.up(
    await registerServing(config, {
      hostOptions: { readinessIntervalSeconds: 1, restartSeconds: 1, startLimitBurst: 3, startLimitIntervalSeconds: 120, devRoot: FAKE_DEV },
      copyOptions: { authorizedKeysFile: "/run/rbln-host/ssh/authorized_keys" },
      secrets: apiKey === undefined ? {} : { apiKey },
    }),
  );

/** The environment systemd gave the rank's running process. */
async function rankEnvironment(host: TestHost): Promise<Map<string, string>> {
  const read = await host.run(`base64 -w0 /proc/$(systemctl show -p MainPID --value ${UNIT})/environ`);
  expect(read.status, read.stderr).toBe(0);
  const entries = Buffer.from(read.stdout, "base64").toString().split("\0").filter(Boolean);
  return new Map(entries.map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]));
}

const models = (host: TestHost, key?: string) =>
  fetch(`http://${host.address}:8000/v1/models`, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } }).then((r) => r.status);

beforeAll(async () => {
  hosts = await startHosts(2, { privatePaths: [INSTALL_ROOT, CACHE_ROOT] });
  const { plan } = planDeployment(parseStackSettings(settings()), shippedCatalog);
  const venv = venvPath(INSTALL_ROOT, deploymentId("test", DEFAULT_INSTANCE), plan.packages);
  // A complete venv holding the stand-in vllm, and every model of the plan (the draft too) cached: install and weights have nothing to do.
  const markers = plan.models.map((m) => weightsMarker(`${CACHE_ROOT}/huggingface`, m.id));
  for (const host of hosts) {
    await prepareStandInServer(host, { venv, devRoot: FAKE_DEV });
    expect((await host.run(`install -d ${CACHE_ROOT}/huggingface/rbln-serving-complete && touch ${markers.join(" ")}`)).status).toBe(0);
  }
  engine = fakeHostsEngine(hosts);
}, 120_000);

afterAll(async () => {
  await Promise.all((hosts ?? []).map((h) => h.stop()));
});

describe("the unit step on two hosts over SSH", { timeout: 240_000 }, () => {
  it("deploys preset: recommended with an extraEnv value over several lines: every rank serves, with each value byte for byte", async () => {
    const result = await up(settings());
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    const lmcache = planDeployment(parseStackSettings(settings()), shippedCatalog).plan.roles[0]!.ranks[0]!.env.LMCACHE_EXTRA_CONFIG!;
    expect(lmcache).toContain("\n");
    for (const host of hosts) {
      const env = await rankEnvironment(host);
      expect([env.get("LMCACHE_EXTRA_CONFIG"), env.get("NOTE")]).toEqual([lmcache, NOTE]);
      expect(await models(host)).toBe(200);
    }
  });

  it("probes with exactly the API key systemd gave vLLM, for a key of every printable ASCII character: every rank serves", async () => {
    const result = await up(settings(), KEY);
    expect(result.failed.map((f) => `${f.name}: ${f.stderr}`)).toEqual([]);
    for (const i of [0, 1])
      expect(result.runs.find((r) => r.name === `rbln-serving-npu-${i}-main-0`)!.stdout).toMatch(/ready npu-\d: main rank 0 serves on port 8000/);
    for (const host of hosts) {
      expect((await rankEnvironment(host)).get("VLLM_API_KEY")).toBe(KEY);
      expect([await models(host), await models(host, KEY)]).toEqual([401, 200]);
    }
  });

  it("a change of key that fails goes back to the config of the old key, and probes it with the old key", async () => {
    const result = await up(settings([FLAG_REFUSED_AT_START.arg], FLAG_REFUSED_AT_START.env), OTHER_KEY);
    expect(result.failed.map((f) => f.name)).toEqual(["rbln-serving-npu-0-main-0"]);
    expect(result.failed[0]!.stderr.trim().split("\n").pop()).toMatch(
      /^npu-0 main rank 0: the new config failed \(.*unrecognized arguments: --rbln-use-custom-kernel\); the previous config is restored and serving$/,
    );
    expect([await models(hosts[0]!, KEY), await models(hosts[0]!, OTHER_KEY)]).toEqual([200, 401]);
  });
});
