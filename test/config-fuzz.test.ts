import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import fc from "fast-check";
import { stringify } from "yaml";
import { describe, expect, it } from "vitest";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { stackDeployment } from "../cli/commands";
import { planServing } from "../components/modelServing";
import { ConfigError } from "../core/errors";
import { allSelections } from "../core/plan/resolve";
import { renderStackFiles } from "./helpers/render";
import { isEnvFileValue } from "../core/render/hosts/systemd";
import { readStackConfig, runProgram } from "../program";
import { hostileString } from "./helpers/arbitraries";
import { runUnderMocks } from "./helpers/pulumiHarness";
import { minimax, shippedCatalog } from "./helpers/recipes";

const SECRETS = { sshPrivateKey: "k" };
const selections = [...allSelections(minimax)];
const nodesOf = (strategy: string) => (minimax.strategies.find((s) => s.slug === strategy)!.nodes === null ? 1 : 2);
const rolesOf = (strategy: string) => minimax.strategies.find((s) => s.slug === strategy)!.options[0]!.grid.base.map((b) => b.role);

/** Stack configs the program must accept: every verified selection, either platform where allowed, extras, replicas. */
const validConfig = fc
  .record({
    selection: fc.constantFrom(...selections),
    replicas: fc.integer({ min: 1, max: 3 }),
    kubernetes: fc.boolean(),
    preset: fc.boolean(),
    extraEnvValue: fc.option(
      hostileString.filter((v) => isEnvFileValue(v) && !v.includes("\0")),
      { nil: undefined },
    ),
    extraArgs: fc.option(fc.constantFrom(["--max-log-len", "100"], ["--max-num-seqs", "2"], ["--no-enable-log-requests"]), { nil: undefined }),
    version: fc.option(fc.constantFrom("0.12.1", "0.13.0rc1"), { nil: undefined }),
    user: fc.option(fc.constantFrom("root", "ubuntu"), { nil: undefined }),
    image: fc.constantFrom("registry.example.com/vllm-rbln:0.12.0", "registry.example.com:5000/ml/vllm-rbln:0.12.0-RC1", `vllm-rbln@sha256:${"ab".repeat(32)}`),
    hostKeyComment: fc.constantFrom("", " root@npu-0", " rotated 2026 (é)"),
  })
  .map((v) => {
    const { strategy, target, axes } = v.selection;
    const platform = v.kubernetes || nodesOf(strategy) > 1 ? "kubernetes" : "hosts";
    const role = rolesOf(strategy)[0]!;
    const recommended = minimax.strategies.find((s) => s.slug === strategy)!.options.find((o) => o.target === target)!.grid.recommended;
    const config: Record<string, unknown> = { strategy, target, axes, platform, replicas: v.replicas };
    if (v.preset && recommended) config.preset = "recommended";
    if (platform === "hosts") {
      config.hosts = Array.from({ length: nodesOf(strategy) * v.replicas }, (_, i) => ({
        name: `npu-${i}`,
        address: `10.0.0.${i + 1}`,
        hostKey: EXAMPLE_HOST_KEY + v.hostKeyComment,
        ...(v.user ? { user: v.user } : {}),
      }));
    } else {
      config.kubernetes = { image: v.image, namespace: "serving" };
    }
    if (v.extraEnvValue !== undefined) config.extraEnv = { [role]: { EXTRA_NOTE: v.extraEnvValue } };
    if (v.extraArgs) config.extraArgs = { [role]: v.extraArgs };
    if (v.version) config.versions = { vllmRbln: v.version };
    return config;
  });

type Mutation = [keyPrefix: string, mutate: (c: any) => void];
const set =
  (path: string, value: unknown): ((c: any) => void) =>
  (c) => {
    const parts = path.split(".");
    let node = c;
    for (const part of parts.slice(0, -1)) node = node[part];
    node[parts[parts.length - 1]!] = value;
  };

