import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHosts, type TestHost, type TestHosts } from "../helpers/hostNamespace";
import { freePort } from "../helpers/sshd";

// The fake hosts share the machine's root filesystem: this canary shows their private /tmp keeps it untouched.
const canary = `/tmp/host-namespace-canary-${randomUUID()}`;
let hosts: TestHosts<2>;

beforeAll(async () => {
  fs.writeFileSync(canary, "still here");
  hosts = await startHosts(2, { privatePaths: ["/opt/rbln-test", "/var/lib/rbln-test"], loopbackIsHostAddress: true });
});

afterAll(async () => {
  await Promise.all(hosts?.map((host) => host.stop()) ?? []);
  expect(fs.readFileSync(canary, "utf8")).toBe("still here");
  fs.rmSync(canary);
});

/** Runs a script as root on the host and fails the test with its output when it exits non-zero. */
async function sh(host: TestHost, script: string): Promise<string> {
  const result = await host.run(script);
  expect(result, `${host.name}: ${script}`).toMatchObject({ status: 0 });
  return result.stdout;
}

const properties = async (host: TestHost, unit: string) =>
  Object.fromEntries(
    (await sh(host, `systemctl show -p ActiveState,SubState,NRestarts,Result,ExecMainStatus,LoadState ${unit}`))
      .trim()
      .split("\n")
      .map((line) => line.split("=", 2)),
  );

/** Polls on the host (no wall clock in the test) until the unit reaches `state`. */
const waitForState = (host: TestHost, unit: string, state: string) =>
  sh(host, `for i in $(seq 200); do [ "$(systemctl show -p ActiveState --value ${unit})" = ${state} ] && exit 0; sleep 0.05; done; exit 1`);

describe("fake NPU hosts (real systemd in namespaces)", () => {
  it("boots each host with its own systemd as PID 1, sshd on its own loopback address and its own host key", async () => {
    expect(hosts.map((h) => h.address)).toEqual([expect.stringMatching(/^127\.2[0-4]\d\.\d+\.2$/), expect.stringMatching(/^127\.2[0-4]\d\.\d+\.3$/)]);
    expect(hosts[0].hostPublicKey).toMatch(/^ssh-ed25519 \S+$/);
    expect(hosts[0].hostPublicKey).not.toBe(hosts[1].hostPublicKey);
    for (const host of hosts) {
      expect(await sh(host, "cat /proc/1/comm; systemctl is-system-running")).toBe("systemd\nrunning\n");
    }
  });

  it("starts sessions in a home of their own, with none of this machine's root dotfiles and the system python3", async () => {
    expect(await sh(hosts[0], 'echo "$HOME"; ls -A "$HOME"; command -v python3')).toBe("/run/rbln-host/ssh/home\n/usr/bin/python3\n");
  });

  it("gives each host its own /etc/systemd/system, private paths and /tmp", async () => {
    const [a, b] = hosts;
    await sh(a, "touch /etc/systemd/system/only-on-a.service /opt/rbln-test/only-on-a /tmp/only-on-a");
    expect(await sh(a, "ls /etc/systemd/system /opt/rbln-test /tmp")).toContain("only-on-a");
    expect(await sh(b, "ls -A /etc/systemd/system /opt/rbln-test /var/lib/rbln-test /tmp")).not.toContain("only-on-a");
    expect(fs.existsSync("/tmp/only-on-a")).toBe(false);
    expect(fs.existsSync("/etc/systemd/system/only-on-a.service")).toBe(false);
  });

  it("runs a unit with User= and EnvironmentFile= on one host only, with its output in the journal", async () => {
    const [a, b] = hosts;
    await sh(
      a,
      `echo 'GREETING=hello' > /opt/rbln-test/greeter.env
cat > /etc/systemd/system/greeter.service <<'UNIT'
[Service]
User=nobody
EnvironmentFile=/opt/rbln-test/greeter.env
ExecStart=/bin/sh -c 'echo "$GREETING from $(id -un)"; exec sleep infinity'
UNIT
systemctl daemon-reload && systemctl start greeter`,
    );
    expect(await properties(a, "greeter")).toMatchObject({ ActiveState: "active", SubState: "running" });
    expect(await properties(b, "greeter")).toMatchObject({ LoadState: "not-found", ActiveState: "inactive" });
    expect(await sh(a, "for i in $(seq 100); do journalctl -u greeter -o cat | grep . && exit; sleep 0.05; done")).toContain("hello from nobody");

    const pid = async () => (await sh(a, "systemctl show -p MainPID --value greeter")).trim();
    const before = await pid();
    await sh(a, "systemctl restart greeter");
    expect(await pid()).not.toBe(before);
  });

  it("gives each host's Python programs all interfaces and a loopback of their own (loopbackIsHostAddress), whatever their user and environment", async () => {
    const port = await freePort(hosts[0].address);
    for (const host of hosts) {
      await sh(
        host,
        `echo ${host.name} > /opt/rbln-test/index.html && systemd-run --quiet --unit=own-network --uid=nobody /usr/bin/python3 -m http.server ${port} --bind 0.0.0.0 --directory /opt/rbln-test`,
      );
    }
    // As root, which writes the compiled sitecustomize to this machine's __pycache__ for the other host to find.
    const fetch = `env -i /usr/bin/python3 -c 'import urllib.request, time
for _ in range(100):
    try: print(urllib.request.urlopen("http://127.0.0.1:${port}/", timeout=1).read().decode().strip()); break
    except OSError: time.sleep(0.05)'`;
    for (const host of hosts) expect((await sh(host, fetch)).trim()).toBe(host.name);
    expect(
      (
        await sh(
          hosts[0],
          `/usr/bin/python3 -c 'import urllib.request; print(urllib.request.urlopen("http://${hosts[1].address}:${port}/").read().decode().strip())'`,
        )
      ).trim(),
    ).toBe(hosts[1].name);
    for (const host of hosts) await sh(host, "systemctl stop own-network");
  });

  // systemd 252 keeps the last exit's Result when the start limit stops an automatic restart (Result=start-limit-hit
  // only when the limit refuses a start that follows a success); the journal names the start limit.
  it("stops restarting a crash-looping unit at its start limit, counting restarts; reset-failed clears it", async () => {
    const [a] = hosts;
    await sh(
      a,
      `cat > /etc/systemd/system/crasher.service <<'UNIT'
[Unit]
StartLimitBurst=3
StartLimitIntervalSec=60
[Service]
ExecStart=/bin/sh -c 'echo crashing now; exit 3'
Restart=on-failure
RestartSec=50ms
UNIT
systemctl daemon-reload && systemctl start crasher; true`,
    );
    await waitForState(a, "crasher", "failed");
    expect(await properties(a, "crasher")).toMatchObject({
      ActiveState: "failed",
      SubState: "failed",
      Result: "exit-code",
      NRestarts: "3",
      ExecMainStatus: "3",
    });
    const journal = await sh(a, "journalctl -u crasher -o cat");
    expect(journal.match(/crashing now/g)).toHaveLength(3);
    expect(journal).toContain("crasher.service: Start request repeated too quickly.");

    await sh(a, "systemctl reset-failed crasher");
    expect(await properties(a, "crasher")).toMatchObject({ ActiveState: "inactive", Result: "success" });
  });
});
