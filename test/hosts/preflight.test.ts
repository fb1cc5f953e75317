import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { preflightScript, remoteCommand } from "../../core/render/hosts/scripts";
import { SERVICE_USER } from "../../core/render/hosts/bundle";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { ENGINE_PID, OTHER_PID, rblnSmiFixture as fixture } from "../helpers/rblnSmi";

/**
 * A re-run while this deployment serves: rbln-smi then lists the contexts of its own units, which
 * are not another process's. On a fake host with the real systemd (test/helpers/hostNamespace.ts),
 * a unit named like ours forks a child, as vLLM's engines do; another unit, and one named like ours
 * outside system.slice, hold NPUs too.
 */
describe("preflight while this deployment's units hold the NPUs (real systemd)", { timeout: 120_000 }, () => {
  const ROOT = "/opt/rbln-preflight-test";
  let testHost: TestHost;
  const sh = async (command: string) => {
    const result = await testHost.run(command);
    expect(result, command).toMatchObject({ status: 0 });
    return result.stdout.trim();
  };

  beforeAll(async () => {
    [testHost] = await startHosts(1, { privatePaths: [ROOT] });
    await sh(
      [
        `install -d ${ROOT}/sys/module/rebellions ${ROOT}/dev ${ROOT}/bin`,
        `touch ${ROOT}/dev/rbln0 ${ROOT}/dev/rbln1 ${ROOT}/dev/rbln2 ${ROOT}/dev/rbln3`,
        `printf '#!/bin/sh\\ncat ${ROOT}/smi.json\\n' > ${ROOT}/bin/rbln-smi`,
        `printf '#!/bin/sh\\necho glibc 2.39\\n' > ${ROOT}/bin/getconf`,
        `chmod 755 ${ROOT}/bin/*`,
        `printf '[Service]\\nExecStart=/bin/sh -c "sleep 600 & echo $$! > /run/engine.pid; exec sleep 600"\\n' > /etc/systemd/system/rbln-serving-main-0.service`,
        "systemctl daemon-reload",
        "systemctl start rbln-serving-main-0.service",
        "systemd-run --quiet --unit=other-tenant sleep 600",
        // Named like ours outside system.slice, as a user's own systemd could name a unit.
        "systemd-run --quiet --slice=user-like.slice --unit=rbln-serving-impostor-0 sleep 600",
        "for i in $(seq 100); do [ -s /run/engine.pid ] && exit 0; sleep 0.05; done; exit 1",
      ].join(" && "),
    );
  }, 120_000);

  afterAll(async () => {
    await testHost?.stop();
  });

  async function preflight(pids: Record<string, string>) {
    await testHost.run(`cat > ${ROOT}/smi.json`, fixture("busy.json", pids));
    const script = preflightScript({
      hostName: "npu-7",
      sysRoot: `${ROOT}/sys`,
      devRoot: `${ROOT}/dev`,
      npus: 4,
      cacheRoot: `${ROOT}/cache`,
      minFreeDiskGb: 0,
      weightsMarkers: [],
      serviceUser: SERVICE_USER,
      ownUnits: ["rbln-serving-main-0.service"],
    });
    return testHost.run(`PATH=${ROOT}/bin:$PATH ${remoteCommand(script, true)}`);
  }

  it("does not count the processes of its own units, in their cgroups, and names the others", async () => {
    const main = await sh("systemctl show -p MainPID --value rbln-serving-main-0.service");
    const engine = await sh("cat /run/engine.pid");
    const other = await sh("systemctl show -p MainPID --value other-tenant.service");
    expect(await sh(`cat /proc/${engine}/cgroup`)).toContain("/system.slice/rbln-serving-main-0.service");
    const own = await preflight({ [ENGINE_PID]: engine, [OTHER_PID]: main });
    expect(own).toMatchObject({ status: 0, stdout: expect.stringMatching(/^preflight npu-7: ok \(4 NPUs, /) });
    const shared = await preflight({ [ENGINE_PID]: engine, [OTHER_PID]: other });
    expect(shared.status).toBe(1);
    expect(shared.stderr.trim()).toBe(
      `preflight npu-7: NPUs in use by other processes: pid ${other} (python3) on npu 0; stop them (or wait until rbln-smi -j lists no contexts) and run again`,
    );
    const impostor = await sh("systemctl show -p MainPID --value rbln-serving-impostor-0.service");
    expect(await sh(`cat /proc/${impostor}/cgroup`)).toContain("/user-like.slice/rbln-serving-impostor-0.service");
    expect((await preflight({ [ENGINE_PID]: engine, [OTHER_PID]: impostor })).stderr).toContain(
      `NPUs in use by other processes: pid ${impostor} (python3) on npu 0;`,
    );
  });
});
