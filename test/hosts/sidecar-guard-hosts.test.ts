import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readStackFile } from "../../core/config/stackFile";
import { parseStackSettings } from "../../core/config/stackConfig";
import { planDeployment } from "../../core/plan/deployment";
import { renderDeployment } from "../../core/render/deployment";
import type { RenderedSidecar } from "../../core/render/hosts/frontDoor/frontDoor";
import { DEFAULT_INSTANCE } from "../../core/render/hosts/names";
import { startHosts, type TestHost, type TestHosts } from "../helpers/hostNamespace";
import { startNetwork, type TestNetwork } from "../helpers/hostNetwork";
import { shippedCatalog } from "../helpers/recipes";
import { installStandIns, STAND_IN_IMAGES } from "../helpers/standIns";

/**
 * The routing sidecar's guard with the real nft, on fake hosts with network namespaces of their own
 * (a router, a decode host, and one more host that is neither): the decode host runs the rendered
 * sidecar unit (the sidecar stand-in under the runtime stand-in; test/fixtures/stand-ins), whose
 * ExecStartPre loads the guard. The sidecar listens on all interfaces, as the real one does
 * (test/fixtures/front-door-trust/exposure.json), so only the guard keeps others off its ports.
 */
const STAND_INS = "/opt/rbln-sidecar-guard-stand-ins";
/** The edge stack's sidecar ports are 8000-8003: each host here has its own network, so they are free. */
const SIDECAR_PORT = 8000;

let network: TestNetwork;
let hosts: TestHosts<3>;
let sidecar: RenderedSidecar;
const [router, decode, other] = [() => hosts[0], () => hosts[1], () => hosts[2]];

async function sh(host: TestHost, script: string): Promise<string> {
  const result = await host.run(script);
  expect(result, `${host.name}: ${script}`).toMatchObject({ status: 0 });
  return result.stdout;
}

/** From `from`, the HTTP status of GET http://address:port/health, or the curl failure ("000" and its exit code). */
async function healthFrom(from: TestHost, address: string, port = SIDECAR_PORT): Promise<string> {
  const result = await from.console(`curl -sS -o /dev/null -w '%{http_code}' -m 3 http://${address}:${port}/health; echo " $?"`);
  return result.stdout.trim();
}

const ruleset = (host: TestHost) => host.console("nft list ruleset").then((r) => r.stdout);

beforeAll(async () => {
  network = await startNetwork();
  hosts = await startHosts(3, { network, privatePaths: [STAND_INS] });
  const [npuPrefill, npuDecode] = [other(), decode()];
  const raw = {
    ...readStackFile("edge").raw,
    hosts: [npuPrefill, npuDecode].map((h) => ({ name: h.name, address: h.address, hostKey: h.hostPublicKey })),
    router: { host: { name: "door", address: router().address, hostKey: router().hostPublicKey }, port: 18080 },
    installRoot: "/opt/rbln-sidecar-guard",
    cacheRoot: "/var/lib/rbln-sidecar-guard",
  };
  const runtime = await installStandIns(decode(), STAND_INS);
  // A host of its own network: "all interfaces" and loopback keep their meaning (no host-address stand-in).
  await sh(decode(), `: > ${STAND_INS}/stand-ins/container-runtime-stand-in.state/host-address && ${runtime} pull ${STAND_IN_IMAGES.sidecar}`);
  const deployment = planDeployment(parseStackSettings(raw), shippedCatalog);
  const rendered = renderDeployment(deployment, {
    stack: "guard",
    instance: DEFAULT_INSTANCE,
    secrets: [],
    hostOptions: { containerRuntime: runtime },
  }).hosts!.frontDoor!;
  sidecar = rendered.sidecars[0]!;
  expect(sidecar.host).toBe(decode().name);
  await decode().run(`cat > /etc/systemd/system/${sidecar.unitName}`, sidecar.unitText);
  await sh(
    decode(),
    `systemctl daemon-reload && systemctl enable --quiet --now ${sidecar.unitName} && ` +
      `for i in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:${SIDECAR_PORT}/health && exit 0; sleep 0.1; done; journalctl -u ${sidecar.unitName} --no-pager; exit 1`,
  );
});

