import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseStackSettings } from "../../core/config/stackConfig";
import { planDeployment } from "../../core/plan/deployment";
import { renderHost, type RenderedHost } from "../../core/render/hosts/bundle";
import { renderPipConfig } from "../../core/render/hosts/pip";
import { readinessScript, remoteCommand } from "../../core/render/hosts/scripts";
import { parseProgressLine } from "../../core/render/progress";
import { startPackageIndex, type PackageIndex } from "../helpers/packageIndex";
import { shippedCatalog } from "../helpers/recipes";
import { freePort, startSshd, type TestSshServer } from "../helpers/sshd";

/**
 * The host scripts run for real: over SSH (a real OpenSSH server on loopback) against this machine,
 * with pip installing stub wheels, named like the real packages, from a package index on loopback.
 */
const STUBS = [
  { name: "rebel-compiler", version: "0.12.0", module: "rebel", source: "VERSION = '0.12.0'\n" },
  { name: "vllm-rbln", version: "0.12.0", module: "vllm_rbln", source: "VERSION = '0.12.0'\n", extras: ["kv_connectors"] },
  { name: "arctic-inference", version: "0.1.1", module: "arctic_inference", source: "" },
  {
    name: "huggingface_hub",
    version: "0.35.3",
    module: "huggingface_hub",
    source: [
      "import os, pathlib",
      "def snapshot_download(repo_id, **kwargs):",
      "    target = pathlib.Path(os.environ['HF_HOME']) / 'hub' / ('models--' + repo_id.replace('/', '--'))",
      "    target.mkdir(parents=True, exist_ok=True)",
      "    (target / 'config.json').write_text('{}')",
      "    (target / 'token-length').write_text(str(len(os.environ.get('HF_TOKEN', ''))))",
      "    return str(target)",
      "",
    ].join("\n"),
  },
];

let sshd: TestSshServer;
let index: PackageIndex;
let work: string;

function hostFor(settings: Record<string, unknown>, indexUrl: string, id = "test"): RenderedHost {
  const deployment = planDeployment(
    parseStackSettings({
      strategy: "aggregated-data-expert-parallel",
      target: "Latency",
      hosts: [{ name: "test-host", address: "127.0.0.1", port: sshd.port, hostKey: sshd.hostKey }],
      installRoot: `${work}/opt`,
      cacheRoot: `${work}/cache`,
      pip: { indexUrl, extraIndexUrls: [] },
      ...settings,
    }),
    shippedCatalog,
  );
  // This machine has no room for real weights; the stub model needs none.
  return renderHost({ ...deployment, settings: { ...deployment.settings, minFreeDiskGb: 0 } }, deployment.placements[0]!, id, {
    pipRetries: 0,
    pipTimeoutSeconds: 5,
  });
}

const run = (script: string, stdin = "") => sshd.run(remoteCommand(script, true), stdin);
/** The deployment's link to the venv its units run. */
const current = (id: string) => `${work}/opt/venvs/${id}/current`;

beforeAll(async () => {
  [sshd, index] = await Promise.all([startSshd(), startPackageIndex(STUBS)]);
  work = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-host-"));
});

