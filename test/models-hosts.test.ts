import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { runCommand } from "../cli/commands";
import { ModelServing } from "../components/modelServing";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { stackPortInventory } from "../core/plan/ports";
import { modelEppPorts, modelEppSlots } from "../core/plan/ports";
import { planStack } from "../core/plan/stack";
import { renderStackFiles } from "../core/render/files";
import { hostStatusReads } from "../core/render/hosts/statusRead";
import { modelInstance, renderStack } from "../core/render/stack";
import { validateEnvoyWithDiscovery } from "./helpers/envoyBootstrap";
import { validateEndpointPickerConfig } from "./helpers/eppConfig";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { ofType, runUnderMocks, stdoutRef } from "./helpers/pulumiHarness";
import { catalogWithSecondModel, SECOND_MODEL, shippedCatalog } from "./helpers/recipes";
import { shellcheckFindings, systemdExecArgv, unitComplaints } from "./helpers/systemdOracle";

// A stack of models on hosts (issue 30): one front door per router host, whose Envoy routes by the
// body's model, and per model its own EPP (own ports), endpoints agent and folder; the program registers
// one front door's steps per router host, which each model's hosts drain through.

const catalog = catalogWithSecondModel();
const host = (name: string, last: number) => ({ name, address: `10.0.0.${last}`, hostKey: EXAMPLE_HOST_KEY });
const HOSTS = [host("npu-a", 11), host("npu-b", 12), host("npu-c", 13)];
const DOOR = { name: "door", address: "10.0.0.10", hostKey: EXAMPLE_HOST_KEY };
const chat = { name: "chat", strategy: "aggregated-data-expert-parallel", target: "Latency", hosts: ["npu-a"] };
const tiny = {
  name: "tiny",
  model: SECOND_MODEL,
  strategy: "two-role",
  target: "Latency",
  servedNames: ["tiny-chat", SECOND_MODEL],
  hosts: ["npu-b", "npu-c"],
};
const stack = (changes: Record<string, unknown> = {}): Record<string, unknown> => ({
  platform: "hosts",
  hosts: HOSTS,
  router: { host: DOOR },
  models: [chat, tiny],
  ...changes,
});
const SECRETS = { sshPrivateKey: "key", hfToken: "hf", apiKey: "api" };

const render = (settings: Record<string, unknown>) =>
  renderStack(planStack(parseStackSettings(settings), catalog), { stack: "dev", instance: "rbln-serving", secrets: ["sshPrivateKey", "apiKey"] });

