import { ConfigMap, Service } from "kubernetes-models/v1";
import { Deployment as DeploymentModel } from "kubernetes-models/apps/v1";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { ModelServing } from "../components/modelServing";
import { parseStackSettings } from "../core/config/stackConfig";
import { planStack } from "../core/plan/stack";
import { UNKNOWN_MODEL_BODY } from "../core/render/modelAnswers";
import { BASE_MODEL_HEADER, PAYLOAD_PROCESSOR_CHART } from "../core/render/kubernetes/modelRouting";
import { renderStack } from "../core/render/stack";
import payloadFixture from "./fixtures/payload-processor/v0.1.0-rc.1.json";
import { validateEnvoyBootstrap } from "./helpers/envoyBootstrap";
import { chartHttpRoute, directResponse, type GatewayRequest, type HttpRoute, payloadProcessorHeaders, selectRule } from "./helpers/gatewayRouting";
import { runUnderMocks } from "./helpers/pulumiHarness";
import { catalogWithSecondModel, SECOND_MODEL } from "./helpers/recipes";
import { validateEndpointPickerConfig } from "./helpers/eppConfig";
import { chartKeyProblems } from "./helpers/routerChart";

// Several models behind one Gateway (issue 30, Kubernetes): a router release per model whose
// HTTPRoute matches the base name the payload processor sets from the body, the served names where
// the payload processor reads them, and the stack's answers for /v1/models and unknown models.
// Requests go through the rendered objects by the rules of the pinned versions
// (test/helpers/gatewayRouting.ts).

const catalog = catalogWithSecondModel();
const pd = { name: "pd", strategy: "prefill-decode-disaggregated", target: "Throughput", servedNames: ["MiniMaxAI/MiniMax-M2.7", "minimax"] };
const tiny = { name: "tiny", model: SECOND_MODEL, strategy: "two-role", target: "Latency", servedNames: ["tiny-chat", SECOND_MODEL] };
const settings = (models: unknown[] = [pd, tiny], kubernetes: Record<string, unknown> = {}): Record<string, any> => ({
  platform: "kubernetes",
  kubernetes: {
    namespace: "llm-serving",
    image: "registry.example.com/ml/vllm-rbln:0.12.0",
    gateway: { name: "inference-gateway", namespace: "gateway-system" },
    provider: "istio",
    ...kubernetes,
  },
  monitoring: { enabled: true },
  models,
});
const render = (raw = settings()) => renderStack(planStack(parseStackSettings(raw), catalog), { stack: "s", instance: "rbln-serving", secrets: [] });

const rendered = render();
const routing = rendered.routing!;
const releases = rendered.models.map((m) => m.kubernetes!.router!.release);

/** Every HTTPRoute on the Gateway: each model's as its chart renders it, then the stack's answers. */
const routes: HttpRoute[] = [
  ...rendered.models.map((m) => chartHttpRoute(m.kubernetes!.routerValues!, m.kubernetes!.router!.release, "llm-serving")!),
  routing.answers.httpRoute as unknown as HttpRoute,
];

/** A request through the Gateway: the payload processor's headers, then the rule the Gateway picks, then the answer if it is the answers'. */
function send(request: GatewayRequest & { body?: string }) {
  const ipp = request.body === undefined ? { set: {} } : payloadProcessorHeaders(request.body, routing.servedNames, routing.payloadProcessor.namespace);
  if ("status" in ipp) return { status: ipp.status };
  // The payload processor's set_headers replace a client's header of the same name, in any case.
  const set = new Set(Object.keys(ipp.set).map((name) => name.toLowerCase()));
  const kept = Object.entries(request.headers).filter(([name]) => !set.has(name.toLowerCase()));
  const picked = selectRule({ ...request, headers: { ...Object.fromEntries(kept), ...ipp.set } }, routes);
  if (!picked) return { status: 404, body: "" };
  const backend = picked.rule.backendRefs![0]!;
  if (backend.kind === "InferencePool") return { pool: backend.name };
  expect(backend.name).toBe(routing.answers.service.metadata.name);
  return directResponse(routing.answers.configMap.data!["envoy.yaml"]!, request)!;
}

/** A deterministic stream of choices, so a failure repeats. */
function choices(seed: number) {
  let state = seed;
  return <T>(list: readonly T[]): T => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return list[state % list.length]!;
  };
}

