import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { note, type PlanMessage } from "../core/plan/messages";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { portInventory } from "../core/plan/ports";
import { allSelections } from "../core/plan/resolve";
import { renderDeployment } from "../core/render/deployment";
import { runProgram } from "../program";
import { shellcheckFindings, unitComplaints } from "./helpers/systemdOracle";
import { validateEndpointPickerConfig } from "./helpers/eppConfig";
import { API_KEY_FILTER, apiKeyFilterConfig } from "../core/render/hosts/frontDoor/envoy";
import { validateEnvoyBootstrap, validateExtensionConfigFile } from "./helpers/envoyBootstrap";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { isSecretAt, ofType, runUnderMocks, stdoutRef, outputValue } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";
import { renderStackFiles } from "./helpers/render";

/** The front door on hosts: what is handed to the EPP and Envoy, checked against their real definitions; the graph under mocks; the refusals. */
const edge = () => readStackFile("edge").raw;
const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
const render = (raw: Record<string, unknown>) => renderDeployment(plan(raw), { stack: "edge", instance: "rbln-serving", secrets: [] });
const host = (name: string, address: string, extra: Record<string, unknown> = {}) => ({ name, address, hostKey: EXAMPLE_HOST_KEY, ...extra });
const SECRETS = { sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n-----END OPENSSH PRIVATE KEY-----\n", pipPassword: "portal" };
const work = fs.mkdtempSync(path.join(os.tmpdir(), "front-door-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

describe("the front door on hosts, rendered", () => {
  it("gives the disaggregated strategy, for both targets and every axis value the recipe verifies, an EPP config and an Envoy bootstrap their real loaders accept", () => {
    const recipe = shippedCatalog.get("MiniMaxAI/MiniMax-M2.7");
    let rendered = 0;
    for (const selection of allSelections(recipe)) {
      if (selection.strategy !== "prefill-decode-disaggregated") continue;
      const frontDoor = render({ ...edge(), target: selection.target, axes: selection.axes }).hosts!.frontDoor!;
      expect(validateEndpointPickerConfig(frontDoor.routers[0]!.files["epp/epp.yaml"]!), JSON.stringify(selection.axes)).toEqual([]);
      expect(validateEnvoyBootstrap(frontDoor.routers[0]!.files["envoy/envoy.yaml"]!)).toEqual([]);
      rendered++;
    }
    expect(rendered).toBeGreaterThan(100);
  });

  it("carries the recipe's router intent into the EPP config, plus file discovery watching the endpoints file", () => {
    const config = render(edge()).hosts!.frontDoor!.routers[0]!.files["epp/epp.yaml"]!;
    expect(config).toContain("type: disagg-profile-handler");
    expect(config).toMatch(/- type: file-discovery\n {4}parameters:\n {6}path: \/etc\/epp\/endpoints.yaml\n {6}watchFile: true/);
    expect(config).toMatch(/dataLayer:\n {2}discovery:\n {4}pluginRef: file-discovery/);
  });

  it("tells the drain each endpoint's rollout wave: with xPyD a second decode server changes after the first", () => {
    const hosts = [...(edge().hosts as object[]), host("npu-edge-2", "10.30.0.13")];
    const desired = JSON.parse(render({ ...edge(), decodeReplicas: 2, hosts }).hosts!.frontDoor!.routers[0]!.files["desired.json"]!);
    const waves = Object.fromEntries(desired.endpoints.map((e: { host: string; role: string; wave: number }) => [`${e.host} ${e.role}`, e.wave]));
    expect(waves).toEqual({ "npu-edge-0 prefill": 0, "npu-edge-1 decode": 0, "npu-edge-2 decode": 1 });
  });

  it("gives aggregated replicas one front door with the chart's default picker, and publishes its URL as the endpoint", async () => {
    const raw = {
      ...readStackFile("dev").raw,
      replicas: 2,
      hosts: [host("npu-a", "10.20.0.11"), host("npu-b", "10.20.0.12")],
      router: { host: host("door", "10.20.0.5") },
    };
    const frontDoor = render(raw).hosts!.frontDoor!;
    expect(validateEndpointPickerConfig(frontDoor.routers[0]!.files["epp/epp.yaml"]!)).toEqual([]);
    expect(frontDoor.routers[0]!.files["epp/epp.yaml"]).toContain("type: kv-cache-utilization-scorer");
    const desired = JSON.parse(frontDoor.routers[0]!.files["desired.json"]!);
    expect(desired.endpoints.map((e: { name: string; address: string; port: number }) => [e.name, e.address, e.port])).toEqual([
      ["npu-a-main-0", "10.20.0.11", 8000],
      ["npu-b-main-0", "10.20.0.12", 8000],
    ]);
    const { result, error } = await runUnderMocks(runProgram, raw, SECRETS);
    expect(error).toBeUndefined();
    const outputs = result as ReturnType<typeof runProgram>;
    expect(await outputValue(outputs.endpoints)).toEqual(["http://10.20.0.5:8080"]);
    expect(await outputValue(outputs.curl)).toContain("http://10.20.0.5:8080/");
  });

  it("reaches decode ranks through their sidecar ports, labels the roles, and binds <EPP_HOST> to the router host", () => {
    const deployment = plan(edge());
    expect(deployment.frontDoor!.endpoints.map((e) => [e.name, e.port, e.rankPort, e.labels["llm-d.ai/role"]])).toEqual([
      ["npu-edge-0-prefill-0", 8000, 8000, "prefill"],
      ["npu-edge-1-decode-0", 8000, 8200, "decode"],
      ["npu-edge-1-decode-1", 8001, 8201, "decode"],
      ["npu-edge-1-decode-2", 8002, 8202, "decode"],
      ["npu-edge-1-decode-3", 8003, 8203, "decode"],
    ]);
    const files = renderStackFiles(deployment, [], "edge");
    expect(files["hosts/npu-edge-1/systemd/rbln-serving-edge.sidecar.service"]).toContain("--port=8000 --model-server-port=8200 --data-parallel-size=4");
    expect(files["hosts/npu-edge-1/systemd/rbln-serving-edge.decode-0.service"]).toContain("tcp://10.30.0.10:5557");
    expect(files["hosts/edge-router/front-door/systemd/rbln-serving-edge.front-door-epp.service"]).toContain("--publish 127.0.0.1:9002:9002");
  });

  it("lists prefill servers first, then decode servers, with prefillReplicas and decodeReplicas (xPyD); each role rolls on its own", () => {
    const raw = { ...edge(), prefillReplicas: 2, decodeReplicas: 3, hosts: [0, 1, 2, 3, 4].map((i) => host(`npu-${i}`, `10.30.0.${20 + i}`)) };
    const deployment = plan(raw);
    expect(deployment.placements.map((p) => [p.host.name, deployment.plan.roles.find((r) => r.node === p.node)!.role, p.replica])).toEqual([
      ["npu-0", "prefill", 0],
      ["npu-1", "prefill", 1],
      ["npu-2", "decode", 0],
      ["npu-3", "decode", 1],
      ["npu-4", "decode", 2],
    ]);
    const waves = renderDeployment(deployment, { stack: "edge", instance: "rbln-serving", secrets: [] }).hosts!.waves.map((w) =>
      w.map((h) => h.placement.host.name),
    );
    expect(waves).toEqual([["npu-0", "npu-2"], ["npu-1", "npu-3"], ["npu-4"]]);
    expect(() => plan({ ...raw, hosts: raw.hosts.slice(0, 4) })).toThrow(
      'hosts: 4 given; strategy "prefill-decode-disaggregated" needs exactly 5: 2 prefill servers, then 3 decode servers, in that order',
    );
  });
});

describe("the front door's settings, refused with one line", () => {
  const refused = (raw: Record<string, unknown>) => {
    try {
      plan(raw);
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error("not refused");
  };

  it("needs router.host for the disaggregated strategy on hosts, and a host key for its server", () => {
    const { router: _, ...raw } = edge() as Record<string, unknown> & { router: unknown };
    expect(refused(raw)).toMatch(/^router\.host: required: strategy "prefill-decode-disaggregated" routes through the llm-d router's front door/);
    expect(() => parseStackSettings({ ...edge(), router: { host: { name: "r", address: "10.30.0.10" } } })).toThrow(/^router\.host\.hostKey: required/);
  });

  it("takes the name of an entry of hosts to share that server, refusing a name no entry has and a port its ranks take", () => {
    expect(plan({ ...edge(), router: { host: "npu-edge-0", port: 8090 } }).frontDoor!.routers[0]!.sharedWith).toBe("npu-edge-0");
    // The same entry named in the object form, the one type the component package has.
    expect(plan({ ...edge(), router: { host: { name: "npu-edge-0" }, port: 8090 } }).frontDoor!.routers[0]!.sharedWith).toBe("npu-edge-0");
    expect(() => parseStackSettings({ ...edge(), router: { host: { name: "npu-edge-0", port: 2222 } } })).toThrow(
      "router.host.port: only with address: without one, name is an entry of hosts, whose own settings apply",
    );
    expect(() => parseStackSettings({ ...edge(), router: { host: { name: "npu-edge-0", adress: "10.0.0.1" } } })).toThrow(
      "router.host.adress: unknown key; allowed: name, address, user, port, hostKey, proxy, listenAddress",
    );
    expect(() => parseStackSettings({ ...edge(), router: { host: 5 } })).toThrow(
      "router.host: a router host {name, address, user, port, hostKey, proxy, listenAddress}, or {name} (or the name alone) of an entry of hosts (got 5)",
    );
    expect(() => parseStackSettings({ ...edge(), router: { host: { name: "nowhere" } } })).toThrow(
      'router.host: names no entry of hosts; allowed: "npu-edge-0"',
    );
    expect(() => parseStackSettings({ ...edge(), router: { host: "nowhere" } })).toThrow(
      'router.host: names no entry of hosts; allowed: "npu-edge-0", "npu-edge-1", or a host {name, address, user, port, hostKey}',
    );
    expect(refused({ ...edge(), router: { host: "npu-edge-1", port: 8201 } })).toBe(
      "router.port: 8201 would be both the front door's listener and decode rank 1's serving port on npu-edge-1, on 10.30.0.12; choose another port",
    );
    expect(refused({ ...edge(), router: { host: "npu-edge-1", port: 8003 } })).toBe(
      "router.port: 8003 would be both the front door's listener and the routing sidecar's port on npu-edge-1, on 10.30.0.12; choose another port",
    );
    expect(refused({ ...edge(), router: { host: "npu-edge-0", port: 8000 } })).toBe(
      "router.port: 8000 would be both the front door's listener and prefill rank 0's serving port on npu-edge-0, on 10.30.0.11; choose another port",
    );
    expect(refused({ ...edge(), router: { ...(edge().router as object), port: 9002 } })).toBe(
      "router.port: 9002 would be both the front door's listener and the front door's eppGrpc port, on 10.30.0.10; choose another port",
    );
    // Every port the stack binds there is taken: the data-parallel RPC port, the NIXL side channels, the SSH server.
    expect(refused({ ...edge(), router: { host: "npu-edge-1", port: 5555 } })).toBe(
      "router.port: 5555 would be both the front door's listener and decode's data-parallel RPC port on npu-edge-1, on 10.30.0.12; choose another port",
    );
    expect(refused({ ...edge(), router: { host: "npu-edge-1", port: 5660 } })).toBe(
      "router.port: 5660 would be both the front door's listener and decode rank 1's NIXL side channel on npu-edge-1, on 10.30.0.12; choose another port",
    );
    expect(refused({ ...edge(), router: { host: "npu-edge-0", port: 5559 } })).toMatch(
      /^router\.port: 5559 would be both the front door's listener and prefill rank 0's NIXL side channel on npu-edge-0/,
    );
    expect(refused({ ...edge(), router: { host: "npu-edge-0", port: 22 } })).toBe(
      "router.port: 22 would be both the front door's listener and the SSH server of npu-edge-0, on 10.30.0.11; choose another port",
    );
    expect(refused({ ...edge(), router: { ...(edge().router as object), port: 22 } })).toMatch(
      /^router\.port: 22 would be both the front door's listener and the SSH server of /,
    );
    // A server of its own that is an entry of hosts under its address is that entry's server too.
    const sameServer = { name: "router", address: "10.30.0.11", hostKey: EXAMPLE_HOST_KEY };
    expect(refused({ ...edge(), router: { host: sameServer, port: 8000 } })).toBe(
      "router.port: 8000 would be both the front door's listener and prefill rank 0's serving port on npu-edge-0, on 10.30.0.11; choose another port",
    );
    expect(plan({ ...edge(), router: { host: sameServer, port: 8090 } }).frontDoor!.routers[0]!.sharedWith).toBeNull();
    // However its address is spelled: an IPv4-mapped address is that IPv4 address.
    expect(refused({ ...edge(), router: { host: { ...sameServer, address: "::ffff:10.30.0.11" }, port: 8000 } })).toBe(
      "router.port: 8000 would be both the front door's listener and prefill rank 0's serving port on npu-edge-0, on 10.30.0.11; choose another port",
    );
  });

  it("writes each host's address into its own front door grant (from=) as sshd sees it connect: IPv4-mapped as IPv4", () => {
    const hosts = (edge().hosts as Record<string, unknown>[]).map((h) => ({ ...h }));
    const mapped = render({
      ...edge(),
      hosts: [
        { ...hosts[0], address: "::ffff:10.30.0.11" },
        { ...hosts[1], address: "::FFFF:a1e:c" },
      ],
    });
    // Each router host lets each host in with its own key, from that host's address as sshd sees it.
    for (const router of mapped.hosts!.frontDoor!.routers) {
      const access = router.access;
      expect(access.map((a) => a.host)).toEqual(["npu-edge-0", "npu-edge-1"]);
      expect(access[0]!.accessScript).toContain("\nfrom_address=10.30.0.11\n");
      expect(access[1]!.accessScript).toContain("\nfrom_address=10.30.0.12\n");
      for (const a of access) expect(a.accessScript).not.toMatch(/ffff/i);
    }
    for (const rank of mapped.hosts!.waves.flat().flatMap((h) => h.ranks)) expect(rank.applyScript).toMatch(/\nrouter_ssh_bind=10\.30\.0\.1[12]\n/);
  });

  it("takes into the port inventory the KV-event endpoints a rank binds (a wildcard, the replay endpoint), not one it connects to", () => {
    const host = { name: "npu-0", address: "10.0.0.1", user: "root", port: 22 };
    const rank = (events: Record<string, unknown>) => ({
      rank: 0,
      argv: [],
      env: {},
      ports: [8000],
      devices: [],
      placeholders: [],
      flags: [{ name: "--kv-events-config", values: [JSON.stringify({ publisher: "zmq", ...events })] }],
    });
    const owners = (events: Record<string, unknown>) =>
      portInventory({ roles: [{ role: "main", node: 0, compileKey: "k", ranks: [rank(events)] }] }, [{ replica: 0, node: 0, host }], null)
        .filter((c) => c.port !== 22 && c.port !== 8000)
        .map((c) => [c.port, c.owner]);
    expect(owners({ endpoint: "tcp://*:5557", replay_endpoint: "tcp://*:5558" })).toEqual([
      [5557, "main rank 0's KV-event publisher on npu-0"],
      [5558, "main rank 0's KV-event replay endpoint on npu-0"],
    ]);
    expect(owners({ endpoint: "tcp://10.0.1.1:5557" })).toEqual([]);
  });

  it("refuses a serving address behind the router that is not IPv4 (file discovery reads literal IPv4 addresses), and a decode host's listenAddress (the sidecar forwards to localhost)", () => {
    const hosts = (edge().hosts as Record<string, unknown>[]).map((h) => ({ ...h }));
    expect(refused({ ...edge(), hosts: [{ ...hosts[0], listenAddress: "fd00::11" }, hosts[1]] })).toBe(
      "hosts[0].listenAddress: \"fd00::11\" is not a literal IPv4 address; the router's file discovery reaches endpoints by IPv4 address only: give the host's IPv4 address (or listenAddress)",
    );
    expect(refused({ ...edge(), hosts: [hosts[0], { ...hosts[1], listenAddress: "10.30.0.12" }] })).toMatch(
      /^hosts\[1\]\.listenAddress: "10\.30\.0\.12": the decode ranks of this host are reached through the routing sidecar/,
    );
  });

  it("notes that aggregated replicas without a front door are separate endpoints, and what file mode leaves out", () => {
    const raw = { ...readStackFile("dev").raw, replicas: 2, hosts: [host("npu-a", "10.20.0.11"), host("npu-b", "10.20.0.12")] };
    expect(plan(raw).plan.messages).toEqual([
      note(
        "router.host: unset, so the 2 replicas are 2 endpoints (stack output endpoints) and clients spread their requests over them; set router.host for one front door",
      ),
    ]);
    expect(plan(edge()).plan.messages).toContainEqual(
      note(expect.stringContaining("InferenceObjective, InferenceModelRewrite and the k8s-notification-source data-layer plugin do not run there")),
    );
  });
});

describe("every SSH grant and bind the hosts write holds IP addresses (sshd matches from= against the address it sees connect)", () => {
  const scriptDir = path.join(__dirname, "../core/render/hosts/scripts");
  // The settings the grants (from="${x}") and the binds (peer_ssh_setup's fifth argument) are written from, read from the scripts themselves.
  const grantSettings = fs.readdirSync(scriptDir).flatMap((file) => {
    const text = fs.readFileSync(path.join(scriptDir, file), "utf8");
    return [...text.matchAll(/from=\\"\$\{(\w+)\}/g), ...text.matchAll(/^\s*peer_ssh_setup(?: "\$(?:\w+|\{[\w[\]$]+\})"){4} "\$(\w+)"/gm)].map((m) => m[1]!);
  });
  const ipv4 = (n: number) => `10.30.0.${n}`;
  const named = (n: number) => `npu-${n}.example.com`;
  const [prefill, decode] = (edge().hosts as Record<string, unknown>[]).map((h) => ({ ...h }));
  const dev = () => readStackFile("dev").raw;
  const twoDev = (a: string, b: string, more: Record<string, unknown> = {}) => ({
    ...dev(),
    replicas: 2,
    hosts: [host("npu-a", a), host("npu-b", b)],
    ...more,
  });
  const VARIANTS: [string, Record<string, unknown>][] = [
    ["edge as shipped", edge()],
    // The front door checks the serving address (listenAddress), the drain grant and bind take the SSH address.
    ["edge, prefill host by name with an IPv4 listenAddress", { ...edge(), hosts: [{ ...prefill, address: named(11), listenAddress: ipv4(11) }, decode] }],
    ["edge, its router host by name", { ...edge(), router: { host: host("door", "door.example.com") } }],
    ["edge, a compile host by name", { ...edge(), compile: { host: host("cpu-0", "cpu-0.example.com") } }],
    ["dev, one host by name", { ...dev(), hosts: [host("npu-a", named(1))] }],
    ["dev, one host by name and a compile host", { ...dev(), hosts: [host("npu-a", named(1))], compile: { host: host("cpu-0", ipv4(9)) } }],
    ["dev, two hosts, the second by name", twoDev(ipv4(1), named(2))],
    ["dev, two hosts by name, a shared cache", twoDev(named(1), named(2), { cache: { shared: "/mnt/rbln-cache" } })],
    [
      "dev, two hosts by name with listenAddress, a shared cache, a router host",
      twoDev(named(1), named(2), {
        cache: { shared: "/mnt/rbln-cache" },
        router: { host: host("door", ipv4(9)) },
        hosts: [host("npu-a", named(1), { listenAddress: ipv4(1) }), host("npu-b", named(2), { listenAddress: ipv4(2) })],
      }),
    ],
    ["dev, two hosts, a router host sharing the first, the second by name", twoDev(ipv4(1), named(2), { router: { host: "npu-a" } })],
    [
      "dev, two hosts, a router host and a compile host by name",
      twoDev(ipv4(1), ipv4(2), { router: { host: host("door", "door.example.com") }, compile: { host: host("cpu-0", "cpu-0.example.com") } }),
    ],
  ];

  it("reads the grants' settings from the scripts: from= in the copy and drain grants, the bind of every copy and drain", () => {
    expect(new Set(grantSettings)).toEqual(new Set(["dest_address", "from_address", "bind_address", "router_ssh_bind"]));
  });

  it("refuses a host name wherever a grant or bind would take it, and renders only IP addresses there otherwise", () => {
    const outcomes = VARIANTS.map(([label, raw]) => {
      let files: Record<string, string>;
      try {
        files = renderStackFiles(plan(raw), [], "edge");
      } catch (error) {
        return [label, (error as Error).message.split(":")[0]];
      }
      const written = Object.values(files)
        .flatMap((text) =>
          grantSettings.flatMap((name) => [...text.matchAll(new RegExp(`^${name}=(.*)$`, "gm"))].flatMap((m) => m[1]!.replace(/^'(.*)'$/, "$1").split(","))),
        )
        .filter((address) => address !== "");
      const hostNames = written.filter((address) => net.isIP(address) === 0);
      return [label, hostNames.length > 0 ? `renders ${hostNames.join(" ")}` : `${written.length} grant addresses`];
    });
    expect(Object.fromEntries(outcomes)).toEqual({
      "edge as shipped": "10 grant addresses",
      "edge, prefill host by name with an IPv4 listenAddress": "hosts[0].address",
      "edge, its router host by name": "10 grant addresses",
      "edge, a compile host by name": "16 grant addresses",
      "dev, one host by name": "0 grant addresses",
      "dev, one host by name and a compile host": "hosts[0].address",
      "dev, two hosts, the second by name": "hosts[1].address",
      "dev, two hosts by name, a shared cache": "0 grant addresses",
      "dev, two hosts by name with listenAddress, a shared cache, a router host": "hosts[0].address",
      "dev, two hosts, a router host sharing the first, the second by name": "hosts[1].address",
      "dev, two hosts, a router host and a compile host by name": "12 grant addresses",
    });
  });
});

describe("the one-server message says what the stack does: a warning while changes are refused, a note once the outage is accepted", () => {
  const oneServer = (role: string) => (messages: PlanMessage[]) =>
    messages.filter((m) => m.text.startsWith(`router: role ${role} has one server`)).map((m) => `${m.level}: ${m.text.slice(m.text.indexOf(";") + 2)}`);
  const REFUSES = "warning: its unit steps refuse that unless rollout.allowEmptyFrontDoor is true (or add a replica)";
  const TAKES = "note: rollout.allowEmptyFrontDoor is true, so its unit steps take that outage (add a replica to avoid it)";

  it("refused while rollout.allowEmptyFrontDoor is false; taken, and no longer said to be refused, once it is true", () => {
    // edge: one prefill and one decode server.
    for (const role of ["prefill", "decode"]) {
      expect(oneServer(role)(plan(edge()).plan.messages), role).toEqual([REFUSES]);
      const allowed = plan({ ...edge(), rollout: { allowEmptyFrontDoor: true } }).plan.messages;
      expect(oneServer(role)(allowed), role).toEqual([TAKES]);
      expect(JSON.stringify(allowed)).not.toContain("refuse that unless");
    }
    // The class: an aggregated replica alone behind a front door, and a role with two servers (no warning either way).
    const dev = readStackFile("dev").raw as Record<string, any>;
    const aggregated = (allowEmptyFrontDoor: boolean, replicas: number) =>
      plan({
        ...dev,
        replicas,
        hosts: [host("npu-a", "10.20.0.11"), host("npu-b", "10.20.0.12")].slice(0, replicas),
        router: { host: { name: "door", address: "10.20.0.10", hostKey: EXAMPLE_HOST_KEY } },
        rollout: { allowEmptyFrontDoor },
      }).plan.messages;
    expect(oneServer("main")(aggregated(true, 1))).toEqual([TAKES]);
    expect(oneServer("main")(aggregated(false, 1))).toEqual([REFUSES]);
    expect(oneServer("main")(aggregated(true, 2))).toEqual([]);
  });
});

describe("the front door under the mock runtime", () => {
  it("runs the front door before any unit step, hands each host its own key as a secret, and gives the decode host its sidecar", async () => {
    const { registrations, error } = await runUnderMocks(runProgram, edge(), SECRETS);
    expect(error).toBeUndefined();
    const commands = ofType(registrations, "command:remote:Command");
    const byName = (name: string) => commands.find((c) => c.name === name)!;
    const apply = "rbln-serving-edge-router-front-door-apply";
    const keyOf = (host: string) => `rbln-serving-edge-router-front-door-access-${host}`;
    for (const name of [apply, keyOf("npu-edge-0"), keyOf("npu-edge-1")]) expect(byName(name).inputs.connection.host).toBe("10.30.0.10");
    expect(commands.filter((c) => c.name.includes("front-door-access")).map((c) => c.name)).toEqual([keyOf("npu-edge-0"), keyOf("npu-edge-1")]);
    for (const host of ["npu-edge-0", "npu-edge-1"]) expect(byName(keyOf(host)).inputs.logging).toBe("none");
    for (const [unit, host, other] of [
      ["rbln-serving-npu-edge-0-prefill-0", "npu-edge-0", "npu-edge-1"],
      ["rbln-serving-npu-edge-1-decode-3", "npu-edge-1", "npu-edge-0"],
      ["rbln-serving-npu-edge-1-sidecar", "npu-edge-1", "npu-edge-0"],
    ] as const) {
      const step = byName(unit);
      for (const name of [apply, keyOf(host)])
        expect(
          step.dependencies.some((d) => d.endsWith(`::${name}`)),
          `${unit} after ${name}`,
        ).toBe(true);
      expect(step.inputs.stdin).toContain(stdoutRef(keyOf(host)));
      expect(step.inputs.stdin).not.toContain(stdoutRef(keyOf(other)));
      expect(isSecretAt(step.wireInputs, ["stdin"])).toBe(true);
    }
    expect(byName("rbln-serving-npu-edge-1-decode-0").dependencies.some((d) => d.endsWith("::rbln-serving-npu-edge-1-sidecar"))).toBe(true);
    expect(commands.some((c) => c.name === "rbln-serving-npu-edge-0-sidecar")).toBe(false);
    expect(ofType(registrations, "rbln-serving:index:FrontDoor")).toHaveLength(1);
  });
});

describe("the rendered router and sidecar units", () => {
  it("pass systemd-analyze verify (but for the container runtime, not installed here) and their scripts shellcheck", () => {
    const files = renderStackFiles(plan({ ...edge(), router: { ...(edge().router as object), runtime: "docker" } }), [], "edge");
    const units = Object.entries(files).filter(([name]) => /front-door-|sidecar\.service/.test(name) && name.endsWith(".service"));
    expect(units.map(([name]) => path.basename(name)).sort()).toEqual([
      "rbln-serving-edge.front-door-agent.service",
      "rbln-serving-edge.front-door-epp.service",
      "rbln-serving-edge.front-door-proxy.service",
      "rbln-serving-edge.sidecar.service",
    ]);
    expect(unitComplaints(units, /\/usr\/bin\/docker|docker\.service|Failed to prepare filename|is not executable: No such file or directory/)).toEqual([]);
    const scripts = Object.entries(files).filter(([name]) => name.includes("front-door/") || name.includes("sidecar.sh"));
    expect(shellcheckFindings(scripts.filter(([name]) => name.endsWith(".sh")))).toBe("");
  });
});

describe("apiKey at the front door, on every path", () => {
  const KEY = 'front-door k3y " $HOME `id` \\ end';
  const WITH_KEY = { ...SECRETS, apiKey: KEY };
  const renderWithKey = (raw: Record<string, unknown>) =>
    renderDeployment(plan(raw), { stack: "edge", instance: "rbln-serving", secrets: ["sshPrivateKey", "pipPassword", "apiKey"] }).hosts!.frontDoor!.routers[0]!;
  const httpFilters = (bootstrap: string) =>
    parseYaml(bootstrap).static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters as { name: string; config_discovery?: any }[];

  it("asks Envoy for the key first, from a file of its own (ECDS): the bootstrap names the file, never the key", () => {
    const door = renderWithKey(edge());
    const bootstrap = door.files["envoy/envoy.yaml"]!;
    expect(validateEnvoyBootstrap(bootstrap)).toEqual([]);
    const filters = httpFilters(bootstrap);
    expect(filters.map((f) => f.name)).toEqual([
      API_KEY_FILTER,
      "envoy.filters.http.header_mutation",
      "envoy.filters.http.ext_proc",
      "envoy.filters.http.router",
    ]);
    expect(filters[0]!.config_discovery).toEqual({
      config_source: { path_config_source: { path: "/etc/envoy/api-key.json" }, resource_api_version: "V3" },
      type_urls: ["type.googleapis.com/envoy.extensions.filters.http.api_key_auth.v3.ApiKeyAuth"],
    });
    expect(door.apiKeyConfig).toBe("/opt/rbln-serving/router/edge/envoy/api-key.json");
    expect(door.applyScript).toContain("\napi_key=true\n");
    // What `render` writes: the file with a placeholder.
    expect(JSON.parse(door.files["envoy/api-key.json"]!).resources[0].typed_config.credentials).toEqual([{ key: "<secret:apiKey>", client: "rbln-serving" }]);
  });

  it("writes a filter config Envoy takes for that filter, whatever the key holds", () => {
    const filter = { name: API_KEY_FILTER, typeUrls: ["type.googleapis.com/envoy.extensions.filters.http.api_key_auth.v3.ApiKeyAuth"] };
    for (const key of [KEY, "a", "x".repeat(4096), "é ✓"]) expect(validateExtensionConfigFile(apiKeyFilterConfig(key), filter)).toEqual([]);
    expect(JSON.parse(apiKeyFilterConfig(KEY)).resources[0].typed_config.credentials[0].key).toBe(KEY);
    // The checks can fail: another name, another type, no key, two resources.
    const good = JSON.parse(apiKeyFilterConfig(KEY));
    const variant = (change: (f: any) => void) => {
      const copy = structuredClone(good);
      change(copy);
      return validateExtensionConfigFile(JSON.stringify(copy), filter).join("\n");
    };
    expect(variant((f) => (f.resources[0].name = "other"))).toContain('resources[0].name: "other", but the filter is "rbln-serving-api-key"');
    expect(variant((f) => (f.resources[0].typed_config = { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" }))).toContain(
      "is not a type the filter takes",
    );
    expect(variant((f) => (f.resources[0].typed_config.credentials[0].key = ""))).toContain("credentials[0].key");
    expect(variant((f) => f.resources.push(f.resources[0]))).toContain("exactly one");
    expect(validateEnvoyBootstrap(renderWithKey(edge()).files["envoy/envoy.yaml"]!.replace("api_key_auth.v3.ApiKeyAuth", "api_key_auth.v3.Nothing"))).toEqual([
      expect.stringContaining("is not an HTTP filter"),
    ]);
  });

  it("hands the key to the router host only as the apply step's secret stdin: no input pulumi preview shows holds it", async () => {
    const { registrations, error } = await runUnderMocks(runProgram, edge(), WITH_KEY);
    expect(error).toBeUndefined();
    const apply = registrations.find((r) => r.name === "rbln-serving-edge-router-front-door-apply")!;
    expect(isSecretAt(apply.wireInputs, ["stdin"])).toBe(true);
    expect(JSON.parse(apply.inputs.stdin).resources[0].typed_config.credentials[0].key).toBe(KEY);
    // Every input of every resource, each secret replaced by a mark: the key is in none.
    const visible = (wire: unknown): unknown =>
      Array.isArray(wire)
        ? wire.map(visible)
        : wire !== null && typeof wire === "object"
          ? isSecretAt(wire, [])
            ? "<secret>"
            : Object.fromEntries(Object.entries(wire).map(([k, v]) => [k, visible(v)]))
          : wire;
    for (const r of registrations) {
      const text = JSON.stringify(visible(r.wireInputs));
      for (const part of [KEY, JSON.stringify(KEY).slice(1, -1)]) expect(text.includes(part), r.name).toBe(false);
    }
  });

  it("without apiKey, has no key filter and reads no stdin; the headers only the EPP may set are removed either way", async () => {
    const door = render(edge()).hosts!.frontDoor!.routers[0]!;
    expect(httpFilters(door.files["envoy/envoy.yaml"]!).map((f) => f.name)).toEqual([
      "envoy.filters.http.header_mutation",
      "envoy.filters.http.ext_proc",
      "envoy.filters.http.router",
    ]);
    expect(door.apiKeyConfig).toBeNull();
    expect(door.files["envoy/api-key.json"]).toBeUndefined();
    expect(door.applyScript).toContain("\napi_key=false\n");
    const mutation = parseYaml(door.files["envoy/envoy.yaml"]!).static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0];
    expect(mutation.typed_config.mutations).toEqual({ request_mutations: [{ remove: "x-gateway-destination-endpoint" }, { remove: "x-prefiller-host-port" }] });
    const { registrations } = await runUnderMocks(runProgram, edge(), SECRETS);
    expect(registrations.find((r) => r.name === "rbln-serving-edge-router-front-door-apply")!.inputs.stdin).toBeUndefined();
  });
});
