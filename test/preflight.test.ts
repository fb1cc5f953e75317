import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { preflightScript } from "../core/render/hosts/scripts";
import { ENGINE_PID, EXITED_PID, OTHER_PID, rblnSmiFixture as fixture } from "./helpers/rblnSmi";

/**
 * Every preflight check, in order, against a made-up driver tree (sysfs, device nodes, rbln-smi)
 * under real bash: each failure is one line naming the host and the check.
 */
type Access = { mode: number; group: string };

function host(
  options: {
    module?: boolean;
    devices?: number;
    smiDevices?: number | "fail";
    smi?: string;
    minFreeGb?: number;
    cached?: boolean;
    glibc?: string;
    serviceUser?: string;
    sharedRoot?: string;
    rbln?: Access;
    rsd?: Access;
  } = {},
) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "preflight-"));
  fs.mkdirSync(path.join(root, "sys", "module"), { recursive: true });
  fs.mkdirSync(path.join(root, "dev"));
  fs.mkdirSync(path.join(root, "bin"));
  if (options.module ?? true) fs.mkdirSync(path.join(root, "sys", "module", "rebellions"));
  const node = (name: string, access?: Access) => {
    const file = path.join(root, "dev", name);
    fs.writeFileSync(file, "");
    if (!access) return;
    fs.chmodSync(file, access.mode);
    spawnSync("chgrp", [access.group, file]);
  };
  for (let i = 0; i < (options.devices ?? 4); i++) node(`rbln${i}`, options.rbln);
  if (options.rsd) node("rsd0", options.rsd);
  // The root of the temporary tree is 0700: let a service user reach the device nodes under it.
  fs.chmodSync(root, 0o755);
  const smi = options.smiDevices ?? 4;
  const devices = JSON.stringify({
    devices: Array.from({ length: smi === "fail" ? 0 : smi }, (_, i) => ({ npu: i, name: "RBLN-CR13", status: "normal" })),
    contexts: [],
  });
  fs.writeFileSync(path.join(root, "smi.json"), options.smi ?? devices);
  fs.writeFileSync(path.join(root, "bin", "rbln-smi"), smi === "fail" ? "#!/bin/sh\nexit 3\n" : `#!/bin/sh\ncat '${root}/smi.json'\n`, { mode: 0o755 });
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
    serviceUser: options.serviceUser ?? "nobody",
    sharedRoot: options.sharedRoot,
    ownUnits: ["rbln-serving-dev.main-0.service"],
  });
  const result = spawnSync("bash", ["-c", script], { env: { PATH: `${root}/bin:${process.env.PATH}` }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  fs.rmSync(root, { recursive: true, force: true });
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
    expect(host({ glibc: "2.39" })).toMatchObject({
      status: 0,
      stdout: expect.stringMatching(/^preflight npu-7: ok \(4 NPUs, python 3\.1\d, glibc 2\.39, \d+ GiB free\)\n$/),
    });
    expect(host({ glibc: "2.40" }).status).toBe(0);
  });

  it("fails on too little disk until the weights are cached", () => {
    expect(host({ glibc: "2.39", minFreeGb: 10 ** 9 }).stderr).toMatch(
      /^preflight npu-7: disk: \d+ GiB free under .*, need 1000000000 GiB for the weights and caches$/,
    );
    expect(host({ glibc: "2.39", minFreeGb: 10 ** 9, cached: true }).status).toBe(0);
  });
});

describe("preflight: cache.shared", () => {
  it("fails where the shared folder is missing, or not a mount of its own (an unmounted mount point is a local folder)", () => {
    expect(host({ glibc: "2.39", sharedRoot: "/nonexistent/rbln-cache" }).stderr).toBe(
      "preflight npu-7: cache.shared: /nonexistent/rbln-cache is not a directory (mount the shared filesystem there on every host first)",
    );
    // `/` is on the root filesystem on every machine.
    expect(host({ glibc: "2.39", sharedRoot: "/" }).stderr).toBe(
      "preflight npu-7: cache.shared: / is on the root filesystem, not on a mount of its own (mount the shared filesystem there on every host first)",
    );
    // /proc is a mount of its own on every Linux machine: the check passes (its 0 free bytes are enough for minFreeDiskGb 0).
    expect(host({ glibc: "2.39", sharedRoot: "/proc" }).status).toBe(0);
  });
});

