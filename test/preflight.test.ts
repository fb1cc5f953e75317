import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { preflightScript } from "../core/render/hosts/scripts";

/**
 * Every preflight check, in order, against a made-up driver tree (sysfs, device nodes, rbln-smi)
 * under real bash: each failure is one line naming the host and the check.
 */
function host(options: { module?: boolean; devices?: number; smiDevices?: number | "fail"; minFreeGb?: number; cached?: boolean; glibc?: string } = {}) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-"));
  fs.mkdirSync(path.join(root, "sys", "module"), { recursive: true });
  fs.mkdirSync(path.join(root, "dev"));
  fs.mkdirSync(path.join(root, "bin"));
  if (options.module ?? true) fs.mkdirSync(path.join(root, "sys", "module", "rebellions"));
  for (let i = 0; i < (options.devices ?? 4); i++) fs.writeFileSync(path.join(root, "dev", `rbln${i}`), "");
  const smi = options.smiDevices ?? 4;
  const devices = JSON.stringify({ devices: Array.from({ length: smi === "fail" ? 0 : smi }, (_, i) => ({ npu: i, name: "RBLN-CR13", status: "normal" })) });
  fs.writeFileSync(path.join(root, "bin", "rbln-smi"), smi === "fail" ? "#!/bin/sh\nexit 3\n" : `#!/bin/sh\necho '${devices}'\n`, { mode: 0o755 });
  // A stand-in getconf reports a glibc, where the test says which.
  if (options.glibc) fs.writeFileSync(path.join(root, "bin", "getconf"), `#!/bin/sh\necho 'glibc ${options.glibc}'\n`, { mode: 0o755 });
  const marker = path.join(root, "cache", "huggingface", "rbln-serving-complete", "MiniMaxAI--MiniMax-M2.7");
  if (options.cached) {
    fs.mkdirSync(path.dirname(marker), { recursive: true });
    fs.writeFileSync(marker, "");
  }
  const script = preflightScript({
    hostName: "npu-7",
    sysRoot: path.join(root, "sys"),
    devRoot: path.join(root, "dev"),
    npus: 4,
    cacheRoot: path.join(root, "cache"),
    minFreeDiskGb: options.minFreeGb ?? 0,
    weightsMarkers: [marker],
  });
  const result = spawnSync("bash", ["-c", script], { env: { PATH: `${root}/bin:${process.env.PATH}` }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr.trim() };
}


describe("preflight", () => {
  it("fails without the kernel module", () => {
    expect(host({ module: false })).toMatchObject({ status: 1, stderr: "preflight npu-7: kernel module rebellions: not loaded (install the RBLN driver)" });
  });

  it("fails with too few device nodes", () => {
    expect(host({ devices: 2 }).stderr).toMatch(/^preflight npu-7: NPU devices: found 2 .*\/dev\/rbln\*, need 4$/);
  });

  it("fails when rbln-smi fails or sees too few NPUs", () => {
    expect(host({ smiDevices: "fail" }).stderr).toBe("preflight npu-7: rbln-smi: 'rbln-smi -j' failed");
    expect(host({ smiDevices: 3 }).stderr).toBe("preflight npu-7: rbln-smi: sees 3 NPUs, need 4");
  });

  it("fails on a glibc older than the vLLM CPU wheel needs", () => {
    expect(host({ glibc: "2.36" }).stderr).toBe("preflight npu-7: glibc: 2.36 is older than 2.39 (the vLLM CPU wheel needs it; use Ubuntu 24.04)");
  });

  it("passes every check on a host with the driver, the NPUs, glibc 2.39 and the disk", () => {
    expect(host({ glibc: "2.39" })).toMatchObject({ status: 0, stdout: expect.stringMatching(/^preflight npu-7: ok \(4 NPUs, python 3\.1\d, glibc 2\.39, \d+ GB free\)\n$/) });
    expect(host({ glibc: "2.40" }).status).toBe(0);
  });

  it("fails on too little disk until the weights are cached", () => {
    expect(host({ glibc: "2.39", minFreeGb: 10 ** 9 }).stderr).toMatch(/^preflight npu-7: disk: \d+ GB free under .*, need 1000000000 GB for the weights and caches$/);
    expect(host({ glibc: "2.39", minFreeGb: 10 ** 9, cached: true }).status).toBe(0);
  });
});
