import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { modelEppPorts } from "../core/plan/ports";
import { envoyBootstrap, modelsEnvoy } from "../core/render/hosts/frontDoor/envoy";
import {
  eppClusterName,
  MAX_REQUEST_BODY_BYTES,
  MODEL_HEADER,
  MODEL_METADATA_NAMESPACE,
  type ModelDoor,
  modelHeaderScript,
} from "../core/render/hosts/frontDoor/modelRoutes";
import { UNKNOWN_MODEL_BODY } from "../core/render/modelAnswers";
import { validateEnvoyBootstrap, validateEnvoyWithDiscovery, withDiscovered } from "./helpers/envoyBootstrap";
import { type EnvoyOutcome, type EnvoyRequest, routeThroughFrontDoor, runLuaHeaderStage } from "./helpers/envoyModelRouting";
import { SECOND_MODEL } from "./helpers/recipes";

// The front door of a stack of models on hosts (issue 30): Envoy reads the body's model into a
// header (json_to_metadata, then model-header.lua under real LuaJIT), routes per served name and asks
// that model's EPP through the route's ExtProcPerRoute. Requests go through the rendered bootstrap by
// the rules of Envoy v1.37 (test/helpers/envoyModelRouting.ts).

const doors: ModelDoor[] = [
  { name: "chat", servedNames: ["MiniMaxAI/MiniMax-M2.7", "minimax"] },
  { name: "tiny", servedNames: ["tiny-chat", SECOND_MODEL] },
].map((m, i) => ({ ...m, eppCluster: eppClusterName(m.name), eppGrpcPort: modelEppPorts(i).eppGrpc, eppHealthPort: modelEppPorts(i).eppHealth }));
const input = { listenAddress: "0.0.0.0", port: 8080, adminPort: 9901, eppGrpcPort: 9002, requestTimeoutSeconds: 3600 };
const discovery = { routesPath: "/etc/envoy/routes.yaml", clustersPath: "/etc/envoy/clusters.yaml" };
const files = modelsEnvoy({ ...input, ...discovery, models: doors });
/** The bootstrap as Envoy runs it once it has read its routes and clusters. */
const bootstrap = withDiscovered(files);

/** A deterministic stream of choices, so a failure repeats. */
function choices(seed: number) {
  let state = seed;
  return <T>(list: readonly T[]): T => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return list[state % list.length]!;
  };
}

const PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/tokenize", "/v1/chat/completions?stream=true"];
const TYPES = ["application/json", "application/json; charset=utf-8", undefined];

/** A chat request for `model`, its body padded to about `size` bytes (a long conversation), with a nested "model" key to mislead a naive reader. */
function chat(model: unknown, options: { size?: number; type?: string; header?: string; path?: string } = {}): EnvoyRequest {
  const messages = [{ role: "user", content: 'say {"model": "elsewhere"}' }];
  const base = { messages, tools: [{ type: "function", function: { name: "f", parameters: { model: "other" } } }], model };
  const padding = Math.max(0, (options.size ?? 0) - JSON.stringify(base).length - 40);
  const body = JSON.stringify({ ...base, messages: [...messages, { role: "assistant", content: "x".repeat(padding) }] });
  const headers: Record<string, string> = {};
  if (options.type !== undefined) headers["content-type"] = options.type;
  if (options.header !== undefined) headers[MODEL_HEADER] = options.header;
  return { method: "POST", path: options.path ?? "/v1/chat/completions", headers, body };
}

const servedBy = (outcome: EnvoyOutcome) => ("eppCluster" in outcome ? outcome.eppCluster : `status ${outcome.status}`);