describe("preflight: the service user opens /dev/rsd*", () => {
  const ok = { glibc: "2.39" };
  const rsdLine = (user: string) => new RegExp(`^preflight npu-7: device access: ${user} cannot open \\S+/dev/rsd0 read-write `);

  it("skips the check where no RSD node exists", () => {
    expect(host({ ...ok, serviceUser: "nobody", rbln: { mode: 0o600, group: "root" } }).status).toBe(0);
  });

  it("asks the kernel as the user once it exists: world or own group read-write passes", () => {
    expect(host({ ...ok, serviceUser: "nobody", rsd: { mode: 0o666, group: "root" } }).status).toBe(0);
    expect(host({ ...ok, serviceUser: "nobody", rsd: { mode: 0o660, group: "nogroup" } }).status).toBe(0);
  });

  it("names the node, its mode and group, and the fix when the existing user cannot open it", () => {
    const otherGroup = host({ ...ok, serviceUser: "nobody", rsd: { mode: 0o660, group: "disk" } });
    expect(otherGroup.status).toBe(1);
    expect(otherGroup.stderr).toMatch(rsdLine("nobody"));
    expect(otherGroup.stderr).toMatch(/ \(-rw-rw---- root:disk\); add it to group disk \(usermod -aG disk nobody\)$/);
    const rootOnly = host({ ...ok, serviceUser: "nobody", rsd: { mode: 0o660, group: "root" } });
    expect(rootOnly.stderr).toMatch(
      / \(-rw-rw---- root:root\); give rsd devices a group it is in and mode 0660 with a udev rule: KERNEL=="rsd\[0-9\]\*", GROUP="nogroup", MODE="0660"$/,
    );
  });

  it("before the install creates the user, judges by the groups the install will give it (those of /dev/rbln*)", () => {
    const fresh = { ...ok, serviceUser: "rbln-preflight-no-such-user", rbln: { mode: 0o660, group: "disk" } };
    expect(host({ ...fresh, rsd: { mode: 0o660, group: "disk" } }).status).toBe(0);
    expect(host({ ...fresh, rsd: { mode: 0o666, group: "root" } }).status).toBe(0);
    const rootGroup = host({ ...fresh, rsd: { mode: 0o660, group: "root" } });
    expect(rootGroup.status).toBe(1);
    expect(rootGroup.stderr).toMatch(rsdLine("rbln-preflight-no-such-user"));
    expect(rootGroup.stderr).toMatch(
      /\(-rw-rw---- root:root\) \(not created yet; the install puts it in the groups of \S+\/dev\/rbln\*: disk\); give rsd devices a group it is in and mode 0660 with a udev rule: KERNEL=="rsd\[0-9\]\*", GROUP="disk", MODE="0660"$/,
    );
    expect(host({ ...fresh, rsd: { mode: 0o600, group: "disk" } }).stderr).toMatch(/\(-rw------- root:disk\) .*GROUP="disk", MODE="0660"$/);
    expect(host({ ...fresh, rbln: { mode: 0o600, group: "root" }, rsd: { mode: 0o660, group: "disk" } }).stderr).toContain(
      "(not created yet; the install puts it in the groups of",
    );
  });
});

describe("preflight: idle NPUs, from rbln-smi -j", () => {
  const ok = { glibc: "2.39" };
  let processes: ChildProcess[] = [];
  const live = () => {
    const child = spawn("sleep", ["300"], { stdio: "ignore" });
    processes.push(child);
    return child.pid!;
  };
  afterAll(() => {
    for (const child of processes) child.kill();
    processes = [];
  });
  const inUse = (uses: string) =>
    `preflight npu-7: NPUs in use by other processes: ${uses}; stop them (or wait until rbln-smi -j lists no contexts) and run again`;

  it("passes with an empty context list, without a warning", () => {
    expect(host({ ...ok, smi: fixture("idle.json") })).toMatchObject({ status: 0, stdout: expect.stringMatching(/^preflight npu-7: ok \(4 NPUs, /) });
  });

  it("fails naming each other process, its name and the NPUs it holds", () => {
    const [engine, other] = [live(), live()];
    expect(host({ ...ok, smi: fixture("busy.json", { [ENGINE_PID]: engine, [OTHER_PID]: other }) })).toMatchObject({
      status: 1,
      stderr: inUse(`pid ${engine} (VLLM::EngineCore) on npu 0, npu 1, npu 2, npu 3; pid ${other} (python3) on npu 0`),
    });
  });

  it("counts a context whose process has exited: its memory is still held", () => {
    const other = live();
    expect(host({ ...ok, smi: fixture("busy.json", { [ENGINE_PID]: EXITED_PID, [OTHER_PID]: other }) }).stderr).toBe(
      inUse(`pid ${EXITED_PID} (VLLM::EngineCore, exited) on npu 0, npu 1, npu 2, npu 3; pid ${other} (python3) on npu 0`),
    );
  });

  it("reads older and other shapes: npu as a string, pid as a number, cmd; contexts per device", () => {
    const other = live();
    expect(host({ ...ok, smi: fixture("sdk1-busy.json", { [OTHER_PID]: other }) }).stderr).toBe(inUse(`pid ${other} (python3 bench.py) on npu 0`));
    expect(host({ ...ok, smi: fixture("per-device-contexts.json", { [OTHER_PID]: other }) }).stderr).toBe(inUse(`pid ${other} (python3) on rbln2`));
  });

  it("ignores what it does not know: unknown fields, entries that are not contexts; a context without a pid still counts", () => {
    const idle = JSON.parse(fixture("idle.json"));
    const odd = { ...idle, schema: 2, contexts: [42, "x", { npu: 1, memalloc: "1GiB", hint: { nested: true } }, { pid: null, process: "p" }] };
    expect(host({ ...ok, smi: JSON.stringify(odd) }).stderr).toBe(inUse("pid ? (?) on npu 1; pid ? (p) on an NPU"));
  });

  it("warns on stdout and passes when this rbln-smi lists no contexts at all", () => {
    const run = host({ ...ok, smi: fixture("no-contexts.json") });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(
      /^preflight npu-7: warning: this rbln-smi lists no contexts, so whether other processes use the NPUs is not checked\npreflight npu-7: ok /,
    );
  });
});