describe("each model's router release", () => {
  it("is llm-d-router-gateway v0.10.0 with values the real chart takes, its route matching its base name", () => {
    expect(releases).toEqual(["router-pd", "router-tiny"]);
    for (const [i, model] of rendered.models.entries()) {
      const values = model.kubernetes!.routerValues as Record<string, any>;
      expect(chartKeyProblems(values), releases[i]).toEqual([]);
      expect([model.kubernetes!.router!.chart, model.kubernetes!.router!.version]).toEqual(["llm-d-router-gateway", "v0.10.0"]);
      expect(values.httpRoute).toMatchObject({ create: true, baseModel: [pd, tiny][i]!.servedNames[0], inferenceGatewayName: "inference-gateway" });
    }
  });

  it("holds an EndpointPickerConfig per model that the v0.10.0 picker loads, as the single model's does", () => {
    const configs = rendered.models.map((m) => {
      const epp = (m.kubernetes!.routerValues as any).router.epp;
      return epp.pluginsCustomConfig[epp.pluginsConfigFile] as string;
    });
    expect(configs).toHaveLength(2);
    for (const [i, config] of configs.entries()) expect(validateEndpointPickerConfig(config), releases[i]).toEqual([]);
  });

  it("pools exactly its own model's serving pods: the pool's labels select them, and no other model's", () => {
    const podLabels = (m: (typeof rendered.models)[number]) =>
      m.kubernetes!.workloads.roles.map((r) => ({ role: r.role, labels: (r.deployment as any).spec.template.metadata.labels }));
    const selected = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
    const pools = rendered.models.map((m) => (m.kubernetes!.routerValues as any).router.modelServers.matchLabels);
    const [pdPods, tinyPods] = rendered.models.map(podLabels);
    expect(pdPods!.filter((p) => selected(pools[0], p.labels)).map((p) => p.role)).toEqual(["prefill", "decode"]);
    expect(tinyPods!.filter((p) => selected(pools[1], p.labels)).map((p) => p.role)).toEqual(["front"]);
    expect(tinyPods!.some((p) => selected(pools[0], p.labels)) || pdPods!.some((p) => selected(pools[1], p.labels))).toBe(false);
    // Two models of one strategy carry the same recipe labels: only the model's own instance label tells their pods apart.
    const twins = render(settings([pd, { ...pd, name: "pd2", servedNames: ["minimax-2"] }])).models;
    const [first, second] = twins.map((m) => (m.kubernetes!.routerValues as any).router.modelServers.matchLabels);
    expect(podLabels(twins[1]!).some((p) => selected(first, p.labels))).toBe(false);
    expect(podLabels(twins[0]!).some((p) => selected(second, p.labels))).toBe(false);
  });

  it("gives a model whose recipe has no router the chart's own default picker over its first role's ports", () => {
    const values = rendered.models[1]!.kubernetes!.routerValues as any;
    expect(values.router.modelServers.targetPorts).toEqual([{ number: 9000 }]);
    expect(parseYaml(values.router.epp.pluginsCustomConfig[values.router.epp.pluginsConfigFile]).schedulingProfiles.map((p: any) => p.name)).toEqual([
      "default",
    ]);
  });
});

describe("routing by the request's model field, in the rendered routing", () => {
  const paths = ["/v1/chat/completions", "/v1/completions"];

  it("lands 1,000 requests per model, every served name and alias, 100 % on that model's pool", () => {
    const pick = choices(7);
    for (const [i, model] of [pd, tiny].entries()) {
      const landed = new Map<string, number>();
      for (let n = 0; n < 1000; n++) {
        const name = pick<string>(model.servedNames);
        const body = JSON.stringify({
          model: name,
          messages: [{ role: "user", content: `question ${n}` }],
          max_tokens: pick([1, 16, 256]),
          stream: pick([true, false]),
        });
        // A client's own base-model header is replaced by the payload processor's.
        const headers = pick<Record<string, string>>([{}, { [BASE_MODEL_HEADER]: pd.servedNames[0]! }, { "x-gateway-base-model-name": "tiny-chat" }]);
        const answer = send({ method: "POST", path: pick(paths), headers, body });
        const key = "pool" in answer ? String(answer.pool) : `status ${String(answer.status)}`;
        landed.set(key, (landed.get(key) ?? 0) + 1);
      }
      expect(Object.fromEntries(landed), model.name).toEqual({ [releases[i]!]: 1000 });
    }
  });

  it("answers a model no entry serves 404 with an OpenAI-style JSON error, never 429 or 503", () => {
    const pick = choices(11);
    for (let n = 0; n < 200; n++) {
      const model = pick(["gpt-4o", "minimax-m2", "MiniMaxAI/MiniMax-M2.7 ", "TINY-CHAT", `model-${n}`]);
      const answer = send({ method: "POST", path: pick(paths), headers: {}, body: JSON.stringify({ model, prompt: "hi" }) });
      expect(answer, model).toEqual({ status: 404, body: UNKNOWN_MODEL_BODY });
    }
    expect(JSON.parse(UNKNOWN_MODEL_BODY)).toEqual({ error: { message: expect.any(String), type: "NotFoundError", param: "model", code: 404 } });
    // Without a model field the payload processor sets nothing: the answers too; a body that is not JSON is the payload processor's 400.
    expect(send({ method: "POST", path: "/v1/chat/completions", headers: {}, body: "{}" })).toEqual({ status: 404, body: UNKNOWN_MODEL_BODY });
    expect(send({ method: "POST", path: "/v1/chat/completions", headers: {}, body: "not json" })).toEqual({ status: 400 });
  });

  it("lists every served name of every model at GET /v1/models", () => {
    const answer = send({ method: "GET", path: "/v1/models", headers: {} });
    expect("status" in answer && answer.status).toBe(200);
    expect(JSON.parse((answer as { body: string }).body).data.map((m: { id: string }) => m.id)).toEqual([...pd.servedNames, ...tiny.servedNames]);
  });

  it("would send every request of an unknown model to the Gateway's bare 404 without the answers' route", () => {
    const bare = routes.slice(0, -1);
    const request = { method: "POST", path: "/v1/completions", headers: { [BASE_MODEL_HEADER]: "", "X-Gateway-Model-Name": "gpt-4o" } };
    expect(selectRule(request, bare)).toBeNull();
    expect(selectRule({ ...request, headers: { [BASE_MODEL_HEADER]: "tiny-chat" } }, bare)?.route.metadata.name).toBe("router-tiny");
  });
});

