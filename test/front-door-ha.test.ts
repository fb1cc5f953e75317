import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { renderDeployment } from "../core/render/deployment";
import { API_KEY_FILTER, apiKeyFilterConfig, EPP_FAILOVER } from "../core/render/hosts/frontDoor/envoy";
import { sidecarAllowedSources } from "../core/render/hosts/frontDoor/sidecarFirewall";
import { virtualRouterId } from "../core/render/hosts/frontDoor/keepalived";
import { renderScript } from "../core/template";
import { runProgram } from "../program";
import eppHa from "./fixtures/llm-d-router-v0.10.0/epp-ha.json";
import { shellcheckFindings, unitComplaints } from "./helpers/systemdOracle";
import { validateEnvoyBootstrap } from "./helpers/envoyBootstrap";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { checkKeepalivedConfig } from "./helpers/keepalived";
import { isSecretAt, ofType, outputValue, runUnderMocks, stdoutRef } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";
import { renderStackFiles } from "./helpers/render";

/**
 * A front door of several router hosts (router.hosts, router.virtualAddress; issue 28): the settings
 * and their refusals, Envoy's priority ext_proc cluster against the pinned release's API and llm-d's
 * values, keepalived's config under `keepalived -t`, the units under systemd-analyze, the stack's TLS
 * certificates from the script that makes them, and the graph under the mock runtime.
 */