/** Ways a stack config goes wrong, each with the key path the refusal must name. */
const mutations: Mutation[] = [
  ["strategy", set("strategy", 42)],
  ["strategy", set("strategy", "")],
  ["strategy", set("strategy", "tensor-parallel")],
  ["strategy", (c) => delete c.strategy],
  ["target", (c) => delete c.target],
  ["target", set("target", "Fastest")],
  ["target", set("target", ["Latency"])],
  ["model", set("model", "")],
  ["model", set("model", "acme/unknown")],
  ["replicas", set("replicas", "many")],
  ["replicas", set("replicas", 0)],
  ["replicas", set("replicas", 1.5)],
  ["platform", set("platform", "slurm")],
  ["colour", set("colour", "blue")],
  ["axes", set("axes", ["lmcache"])],
  ["axes.lmcache", (c) => (c.axes = { ...c.axes, lmcache: "bogus" })],
  ["axes.spec_decode", (c) => (c.axes = { ...c.axes, spec_decode: "mtp" })],
  ["axes.kv_connector", (c) => (c.axes = { ...c.axes, kv_connector: "lmcache_cpu" })],
  ["axes.colour", (c) => (c.axes = { ...c.axes, colour: "red" })],
  ["preset", set("preset", "fastest")],
  ["versions.vllm", set("versions", { vllm: "0.30.0" })],
  ["versions.vllmRbln", set("versions", { vllmRbln: "1.0; rm -rf /" })],
  ["installRoot", set("installRoot", "")],
  ["installRoot", set("installRoot", "relative/path")],
  ["cacheRoot", set("cacheRoot", "/var/lib/../../etc")],
  ["minFreeDiskGb", set("minFreeDiskGb", -5)],
  ["extraArgs", set("extraArgs", { nope: ["--x"] })],
  ["extraEnv", set("extraEnv", { nope: { X: "1" } })],
  ["pip.indexUrl", set("pip", { indexUrl: "ftp://mirror/simple" })],
  ["pip.user", set("pip", { user: "alice" })],
  ["extraEnv", set("extraEnv", { main: { BELL: "ring\u0007" } })],
  ["extraArgs", set("extraArgs", { main: ["--x", "nul\u0000byte"] })],
  ["cacheRoot", set("cacheRoot", "/tmp")],
  ["cacheRoot", (c) => (c.installRoot = "/var/lib/rbln-serving/install")],
  ["pip.indexUrl", set("pip", { indexUrl: "https://alice:hunter2@mirror.example.com/simple" })],
  ["pip.indexUrl", set("pip", { indexUrl: "https://host name/" })],
  ["pip.extraIndexUrls", set("pip", { extraIndexUrls: ["https://alice:hunter2@host name/"] })],
  ["pip.indexUrl", set("pip", { indexUrl: "ftp://alice:hunter2@mirror.example.com/simple" })],
  ["versions.vllmRbln", set("versions", { vllmRbln: "1".padEnd(260, "0") })],
  ["__proto__", (c) => Object.defineProperty(c, "__proto__", { value: { replicas: 2 }, enumerable: true, writable: true, configurable: true })],
  ["axes.__proto__", (c) => (c.axes = JSON.parse('{"__proto__": {"lmcache": "cpu"}}'))],
  ["extraEnv", (c) => (c.extraEnv = JSON.parse(`${'{"main":'.repeat(100)}{}${"}".repeat(100)}`))],
  ["router.images.proxy", set("router", { images: { proxy: "me:hunter2@registry.example.com/envoy:1" } })],
  ["router.images.sidecar", set("router", { images: { sidecar: "a::::b//c@@" } })],
  ["autoscaling.prometheusAddress", set("autoscaling", { prometheusAddress: "https://me:hunter2@prometheus.example.com:9090" })],
  ["pip.username", set("pip", { username: "me:hunter2" })],
  ["compile.registry.username", set("compile", { registry: { repository: "registry.example.com/c", username: "me:hunter2" } })],
  ["extraEnv", (c) => (c.extraEnv = { [rolesOf(c.strategy)[0]!]: { "A\nB": "1" } })],
  ["extraEnv", (c) => (c.extraEnv = { [rolesOf(c.strategy)[0]!]: { HF_HOME: "/elsewhere" } })],
  ["extraEnv", (c) => (c.extraEnv = { [rolesOf(c.strategy)[0]!]: { HF_HUB_OFFLINE: "0" } })],
];
const hostMutations: Mutation[] = [
  ["hosts", set("hosts", "npu-0")],
  ["hosts", (c) => c.hosts.pop()],
  ["hosts", (c) => c.hosts.push({ name: "spare", address: "10.9.9.9", hostKey: EXAMPLE_HOST_KEY })],
  ["hosts[0].port", (c) => (c.hosts[0].port = 0)],
  ["hosts[0].port", (c) => (c.hosts[0].port = 70000)],
  ["hosts[0].port", (c) => (c.hosts[0].port = "22")],
  ["hosts[0].name", (c) => (c.hosts[0].name = "")],
  ["hosts[0].name", (c) => (c.hosts[0].name = "Bad Name")],
  ["hosts[0].address", (c) => delete c.hosts[0].address],
  ["hosts[0].address", (c) => (c.hosts[0].address = "10.0.0.1; reboot")],
  ["hosts[0].extra", (c) => (c.hosts[0].extra = true)],
  ["hosts[0].user", (c) => (c.hosts[0].user = "")],
  ["hosts[0].hostKey", (c) => (c.hosts[0].hostKey = "10.0.0.1 ssh-ed25519 AAAA")],
  ["insecureSkipHostKeyCheck", (c) => (c.insecureSkipHostKeyCheck = "yes")],
  ["hosts[1].name", (c) => c.hosts.push({ ...c.hosts[0], address: "10.8.8.8" }) && c.hosts.splice(1, 0, c.hosts.pop())],
  ["hosts[1].address", (c) => c.hosts.push({ ...c.hosts[0], name: "dup" }) && c.hosts.splice(1, 0, c.hosts.pop())],
  ["extraArgs.main", (c) => (c.extraArgs = { main: ["--data-parallel-size", "8"] })],
  ["extraArgs.main", (c) => (c.extraArgs = { main: ["--port=9000"] })],
  ["extraEnv.main.RBLN_VISIBLE_DEVICES", (c) => (c.extraEnv = { main: { RBLN_VISIBLE_DEVICES: "0" } })],
  ["prefillReplicas", set("prefillReplicas", 2)],
  ["hosts[0].hostKey", (c) => delete c.hosts[0].hostKey],
  ["hosts[0].hostKey", (c) => (c.hosts[0].hostKey = `10.0.0.1 ${c.hosts[0].hostKey}`)],
  ["extraArgs.main", (c) => (c.extraArgs = { main: ["-dp", "8"] })],
  ["extraArgs.main", (c) => (c.extraArgs = { main: ["--tensor_parallel_size=2"] })],
  ["extraArgs.main", (c) => (c.extraArgs = { main: ["--disable-log-requests"] })],
  ["extraArgs.main", (c) => (c.extraArgs = { main: ["--shutdown-time", "0"] })],
  ["extraArgs.main", (c) => (c.extraArgs = { main: ["--max-num", "8"] })],
  ["extraEnv.main.HF_HUB_TOKEN", (c) => (c.extraEnv = { main: { HF_HUB_TOKEN: "hf_x" } })],
  ["extraEnv.main.BASH_ENV", (c) => (c.extraEnv = { main: { BASH_ENV: "/tmp/x" } })],
  ["minFreeDiskGb", set("minFreeDiskGb", 10)],
  ["pip.indexUrl", set("pip", { username: "u", indexUrl: "http://mirror.example.com/simple" })],
  ["pip.extraIndexUrls[0]", set("pip", { username: "u", extraIndexUrls: ["http://pypi.rbln.ai/simple"] })],
  ["hosts[0].hostKey", (c) => (c.hosts[0].hostKey = `${c.hosts[0].hostKey} root@npu\u001b[2J`)],
  ["hosts[0].proxy.hostKey", (c) => (c.hosts[0].proxy = { address: "10.9.0.1", hostKey: `${c.hosts[0].hostKey} \r` })],
  ["extraEnv.main.VLLM_CACHE_ROOT", (c) => (c.extraEnv = { main: { VLLM_CACHE_ROOT: "/tmp" } })],
  [
    "hosts[1].address",
    (c) => {
      c.replicas = 2;
      c.hosts = [c.hosts[0], { ...c.hosts[0], name: "dup", port: 2222 }];
    },
  ],
  [
    "hosts[1].address",
    (c) => {
      c.replicas = 2;
      c.hosts = [
        { ...c.hosts[0], address: "npu-a.example.com" },
        { ...c.hosts[0], name: "dup", address: "NPU-A.example.com", port: 2222 },
      ];
      c.cache = { shared: "/mnt/rbln-cache" };
    },
  ],
  [
    "hosts[1].address",
    (c) => {
      c.replicas = 2;
      c.hosts = [
        { ...c.hosts[0], address: "fd00::a" },
        { ...c.hosts[0], name: "dup", address: "fd00:0::a" },
      ];
    },
  ],
  [
    "hosts[1].listenAddress",
    (c) => {
      c.replicas = 2;
      c.hosts = [
        { ...c.hosts[0], listenAddress: "10.7.7.7" },
        { ...c.hosts[0], name: "dup", address: "10.0.0.99", listenAddress: "10.7.7.7" },
      ];
    },
  ],
];
const kubernetesMutations: Mutation[] = [
  ["kubernetes.image", (c) => delete c.kubernetes.image],
  ["kubernetes.namespace", (c) => (c.kubernetes.namespace = "Not_A_Namespace")],
  ["kubernetes.provider", (c) => (c.kubernetes.provider = "nginx")],
  ["kubernetes.nodeSelector", (c) => (c.kubernetes.nodeSelector = { "bad key!": "x" })],
  ["kubernetes.gateway.name", (c) => (c.kubernetes.gateway = { name: "" })],
  ["kubernetes.storageClass", (c) => (c.kubernetes.storageClass = 7)],
  ["kubernetes.weightsVolumeSize", (c) => (c.kubernetes.weightsVolumeSize = "10Gi")],
  ["kubernetes.weightsVolumeSize", (c) => (c.kubernetes.weightsVolumeSize = "0Gi")],
  ["kubernetes.compileCacheVolumeSize", (c) => (c.kubernetes.compileCacheVolumeSize = "0Ti")],
  ["kubernetes.resources", (c) => (c.kubernetes.resources = { [rolesOf(c.strategy)[0]!]: { requests: { cpu: "0" } } })],
  ["kubernetes.sidecarResources.requests.memory", (c) => (c.kubernetes.sidecarResources = { requests: { memory: "0Mi" } })],
  ["router.pickerResources.requests.cpu", (c) => (c.router = { pickerResources: { requests: { cpu: "0m" } } })],
  ["kubernetes.image", (c) => (c.kubernetes.image = "a::::b//c@@")],
  ["kubernetes.image", (c) => (c.kubernetes.image = "Registry.example.com/VLLM:1")],
  ["kubernetes.namespace", (c) => (c.kubernetes.namespace = "kube-system")],
  ["kubernetes.namespace", (c) => (c.kubernetes.namespace = "default")],
  ["kubernetes.namespace", (c) => (c.kubernetes.namespace = "kube-serving")],
  ["kubernetes.extra", (c) => (c.kubernetes.extra = 1)],
  ["platform", (c) => (c.platform = "nope")],
  // On hosts the disaggregated strategy needs the front door's server; any strategy refuses one that names no host.
  [
    "router.host",
    (c) => {
      c.platform = "hosts";
      if (c.strategy === "prefill-decode-disaggregated") {
        c.hosts = [
          { name: "a", address: "10.0.0.1", hostKey: EXAMPLE_HOST_KEY },
          { name: "b", address: "10.0.0.2", hostKey: EXAMPLE_HOST_KEY },
        ];
      } else {
        c.hosts ??= [{ name: "a", address: "10.0.0.1", hostKey: EXAMPLE_HOST_KEY }];
        c.router = { host: "no-such-host" };
      }
    },
  ],
];