describe("the front door of a stack of models on hosts, rendered", () => {
  const rendered = render(stack());
  const files = renderStackFiles(rendered);
  const router = "hosts/door/front-door";

  it("is one front door on the router host: one Envoy, and per model an EPP and an agent named after the model", () => {
    expect(rendered.frontDoor!.routers.map((r) => r.host.name)).toEqual(["door"]);
    for (const model of rendered.models) expect(model.hosts!.frontDoor!.routers).toEqual([]);
    expect(
      Object.keys(files)
        .filter((f) => f.startsWith(`${router}/systemd/`))
        .map((f) => path.basename(f))
        .sort(),
    ).toEqual([
      "rbln-serving-dev.front-door-proxy.service",
      "rbln-serving-dev.rbln-serving-chat.front-door-agent.service",
      "rbln-serving-dev.rbln-serving-chat.front-door-epp.service",
      "rbln-serving-dev.rbln-serving-tiny.front-door-agent.service",
      "rbln-serving-dev.rbln-serving-tiny.front-door-epp.service",
    ]);
    expect(Object.keys(files).filter((f) => f.includes("front-door/") && !f.startsWith(router))).toEqual([]);
  });

  it("gives each model's EPP its own ports, pool and folder, and its agent its own folder", () => {
    const argv = (model: string) => systemdExecArgv(files[`${router}/systemd/rbln-serving-dev.rbln-serving-${model}.front-door-epp.service`]!);
    expect(argv("chat")).toEqual(
      expect.arrayContaining(["127.0.0.1:20378:20378", "127.0.0.1:20379:20379", "0.0.0.0:21189:21189", "--pool-name=dev.rbln-serving-chat"]),
    );
    expect(argv("chat")).toContain("/opt/rbln-serving/router/dev.rbln-serving-chat/epp:/etc/epp:ro,z");
    expect(argv("tiny")).toEqual(
      expect.arrayContaining([
        "127.0.0.1:20002:20002",
        "127.0.0.1:20003:20003",
        "0.0.0.0:21001:21001",
        "--grpc-port=20002",
        "--pool-name=dev.rbln-serving-tiny",
      ]),
    );
    expect(files[`${router}/systemd/rbln-serving-dev.rbln-serving-tiny.front-door-agent.service`]).toContain(
      " agent /opt/rbln-serving/router/dev.rbln-serving-tiny\n",
    );
    const desired = (model: string) => JSON.parse(files[`${router}/models/${model}/desired.json`]!).endpoints.map((e: { name: string }) => e.name);
    expect([desired("chat"), desired("tiny")]).toEqual([["npu-a-main-0"], ["npu-b-front-0", "npu-c-back-0"]]);
    for (const model of ["chat", "tiny"]) expect(validateEndpointPickerConfig(files[`${router}/models/${model}/epp/epp.yaml`]!)).toEqual([]);
  });

  it("routes each served name to its model's EPP in the one Envoy's routes and clusters files, which Envoy v1.37's API takes", () => {
    const envoy = {
      bootstrap: files[`${router}/envoy/envoy.yaml`]!,
      routes: files[`${router}/envoy/routes.yaml`]!,
      clusters: files[`${router}/envoy/clusters.yaml`]!,
    };
    expect(validateEnvoyWithDiscovery(envoy)).toEqual([]);
    const routes = parseYaml(envoy.routes).resources[0].virtual_hosts[0].routes;
    const toEpp = routes
      .filter((r: any) => r.match.headers?.[0]?.name === "x-gateway-base-model-name")
      .map((r: any) => [
        r.match.headers[0].string_match.exact,
        r.typed_per_filter_config["envoy.filters.http.ext_proc"].overrides.grpc_service.envoy_grpc.cluster_name,
      ]);
    expect(toEpp).toEqual([
      ["MiniMaxAI/MiniMax-M2.7", "epp-chat"],
      ["tiny-chat", "epp-tiny"],
      [SECOND_MODEL, "epp-tiny"],
    ]);
    // Each model's EPP cluster reaches that model's EPP, on its own gRPC port.
    const clusters = parseYaml(envoy.clusters).resources;
    expect(clusters.map((c: any) => [c.name, c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value])).toEqual([
      ["epp-chat", 20378],
      ["epp-tiny", 20002],
    ]);
  });

  it("hands each host a key into its own model's folder only", () => {
    const access = rendered.frontDoor!.routers[0]!.access;
    expect(access.map((a) => a.host)).toEqual(["npu-a", "npu-b", "npu-c"]);
    expect(access[0]!.accessScript).toContain("state_dir=/opt/rbln-serving/router/dev.rbln-serving-chat\n");
    expect(access[1]!.accessScript).toContain("state_dir=/opt/rbln-serving/router/dev.rbln-serving-tiny\n");
  });

  it("labels each model's EPP scrape target with its model, on its own metrics port", () => {
    const targets = JSON.parse(files["prometheus/targets.json"]!).filter((t: any) => t.labels.role === "endpoint-picker");
    expect(targets.map((t: any) => [t.targets[0], t.labels.model])).toEqual([
      ["10.0.0.10:21189", "chat"],
      ["10.0.0.10:21001", "tiny"],
    ]);
  });

  it("status reads each model's ranks by the units its render names, and its drains in its own folder on the router host", () => {
    rendered.models.forEach((model) => {
      const reads = hostStatusReads(model.deployment, "dev", modelInstance("rbln-serving", model.deployment));
      const spec = (script: string) => JSON.parse(JSON.parse(/json\.loads\(("(?:[^"\\]|\\.)*")\)/.exec(script)![1]!));
      const read = reads.hosts.flatMap((h) => spec(h.script).ranks.map((r: { unit: string }) => r.unit)).sort();
      const units = model.hosts!.waves.flat().flatMap((placement) => placement.ranks.map((r) => r.unitName));
      expect(read).toEqual(units.sort());
      expect(reads.routers.map((r) => [r.host.name, spec(r.script).drainsDir])).toEqual([
        ["door", `/opt/rbln-serving/router/dev.rbln-serving-${model.deployment.entry.name}/drains`],
      ]);
    });
  });

  it("its units pass systemd-analyze verify (but for the container runtime) and its scripts shellcheck", () => {
    const units = Object.entries(files).filter(([name]) => name.startsWith(`${router}/systemd/`));
    expect(units).toHaveLength(5);
    expect(unitComplaints(units, /\/usr\/bin\/podman|Failed to prepare filename|is not executable: No such file or directory/)).toEqual([]);
    const scripts = Object.entries(files).filter(([name]) => name.startsWith(router) && name.endsWith(".sh"));
    expect(scripts.length).toBeGreaterThan(5);
    expect(shellcheckFindings(scripts)).toBe("");
  });

  it("puts every model behind each of several router hosts: each model's EPP falls back to the peer's EPP of that model", () => {
    const two = { hosts: [DOOR, { ...DOOR, name: "door-2", address: "10.0.0.20" }], virtualAddress: "10.0.0.100" };
    const ha = render(stack({ router: two }));
    const haFiles = renderStackFiles(ha);
    expect(ha.frontDoor!.routers.map((r) => r.host.name)).toEqual(["door", "door-2"]);
    expect(ha.frontDoor!.tls!.steps.map((s) => s.router)).toEqual(["door", "door-2"]);
    expect(ha.frontDoor!.urls).toEqual(["http://10.0.0.100:8080"]);
    for (const [router, peer] of [
      ["door", "10.0.0.20"],
      ["door-2", "10.0.0.10"],
    ] as const) {
      const read = (file: string) => haFiles[`hosts/${router}/front-door/envoy/${file}`]!;
      const envoy = { bootstrap: read("envoy.yaml"), routes: read("routes.yaml"), clusters: read("clusters.yaml") };
      expect(validateEnvoyWithDiscovery(envoy)).toEqual([]);
      const clusters = parseYaml(envoy.clusters).resources;
      expect(clusters.map((c: any) => c.name)).toEqual([
        "epp-chat",
        "epp-chat-local",
        "epp-chat-local-health",
        "epp-tiny",
        "epp-tiny-local",
        "epp-tiny-local-health",
      ]);
      // Each model's failover cluster: this host's EPP of that model at priority 0, the peer's at 1, health checked by the model's authority.
      for (const [model, port] of [
        ["chat", 20378],
        ["tiny", 20002],
      ] as const) {
        const c = clusters.find((x: any) => x.name === `epp-${model}`);
        expect(c.load_assignment.endpoints.map((e: any) => [e.priority, e.lb_endpoints[0].endpoint.address.socket_address])).toEqual([
          [0, { address: "127.0.0.1", port_value: port }],
          [1, { address: peer, port_value: 9443 }],
        ]);
        expect(c.health_checks[0].grpc_health_check.authority).toBe(`epp-${model}`);
      }
      // The peer listener takes a stream to this host's EPP of the model its authority names.
      const peerRoutes = parseYaml(read("peer-routes.yaml")).resources[0];
      expect(peerRoutes.virtual_hosts.map((v: any) => [v.domains, v.routes.map((r: any) => r.route.cluster)])).toEqual([
        [["epp-chat"], ["epp-chat-local-health", "epp-chat-local"]],
        [["epp-tiny"], ["epp-tiny-local-health", "epp-tiny-local"]],
      ]);
      const bootstrap = parseYaml(envoy.bootstrap);
      expect(bootstrap.static_resources.listeners[1].filter_chains[0].filters[0].typed_config.rds.route_config_name).toBe("peer-epp");
      // Every model's route asks its model's EPP with the retry a peer's EPP takes over on.
      const override = parseYaml(envoy.routes).resources[0].virtual_hosts[0].routes[1].typed_per_filter_config["envoy.filters.http.ext_proc"].overrides;
      expect(override.grpc_service).toMatchObject({ envoy_grpc: { cluster_name: "epp-chat", authority: "epp-chat" }, retry_policy: { num_retries: 1 } });
      expect(haFiles[`hosts/${router}/front-door/keepalived/keepalived.conf`]).toContain("10.0.0.100");
    }
    const scripts = Object.entries(haFiles).filter(([name]) => name.startsWith("hosts/door") && name.endsWith(".sh"));
    expect(shellcheckFindings(scripts)).toBe("");
  });
});

it("the shipped stack multi-hosts renders one front door on its router host, carrying both models", () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "multi-hosts-"));
  try {
    const files = runCommand("render", { stack: "multi-hosts", out }, shippedCatalog)
      .trim()
      .split("\n")
      .map((file) => path.relative(out, file));
    const door = files.filter((f) => f.startsWith("hosts/multi-router/front-door/"));
    expect(door).toEqual(
      expect.arrayContaining(
        ["apply.sh", "envoy/envoy.yaml", "envoy/routes.yaml", "envoy/clusters.yaml", "models/chat/desired.json", "models/batch/desired.json"].map(
          (f) => `hosts/multi-router/front-door/${f}`,
        ),
      ),
    );
    expect(door.filter((f) => f.includes("access-")).sort()).toEqual(
      ["npu-multi-0", "npu-multi-1", "npu-multi-2"].map((h) => `hosts/multi-router/front-door/access-${h}.sh`),
    );
    const read = (file: string) => fs.readFileSync(path.join(out, "hosts/multi-router/front-door/envoy", file), "utf8");
    const envoy = { bootstrap: read("envoy.yaml"), routes: read("routes.yaml"), clusters: read("clusters.yaml") };
    expect(validateEnvoyWithDiscovery(envoy)).toEqual([]);
    for (const name of ["MiniMaxAI/MiniMax-M2.7", "minimax", "minimax-batch"]) expect(envoy.routes).toContain(`exact: ${name}\n`);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});

