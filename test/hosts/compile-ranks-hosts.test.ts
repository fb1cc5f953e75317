import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseStackSettings } from "../../core/config/stackConfig";
import { readStackFile } from "../../core/config/stackFile";
import { planDeployment } from "../../core/plan/deployment";
import { renderDeployment } from "../../core/render/deployment";
import type { RenderedCompileStep } from "../../core/render/hosts/compileHost";
import { DEFAULT_INSTANCE } from "../../core/render/hosts/names";
import { remoteCommand } from "../../core/render/hosts/scripts";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { shippedCatalog } from "../helpers/recipes";
import { scriptSettings } from "../helpers/scriptSettings";
import { prepareStandInServer } from "../helpers/standInServer";

/**
 * The compile step of a role of several ranks (issue 31): decode's four data-parallel ranks on a
 * compile host, a fake host with real systemd. Every rank runs compile-only at once, each as a
 * transient unit of its own, as the ranks start together on their NPU host; the step waits for all
 * of them, and a rank that ends first fails the step and stops the others. The stand-in vllm
 * compiles (test/fixtures/fake-vllm); no NPU host is reached.
 */
const INSTALL_ROOT = "/opt/rbln-compile-ranks-test";
const CACHE_ROOT = "/var/lib/rbln-compile-ranks-test";
const LOGS = fs.mkdtempSync("/var/lib/rbln-compile-ranks-test-logs-");
const COMPILE_LOG = `${LOGS}/compiles`;

let host: TestHost;
let decode: RenderedCompileStep;

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []);
const activeUnits = () =>
  host.run(`systemctl is-active ${scriptSettings(decode.script, "units").join(" ")} || true`).then((r) => r.stdout.split("\n").filter(Boolean));

beforeAll(async () => {
  fs.chmodSync(LOGS, 0o1777);
  [host] = await startHosts(1, { privatePaths: [INSTALL_ROOT, CACHE_ROOT] });
  const edge = readStackFile("edge").raw;
  const raw = {
    ...edge,
    installRoot: INSTALL_ROOT,
    cacheRoot: CACHE_ROOT,
    compile: { host: { name: "cpu-0", address: host!.address, port: host!.port, hostKey: host!.hostPublicKey } },
    extraEnv: { decode: { FAKE_VLLM_READY_AFTER: "1", FAKE_VLLM_COMPILE_LOG: COMPILE_LOG } },
  };
  const rendered = renderDeployment(planDeployment(parseStackSettings(raw), shippedCatalog), {
    stack: "test",
    instance: DEFAULT_INSTANCE,
    secrets: [],
    hostOptions: { readinessIntervalSeconds: 1, compileListenAddress: host!.address },
  });
  decode = rendered.hosts!.compileHost!.steps.find((s) => s.roles[0] === "decode")!;
  const vllm = scriptSettings(decode.script, "command_words")[0]!;
  await prepareStandInServer(host!, { venv: path.dirname(path.dirname(vllm)), devRoot: `${INSTALL_ROOT}/dev` });
  const user = await host!.run("id -u rbln-serving >/dev/null 2>&1 || useradd --system --no-create-home rbln-serving");
  if (user.status !== 0) throw new Error(user.stderr);
}, 180_000);

afterAll(async () => {
  await host?.stop();
  fs.rmSync(LOGS, { recursive: true, force: true });
});

describe("a compile step of several ranks, on a fake host", { timeout: 300_000 }, () => {
  it("runs each of decode's four ranks in compile-only mode at once, waits for all of them, and stops them", async () => {
    // stdin: the registry password's line (none), then a variable whose value carries URL credentials.
    const run = await host.run(remoteCommand(decode.script, true), "\nHTTPS_PROXY='http://me:hunter2@proxy.invalid:3128'\n");
    expect([run.status, run.stderr]).toEqual([0, ""]);
    expect(run.stdout).not.toContain("hunter2");
    expect(run.stdout).toContain(`compiling for decode (4 rank(s)) in compile-only mode`);
    expect(run.stdout.trimEnd().split("\n").pop()).toBe(`compiled ${decode.key} local`);
    expect(lines(COMPILE_LOG)).toEqual(Array(4).fill(`${host.address} compile-only`));
    expect(await activeUnits()).not.toContain("active");
  });

  it("fails when one rank ends before it saved, in one line naming it, and stops the others", async () => {
    await host.run(`rm -rf ${CACHE_ROOT}/vllm`);
    // Rank 2 gets a flag vLLM does not have: argparse ends it at once (the same number of words).
    const broken = decode.script.replace("--data-parallel-rank 2", "--no-such-flag 2");
    expect(broken).not.toBe(decode.script);
    const run = await host.run(remoteCommand(broken, true), "\n");
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(new RegExp(`^compile cpu-0 ${decode.key}: the compile-only run of rank 2 ended \\(exit 2\\) before vllm-rbln saved the cache`)),
    ]);
    expect(await activeUnits()).not.toContain("active");
    expect((await host.run(`test -e ${CACHE_ROOT}/vllm/rbln-serving-complete/compile-${decode.key}`)).status).not.toBe(0);
  });
});
