import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { renderStackFiles } from "./helpers/render";
import { envFileLine, execStartLine, isEnvFileValue } from "../core/render/hosts/systemd";
import { remoteCommand } from "../core/render/hosts/scripts";
import { renderHost } from "../core/render/hosts/bundle";
import { shippedCatalog } from "./helpers/recipes";
import { systemdEnvFile, systemdExecArgv, unitComplaints } from "./helpers/systemdOracle";
import { hostileString } from "./helpers/arbitraries";

/** Rendered files for the hosts stacks and a spread of axis values on both aggregated strategies. */
function renderedVariants(): Record<string, string> {
  const variants: Record<string, unknown>[] = [readStackFile("dev").raw, readStackFile("staging").raw];
  for (const strategy of ["aggregated-data-expert-parallel", "aggregated-pipeline-parallel"]) {
    for (const axes of [
      { lmcache: "rds", spec_decode: "eagle3" },
      { lmcache: "cpu", prefix_caching: "on", spec_decode: "suffix", tool_calling: "off" },
      { prefix_caching: "on_sub_block", reasoning_parser: "off" },
    ]) {
      variants.push({
        strategy,
        target: "Throughput",
        axes,
        hosts: [{ name: "npu-a", address: "10.1.2.3", hostKey: EXAMPLE_HOST_KEY }],
        extraEnv: { main: { NOTE: "it's 100% $HOME `x`" } },
      });
    }
  }
  // Three replicas: weights and compiled-cache copies, with and without a host key.
  const three = [0, 1, 2].map((i) => ({ name: `npu-${i}`, address: `10.1.2.${i + 1}`, hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITest" }));
  variants.push(
    { ...readStackFile("dev").raw, replicas: 3, hosts: three },
    { ...readStackFile("dev").raw, replicas: 3, hosts: three.map(({ hostKey: _, ...h }) => h), insecureSkipHostKeyCheck: true },
  );
  // A shared cache: no copies, leases in the weights step and around each rank.
  variants.push({ ...readStackFile("dev").raw, replicas: 3, hosts: three, cache: { shared: "/mnt/rbln-cache" } });
  // Compile ahead: a compile host with a registry (it seeds and compiles, the first wave copies), and a registry alone (the first host pulls).
  const registry = { repository: "registry.example.com/ml/rbln-compile-cache", username: "ci" };
  const revision = "0123456789abcdef0123456789abcdef01234567";
  variants.push({
    ...readStackFile("dev").raw,
    replicas: 3,
    hosts: three,
    revision,
    compile: { host: { name: "cpu-0", address: "10.1.2.9", hostKey: EXAMPLE_HOST_KEY }, registry },
  });
  variants.push({ ...readStackFile("dev").raw, replicas: 3, hosts: three, revision, compile: { registry } });
  // Prefill/decode behind a router host: the decode ranks' data-parallel group and its restart unit, the sidecar.
  variants.push(readStackFile("edge").raw); // copies weights and the compiled cache: 3 scripts more
  const files: Record<string, string> = {};
  variants.forEach((raw, i) => {
    const deployment = planDeployment(parseStackSettings(raw), shippedCatalog);
    for (const [name, content] of Object.entries(renderStackFiles(deployment, ["hfToken", "apiKey", "pipPassword"], "dev"))) files[`v${i}/${name}`] = content;
  });
  return files;
}

function writeTree(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rendered-"));
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
  return dir;
}

describe("rendered host artifacts", () => {
  const files = renderedVariants();
  const dir = writeTree(files);

  // shellcheck reads every rendered script of every variant: minutes on a loaded machine.
  it("every script passes shellcheck", { timeout: 240_000 }, () => {
    const scripts = Object.keys(files).filter((f) => f.endsWith(".sh"));
    expect(scripts.length).toBeGreaterThan(40);
    expect(scripts.filter((f) => /\/(allow|copy|revoke)-(weights|compile)-/.test(f))).toHaveLength(24 + 18 + 12 + 3);
    expect(scripts.filter((f) => /\/cpu-0\/(preflight|install|weights|compile-[0-9a-f]{16})\.sh$/.test(f))).toHaveLength(4);
    expect(scripts.filter((f) => /\/npu-0\/pull-compile-[0-9a-f]{16}\.sh$/.test(f))).toHaveLength(1);
    // Scripts of the same text (a step rendered alike in several variants) are read once.
    const firstOfEachText = [...new Map(scripts.map((f) => [files[f]!, f])).values()];
    const result = spawnSync("shellcheck", ["--severity=style", ...firstOfEachText], { cwd: dir, encoding: "utf8" });
    expect(result.stdout).toBe("");
    expect(result.status).toBe(0);
  });

  it("every command string a resource runs is valid bash around the same script", () => {
    const script = files["v0/hosts/npu-dev-0/install.sh"]!;
    for (const asRoot of [true, false]) {
      const command = remoteCommand(script, asRoot);
      expect(command).toContain(script);
      const result = spawnSync("bash", ["-n", "-c", command], { encoding: "utf8" });
      expect(result.stderr).toBe("");
    }
  });

  it("every unit passes systemd-analyze verify, but for the vllm binary that only the install creates and the router's runtime", () => {
    const units = Object.keys(files).filter((f) => f.endsWith(".service"));
    expect(units.length).toBeGreaterThanOrEqual(8);
    const complaints = unitComplaints(
      units.map((unit, i) => [`v${i}-${path.basename(unit)}`, files[unit]!] as const),
      /Command .*\/bin\/(vllm|podman) is not executable: No such file or directory/,
    );
    expect(complaints).toEqual([]);
    // The decode ranks of prefill/decode are one data-parallel group: each names the unit that restarts it as one.
    expect(units.filter((u) => u.endsWith(".decode-group-restart.service"))).toEqual([
      "v13/hosts/npu-edge-1/systemd/rbln-serving-dev.decode-group-restart.service",
    ]);
  });

  it("with cache.shared a rank starts under the compile lease, from the lock script install writes, and nothing is copied", () => {
    const shared = Object.keys(files).filter((f) => f.startsWith("v10/"));
    expect(shared.filter((f) => /\/(allow|copy|revoke)-/.test(f))).toEqual([]);
    const argv = systemdExecArgv(files["v10/hosts/npu-2/systemd/rbln-serving-dev.main-0.service"]!);
    const lockPath = argv[1]!;
    expect(argv.slice(0, 5)).toEqual(["/bin/bash", lockPath, "run", "--name", argv[4]!]);
    expect(lockPath).toMatch(/^\/opt\/rbln-serving\/bin\/lease-lock-[0-9a-f]{12}\.sh$/);
    expect(argv[4]).toMatch(/^compile-[0-9a-f]+$/);
    expect(argv[5]).toBe("--ready");
    expect(argv.slice(7, 10)).toEqual(["--", "/opt/rbln-serving/venvs/dev/rebel-compiler-0.12.0_vllm-rbln-0.12.0/bin/vllm", "serve"]);
    // The readiness check is valid bash, and the lock script the unit names is the one install and weights write.
    expect(spawnSync("bash", ["-n", "-c", argv[6]!], { encoding: "utf8" }).stderr).toBe("");
    for (const step of ["install.sh", "weights.sh"]) expect(files[`v10/hosts/npu-2/${step}`]).toContain(`lease_lock_path=${lockPath}\n`);
    expect(files["v10/hosts/npu-2/systemd/rbln-serving-dev.main-0.service"]).not.toContain("/var/lib/rbln-serving/vllm");
    // After a reboot the unit waits for the shared mount.
    expect(files["v10/hosts/npu-2/systemd/rbln-serving-dev.main-0.service"]).toContain("\nRequiresMountsFor=/mnt/rbln-cache\n");
    expect(files["v10/hosts/npu-2/env/dev.main-0.env"]).toContain("VLLM_CACHE_ROOT='/mnt/rbln-cache/vllm'");
  });

  it("env files are mode-0600 material: secrets only as placeholders offline", () => {
    const env = files["v0/hosts/npu-dev-0/env/dev.main-0.env"]!;
    expect(env).toContain("HF_TOKEN='<secret:hfToken>'\n");
    expect(env).toContain("VLLM_API_KEY='<secret:apiKey>'\n");
    expect(files["v0/hosts/npu-dev-0/unit-main-0.sh"]).not.toContain("<secret:");
  });
});

describe("systemd quoting round-trips through systemd's own parsers", () => {
  it("ExecStart words come back as the same argv, with $, %, quotes, backslashes and newlines", () => {
    const samples = fc.sample(
      fc.array(
        hostileString.filter((s) => !s.includes("\0")),
        { minLength: 1, maxLength: 5 },
      ),
      { numRuns: 150, seed: 42 },
    );
    const lines = [["/bin/true"], ...samples];
    const argv = systemdExecArgv(`[Service]\n${execStartLine(lines)}\n`);
    expect(argv).toEqual(lines.flat());
  });

  it("EnvironmentFile values come back byte for byte", () => {
    // The environment.d generator expands $VAR after parsing and drops empty values, which
    // EnvironmentFile= does not: leave those out of this oracle.
    const values = fc.sample(
      hostileString.filter((s) => isEnvFileValue(s) && !s.includes("$") && s !== ""),
      { numRuns: 150, seed: 7 },
    );
    const text = values.map((value, i) => `${envFileLine(`RBLN_PROBE_${i}`, value)}\n`).join("");
    const parsed = systemdEnvFile(text);
    for (const [i, value] of values.entries()) expect(parsed[`RBLN_PROBE_${i}`], JSON.stringify(value)).toBe(value);
  });
});

describe("host scripts stop at the first failure (set -euo pipefail)", () => {
  it.skipIf(process.getuid?.() !== 0)("a weights download that fails exits non-zero and writes no completion marker", () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-weights-"));
    const deployment = planDeployment(
      parseStackSettings({ ...readStackFile("dev").raw, installRoot: `${work}/opt`, cacheRoot: `${work}/cache` }),
      shippedCatalog,
    );
    const { weightsScript } = renderHost(deployment, deployment.placements[0]!, "test");
    // Every python3 fails, as a broken download or index would.
    const stubs = path.join(work, "bin");
    fs.mkdirSync(stubs);
    fs.writeFileSync(path.join(stubs, "python3"), "#!/bin/sh\necho 'stub python3: failing' >&2\nexit 1\n", { mode: 0o755 });
    const run = spawnSync("bash", ["-c", weightsScript], { input: "\n", encoding: "utf8", env: { ...process.env, PATH: `${stubs}:${process.env.PATH}` } });
    const files = fs.readdirSync(`${work}/cache`, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
    expect(run.status, run.stderr).not.toBe(0);
    expect(files.map((f) => f.name)).toEqual([]);
  });
});