describe("the router host's ports in a stack of models", () => {
  const plan = (settings: Record<string, unknown>) => planStack(parseStackSettings(settings), catalog);
  const refused = (settings: Record<string, unknown>) => {
    try {
      plan(settings);
    } catch (error) {
      return (error as Error).message;
    }
    return "planned";
  };

  it("claims every model's EPP ports on the router host of the shipped stack multi-hosts, each named after its model", () => {
    const multi = planStack(parseStackSettings(readStackFile("multi-hosts").raw), shippedCatalog);
    const router = stackPortInventory(multi.models).filter((c) => c.server === "10.40.0.10");
    expect(router.map((c) => [c.port, c.owner])).toEqual([
      [22, "the SSH server of multi-router"],
      [8080, "the front door's listener (router.port)"],
      [20378, "model chat's endpoint picker (gRPC)"],
      [20379, "model chat's endpoint picker (health)"],
      [21189, "model chat's endpoint picker (metrics)"],
      [20656, "model batch's endpoint picker (gRPC)"],
      [20657, "model batch's endpoint picker (health)"],
      [21328, "model batch's endpoint picker (metrics)"],
      [9901, "the front door's envoyAdmin port"],
    ]);
  });

  it("claims in each model's name the ports its rendered EPP unit publishes", () => {
    const files = renderStackFiles(render(stack()));
    const claims = stackPortInventory(plan(stack()).models).filter((c) => c.server === "10.0.0.10");
    for (const model of ["chat", "tiny"]) {
      const argv = systemdExecArgv(files[`hosts/door/front-door/systemd/rbln-serving-dev.rbln-serving-${model}.front-door-epp.service`]!);
      const published = argv.filter((_, i) => argv[i - 1] === "--publish").map((spec) => Number(spec.split(":").at(-1)));
      expect(published).toHaveLength(3);
      for (const port of published)
        expect(claims.find((c) => c.port === port)?.owner, `${model} ${port}`).toMatch(new RegExp(`^model ${model}'s endpoint picker`));
    }
  });

  it("places each model's EPP by its name: taking a model out or adding one moves no other model's EPP ports", () => {
    const slots = (names: string[]) => Object.fromEntries(names.map((n, i) => [n, modelEppSlots(names)[i]]));
    const all = slots(["chat", "tiny", "batch"]);
    expect(slots(["tiny", "batch"])).toEqual({ tiny: all.tiny, batch: all.batch });
    expect(slots(["batch", "chat", "tiny"])).toEqual(all);
    expect(modelEppPorts(all.chat!)).toEqual({ eppGrpc: 20378, eppHealth: 20379, eppMetrics: 21189 });
    // Two names of one slot: the second takes the next free one; every slot's ports are distinct from every other's.
    const many = modelEppSlots(Array.from({ length: 500 }, (_, i) => `m${i}`));
    expect(new Set(many).size).toBe(500);
    const ports = many.flatMap((slot) => Object.values(modelEppPorts(slot)));
    expect(new Set(ports).size).toBe(1500);
    expect(Math.min(...ports)).toBe(20000);
    expect(Math.max(...ports)).toBe(21499);
  });

  it("refuses, in one line naming both owners, another port on the router host that the second model's EPP takes", () => {
    expect(refused(stack({ router: { host: DOOR, port: 20003 } }))).toBe(
      "router.port: 20003 would be both the front door's listener and model tiny's endpoint picker (health), on 10.0.0.10; choose another port",
    );
    expect(refused(stack({ router: { host: { ...DOOR, port: 21001 } } }))).toBe(
      "router.host: 21001 on 10.0.0.10 would be both model tiny's endpoint picker (metrics) and the SSH server of door; the front door's own ports are fixed: give that a port the front door leaves free, or the front door a server of its own",
    );
    // A router host shared with the first model's server: that server's SSH port.
    expect(refused(stack({ router: { host: "npu-a" }, hosts: [{ ...HOSTS[0], port: 20002 }, HOSTS[1], HOSTS[2]] }))).toBe(
      "router.host: 20002 on 10.0.0.11 would be both model tiny's endpoint picker (gRPC) and the SSH server of npu-a; the front door's own ports are fixed: give that a port the front door leaves free, or the front door a server of its own",
    );
    // The same ports are free for a stack of one model, whose one EPP takes 9002, 9003 and 9090 (without models, under their old names).
    expect(refused(stack({ router: { host: { ...DOOR, port: 20002 } }, models: [chat] }))).toBe("planned");
    const single = { platform: "hosts", hosts: [HOSTS[0]], strategy: chat.strategy, target: chat.target };
    expect(refused({ ...single, router: { host: { ...DOOR, port: 9004 } } })).toBe("planned");
    expect(refused({ ...single, router: { host: { ...DOOR, port: 9003 } } })).toBe(
      "router.host: 9003 on 10.0.0.10 would be both the front door's eppHealth port and the SSH server of door; the front door's own ports are fixed: give that a port the front door leaves free, or the front door a server of its own",
    );
  });
});

