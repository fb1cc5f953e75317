import { describe, expect, it } from "vitest";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { endpointPickerConfig } from "../core/render/pickerConfig";
import { resolvePlan } from "../core/plan/resolve";
import configSchema from "./fixtures/llm-d-router-v0.10.0/config-schema.json";
import pluginFacts from "./fixtures/llm-d-router-v0.10.0/plugins.json";
import sidecarFacts from "./fixtures/llm-d-router-v0.10.0/sidecar-flags.json";
import eppFlags from "./fixtures/llm-d-router-v0.10.0/epp-flags.json";
import metricFacts from "./fixtures/llm-d-router-v0.10.0/metrics.json";
import { goParsesAsIPv4, validateEndpointPickerConfig, validateEndpointsFile } from "./helpers/eppConfig";
import { minimax } from "./helpers/recipes";

/* eslint-disable @typescript-eslint/no-explicit-any */

const ENDPOINTS_PATH = "/etc/epp/endpoints.yaml";

/** The recipe's P/D router intent as an EndpointPickerConfig, plus file discovery. */
function pdFileConfig(target: "Latency" | "Throughput" = "Throughput"): any {
  const plan = resolvePlan(minimax, { model: minimax.model, strategy: "prefill-decode-disaggregated", target });
  const config = parseYaml(endpointPickerConfig(plan.router!.values));
  config.plugins.push({ type: "file-discovery", parameters: { path: ENDPOINTS_PATH, watchFile: true } });
  config.dataLayer = { discovery: { pluginRef: "file-discovery" } };
  return config;
}

/** A plain one-profile config for the aggregated strategies: the chart's default plugins plus file discovery. */
function aggregatedFileConfig(): any {
  const config = structuredClone(configSchema.chartDefaultPlugins.config) as any;
  config.plugins.push({ name: "endpoints", type: "file-discovery", parameters: { path: ENDPOINTS_PATH, watchFile: true } });
  config.dataLayer = { discovery: { pluginRef: "endpoints" } };
  return config;
}

function check(config: unknown, options?: { allowExperimentalPlugins?: boolean }): string[] {
  return validateEndpointPickerConfig(stringifyYaml(config), options);
}

function mutate(config: any, change: (c: any) => void): any {
  const copy = structuredClone(config);
  change(copy);
  return copy;
}

const plugin = (config: any, type: string) => config.plugins.find((p: any) => p.type === type);

describe("the fixture", () => {
  it("lists the plugin types the recipe uses as registered at v0.10.0, with their stability", () => {
    const types = new Map(pluginFacts.types.map((t) => [t.type, t]));
    for (const type of [
      "prefix-based-pd-decider",
      "disagg-profile-handler",
      "prefill-filter",
      "decode-filter",
      "approx-prefix-cache-producer",
      "prefix-cache-scorer",
      "queue-scorer",
      "max-score-picker",
      "file-discovery",
      "single-profile-handler",
      "metrics-data-source",
      "core-metrics-extractor",
    ]) {
      expect(types.get(type)?.stability, type).toBe("beta");
    }
    expect(types.get("multicluster-file-discovery")?.stability).toBe("alpha");
    expect(pluginFacts.types.length).toBe(96);
  });

  it("carries a source with the pinned commit on every group", () => {
    const commit = "71f4f0999f95b96c49a9d0c4afbd18dfdb943c26";
    for (const facts of [configSchema, pluginFacts, sidecarFacts, eppFlags, metricFacts] as any[]) {
      expect(facts.source.commit).toBe(commit);
      expect(facts.source.repository).toBe("llm-d/llm-d-router");
      expect(facts.source.path).toMatch(/\S/);
    }
  });

  it("names the flow-control queue gauge and the gate that records it", () => {
    const queue = metricFacts.metrics.find((m) => m.name === "llm_d_epp_flow_control_queue_size")!;
    expect(queue.labels).toEqual(["fairness_id", "priority", "inference_pool", "model_name", "target_model_name"]);
    expect(queue.recordedOnlyWith).toMatch(/flowControl/);
    expect(configSchema.featureGates.registered).toEqual({ flowControl: { default: false }, haPopulateNonLeaderDatastore: { default: true } });
  });

  it("records the sidecar data-parallel port mapping", () => {
    expect(sidecarFacts.dataParallel.example).toEqual({
      args: ["--port=8000", "--model-server-port=8200", "--data-parallel-size=4"],
      listens: [8000, 8001, 8002, 8003],
      forwardsTo: ["localhost:8200", "localhost:8201", "localhost:8202", "localhost:8203"],
    });
    const flags = Object.fromEntries(sidecarFacts.flags.map((f) => [f.flag, f.default]));
    expect(flags["--secure-proxy"]).toBe(true);
    expect(flags["--kv-connector"]).toBe("nixlv2");
  });
});

