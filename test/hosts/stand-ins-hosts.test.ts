import * as http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLoad, startSampler } from "../helpers/frontDoorLoad";
import { startHosts, type TestHost } from "../helpers/hostNamespace";
import { aggregatedEppConfig, endpointsFile, frontDoorBootstrap, installStandIns, STAND_IN_IMAGES } from "../helpers/standIns";

/**
 * The stand-ins on a fake host (real systemd as PID 1, real sshd: test/helpers/hostNamespace.ts), run
 * the way the router host's units will run them: the runtime stand-in as a Type=exec service's main
 * process, the EPP with published ports and its config folder as a volume, Envoy on the host network.
 * Two upstreams on the host's address stand for two replicas.
 */
const DIR = "/opt/rbln-stand-ins-test";
const LISTEN = 8080;

let host: TestHost;
let runtime: string;

function unit(name: string, run: string): string {
  return `[Unit]
Description=stand-in ${name}
[Service]
Type=exec
ExecStartPre=-${runtime} rm -f ${name}
ExecStart=${runtime} run --rm --name ${name} --pull never ${run}
ExecStop=${runtime} stop --time 10 ${name}
`;
}

async function sh(command: string, stdin?: string): Promise<string> {
  const result = await host.run(command, stdin);
  if (result.status !== 0) throw new Error(`${command}: ${result.stderr}`);
  return result.stdout;
}

async function replica(name: string) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const body = req.url === "/v1/models" ? { object: "list", data: [] } : { choices: [{ text: name, finish_reason: "length" }] };
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host.address, resolve));
  return { name, port: (server.address() as { port: number }).port, close: () => new Promise<void>((r) => server.close(() => r()).closeAllConnections()) };
}

async function untilServes(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} never served: ${await sh("journalctl --no-pager -n 40 -u stand-in-epp -u stand-in-envoy")}`);
}

beforeAll(async () => {
  [host] = await startHosts(1, { privatePaths: [DIR] });
  runtime = await installStandIns(host!, DIR);
  for (const image of [STAND_IN_IMAGES.endpointPicker, STAND_IN_IMAGES.proxy]) await sh(`${runtime} pull ${image}`);
}, 120_000);

afterAll(async () => {
  await host?.stop();
});

describe("the stand-ins under systemd on a fake host", { timeout: 120_000 }, () => {
  it("serve through Envoy and the EPP without a failed request while the endpoints file is renamed over, and stop cleanly", async () => {
    const [a, b] = [await replica("a"), await replica("b")];
    await sh(`install -d ${DIR}/epp ${DIR}/envoy && cat > ${DIR}/epp/epp.yaml`, aggregatedEppConfig());
    await sh(`cat > ${DIR}/epp/endpoints.yaml`, endpointsFile(host.address, [{ name: "a", port: String(a.port) }]));
    await sh(`cat > ${DIR}/envoy/envoy.yaml`, frontDoorBootstrap({ listen: LISTEN, admin: 9901, pick: 9002 }));
    const epp = unit(
      "stand-in-epp",
      `--publish 127.0.0.1:9002:9002 --publish 127.0.0.1:9003:9003 --publish ${host.address}:9090:9090 --volume ${DIR}/epp:/etc/epp:ro,z ${STAND_IN_IMAGES.endpointPicker} --config-file=/etc/epp/epp.yaml --pool-name=test --pool-namespace=test --secure-serving=false --tracing=false --grpc-port=9002 --grpc-health-port=9003 --metrics-port=9090`,
    );
    const envoy = unit(
      "stand-in-envoy",
      `--network host --volume ${DIR}/envoy:/etc/envoy:ro,z ${STAND_IN_IMAGES.proxy} -c /etc/envoy/envoy.yaml --log-level info`,
    );
    await sh("cat > /etc/systemd/system/stand-in-epp.service", epp);
    await sh("cat > /etc/systemd/system/stand-in-envoy.service", envoy);
    await sh("systemctl daemon-reload && systemctl start stand-in-epp stand-in-envoy");
    const url = `http://${host.address}:${LISTEN}`;
    await untilServes(`${url}/v1/models`);
    // "127.0.0.1" in the units is the host's own loopback: on a fake host, its address.
    expect(await (await fetch(`http://${host.address}:9901/ready`)).text()).toBe("LIVE\n");
    expect(await (await fetch(`http://${host.address}:9090/metrics`)).text()).toMatch(/^llm_d_epp_ready_endpoints\{name="test"\} 1$/m);

    const load = startLoad(url, { concurrency: 2, maxSeconds: 60 });
    const sampler = startSampler({ every: 100, read: () => sh(`cat ${DIR}/epp/endpoints.yaml`), maxSeconds: 60 });
    const servedBy = async () =>
      ((await (await fetch(`${url}/v1/completions`, { method: "POST", body: "{}" })).json()) as { choices: { text: string }[] }).choices[0]!.text;
    expect(await servedBy()).toBe("a");
    await sh(
      `cat > ${DIR}/epp/endpoints.yaml.tmp && mv ${DIR}/epp/endpoints.yaml.tmp ${DIR}/epp/endpoints.yaml`,
      endpointsFile(host.address, [{ name: "b", port: String(b.port) }]),
    );
    for (let i = 0; i < 100 && (await servedBy()) !== "b"; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await servedBy()).toBe("b");
    const [report, samples] = [await load.stop(), await sampler.stop()];
    expect(report.total).toBeGreaterThan(0);
    expect(report.failures).toEqual([]);
    expect(samples.bad).toEqual([]);
    expect(await sh("journalctl --no-pager -u stand-in-epp")).toContain("endpoints file changed, reloading");

    await sh("systemctl stop stand-in-envoy");
    const shown = Object.fromEntries(
      (await sh("systemctl show -p ActiveState -p Result stand-in-envoy"))
        .trim()
        .split("\n")
        .map((l) => l.split("=")),
    );
    expect(shown).toEqual({ ActiveState: "inactive", Result: "success" });
    expect(await sh(`ls ${DIR}/stand-ins/container-runtime-stand-in.state/containers`)).toBe("stand-in-epp.json\n");
    await Promise.all([a.close(), b.close()]);
  });

  it("start again after the unit's processes were killed outright: ExecStartPre's rm -f frees the name", async () => {
    await sh("systemctl kill -s KILL stand-in-epp; while systemctl is-active -q stand-in-epp; do sleep 0.1; done");
    // The container keeps its name, as podman's does; `run` alone would refuse it.
    expect((await host.run(`${runtime} run --rm --name stand-in-epp --pull never ${STAND_IN_IMAGES.endpointPicker}`)).status).toBe(125);
    await sh("systemctl start stand-in-epp");
    for (
      let i = 0;
      i < 100 &&
      !(await fetch(`http://${host.address}:9090/metrics`).then(
        (r) => r.ok,
        () => false,
      ));
      i++
    )
      await new Promise((r) => setTimeout(r, 100));
    expect((await fetch(`http://${host.address}:9090/metrics`)).status).toBe(200);
  });
});