describe("the payload processor and the answers", () => {
  it("installs the payload processor's pinned chart in the Gateway's namespace, hooked into that Gateway, and puts the served names where it reads them", () => {
    const ipp = routing.payloadProcessor;
    expect([`${ipp.repository}/${ipp.chart}`, ipp.version]).toEqual([
      payloadFixture.facts.chartPublished.value.chart,
      payloadFixture.facts.chartPublished.value.version,
    ]);
    expect(ipp.namespace).toBe("gateway-system");
    expect(ipp.values).toEqual({ payloadProcessor: { name: "llm-serving-ipp" }, provider: { name: "istio" }, inferenceGateway: { name: "inference-gateway" } });
    const chartKeys = Object.keys(payloadFixture.facts.values.value);
    expect(Object.keys(ipp.values).every((key) => chartKeys.includes(key))).toBe(true);
    for (const configMap of routing.servedNames) {
      expect(configMap.metadata).toMatchObject({ namespace: "gateway-system", labels: { "inference.llm-d.ai/ipp-managed": "true" } });
      expect(() => new ConfigMap(configMap as any).validate()).not.toThrow();
    }
    expect(routing.servedNames.map((c) => [c.data!.baseModel, parseYaml(c.data!.adapters ?? "[]")])).toEqual([
      ["MiniMaxAI/MiniMax-M2.7", ["minimax"]],
      ["tiny-chat", [SECOND_MODEL]],
    ]);
    expect(PAYLOAD_PROCESSOR_CHART.version).toBe(payloadFixture.pinned["llm-d-inference-payload-processor"]);
  });

  it("answers from an Envoy bootstrap Envoy v1.37's API takes, in objects the API schema takes", () => {
    expect(validateEnvoyBootstrap(routing.answers.configMap.data!["envoy.yaml"]!)).toEqual([]);
    expect(() => new DeploymentModel(routing.answers.deployment as any).validate()).not.toThrow();
    expect(() => new Service(routing.answers.service as any).validate()).not.toThrow();
    const route = routing.answers.httpRoute as any;
    expect(route.spec.parentRefs).toEqual([{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "inference-gateway", namespace: "gateway-system" }]);
    // A new list of names rolls the answers' pods: Envoy reads its bootstrap once.
    const other = render(settings([pd, { ...tiny, servedNames: ["tiny-chat"] }])).routing!.answers.deployment as any;
    expect(other.spec.template.metadata.annotations).not.toEqual((routing.answers.deployment as any).spec.template.metadata.annotations);
  });

  it("shares the namespace at the baseline Pod Security level every endpoint picker meets", () => {
    expect(rendered.namespace?.metadata.labels?.["pod-security.kubernetes.io/enforce"]).toBe("baseline");
  });

  it("refuses a first served name the chart would write as something other than text", () => {
    for (const [name, key] of [
      ["1.5", "models[1].servedNames[0]"],
      ["yes", "models[1].servedNames[0]"],
    ] as const)
      expect(() => planStack(parseStackSettings(settings([pd, { ...tiny, servedNames: [name] }])), catalog)).toThrow(
        `${key}: "${name}": the router chart writes the first served name unquoted into the model's HTTPRoute (httpRoute.baseModel), where YAML reads it as something else than this text; put first a name YAML reads as text`,
      );
  });
});

describe("the program on Kubernetes with models (mock runtime)", async () => {
  const { registrations, error } = await runUnderMocks(
    () => new ModelServing("rbln-serving", { settings: settings(), secrets: { hfToken: "hf" }, catalog }),
    {},
    {},
  );

  it("installs a router release per model, the payload processor once, and the answers", () => {
    expect(error).toBeUndefined();
    const charts = registrations.filter((r) => r.type === "kubernetes:helm.sh/v4:Chart").map((r) => [r.name, r.inputs.name, r.inputs.namespace]);
    expect(charts.sort()).toEqual(
      [
        ["rbln-serving-pd-router-chart", "router-pd", "llm-serving"],
        ["rbln-serving-routing-payload-processor", "llm-serving-ipp", "gateway-system"],
        ["rbln-serving-tiny-router-chart", "router-tiny", "llm-serving"],
      ].sort(),
    );
    const names = registrations.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(["rbln-serving-pd-served-names", "rbln-serving-tiny-served-names", "rbln-serving-routing-answers-route"]));
  });
});