describe("validateEndpointPickerConfig: configs we will ship", () => {
  it("accepts the recipe's P/D router intent with file discovery, for both targets", () => {
    expect(check(pdFileConfig("Throughput"))).toEqual([]);
    expect(check(pdFileConfig("Latency"))).toEqual([]);
  });

  it("accepts the plain single-profile config for the aggregated strategies", () => {
    expect(check(aggregatedFileConfig())).toEqual([]);
  });

  it("accepts the flowControl gate with nothing else added", () => {
    expect(check(mutate(pdFileConfig(), (c) => (c.featureGates = ["flowControl"])))).toEqual([]);
    expect(check(mutate(pdFileConfig(), (c) => (c.featureGates = ["flowControl=true", "haPopulateNonLeaderDatastore=false"])))).toEqual([]);
  });

  it("accepts a config without apiVersion and kind, as the decoder defaults them", () => {
    expect(
      check(
        mutate(aggregatedFileConfig(), (c) => {
          delete c.apiVersion;
          delete c.kind;
        }),
      ),
    ).toEqual([]);
  });

  it("accepts an explicit single-profile-handler, injectDefaults: false with listed sources, and parameters a factory ignores", () => {
    const config = mutate(aggregatedFileConfig(), (c) => {
      c.plugins.push({ type: "single-profile-handler", parameters: { anything: 1 } }, { type: "max-score-picker", parameters: { maxNumOfEndpoints: 1 } });
      c.schedulingProfiles[0].plugins.push({ pluginRef: "max-score-picker" });
      c.dataLayer.injectDefaults = false;
      c.dataLayer.sources = [{ pluginRef: "metrics-data-source", extractors: [{ pluginRef: "core-metrics-extractor" }] }];
      plugin(c, "queue-scorer").parameters = { unknown: "ignored by a factory that never decodes" };
    });
    expect(check(config)).toEqual([]);
  });

  it("matches plugin parameter names case-insensitively, as encoding/json does", () => {
    expect(check(mutate(pdFileConfig(), (c) => (plugin(c, "file-discovery").parameters = { Path: ENDPOINTS_PATH, WATCHFILE: true })))).toEqual([]);
  });

  it("accepts the deprecated flat disagg-profile-handler parameters", () => {
    expect(
      check(mutate(pdFileConfig(), (c) => (plugin(c, "disagg-profile-handler").parameters = { prefillDeciderPluginName: "prefix-based-pd-decider" }))),
    ).toEqual([]);
  });
});