const invalidConfig = validConfig.chain((config) =>
  fc.constantFrom(...mutations, ...(config.platform === "hosts" ? hostMutations : kubernetesMutations)).map(([key, mutate]) => {
    const broken = structuredClone(config);
    mutate(broken);
    return { config: broken, key };
  }),
);

/** The config's plan, or its refusal; anything but a ConfigError is thrown. */
function planOrRefusal(config: Record<string, unknown>): { deployment: ReturnType<typeof planServing> } | { error: ConfigError } {
  try {
    return { deployment: planServing({ settings: config as never, secrets: SECRETS }) };
  } catch (error) {
    if (error instanceof ConfigError) return { error };
    throw error;
  }
}

describe("config fuzzing", () => {
  it("accepts and renders every valid config; refuses every broken one with a one-line ConfigError naming the key path", () => {
    let valid = 0;
    let invalid = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          validConfig.map((config) => ({ config, key: null as string | null })),
          invalidConfig,
        ),
        ({ config, key }) => {
          const planned = planOrRefusal(config);
          const error = "error" in planned ? planned.error : null;
          if (key === null) {
            expect(error).toBeNull();
            expect(Object.keys(renderStackFiles((planned as { deployment: ReturnType<typeof planServing> }).deployment, [], "dev")).length).toBeGreaterThan(0);
            valid++;
          } else {
            expect(error, `${key}: ${JSON.stringify(config)}`).toBeInstanceOf(ConfigError);
            expect(error!.key.startsWith(key) || key.startsWith(error!.key), `expected ${key}, got ${error!.message}`).toBe(true);
            expect(error!.message).not.toContain("\n");
            expect(error!.message).not.toContain("hunter2");
            invalid++;
          }
        },
      ),
      { numRuns: 10_000, seed: 20261130 },
    );
    expect(valid).toBeGreaterThan(2000);
    expect(invalid).toBeGreaterThan(2000);
    // 10,000 plans and renders (host-to-host copy scripts included) take about 55 s on a quiet 2-core machine, 120 s on a busy one.
  }, 300_000);

  it("registers no resource for a refused config", async () => {
    for (const { config } of fc.sample(invalidConfig, { numRuns: 25, seed: 5 })) {
      const { registrations, error } = await runUnderMocks(runProgram, config, SECRETS);
      expect(error).toBeInstanceOf(Error);
      expect(registrations).toEqual([]);
    }
  });
});