afterAll(() => {
  sshd?.stop();
  index?.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe("preflight over SSH", () => {
  it("fails on a host without NPUs, naming the host and the check, and changes nothing", async () => {
    const host = hostFor({}, index.url);
    const result = await run(host.preflightScript);
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toBe("preflight test-host: kernel module rebellions: not loaded (install the RBLN driver)");
    expect(fs.readdirSync(work)).toEqual([]);
  });
});

describe("install over SSH", () => {
  it("installs the pinned packages into a versioned venv and points current at it", async () => {
    const host = hostFor({}, index.url);
    const result = await run(host.installScript, renderPipConfig(host.pipIndexes, null));
    expect(result.stderr).not.toMatch(/ERROR/);
    expect(result.status).toBe(0);
    expect(host.venv).toBe(`${work}/opt/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`);
    expect(result.stdout).toContain(`install test-host: installed rebel-compiler==0.12.0 vllm-rbln[kv_connectors]==0.12.0 into ${host.venv}`);
    expect(fs.readlinkSync(current("test"))).toBe(host.venv);
    expect(fs.readFileSync(`${host.venv}/.rbln-serving-complete`, "utf8")).toBe("rebel-compiler==0.12.0\nvllm-rbln[kv_connectors]==0.12.0\n");
    expect(fs.statSync(`${work}/opt/env`).mode & 0o777).toBe(0o700);
  });

  it("changes nothing when run again with the same versions", async () => {
    const host = hostFor({}, index.url);
    const marker = fs.statSync(`${host.venv}/.rbln-serving-complete`).mtimeMs;
    const result = await run(host.installScript, renderPipConfig(host.pipIndexes, null));
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe(`install test-host: ${host.venv} is complete; nothing to install`);
    expect(fs.statSync(`${host.venv}/.rbln-serving-complete`).mtimeMs).toBe(marker);
  });

  it("fails with pip's reason on an unreachable index and leaves current as it was", async () => {
    const previous = fs.readlinkSync(current("test"));
    const dead = `http://127.0.0.1:${await freePort()}/simple`;
    const host = hostFor({ axes: { spec_decode: "suffix" } }, dead);
    expect(host.venv).toBe(`${work}/opt/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0_arctic-inference-0.1.1`);
    const result = await run(host.installScript, renderPipConfig(host.pipIndexes, null));
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/ERROR: (Could not find a version|No matching distribution)/);
    expect(result.stderr).toContain(`install test-host: pip install failed (its reason is above); current still points to ${previous}`);
    expect(fs.readlinkSync(current("test"))).toBe(previous);
  });

  it("converges on the next run once the index is back, installing arctic-inference for suffix decoding", async () => {
    const host = hostFor({ axes: { spec_decode: "suffix" } }, index.url);
    const result = await run(host.installScript, renderPipConfig(host.pipIndexes, null));
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("arctic-inference==0.1.1");
    expect(fs.readlinkSync(current("test"))).toBe(host.venv);
  });

  it("installs another deployment on the host into its own venvs: neither moves the other's current", async () => {
    const first = fs.readlinkSync(current("test"));
    const other = hostFor({}, index.url, "test.team-b");
    const result = await run(other.installScript, renderPipConfig(other.pipIndexes, null));
    expect(result.status).toBe(0);
    expect(other.venv).toBe(`${work}/opt/venvs/test.team-b/rebel-compiler-0.12.0_vllm-rbln-0.12.0`);
    expect(fs.readlinkSync(current("test.team-b"))).toBe(other.venv);
    expect(fs.readlinkSync(current("test"))).toBe(first);
    expect(first).toContain("arctic-inference");
  });
});

describe("credentials over SSH", () => {
  it("pass the index password to pip on stdin and never print it", async () => {
    const password = "MARKER-pip-p@ss:w0rd/%";
    const host = hostFor({ installRoot: `${work}/opt-auth`, pip: { indexUrl: index.url, extraIndexUrls: [], username: "portal-user" } }, index.url);
    const indexes = { ...host.pipIndexes, credentialHosts: [new URL(index.url).host] };
    const pipConf = renderPipConfig(indexes, password);
    expect(pipConf).toContain(`index-url = http://portal-user:${encodeURIComponent(password)}@127.0.0.1:`);
    const result = await run(host.installScript, pipConf);
    expect(result.status).toBe(0);
    expect(result.stdout + result.stderr).not.toContain(password);
    expect(result.stdout + result.stderr).not.toContain(encodeURIComponent(password));
  });
});

describe("weights over SSH", () => {
  it("downloads the model once with the token from stdin, into a cache the service user owns, and not again", async () => {
    // Its own roots: the weights step must stand alone, since it runs beside the install.
    const host = hostFor({ installRoot: `${work}/opt-w`, cacheRoot: `${work}/cache-w` }, index.url);
    // An existing folder keeps its owner and mode (here a sticky, world-writable one, like /tmp).
    fs.mkdirSync(`${work}/cache-w`);
    fs.chmodSync(`${work}/cache-w`, 0o1777);
    const token = "hf_marker_token_1234";
    const first = await run(host.weightsScript, `${token}\n${renderPipConfig(host.pipIndexes, null)}`);
    expect(first.status).toBe(0);
    expect(first.stdout + first.stderr).not.toContain(token);
    expect(fs.readFileSync(`${work}/cache-w/huggingface/hub/models--MiniMaxAI--MiniMax-M2.7/token-length`, "utf8")).toBe(String(token.length));
    const owner = spawnSync("stat", ["-c", "%U", `${work}/cache-w/huggingface/hub`], { encoding: "utf8" }).stdout.trim();
    expect(owner).toBe("rbln-serving");
    expect(fs.statSync(`${work}/cache-w`).mode & 0o7777).toBe(0o1777);
    expect(fs.statSync(`${work}/cache-w`).uid).toBe(0);
    const second = await run(host.weightsScript, `${token}\n`);
    expect(second.status).toBe(0);
    expect(second.stdout).toMatch(/already in .*; nothing to download/);
  });
});

describe("readiness over SSH", () => {
  async function stubServer(failures: number): Promise<{ port: number; close(): void }> {
    let requests = 0;
    const server = http.createServer((_, response) => {
      requests += 1;
      response.writeHead(requests <= failures ? 503 : 200, { "content-type": "application/json" });
      response.end("{}");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return { port: (server.address() as { port: number }).port, close: () => server.close() };
  }

  const script = (port: number, timeoutSeconds: number) =>
    readinessScript({
      hostName: "test-host",
      ranks: [{ unitName: "rbln-serving-main-0.service", label: "main rank 0", port, bundleDir: `${work}/cache/vllm/rbln/model` }],
      wait: { probeHost: "127.0.0.1", timeoutSeconds, intervalSeconds: 1, startLimitBurst: 3 },
    });

  it("waits through 503s, printing the rank's progress, until the rank serves", async () => {
    const stub = await stubServer(3);
    try {
      const result = await run(script(stub.port, 60));
      expect(result.status).toBe(0);
      // Its progress lines (docs/progress.md): no compiled bundle of the model here, so a compile, against the 60 s bound.
      const progress = result.stdout.split("\n").map(parseProgressLine);
      expect(progress.find((p) => p !== null)).toMatchObject({ host: "test-host", who: "main/0", phase: "compile", budget: "60 s" });
      expect(result.stdout).toMatch(/ready test-host: main rank 0 serves on port \d+ after \d+s/);
    } finally {
      stub.close();
    }
  });

  it("fails cleanly at the deadline", async () => {
    const stub = await stubServer(Number.MAX_SAFE_INTEGER);
    try {
      const result = await run(script(stub.port, 2));
      expect(result.status).toBe(1);
      expect(result.stderr).toMatch(/^last journal lines of rbln-serving-main-0.service:$/m);
      expect(result.stderr.trim().split("\n").pop()).toMatch(/^ready test-host: main rank 0 \(port \d+\) does not serve: no ready answer within 2s, unit \S+$/);
    } finally {
      stub.close();
    }
  });
});