afterAll(async () => {
  await Promise.all(hosts?.map((h) => h.stop()) ?? []);
  await network?.stop();
});

describe("the routing sidecar's guard, with the real nft on hosts of their own", () => {
  it("lets the router host and the decode host itself reach the sidecar's ports, and resets anyone else", async () => {
    for (const port of [SIDECAR_PORT, SIDECAR_PORT + 3]) {
      expect(await healthFrom(router(), decode().address, port)).toBe("200 0");
      expect(await healthFrom(decode(), "127.0.0.1", port)).toBe("200 0");
      expect(await healthFrom(decode(), decode().address, port)).toBe("200 0");
      // Refused at once (a reset), not left to time out: curl's "couldn't connect" (7).
      expect(await healthFrom(other(), decode().address, port)).toBe("000 7");
    }
  });

  it("so nobody but the front door can ask the sidecar for a prefill at an address of their choosing", async () => {
    await sh(
      other(),
      "systemd-run --quiet --unit=target /usr/bin/python3 -m http.server 19000 --bind 0.0.0.0 --directory /tmp && " +
        "for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:19000/ && exit 0; sleep 0.1; done; exit 1",
    );
    const asked = await other().console(
      `curl -sS -m 3 -o /dev/null -w '%{http_code}' -X POST -H 'x-prefiller-host-port: ${other().address}:19000' -d '{"prompt":"p"}' http://${decode().address}:${SIDECAR_PORT}/v1/completions; echo " $?"`,
    );
    expect(asked.stdout.trim()).toBe("000 7");
    expect((await other().console("journalctl -u target --no-pager -o cat")).stdout).not.toContain("POST");
  });

  it("keeps other ports and other hosts' traffic alone: one table of its own, loaded whole again on a restart", async () => {
    await sh(
      decode(),
      "systemd-run --quiet --unit=elsewhere /usr/bin/python3 -m http.server 19001 --bind 0.0.0.0 --directory /tmp && " +
        "for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:19001/ && exit 0; sleep 0.1; done; exit 1",
    );
    expect(await healthFrom(other(), decode().address, 19001)).toMatch(/^404 0$/);
    const before = await ruleset(decode());
    expect(before.match(/^table /gm)).toEqual(["table "]);
    await sh(decode(), `systemctl restart ${sidecar.unitName}`);
    expect(await ruleset(decode())).toBe(before);
  });

  it("loads the guard again when the host boots, with the sidecar", async () => {
    await decode().reboot();
    // Up to 2 min for the boot's units: a wait, not a claim on how fast a boot is (30 s ran out under load).
    const up = await decode().run(`for i in $(seq 1200); do curl -sf -o /dev/null http://127.0.0.1:${SIDECAR_PORT}/health && exit 0; sleep 0.1; done; exit 1`);
    // Once (2026-12-06, a CI run under load) the sidecar did not answer within the 2 min: what systemd says of it, if it happens again.
    const why =
      up.status === 0
        ? ""
        : (await decode().console(`systemctl status --no-pager ${sidecar.unitName}; journalctl -b --no-pager -n 40 -u ${sidecar.unitName}`)).stdout;
    expect(up.status, `the sidecar after the boot:\n${why}`).toBe(0);
    expect(await healthFrom(router(), decode().address)).toBe("200 0");
    expect(await healthFrom(other(), decode().address)).toBe("000 7");
  }, 240_000);

  it("takes its table away with the sidecar: the remove step leaves the host's rule set as it found it", async () => {
    await sh(decode(), sidecar.removeScript);
    expect((await ruleset(decode())).trim()).toBe("");
    // Idempotent, as every remove step.
    await sh(decode(), sidecar.removeScript);
  });
});