describe("the Envoy of a front door of several models", () => {
  it("is a bootstrap and discovery files Envoy v1.37's API takes, and a stack of one model's is as it was", () => {
    expect(validateEnvoyWithDiscovery(files)).toEqual([]);
    const single = envoyBootstrap(input);
    expect(validateEnvoyBootstrap(single)).toEqual([]);
    expect(single).not.toMatch(/json_to_metadata|lua|per_filter/);
    const clusters = parseYaml(files.clusters).resources.map((c: any) => [c.name, c.load_assignment?.endpoints[0].lb_endpoints[0].endpoint.address]);
    expect(clusters).toEqual([
      ["epp-chat", { socket_address: { address: "127.0.0.1", port_value: 20000 } }],
      ["epp-tiny", { socket_address: { address: "127.0.0.1", port_value: 20002 } }],
    ]);
  });

  it("keeps every model in its routes and clusters files: adding, removing or renaming a model changes no byte of the bootstrap", () => {
    const variants = [[doors[0]!], [doors[1]!], doors, [{ ...doors[1]!, servedNames: ["renamed"] }]].map((models) =>
      modelsEnvoy({ ...input, ...discovery, models }),
    );
    expect(new Set(variants.map((v) => v.bootstrap)).size).toBe(1);
    expect(new Set(variants.map((v) => v.routes)).size).toBe(4);
    expect(new Set(variants.map((v) => v.clusters)).size).toBe(3);
    // Each file's version names its content: Envoy's /config_dump shows which one it runs.
    expect(new Set(variants.map((v) => parseYaml(v.routes).version_info)).size).toBe(4);
    const bootstrapOnly = parseYaml(files.bootstrap);
    expect(JSON.stringify(bootstrapOnly)).not.toMatch(/minimax|tiny|epp-chat/);
  });

  it("lands 1,000 requests per model, every served name and alias, 100 % on that model's EPP", () => {
    const pick = choices(30);
    const requests: { model: ModelDoor; request: EnvoyRequest; name: string }[] = [];
    for (const model of doors) {
      const others = doors.filter((d) => d !== model).flatMap((d) => d.servedNames);
      for (let i = 0; i < 1000; i++) {
        const name = pick(model.servedNames);
        // A third of them carry a client's own header naming another model: the body decides.
        const header = i % 3 === 0 ? pick(others) : undefined;
        requests.push({ model, name, request: chat(name, { type: pick(TYPES), header, path: pick(PATHS), size: pick([0, 2000, 20000]) }) });
      }
    }
    const outcomes = routeThroughFrontDoor(
      bootstrap,
      requests.map((r) => r.request),
    );
    for (const model of doors) {
      const mine = outcomes.filter((_, i) => requests[i]!.model === model);
      expect(mine.map(servedBy).filter((c) => c !== model.eppCluster)).toEqual([]);
      expect(mine).toHaveLength(1000);
    }
    outcomes.forEach((outcome, i) => {
      expect(outcome).toMatchObject({ cluster: "original_destination_cluster", headers: { [MODEL_HEADER]: requests[i]!.name } });
    });
  });

  it("answers a model no entry serves 404 with an OpenAI-style JSON error, never 429 or 503, and asks no EPP", () => {
    const pick = choices(404);
    const unknown = Array.from({ length: 200 }, (_, i) => chat(`model-${i}`, { type: pick(TYPES), header: i % 2 ? "minimax" : undefined }));
    const odd = [
      chat(undefined, { type: "application/json" }),
      chat(5, { type: "application/json" }),
      chat("minimax\nx-evil: 1", { type: "application/json" }),
      chat("MiniMaxAI/MiniMax-M2.7 ", { type: "application/json" }),
      chat("minimax", { type: "text/plain", header: "minimax" }),
      { method: "POST", path: "/v1/chat/completions", headers: { "content-type": "application/json", [MODEL_HEADER]: "minimax" }, body: "not json" },
      { method: "POST", path: "/v1/chat/completions", headers: { [MODEL_HEADER]: "tiny-chat" }, body: '["model", "tiny-chat"]' },
      { method: "GET", path: "/health", headers: { [MODEL_HEADER]: "tiny-chat" } },
    ];
    for (const outcome of routeThroughFrontDoor(bootstrap, [...unknown, ...odd])) {
      expect(outcome).toEqual({ status: 404, body: UNKNOWN_MODEL_BODY });
    }
    expect(JSON.parse(UNKNOWN_MODEL_BODY)).toMatchObject({ error: { type: "NotFoundError", code: 404, param: "model" } });
  });

  it("lists every served name of every model at GET /v1/models, itself", () => {
    const [outcome] = routeThroughFrontDoor(bootstrap, [{ method: "GET", path: "/v1/models", headers: { [MODEL_HEADER]: "minimax" } }]);
    expect(outcome).toMatchObject({ status: 200 });
    expect(JSON.parse((outcome as { body: string }).body).data.map((m: { id: string }) => m.id)).toEqual(doors.flatMap((d) => d.servedNames));
  });

  it("routes bodies of 1 MB and 4 MB by their model, and answers 413 only past its limit", () => {
    const sizes = [1024 * 1024, 4 * 1024 * 1024];
    const requests = doors.flatMap((d) => sizes.map((size) => chat(d.servedNames[1], { type: "application/json", size })));
    requests.forEach((r, i) => {
      expect(Buffer.byteLength(r.body!)).toBeGreaterThanOrEqual(sizes[i % 2]! - 100);
    });
    expect(routeThroughFrontDoor(bootstrap, requests).map(servedBy)).toEqual(["epp-chat", "epp-chat", "epp-tiny", "epp-tiny"]);
    const [tooLarge] = routeThroughFrontDoor(bootstrap, [chat("minimax", { type: "application/json", size: MAX_REQUEST_BODY_BYTES + 1024 })]);
    expect(tooLarge).toMatchObject({ status: 413 });
    // Envoy's default buffer of 1 MiB would refuse the 4 MB body: the limit is the virtual host's.
    expect(parseYaml(bootstrap).static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0]).toMatchObject({
      request_body_buffer_limit: MAX_REQUEST_BODY_BYTES,
    });
  });

  it("raises Envoy's 4 KiB direct-response limit when the list of names is longer, and the bootstrap still loads", () => {
    const many: ModelDoor[] = Array.from({ length: 6 }, (_, i) => ({
      name: `m${i}`,
      servedNames: Array.from({ length: 12 }, (_, k) => `org-${i}/a-rather-long-model-name-${k}`),
      eppCluster: eppClusterName(`m${i}`),
      eppGrpcPort: modelEppPorts(i).eppGrpc,
      eppHealthPort: modelEppPorts(i).eppHealth,
    }));
    const manyFiles = modelsEnvoy({ ...input, ...discovery, models: many });
    expect(validateEnvoyWithDiscovery(manyFiles)).toEqual([]);
    const text = withDiscovered(manyFiles);
    const routeConfig = parseYaml(text).static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config;
    expect(routeConfig.max_direct_response_body_size_bytes).toBeGreaterThan(4096);
    expect(routeConfig.virtual_hosts[0].routes[0].direct_response.body.inline_string.length).toBeLessThanOrEqual(
      routeConfig.max_direct_response_body_size_bytes,
    );
  });
});