const host = (name: string, address: string, extra: Record<string, unknown> = {}) => ({ name, address, hostKey: EXAMPLE_HOST_KEY, ...extra });
const VIP = "10.20.0.100";
/** Two aggregated replicas behind two router hosts of their own and a virtual address. */
const ha = (router: Record<string, unknown> = {}) => ({
  ...readStackFile("dev").raw,
  replicas: 2,
  hosts: [host("npu-a", "10.20.0.11"), host("npu-b", "10.20.0.12")],
  router: { hosts: [host("door-a", "10.20.0.5"), host("door-b", "10.20.0.6")], virtualAddress: VIP, ...router },
});
const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
/** The plan's warnings, as text. */
const warningsOf = (deployment: ReturnType<typeof plan>) => deployment.plan.messages.filter((m) => m.level === "warning").map((m) => m.text);
const render = (raw: Record<string, unknown>) => renderDeployment(plan(raw), { stack: "dev", instance: "rbln-serving", secrets: [] }).hosts!.frontDoor!;
const refused = (raw: Record<string, unknown>) => {
  try {
    plan(raw);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("not refused");
};
const SECRETS = { sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----\n", pipPassword: "portal" };
const work = fs.mkdtempSync(path.join(os.tmpdir(), "front-door-ha-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

describe("router.hosts and router.virtualAddress, refused with one line", () => {
  it("takes router.host or router.hosts, not both; each router host once, with a host key", () => {
    const { router } = ha();
    expect(refused(ha({ host: host("door-c", "10.20.0.7") }))).toBe(
      "router.hosts: set router.host or router.hosts, not both (router.host is router.hosts with one entry)",
    );
    expect(refused(ha({ hosts: [...router.hosts, host("door-a", "10.20.0.8")] }))).toBe(
      `router.hosts[2].name: duplicate of router.hosts[0]'s name: each router host is a server of its own (got "door-a")`,
    );
    expect(refused(ha({ hosts: [...router.hosts, host("door-c", "10.20.0.6")] }))).toBe(
      `router.hosts[2].address: duplicate of router.hosts[1]'s address: each router host is a server of its own (got "10.20.0.6")`,
    );
    expect(refused(ha({ hosts: [router.hosts[0], { name: "door-b", address: "10.20.0.6" }] }))).toMatch(/^router\.hosts\[1\]\.hostKey: required: /);
    expect(refused(ha({ hosts: [router.hosts[0], "npu-z"] }))).toBe(
      'router.hosts[1]: names no entry of hosts; allowed: "npu-a", "npu-b", or a host {name, address, user, port, hostKey} (got "npu-z")',
    );
    expect(refused(ha({ hosts: [router.hosts[0], host("npu-b", "10.20.0.9")] }))).toBe(
      'router.hosts[1].name: "npu-b" is the name of an entry of hosts; to share that server give its name alone (router.hosts[1]: npu-b), else another name (got "npu-b")',
    );
    expect(refused(ha({ hosts: [] }))).toMatch(/^router\.hosts: /);
  });

  it("needs two router hosts for a virtual address, of their addresses' family, used by no server, with Envoy on every interface", () => {
    const { router } = ha();
    expect(refused(ha({ hosts: [router.hosts[0]] }))).toBe(
      'router.virtualAddress: needs two router hosts (router.hosts) to move between, but router.hosts[0] is the only one; add a second router host, or leave virtualAddress unset (got "10.20.0.100")',
    );
    expect(refused({ ...ha(), router: { host: router.hosts[0], virtualAddress: VIP } })).toBe(
      'router.virtualAddress: needs two router hosts (router.hosts) to move between, but router.host is the only one; add a second router host, or leave virtualAddress unset (got "10.20.0.100")',
    );
    expect(refused(ha({ virtualAddress: "fd00::100" }))).toBe(
      "router.hosts[0].address: \"10.20.0.5\" is IPv4, but router.virtualAddress fd00::100 is IPv6: keepalived's VRRP peers are the router hosts' IP addresses, of the virtual address's family; give the router host its IPv6 address",
    );
    expect(refused(ha({ hosts: [router.hosts[0], host("door-b", "door-b.example.com")] }))).toBe(
      "router.hosts[1].address: \"door-b.example.com\" is a host name, but router.virtualAddress 10.20.0.100 is IPv4: keepalived's VRRP peers are the router hosts' IP addresses, of the virtual address's family; give the router host its IPv4 address",
    );
    // A shared entry is checked at that entry's address.
    expect(refused({ ...ha({ hosts: ["npu-a", router.hosts[1]] }), hosts: [host("npu-a", "npu-a.example.com"), host("npu-b", "10.20.0.12")] })).toMatch(
      /^hosts\[0\]\.address: "npu-a\.example\.com" is a host name, but router\.virtualAddress 10\.20\.0\.100 is IPv4/,
    );
    expect(refused(ha({ virtualAddress: "10.20.0.12" }))).toBe(
      "router.virtualAddress: 10.20.0.12 is hosts[1].address too; the virtual address must be one no server of the stack has (keepalived adds it to the holder and removes it from the others)",
    );
    expect(refused(ha({ virtualAddress: "10.20.0.6" }))).toMatch(/^router\.virtualAddress: 10\.20\.0\.6 is router\.hosts\[1\]\.address too;/);
    expect(refused(ha({ hosts: [router.hosts[0], host("door-b", "10.20.0.6", { listenAddress: "10.20.0.6" })] }))).toBe(
      'router.hosts[1].listenAddress: with router.virtualAddress the front door listens on all interfaces, so the virtual address reaches it on whichever router host holds it; leave listenAddress unset (got "10.20.0.6")',
    );
    for (const address of ["127.0.0.5", "0.0.0.0", "224.0.0.18", "169.254.1.1", "::1", "fe80::1", "ff02::12"])
      expect(refused(ha({ virtualAddress: address }))).toBe(
        `router.virtualAddress: a unicast address clients reach across the network: not 0.0.0.0, ::, loopback, link-local or multicast (got "${address}")`,
      );
    expect(refused(ha({ virtualAddress: "door.example.com" }))).toBe('router.virtualAddress: an IPv4 or IPv6 address (got "door.example.com")');
  });

  it("on Kubernetes, says that router.hosts and router.virtualAddress do nothing there", () => {
    const { router } = ha();
    const warnings = warningsOf(plan({ ...readStackFile("prod").raw, router }));
    for (const key of ["hosts", "virtualAddress"])
      expect(warnings).toContain(`router.${key}: does nothing with platform: kubernetes; remove it or choose the platform that reads it`);
  });

  it("without a virtual address, lists every router host as an endpoint and warns what the clients must do", () => {
    const raw = ha({ virtualAddress: undefined });
    expect(render(raw).urls).toEqual(["http://10.20.0.5:8080", "http://10.20.0.6:8080"]);
    expect(warningsOf(plan(raw))).toContain(
      "router.virtualAddress: unset, so no address moves between the router hosts: clients (or a DNS name with every address, and a short TTL) must be given 10.20.0.5, 10.20.0.6, use one, and on a refused or reset connection, or a 503 from a draining router host, retry the request on another; a request cut mid-answer is lost",
    );
    expect(warningsOf(plan(ha())).filter((w) => w.startsWith("router.virtualAddress"))).toEqual([]);
  });
});

describe("a front door of two router hosts, rendered", () => {
  const door = render(ha());
  const [a, b] = door.routers;

  it("gives clients the virtual address, each router host its Envoy on every interface, and binds <EPP_HOST> to the virtual address", () => {
    expect(door.urls).toEqual([`http://${VIP}:8080`]);
    const routers = plan(ha()).frontDoor!.routers;
    expect(routers.map((r) => [r.host.name, r.listenAddress, r.address, r.priority])).toEqual([
      ["door-a", "0.0.0.0", "10.20.0.5", 150],
      ["door-b", "0.0.0.0", "10.20.0.6", 140],
    ]);
    expect(door.scrapeTargets.map((t) => t.targets[0])).toEqual(["10.20.0.5:9090", "10.20.0.6:9090"]);
  });

  it("gives each Envoy its EPP at priority 0 and the peer's at priority 1, with llm-d PR #2228's health checks and outlier detection, which the pinned Envoy's API accepts", () => {
    for (const router of [a!, b!]) {
      const text = router.files["envoy/envoy.yaml"]!;
      expect(validateEnvoyBootstrap(text)).toEqual([]);
      const bootstrap = parseYaml(text);
      const epp = bootstrap.static_resources.clusters.find((c: { name: string }) => c.name === "epp");
      const pr = eppHa.facts["pr2228.envoyCluster"].value;
      const [check] = epp.health_checks;
      // The fixture's "5s [10s]": PR #2228's value, then v0.10.0's in brackets.
      const prValue = (v: string) => v.split(" ")[0];
      expect([check.interval, check.timeout, String(check.unhealthy_threshold), String(check.healthy_threshold)]).toEqual(
        [pr.health_checks[0]!.interval, pr.health_checks[0]!.timeout, pr.health_checks[0]!.unhealthy_threshold, pr.health_checks[0]!.healthy_threshold].map(
          prValue,
        ),
      );
      expect(check.grpc_health_check).toEqual(pr.health_checks[0]!.grpc_health_check);
      expect(epp.outlier_detection).toEqual(pr.outlier_detection);
      expect(epp.common_lb_config).toEqual({ healthy_panic_threshold: { value: 10 }, ignore_new_hosts_until_first_hc: true });
      expect(epp.connect_timeout).toBe(prValue(pr.connect_timeout));
      const [local, peers] = epp.load_assignment.endpoints;
      expect(local.priority).toBe(0);
      expect(local.lb_endpoints).toEqual([
        { endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: 9002 } }, health_check_config: { port_value: 9003 } } },
      ]);
      expect(peers.priority).toBe(1);
      const peer = router === a ? { name: "door-b", address: "10.20.0.6" } : { name: "door-a", address: "10.20.0.5" };
      expect(peers.lb_endpoints).toEqual([
        {
          endpoint: { address: { socket_address: { address: peer.address, port_value: 9443 } } },
          metadata: { filter_metadata: { "envoy.transport_socket_match": { router: peer.name } } },
        },
      ]);
      // To the peer: its name as SNI and the only name its certificate may carry, from the stack's CA, with this host's certificate.
      const [match] = epp.transport_socket_matches;
      expect(match.match).toEqual({ router: peer.name });
      expect(match.transport_socket.typed_config.sni).toBe(peer.name);
      expect(match.transport_socket.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names).toEqual([
        { san_type: "DNS", matcher: { exact: peer.name } },
      ]);
      const filters = bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters as { name: string; typed_config: any }[];
      // Every router host's Envoy removes the headers only the EPP may set before it asks an EPP.
      expect(filters.map((f) => f.name)).toEqual(["envoy.filters.http.header_mutation", "envoy.filters.http.ext_proc", "envoy.filters.http.router"]);
      const grpc = filters[1]!.typed_config.grpc_service;
      expect(grpc.retry_policy).toEqual({ retry_on: "connect-failure,refused-stream,reset", num_retries: 1 });
      // The peers reach this host's EPP only with a certificate of the stack's CA naming a peer.
      const listener = bootstrap.static_resources.listeners[1];
      expect(listener.address.socket_address).toEqual({ address: router === a ? "10.20.0.5" : "10.20.0.6", port_value: 9443 });
      const downstream = listener.filter_chains[0].transport_socket.typed_config;
      expect(downstream.require_client_certificate).toBe(true);
      expect(downstream.common_tls_context.validation_context.match_typed_subject_alt_names).toEqual([{ san_type: "DNS", matcher: { exact: peer.name } }]);
    }
    expect(EPP_FAILOVER.healthCheck).toEqual({ interval: "5s", timeout: "1s", unhealthyThreshold: 2, healthyThreshold: 3 });
  });

  it("refuses, through the validator, what the pinned Envoy would: a TLS context of the wrong direction, a priority over 128", () => {
    const text = a!.files["envoy/envoy.yaml"]!;
    expect(
      validateEnvoyBootstrap(text.replace("tls.v3.DownstreamTlsContext", "tls.v3.UpstreamTlsContext").replace(/^ *require_client_certificate: true\n/m, "")),
    ).toEqual([expect.stringContaining("UpstreamTlsContext is not an extension of envoy.transport_sockets.downstream")]);
    expect(validateEnvoyBootstrap(text.replace("priority: 1\n", "priority: 129\n"))).toEqual([expect.stringMatching(/priority: 129 must be <= 128/)]);
  });

  it("stays what it was with one router host: router.hosts of one is router.host, and nothing of the failover is rendered", () => {
    const one = (router: Record<string, unknown>) => ({ ...ha(), router });
    const single = render(one({ host: host("door-a", "10.20.0.5") }));
    expect(render(one({ hosts: [host("door-a", "10.20.0.5")] }))).toEqual(single);
    const files = single.routers[0]!.files;
    expect(single.tls).toBeNull();
    expect(Object.keys(files).sort()).toEqual([
      "desired.json",
      "envoy/envoy.yaml",
      "epp/epp.yaml",
      "systemd/rbln-serving-dev.front-door-agent.service",
      "systemd/rbln-serving-dev.front-door-epp.service",
      "systemd/rbln-serving-dev.front-door-proxy.service",
    ]);
    expect(files["envoy/envoy.yaml"]).not.toMatch(/priority|health_checks|outlier_detection|retry_policy|peer-epp|tls/);
    expect(files["systemd/rbln-serving-dev.front-door-proxy.service"]).not.toContain("--drain-time-s");
    expect(files["systemd/rbln-serving-dev.front-door-epp.service"]).toContain("stop --time 30 ");
    expect(single.routers[0]!.applyScript).toMatch(/\ntls_name=''\n[\s\S]*\nkeepalived_unit_name=''\n/);
  });

  it("gives keepalived a config that keepalived -t accepts on the interface the apply step finds, unicast between the router hosts", () => {
    const interfaceFile = path.join(work, "interface.conf");
    fs.writeFileSync(interfaceFile, "$INTERFACE=eth7\n");
    const configs = [a!, b!].map((r) => r.files["keepalived/keepalived.conf"]!);
    for (const [i, config] of configs.entries()) {
      const local = config.replace(/^include .*$/m, `include ${interfaceFile}`);
      expect(config).toMatch(/^include \/opt\/rbln-serving\/router\/dev\/keepalived\/interface\.conf$/m);
      const check = checkKeepalivedConfig(local, ["eth7"]);
      expect(check.stderr + check.stdout).toBe("");
      expect(check.status).toBe(0);
      expect(config).toContain(`\n  priority ${[150, 140][i]}\n`);
      expect(config).toContain(`\n  unicast_src_ip ${["10.20.0.5", "10.20.0.6"][i]}\n  unicast_peer {\n    ${["10.20.0.6", "10.20.0.5"][i]}\n  }\n`);
      expect(config).toContain(`\n    ${VIP}/32 dev $INTERFACE\n`);
      expect(config).toContain('script "/usr/bin/curl -fsS -o /dev/null --max-time 1 http://127.0.0.1:9901/ready"');
      expect(config).toMatch(/\n {2}state BACKUP\n {2}nopreempt\n/);
      expect(config).toContain(`\n  virtual_router_id ${virtualRouterId("dev")}\n`);
      // keepalived itself refuses an interface the host does not have.
      expect(checkKeepalivedConfig(local, ["eth8"]).status).not.toBe(0);
    }
    // An IPv6 virtual address: every server's address IPv6, the ranks' endpoints IPv4 (file discovery reads IPv4 only).
    const v6Stack = {
      ...ha({ hosts: [host("door-a", "fd00::5"), host("door-b", "fd00::6")], virtualAddress: "fd00::100" }),
      hosts: [host("npu-a", "fd00::11", { listenAddress: "10.20.0.11" }), host("npu-b", "fd00::12", { listenAddress: "10.20.0.12" })],
    };
    const v6 = render(v6Stack).routers[0]!.files["keepalived/keepalived.conf"]!;
    expect(v6).toContain("\n  version 3\n");
    expect(checkKeepalivedConfig(v6.replace(/^include .*$/m, `include ${interfaceFile}`), ["eth7"]).status).toBe(0);
  });

  it("gives each router host its units, which systemd-analyze verify accepts, and scripts shellcheck accepts", () => {
    const files = renderStackFiles(plan(ha()), [], "dev");
    const units = Object.entries(files).filter(([name]) => name.startsWith("hosts/door-a/") && name.endsWith(".service"));
    expect(units.map(([name]) => path.basename(name)).sort()).toEqual([
      "rbln-serving-dev.front-door-agent.service",
      "rbln-serving-dev.front-door-epp.service",
      "rbln-serving-dev.front-door-keepalived.service",
      "rbln-serving-dev.front-door-proxy.service",
    ]);
    expect(unitComplaints(units, /\/usr\/bin\/podman|is not executable: No such file or directory/)).toEqual([]);
    const keepalived = units.find(([name]) => name.endsWith("keepalived.service"))![1];
    expect(keepalived).toContain(
      "\nExecStart=/usr/sbin/keepalived --dont-fork --log-console --vrrp --use-file=/opt/rbln-serving/router/dev/keepalived/keepalived.conf --pid=/run/rbln-serving-dev-keepalived.pid --vrrp_pid=/run/rbln-serving-dev-keepalived-vrrp.pid\n",
    );
    // The EPP's stop lets its streams finish, as long as a stopping rank lets its requests; Envoy drains for 10 s.
    expect(units.find(([name]) => name.endsWith("epp.service"))![1]).toContain("stop --time 3600 ");
    expect(units.find(([name]) => name.endsWith("proxy.service"))![1]).toContain(" --drain-time-s 10 --drain-strategy immediate");
    const scripts = Object.entries(files).filter(([name]) => /^hosts\/door-[ab]\/front-door\/.*\.sh$/.test(name));
    expect(scripts.map(([name]) => name).sort()).toEqual(
      ["door-a", "door-b"]
        .flatMap((door) => ["access-npu-a", "access-npu-b", "apply", "remove", "revoke-npu-a", "revoke-npu-b"].map((step) => `${door}/front-door/${step}.sh`))
        .concat(["door-a/front-door/tls-door-a.sh", "door-a/front-door/tls-door-b.sh"])
        .sort()
        .map((n) => `hosts/${n}`),
    );
    expect(shellcheckFindings(scripts)).toBe("");
  });
});

describe("the stack's TLS certificates", () => {
  const script = (stateDir: string, router: string) =>
    renderScript("core/render/hosts/scripts/front-door-tls.sh", "test", { host_name: "door-a", state_dir: stateDir, id: "dev", routers: [router], days: 3650 });
  const run = (stateDir: string, router: string) => spawnSync("bash", ["-c", script(stateDir, router)], { encoding: "utf8" });

  it("issues each router host a certificate of the stack's CA, naming that host, for serving and for reaching peers, and prints the same one again", () => {
    const stateDir = path.join(work, "tls");
    const first = run(stateDir, "door-b");
    expect(first.stderr).toBe("");
    expect(first.status).toBe(0);
    expect(run(stateDir, "door-b").stdout).toBe(first.stdout);
    // Only the CA and that host's own key: never another's.
    expect(first.stdout.split("\n").map((line) => line.split(" ")[0])).toEqual(["ca", "door-b", ""]);
    const other = run(stateDir, "door-a");
    expect(other.stdout.split("\n")[0]).toBe(first.stdout.split("\n")[0]);
    const pem = (b64: string, name: string) => {
      const file = path.join(work, name);
      fs.writeFileSync(file, Buffer.from(b64, "base64"));
      return file;
    };
    const [ca, own] = first.stdout
      .trim()
      .split("\n")
      .map((line) => line.split(" "));
    const caFile = pem(ca![1]!, "ca.pem");
    const crtFile = pem(own![1]!, "door-b.pem");
    for (const purpose of ["sslserver", "sslclient"]) {
      const verify = spawnSync("openssl", ["verify", "-purpose", purpose, "-CAfile", caFile, crtFile], { encoding: "utf8" });
      expect(verify.stdout.trim(), purpose).toBe(`${crtFile}: OK`);
    }
    const text = spawnSync("openssl", ["x509", "-in", crtFile, "-noout", "-ext", "subjectAltName"], { encoding: "utf8" }).stdout;
    expect(text).toContain("DNS:door-b");
    const key = pem(own![2]!, "door-b.key");
    const match = (args: string[]) => spawnSync("openssl", args, { encoding: "utf8" }).stdout;
    expect(match(["pkey", "-in", key, "-pubout"])).toBe(match(["x509", "-in", crtFile, "-noout", "-pubkey"]));
    // The CA's key stays on the first router host, readable by root only.
    expect(fs.statSync(path.join(stateDir, "tls-issuer", "ca.key")).mode & 0o077).toBe(0);
    expect(first.stdout + other.stdout).not.toContain(fs.readFileSync(path.join(stateDir, "tls-issuer", "ca.key")).toString("base64"));
  });
});

describe("a front door of two router hosts under the mock runtime", () => {
  it("has a component per router host that applies after the one before, the first making the TLS certificates, each host's key to the unit steps", async () => {
    const { registrations, error, result } = await runUnderMocks(runProgram, ha(), SECRETS);
    expect(error).toBeUndefined();
    expect(ofType(registrations, "rbln-serving:index:FrontDoor").map((r) => r.name)).toEqual([
      "rbln-serving-door-a-front-door",
      "rbln-serving-door-b-front-door",
    ]);
    const commands = ofType(registrations, "command:remote:Command");
    const byName = (name: string) => commands.find((c) => c.name === name)!;
    const [applyA, applyB] = ["door-a", "door-b"].map((n) => byName(`rbln-serving-${n}-front-door-apply`));
    expect(applyB!.dependencies.some((d) => d.endsWith(`::${applyA!.name}`))).toBe(true);
    // Each router host's certificate is made on the first, and reaches that host's apply step alone, as a secret.
    expect(commands.filter((c) => c.name.includes("-front-door-tls")).map((c) => c.name)).toEqual([
      "rbln-serving-door-a-front-door-tls-door-a",
      "rbln-serving-door-a-front-door-tls-door-b",
    ]);
    for (const [router, apply] of [
      ["door-a", applyA!],
      ["door-b", applyB!],
    ] as const) {
      const tls = byName(`rbln-serving-door-a-front-door-tls-${router}`);
      expect(tls.inputs.connection.host).toBe("10.20.0.5");
      expect(tls.inputs.logging).toBe("none");
      expect(isSecretAt(tls.wireInputs, ["create"])).toBe(false);
      expect(apply.inputs.stdin).toBe(`${stdoutRef(tls.name)}\n`);
      expect(isSecretAt(apply.wireInputs, ["stdin"])).toBe(true);
    }
    // Each host's own key on each router host, in the router hosts' order; never another host's.
    const unit = byName("rbln-serving-npu-b-main-0");
    for (const access of ["door-a", "door-b"].map((d) => `rbln-serving-${d}-front-door-access-npu-b`)) {
      expect(unit.inputs.stdin).toContain(stdoutRef(access));
      expect(unit.dependencies.some((d) => d.endsWith(`::${access}`))).toBe(true);
    }
    expect(unit.inputs.stdin).not.toContain("front-door-access-npu-a");
    expect(unit.inputs.stdin.indexOf(stdoutRef("rbln-serving-door-a-front-door-access-npu-b"))).toBeLessThan(
      unit.inputs.stdin.indexOf(stdoutRef("rbln-serving-door-b-front-door-access-npu-b")),
    );
    expect(await outputValue((result as { endpoints: Parameters<typeof outputValue>[0] }).endpoints)).toEqual([`http://${VIP}:8080`]);
  });

  it("gives every router host each host's own drain key, the API key filter and the header removal, and lets every router host past the sidecar's guard", async () => {
    const KEY = "sk-ha-0123456789";
    const rendered = renderDeployment(plan(ha()), { stack: "dev", instance: "rbln-serving", secrets: ["sshPrivateKey", "apiKey"] }).hosts!.frontDoor!;
    for (const router of rendered.routers) {
      expect(router.access.map((a) => [a.host, /\nfrom_address=(.*)\n/.exec(a.accessScript)![1]])).toEqual([
        ["npu-a", "10.20.0.11"],
        ["npu-b", "10.20.0.12"],
      ]);
      const filters = parseYaml(router.files["envoy/envoy.yaml"]!).static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters;
      expect(filters.map((f: { name: string }) => f.name)).toEqual([
        API_KEY_FILTER,
        "envoy.filters.http.header_mutation",
        "envoy.filters.http.ext_proc",
        "envoy.filters.http.router",
      ]);
      expect(router.apiKeyConfig).toBe("/opt/rbln-serving/router/dev/envoy/api-key.json");
    }
    expect(sidecarAllowedSources(plan(ha()).frontDoor!)).toEqual(["10.20.0.5", "10.20.0.6", VIP]);
    // The apply step's stdin: the host's TLS lines, then the filter config (front-door-apply.sh reads them so), a secret.
    const { registrations, error } = await runUnderMocks(runProgram, ha(), { ...SECRETS, apiKey: KEY });
    expect(error).toBeUndefined();
    const commands = ofType(registrations, "command:remote:Command");
    for (const router of ["door-a", "door-b"]) {
      const apply = commands.find((c) => c.name === `rbln-serving-${router}-front-door-apply`)!;
      expect(apply.inputs.stdin).toBe(`${stdoutRef(`rbln-serving-door-a-front-door-tls-${router}`)}\n${apiKeyFilterConfig(KEY)}`);
      expect(isSecretAt(apply.wireInputs, ["stdin"])).toBe(true);
    }
  });

  it("reads its TLS lines off the apply step's stdin and leaves the API key filter's config after them, with or without the last newline", () => {
    const lib = path.resolve(__dirname, "../core/render/hosts/scripts");
    const filter = apiKeyFilterConfig("sk-ha-0123456789");
    const read = (stdin: string) =>
      spawnSync(
        "bash",
        [
          "-c",
          `set -euo pipefail; fail() { echo "$*" >&2; exit 1; }; . ./front-door-roll.sh; tls_name=door-b; read_tls; echo "$tls_ca|$tls_crt|$tls_key"; cat`,
        ],
        {
          cwd: lib,
          input: stdin,
          encoding: "utf8",
        },
      );
    const lines = "ca Q0E=\ndoor-a QQ== S0E=\ndoor-b Qg== S0I=";
    for (const stdin of [`${lines}\n${filter}`, `${lines}\n`, lines]) {
      const result = read(stdin);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout).toBe(`Q0E=|Qg==|S0I=\n${stdin.startsWith(`${lines}\n`) ? stdin.slice(lines.length + 1) : ""}`);
    }
    const missing = read(`ca Q0E=\ndoor-a QQ== S0E=\n${filter}`);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("no TLS certificate for door-b on stdin");
  });

  it("keeps an existing single-router stack's resources: router.host and router.hosts of one register the same, with the names they had", async () => {
    const edge = readStackFile("edge").raw as Record<string, unknown> & { router: { host: unknown } };
    const asHost = await runUnderMocks(runProgram, edge, SECRETS);
    const asHosts = await runUnderMocks(runProgram, { ...edge, router: { ...edge.router, host: undefined, hosts: [edge.router.host] } }, SECRETS);
    const shape = (r: typeof asHost) => r.registrations.map((x) => ({ urn: x.urn, inputs: x.inputs }));
    expect(shape(asHosts)).toEqual(shape(asHost));
    expect(
      asHost.registrations
        .filter((r) => /front-door/.test(r.name))
        .map((r) => r.name)
        .sort(),
    ).toEqual([
      "rbln-serving-edge-router-front-door",
      "rbln-serving-edge-router-front-door-access-npu-edge-0",
      "rbln-serving-edge-router-front-door-access-npu-edge-1",
      "rbln-serving-edge-router-front-door-apply",
    ]);
  });
});