describe("validateEndpointPickerConfig: refusals", () => {
  const cases: [string, () => unknown, RegExp][] = [
    ["an unknown top-level field", () => mutate(pdFileConfig(), (c) => (c.pluginz = [])), /^pluginz: unknown field$/],
    ["an unknown field in a plugin entry", () => mutate(pdFileConfig(), (c) => (c.plugins[0].nmae = "x")), /^plugins\[0\]\.nmae: unknown field$/],
    [
      "a mis-cased field name at a typed level",
      () => mutate(pdFileConfig(), (c) => (c.schedulingProfiles[0].plugins[0] = { PluginRef: "prefill-filter" })),
      /schedulingProfiles\[0\]\.plugins\[0\]\.PluginRef: unknown field/,
    ],
    [
      "an unknown field in a profile",
      () => mutate(pdFileConfig(), (c) => (c.schedulingProfiles[1].handler = "x")),
      /schedulingProfiles\[1\]\.handler: unknown field/,
    ],
    [
      "an unknown field in dataLayer.discovery (the newer endpoints: form)",
      () => mutate(pdFileConfig(), (c) => (c.dataLayer.discovery = { endpoints: { pluginRef: "file-discovery" } })),
      /dataLayer\.discovery\.endpoints: unknown field/,
    ],
    ["an unknown field in dataLayer", () => mutate(pdFileConfig(), (c) => (c.dataLayer.discover = {})), /dataLayer\.discover: unknown field/],
    ["an unknown field in flowControl", () => mutate(pdFileConfig(), (c) => (c.flowControl = { maxQueue: 3 })), /flowControl\.maxQueue: unknown field/],
    [
      "an unknown field in file-discovery parameters",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "file-discovery").parameters.watch = true)),
      /parameters\.watch: unknown field/,
    ],
    [
      "an unknown field in approx-prefix-cache-producer parameters",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "approx-prefix-cache-producer").parameters.lruCapacity = 5)),
      /parameters\.lruCapacity: unknown field/,
    ],
    [
      "an unknown nested field in disagg-profile-handler deciders",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "disagg-profile-handler").parameters.deciders.decode = "x")),
      /deciders\.decode: unknown field/,
    ],
    [
      "an unregistered plugin type",
      () => mutate(pdFileConfig(), (c) => c.plugins.push({ type: "file-discovery-v2" })),
      /plugin type 'file-discovery-v2' is not registered/,
    ],
    ["a plugin without a type", () => mutate(pdFileConfig(), (c) => c.plugins.push({ name: "lonely" })), /plugin 'lonely' is missing a type/],
    [
      "a string where a bool parameter is expected",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "file-discovery").parameters.watchFile = "true")),
      /watchFile: string cannot be decoded into Go bool/,
    ],
    [
      "a string where an int parameter is expected",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "prefix-based-pd-decider").parameters.nonCachedTokens = "1")),
      /nonCachedTokens: string cannot be decoded into Go int/,
    ],
    [
      "a fraction where an int parameter is expected",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "prefix-based-pd-decider").parameters.nonCachedTokens = 1.5)),
      /nonCachedTokens: number cannot be decoded into Go int/,
    ],
    [
      "a negative nonCachedTokens",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "prefix-based-pd-decider").parameters.nonCachedTokens = -1)),
      /nonCachedTokens: -1 is below 0/,
    ],
    [
      "a string weight",
      () => mutate(pdFileConfig(), (c) => (c.schedulingProfiles[0].plugins[2].weight = "2")),
      /weight: string cannot be decoded into Go \*float64/,
    ],
    ["a missing file-discovery path", () => mutate(pdFileConfig(), (c) => delete plugin(c, "file-discovery").parameters.path), /parameters\.path: required/],
    [
      "a profile reference to an undefined plugin",
      () => mutate(pdFileConfig(), (c) => c.schedulingProfiles[0].plugins.push({ pluginRef: "kv-cache-utilization-scorer" })),
      /schedulingProfiles\[prefill\] references undefined plugin 'kv-cache-utilization-scorer'/,
    ],
    ["a profile entry without pluginRef", () => mutate(pdFileConfig(), (c) => c.schedulingProfiles[0].plugins.push({ weight: 1 })), /is missing a 'pluginRef'/],
    [
      "a decider reference to an undefined plugin",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "disagg-profile-handler").parameters.deciders.prefill = "always-disagg-pd-decider")),
      /dependency on the unregistered plugin always-disagg-pd-decider/,
    ],
    [
      "a decider reference to a plugin that is not a decider",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "disagg-profile-handler").parameters.deciders.prefill = "queue-scorer")),
      /is not a decider/,
    ],
    [
      "a discovery reference to an undefined plugin",
      () => mutate(pdFileConfig(), (c) => (c.dataLayer.discovery.pluginRef = "files")),
      /no plugin found with name "files"/,
    ],
    [
      "a discovery reference to a plugin that is not a discovery",
      () => mutate(pdFileConfig(), (c) => (c.dataLayer.discovery.pluginRef = "queue-scorer")),
      /does not implement EndpointDiscovery/,
    ],
    [
      "a data source reference to an extractor",
      () => mutate(aggregatedFileConfig(), (c) => (c.dataLayer.sources = [{ pluginRef: "core-metrics-extractor", extractors: [] }])),
      /the plugin core-metrics-extractor is not a fwkdl.DataSource/,
    ],
    [
      "a prefixMatchInfoProducerName no plugin produces",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "prefix-cache-scorer").parameters.prefixMatchInfoProducerName = "approx")),
      /no plugin named approx produces PrefixCacheMatchInfo/,
    ],
    ["a duplicate plugin name", () => mutate(pdFileConfig(), (c) => c.plugins.push({ type: "queue-scorer" })), /duplicate plugin name 'queue-scorer'/],
    ["a duplicate profile name", () => mutate(pdFileConfig(), (c) => (c.schedulingProfiles[1].name = "prefill")), /has duplicate name 'prefill'/],
    [
      "two pickers in one profile",
      () =>
        mutate(pdFileConfig(), (c) => {
          c.plugins.push({ type: "random-picker" });
          c.schedulingProfiles[0].plugins.push({ pluginRef: "random-picker" });
        }),
      /already have a registered picker plugin/,
    ],
    [
      "two profiles without a profile handler",
      () => mutate(pdFileConfig(), (c) => (c.plugins = c.plugins.filter((p: any) => p.type !== "disagg-profile-handler"))),
      /no profile handler configured/,
    ],
    ["two profile handlers", () => mutate(pdFileConfig(), (c) => c.plugins.push({ type: "single-profile-handler" })), /multiple profile handlers found/],
    [
      "single-profile-handler with two profiles",
      () =>
        mutate(aggregatedFileConfig(), (c) => {
          c.plugins.push({ type: "single-profile-handler" });
          c.schedulingProfiles.push({ name: "other", plugins: [{ pluginRef: "queue-scorer" }] });
        }),
      /SingleProfileHandler cannot support multiple scheduling profiles/,
    ],
    [
      "an unknown feature gate",
      () => mutate(pdFileConfig(), (c) => (c.featureGates = ["flowcontrol"])),
      /feature gate 'flowcontrol' is unknown or unregistered/,
    ],
    [
      "a feature gate value that is not a bool",
      () => mutate(pdFileConfig(), (c) => (c.featureGates = ["flowControl=on"])),
      /on is not a valid value for the feature gate flowControl/,
    ],
    [
      "the llm-d.ai/v1 apiVersion of newer guides",
      () => mutate(pdFileConfig(), (c) => (c.apiVersion = "llm-d.ai/v1")),
      /apiVersion: "llm-d.ai\/v1" is not registered/,
    ],
    ["another kind", () => mutate(pdFileConfig(), (c) => (c.kind = "EndpointPicker")), /kind: "EndpointPicker" is not registered/],
    [
      "an alpha plugin without --allow-experimental-plugins",
      () => mutate(pdFileConfig(), (c) => c.plugins.push({ type: "utilization-filter" })),
      /has Alpha stability level/,
    ],
    [
      "a parser reference that is not a parser",
      () => mutate(pdFileConfig(), (c) => (c.requestHandler = { parsers: [{ pluginRef: "queue-scorer" }] })),
      /the plugin queue-scorer is not a parser plugin/,
    ],
    [
      "a saturation detector reference to an undefined plugin",
      () => mutate(pdFileConfig(), (c) => (c.flowControl = { saturationDetector: { pluginRef: "concurrency-detector" } })),
      /saturation detector references undefined plugin 'concurrency-detector'/,
    ],
    [
      "prefill-first stage order with a prefill decider",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "disagg-profile-handler").parameters.stageOrder = "prefill-first")),
      /prefill decider is not supported in prefill-first/,
    ],
    [
      "an invalid stage order",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "disagg-profile-handler").parameters.stageOrder = "encode-first")),
      /invalid stage order/,
    ],
    [
      "autoTune false with blockSizeTokens 0",
      () => mutate(pdFileConfig(), (c) => Object.assign(plugin(c, "approx-prefix-cache-producer").parameters, { autoTune: false, blockSizeTokens: 0 })),
      /blockSizeTokens: must be > 0 when autoTune is false/,
    ],
    [
      "a matchLengthWeight above 1",
      () => mutate(pdFileConfig(), (c) => (plugin(c, "prefix-cache-scorer").parameters.matchLengthWeight = 1.5)),
      /matchLengthWeight: 1.5 is above 1/,
    ],
    [
      "a metrics-data-source scheme other than http/https",
      () => mutate(aggregatedFileConfig(), (c) => (plugin(c, "metrics-data-source").parameters.scheme = "grpc")),
      /scheme: "grpc" is not one of http, https/,
    ],
  ];
  for (const [what, build, message] of cases) {
    it(`refuses ${what}`, () => {
      const problems = check(build());
      expect(
        problems.some((p) => message.test(p)),
        problems.join("\n"),
      ).toBe(true);
    });
  }

  it("allows alpha plugins with --allow-experimental-plugins", () => {
    expect(
      check(
        mutate(pdFileConfig(), (c) => c.plugins.push({ type: "utilization-filter" })),
        { allowExperimentalPlugins: true },
      ),
    ).toEqual([]);
  });

  it("refuses duplicate YAML keys and invalid YAML", () => {
    expect(validateEndpointPickerConfig("plugins: []\nplugins: []\n")[0]).toMatch(/invalid YAML: Map keys must be unique/);
    expect(validateEndpointPickerConfig("plugins: [\n")[0]).toMatch(/invalid YAML/);
  });

  it("reads unquoted yes as a YAML 1.1 bool, as the loader does", () => {
    const text = stringifyYaml(pdFileConfig()).replace("watchFile: true", "watchFile: yes");
    expect(text).toContain("watchFile: yes");
    expect(validateEndpointPickerConfig(text)).toEqual([]);
    expect(validateEndpointPickerConfig(text.replace("watchFile: yes", 'watchFile: "yes"'))).toEqual([
      expect.stringMatching(/watchFile: string cannot be decoded into Go bool/),
    ]);
  });
});