describe("model-header.lua under LuaJIT", () => {
  const run = (inputs: { model: string | undefined; header: string | undefined }[]) =>
    runLuaHeaderStage(modelHeaderScript(), MODEL_METADATA_NAMESPACE, MODEL_HEADER, inputs);

  it("sets the header to the body's model, replacing a client's, and removes a client's when the body names none or an impossible one", () => {
    expect(
      run([
        { model: "tiny-chat", header: undefined },
        { model: "minimax", header: "tiny-chat" },
        { model: undefined, header: "tiny-chat" },
        { model: "", header: "minimax" },
        { model: "a b", header: undefined },
        { model: "minimax\r\nx: y", header: undefined },
        { model: "모델", header: undefined },
      ]),
    ).toEqual(["tiny-chat", "minimax", undefined, undefined, undefined, undefined, undefined]);
  });

  it("reads the namespace and header the bootstrap's other pieces use", () => {
    expect(modelHeaderScript()).toContain(`local NAMESPACE = "${MODEL_METADATA_NAMESPACE}"`);
    expect(modelHeaderScript()).toContain(`local HEADER = "${MODEL_HEADER}"`);
    const jsonToMetadata = parseYaml(bootstrap).static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters.find((f: any) =>
      f.name.endsWith("json_to_metadata"),
    );
    expect(jsonToMetadata.typed_config.request_rules.rules[0].on_present).toMatchObject({ metadata_namespace: MODEL_METADATA_NAMESPACE, key: "model" });
  });
});