describe("a stack of models on hosts under the mock runtime", () => {
  it("registers one front door's steps per router host, which every model's hosts drain through", async () => {
    const { registrations, error } = await runUnderMocks(() => new ModelServing("rbln-serving", { settings: stack(), secrets: SECRETS, catalog }), {}, {});
    expect(error).toBeUndefined();
    expect(ofType(registrations, "rbln-serving:index:FrontDoor").map((r) => r.name)).toEqual(["rbln-serving-door-front-door"]);
    const commands = ofType(registrations, "command:remote:Command");
    const doorSteps = commands.filter((c) => c.name.startsWith("rbln-serving-door-front-door-")).map((c) => c.name);
    expect(doorSteps.sort()).toEqual(["apply", "access-npu-a", "access-npu-b", "access-npu-c"].map((s) => `rbln-serving-door-front-door-${s}`).sort());
    const apply = "rbln-serving-door-front-door-apply";
    for (const [unit, owner] of [
      ["rbln-serving-chat-npu-a-main-0", "npu-a"],
      ["rbln-serving-tiny-npu-b-front-0", "npu-b"],
      ["rbln-serving-tiny-npu-c-back-0", "npu-c"],
    ] as const) {
      const step = commands.find((c) => c.name === unit);
      expect(step, unit).toBeDefined();
      expect(
        step!.dependencies.some((d) => d.endsWith(`::${apply}`)),
        `${unit} after the front door`,
      ).toBe(true);
      expect(step!.inputs.stdin).toContain(stdoutRef(`rbln-serving-door-front-door-access-${owner}`));
    }
  });

  it("changing model tiny changes none of chat's resources", async () => {
    const registered = async (settings: Record<string, unknown>) => {
      const { registrations } = await runUnderMocks(() => new ModelServing("rbln-serving", { settings, secrets: SECRETS, catalog }), {}, {});
      return new Map(registrations.filter((r) => r.name.startsWith("rbln-serving-chat-")).map((r) => [r.urn, JSON.stringify([r.inputs, r.dependencies])]));
    };
    const before = await registered(stack());
    const after = await registered(stack({ models: [chat, { ...tiny, extraArgs: { front: ["--max-log-len", "100"] } }] }));
    expect(before.size).toBeGreaterThanOrEqual(5);
    expect([...after]).toEqual([...before]);
  });
});