describe("validateEndpointsFile", () => {
  // One prefill host and one decode host with four data-parallel ranks behind the sidecar (8000-8003).
  const endpoints = () => ({
    endpoints: [
      { name: "prefill-0", address: "10.0.0.11", port: "8000", labels: { "llm-d.ai/role": "prefill" } },
      ...[0, 1, 2, 3].map((r) => ({
        name: `decode-0-rank${r}`,
        address: "10.0.0.12",
        port: String(8000 + r),
        labels: { "llm-d.ai/role": "decode", "llm-d.ai/engine-type": "vllm" },
      })),
    ],
  });
  const checkFile = (doc: unknown, options?: { refuseDuplicateNames?: boolean }) => validateEndpointsFile(stringifyYaml(doc), options);
  const withEntry = (change: (e: any) => void) => mutate(endpoints(), (d) => change(d.endpoints[1]));

  it("accepts our P/D endpoints file", () => {
    expect(checkFile(endpoints())).toEqual([]);
    expect(checkFile(endpoints(), { refuseDuplicateNames: true })).toEqual([]);
  });

  it("accepts an empty file and an empty list (zero endpoints)", () => {
    expect(validateEndpointsFile("")).toEqual([]);
    expect(validateEndpointsFile("endpoints: []\n")).toEqual([]);
    expect(validateEndpointsFile("# nothing yet\n")).toEqual([]);
  });

  it("ignores unknown fields and matches names case-insensitively, as plain encoding/json does", () => {
    expect(checkFile(withEntry((e) => (e.weight = "3")))).toEqual([]);
    expect(validateEndpointsFile('Endpoints:\n- Name: a\n  Address: "10.0.0.1"\n  PORT: "8000"\n')).toEqual([]);
    expect(validateEndpointsFile('Endpoints:\n- Name: a\n  Address: "10.0.0.1"\n  PORT: "0"\n')).toEqual(['endpoint "a": invalid port "0"']);
  });

  const refused: [string, (e: any) => void, string][] = [
    ["an IPv6 address", (e) => (e.address = "::1"), 'endpoint "decode-0-rank0": invalid IPv4 address "::1"'],
    ["a host name", (e) => (e.address = "decode-0.example"), 'endpoint "decode-0-rank0": invalid IPv4 address "decode-0.example"'],
    ["an address with a port", (e) => (e.address = "10.0.0.12:8000"), 'endpoint "decode-0-rank0": invalid IPv4 address "10.0.0.12:8000"'],
    ["a leading zero in an octet", (e) => (e.address = "10.0.0.012"), 'endpoint "decode-0-rank0": invalid IPv4 address "10.0.0.012"'],
    ["an empty address", (e) => delete e.address, 'endpoint "decode-0-rank0": invalid IPv4 address ""'],
    ["port 0", (e) => (e.port = "0"), 'endpoint "decode-0-rank0": invalid port "0"'],
    ["port 65536", (e) => (e.port = "65536"), 'endpoint "decode-0-rank0": invalid port "65536"'],
    ["a non-decimal port", (e) => (e.port = "0x1f40"), 'endpoint "decode-0-rank0": invalid port "0x1f40"'],
    ["a missing port", (e) => delete e.port, 'endpoint "decode-0-rank0": invalid port ""'],
  ];
  for (const [what, change, problem] of refused) {
    it(`refuses ${what}`, () => expect(checkFile(withEntry(change))).toEqual([problem]));
  }

  it("refuses the whole file for a YAML number or bool where a string is required", () => {
    expect(checkFile(withEntry((e) => (e.port = 8000)))).toEqual([
      expect.stringMatching(/^endpoints\[1\]\.port: json: cannot unmarshal integer .* of type string$/),
    ]);
    expect(checkFile(withEntry((e) => (e.labels.rank = 0)))).toEqual([expect.stringMatching(/^endpoints\[1\]\.labels\.rank: json: cannot unmarshal integer/)]);
    expect(validateEndpointsFile('endpoints:\n- name: a\n  address: "10.0.0.1"\n  port: "8000"\n  labels: {enabled: on}\n')).toEqual([
      expect.stringMatching(/labels\.enabled: json: cannot unmarshal boolean/),
    ]);
    expect(validateEndpointsFile('endpoints:\n- name: a\n  address: "10.0.0.1"\n  port: "8000"\n  labels: {enabled: "on"}\n')).toEqual([]);
  });

  it("refuses a top level that is not a mapping, entries that are not mappings, and files over 1 MiB", () => {
    expect(validateEndpointsFile("- name: a\n")).toEqual([expect.stringMatching(/cannot unmarshal array into Go value of type file.EndpointsFile/)]);
    expect(validateEndpointsFile("endpoints: {a: 1}\n")).toEqual([expect.stringMatching(/cannot unmarshal object/)]);
    expect(validateEndpointsFile("endpoints:\n- just-a-string\n")).toEqual([expect.stringMatching(/endpoints\[0\]: json: cannot unmarshal string/)]);
    expect(validateEndpointsFile(`# ${"x".repeat(1 << 20)}\n`)).toEqual(["endpoints file exceeds 1 MiB limit"]);
  });

  it("accepts duplicate names as the loader does, and refuses them on request", () => {
    const doc = withEntry((e) => (e.name = "prefill-0"));
    expect(checkFile(doc)).toEqual([]);
    expect(checkFile(doc, { refuseDuplicateNames: true })).toEqual([
      expect.stringMatching(/^endpoint "prefill-0": duplicate of an earlier entry default\/prefill-0/),
    ]);
    expect(
      checkFile(
        mutate(doc, (d) => (d.endpoints[1].namespace = "decode")),
        { refuseDuplicateNames: true },
      ),
    ).toEqual([]);
  });

  it("accepts what Go's parsers accept: an IPv4-mapped IPv6 literal, a signed or zero-padded port", () => {
    expect(checkFile(withEntry((e) => (e.address = "::ffff:10.0.0.12")))).toEqual([]);
    expect(checkFile(withEntry((e) => (e.port = "+8000")))).toEqual([]);
    expect(checkFile(withEntry((e) => (e.port = "08000")))).toEqual([]);
  });

  it("parses IPv4 the way net.ParseIP(...).To4() does", () => {
    for (const ok of ["0.0.0.0", "255.255.255.255", "10.0.0.1", "::ffff:1.2.3.4", "0:0:0:0:0:ffff:102:304", "::FFFF:0a00:0001"])
      expect(goParsesAsIPv4(ok), ok).toBe(true);
    for (const bad of [
      "256.0.0.1",
      "1.2.3",
      "1.2.3.4.5",
      "01.2.3.4",
      " 1.2.3.4",
      "::1",
      "::",
      "fe80::1%eth0",
      "::ffff:1.2.3.256",
      "1:2:3:4:5:6:7:8",
      "::ffff:1:2:3",
      "localhost",
      "",
    ])
      expect(goParsesAsIPv4(bad), bad).toBe(false);
  });
});