/** A value in another form a stack may give it: as it is, its JSON text, a wrong type, or a map with a `__proto__` key. */
function otherForm(value: unknown) {
  const withPrototypeKey =
    value !== null && typeof value === "object" && !Array.isArray(value)
      ? JSON.parse(JSON.stringify(value).replace(/^\{/, `{"__proto__": {"replicas": 2}${Object.keys(value).length > 0 ? "," : ""}`))
      : value;
  return fc.oneof(
    { weight: 8, arbitrary: fc.constant(value) },
    { weight: 4, arbitrary: fc.constant(typeof value === "string" ? value : JSON.stringify(value)) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(5, 1.5, true, "x", "", [], {}, null, "[true]", '{"a": 1}', "5") },
    { weight: 1, arbitrary: fc.constant(withPrototypeKey) },
    { weight: 1, arbitrary: fc.constant(JSON.stringify(withPrototypeKey)) },
  );
}

/** Stack configs in every form: each key's value as it is or in otherForm, sometimes with a top-level `__proto__` key. */
const configInAnyForm = fc.oneof({ weight: 3, arbitrary: validConfig }, { weight: 1, arbitrary: invalidConfig.map(({ config }) => config) }).chain((config) =>
  fc
    .tuple(fc.tuple(...Object.entries(config).map(([key, value]) => otherForm(value).map((form) => [key, form] as const))), fc.integer({ min: 0, max: 9 }))
    .map(([entries, one]) => {
      const prototypeKey = one === 0;
      const reformed: Record<string, unknown> = Object.fromEntries(entries);
      if (prototypeKey) Object.defineProperty(reformed, "__proto__", { value: '{"replicas": 2}', enumerable: true, writable: true, configurable: true });
      return reformed;
    }),
);

/** A plan, or the line of the ConfigError that refused the config. */
function outcome(run: () => unknown): { plan: unknown } | { refusal: string } {
  try {
    return { plan: run() };
  } catch (error) {
    if (error instanceof ConfigError) return { refusal: error.message };
    throw error;
  }
}

describe("the program and the offline commands", () => {
  it("read a stack file alike: the same plan or the same refusal, for objects, their JSON text, wrong types and prototype keys", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stacks-alike-"));
    let stacks = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(configInAnyForm, async (config) => {
        const name = `alike-${stacks++}`;
        const entries = Object.fromEntries(Object.entries(config).map(([key, value]) => [`rbln-serving:${key}`, value]));
        fs.writeFileSync(
          path.join(dir, `Pulumi.${name}.yaml`),
          stringify({ config: { ...entries, "rbln-serving:sshPrivateKey": { secure: "v1:AAAAciphertext" } } }),
        );
        const offline = outcome(() => stackDeployment({}, shippedCatalog, name, dir).deployment.plan);
        // The program's path: its reading of Pulumi's config, then ModelServing's validation and plan.
        const program = await runUnderMocks(() => outcome(() => planServing(readStackConfig()).plan), config, SECRETS);
        expect(program.error).toBeUndefined();
        expect(program.result, JSON.stringify(config)).toEqual(offline);
        if ("refusal" in offline) refused++;
      }),
      { numRuns: 400, seed: 20261201 },
    );
    // Both kinds of outcome come up often.
    expect(refused).toBeGreaterThan(100);
    expect(stacks - refused).toBeGreaterThan(30);
  }, 300_000);
});
