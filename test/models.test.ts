import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ModelServing } from "../components/modelServing";
import { modelEntries } from "../core/config/models";
import { parseStackSettings } from "../core/config/stackConfig";
import { scrapeTargets } from "../core/monitoring/targets";
import { messagesAt } from "../core/plan/messages";
import { planStack } from "../core/plan/stack";
import { renderStackFiles } from "../core/render/files";
import { renderStack } from "../core/render/stack";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { runUnderMocks, type Registration } from "./helpers/pulumiHarness";
import { catalogWithSecondModel, SECOND_MODEL, shippedCatalog } from "./helpers/recipes";

// Several model deployments in one stack (issue 30): the `models` setting, its refusals, a plan per
// model, and resources that stay per model.

const catalog = catalogWithSecondModel();

const host = (name: string, last: number) => ({ name, address: `10.0.0.${last}`, hostKey: EXAMPLE_HOST_KEY });
const HOSTS = [host("npu-a", 11), host("npu-b", 12), host("npu-c", 13), host("npu-d", 14)];
const chat = { name: "chat", strategy: "aggregated-data-expert-parallel", target: "Latency" };
const tiny = { name: "tiny", model: SECOND_MODEL, strategy: "two-role", target: "Latency", servedNames: ["tiny-chat", SECOND_MODEL] };

/** Two models on hosts behind a router host of their own. */
const onHosts = (changes: Record<string, unknown> = {}) => ({
  platform: "hosts",
  hosts: HOSTS,
  router: { host: { name: "door", address: "10.0.0.10", hostKey: EXAMPLE_HOST_KEY } },
  models: [
    { ...chat, hosts: ["npu-a"] },
    { ...tiny, hosts: ["npu-b", "npu-c"] },
  ],
  ...changes,
});

/** Two models on Kubernetes behind one Gateway whose provider runs the payload processor's hook. */
const onKubernetes = (models: unknown[] = [chat, tiny], changes: Record<string, unknown> = {}) => ({
  platform: "kubernetes",
  kubernetes: { image: "registry.example.com/ml/vllm-rbln:0.12.0", gateway: { name: "inference-gateway", namespace: "gateway-system" }, provider: "istio" },
  monitoring: { enabled: true },
  models,
  ...changes,
});

const refusal = (settings: Record<string, unknown>) => {
  try {
    planStack(parseStackSettings(settings), catalog);
  } catch (error) {
    return (error as Error).message;
  }
  return "planned";
};

describe("the models setting", () => {
  it("is a list of model deployments, each the settings of a stack of that model alone, on its own hosts", () => {
    const entries = modelEntries(parseStackSettings(onHosts()));
    expect(entries.map((e) => [e.name, e.servedNames, e.settings.hosts.map((h) => h.name), e.hostIndexes])).toEqual([
      ["chat", ["MiniMaxAI/MiniMax-M2.7"], ["npu-a"], [0]],
      ["tiny", ["tiny-chat", SECOND_MODEL], ["npu-b", "npu-c"], [1, 2]],
    ]);
    expect(entries[1]!.settings).toMatchObject({ model: SECOND_MODEL, strategy: "two-role", platform: "hosts", models: undefined });
  });

  it("without models, the top level is the one model, of no name", () => {
    const { name: _, ...selection } = chat;
    const [entry, ...rest] = modelEntries(parseStackSettings({ ...selection, hosts: [HOSTS[0]] }));
    expect(rest).toEqual([]);
    expect([entry!.index, entry!.name, entry!.servedNames]).toEqual([null, null, ["MiniMaxAI/MiniMax-M2.7"]]);
  });

  it("refuses each fault in one line naming the key path", () => {
    const models = (list: unknown[]) => onHosts({ models: list });
    const cases: [Record<string, unknown>, string][] = [
      [
        { ...onHosts(), strategy: "aggregated-pipeline-parallel", axes: {} },
        "models: given beside the top-level strategy, axes: with models each entry sets its own (its model, strategy, target, ...); move them into the entries of models",
      ],
      [{ platform: "hosts", hosts: HOSTS }, "strategy: required: the strategy the recipe verifies, or a list of models each with its own (missing)"],
      [
        models([
          { ...chat, hosts: ["npu-a"] },
          { ...chat, hosts: ["npu-b"] },
        ]),
        'models[1].name: duplicate of models[0].name "chat"',
      ],
      [
        models([
          { ...chat, hosts: ["npu-a"] },
          { ...chat, name: "chat2", hosts: ["npu-b"] },
        ]),
        'models[1].servedNames: "MiniMaxAI/MiniMax-M2.7" (the model id, served when servedNames is unset) is served by models[0] too: a request names one model; give each model names of its own',
      ],
      [
        models([
          { ...chat, hosts: ["npu-a"] },
          { ...tiny, servedNames: ["tiny", "MiniMaxAI/MiniMax-M2.7"], hosts: ["npu-b", "npu-c"] },
        ]),
        'models[1].servedNames[1]: "MiniMaxAI/MiniMax-M2.7" is served by models[0] too: a request names one model; give each model names of its own',
      ],
      [
        models([
          { ...chat, hosts: ["npu-a"] },
          { ...tiny, hosts: ["npu-a", "npu-c"] },
        ]),
        'models[1].hosts[0]: "npu-a" is listed by models[0] too: a server\'s NPUs and ports serve one model (its ranks take the NPUs and ports their recipe names)',
      ],
      [models([{ ...chat, hosts: ["npu-z"] }]), 'models[0].hosts[0]: names no entry of hosts; allowed: "npu-a", "npu-b", "npu-c", "npu-d" (got "npu-z")'],
      [models([{ ...chat }]), "models[0].hosts: required with platform: hosts: the names of the entries of hosts it runs on (missing)"],
      [
        onHosts({ router: undefined }),
        "router.host: required with models: on hosts one front door (Envoy and an endpoint picker per model) routes each request by its model field; give it a server (a host {name, address, user, port, hostKey}) or the name of an entry of hosts (or several router hosts in router.hosts) (missing)",
      ],
      [
        onKubernetes([chat], { kubernetes: { image: "registry.example.com/ml/vllm-rbln:0.12.0", provider: "istio" } }),
        "kubernetes.gateway: required with models: each model's HTTPRoute attaches to the Gateway and matches the model name the payload processor reads from the request body; give the Gateway {name, namespace} (missing)",
      ],
      [
        onKubernetes([chat], { kubernetes: { image: "registry.example.com/ml/vllm-rbln:0.12.0", gateway: { name: "g" } } }),
        `kubernetes.provider: "none" hooks no body-based routing into the Gateway (the payload processor's chart renders its ext_proc hook for istio and gke only), so no request of models would find its route; choose istio or gke`,
      ],
      [
        models([{ ...chat, hosts: ["npu-a"], compile: { registry: { repository: "registry.example.com/cache" } } }]),
        "models[0].revision: required with compile.registry: the compile key names the model's commit, so every stack that pulls a key serves the weights it was compiled for (missing)",
      ],
      [
        models([{ ...chat, name: "Chat", hosts: ["npu-a"] }]),
        "models[0].name: a DNS label: 1-63 lower-case letters, digits or '-', not starting or ending with '-' (got \"Chat\")",
      ],
      [
        models([{ ...chat, servedNames: ["my model"], hosts: ["npu-a"] }]),
        'models[0].servedNames[0]: printable ASCII without spaces, quotes or backslashes, such as MiniMaxAI/MiniMax-M2.7 or tiny-chat (got "my model")',
      ],
      // The plan's own refusals name the entry's keys, and an index into its hosts as the top level's.
      [
        models([
          { ...chat, hosts: ["npu-a"] },
          { ...tiny, hosts: ["npu-b"] },
        ]),
        'models[1].hosts: 1 given; strategy "two-role" needs exactly 2: 1 front servers, then 1 back servers, in that order',
      ],
      [
        models([{ ...chat, hosts: ["npu-a"], extraArgs: { main: ["--served-model-name", "x"] } }]),
        'models[0].extraArgs.main: "--served-model-name" comes from models[].servedNames; list the names there',
      ],
      [
        models([{ ...chat, hosts: ["npu-a"], extraEnv: { decode: { X: "1" } } }]),
        'models[0].extraEnv.decode: strategy "aggregated-data-expert-parallel" has no role "decode"; allowed: "main"',
      ],
      [
        onHosts({ hosts: [...HOSTS.slice(0, 2), { ...HOSTS[2]!, address: "door.example.com" }, HOSTS[3]] }),
        'hosts[2].address: "door.example.com" is a host name, but this host drains its endpoints at the front door (router.host) and copies caches from another server over SSH, under a grant (from= in authorized_keys) that sshd matches against the address it sees connect and never against a name (UseDNS no, its default); give the host\'s IP address',
      ],
    ];
    for (const [settings, message] of cases) expect(refusal(settings)).toBe(message);
  });

  it("shares kubernetes.resources: a role of any model's strategy, and none of no model's", () => {
    const resources = (roles: string[]) => ({ ...Object.fromEntries(roles.map((r) => [r, { requests: { cpu: "8" } }])) });
    const kubernetes = (roles: string[]) => ({
      image: "registry.example.com/ml/vllm-rbln:0.12.0",
      gateway: { name: "g" },
      provider: "istio",
      resources: resources(roles),
    });
    expect(refusal(onKubernetes([chat, tiny], { kubernetes: kubernetes(["main", "front"]) }))).toBe("planned");
    expect(refusal(onKubernetes([chat, tiny], { kubernetes: kubernetes(["decode"]) }))).toBe(
      'kubernetes.resources.decode: no model\'s strategy has a role "decode"; allowed: "main", "front", "back"',
    );
  });
});

describe("the plan of a stack of models", () => {
  it("is a deployment per model: its name, served names, selection, compile keys and router release", () => {
    const pd = { name: "pd", strategy: "prefill-decode-disaggregated", target: "Throughput" };
    const stack = planStack(parseStackSettings(onKubernetes([pd, tiny])), catalog);
    expect(stack.models.map((m) => [m.entry.name, m.entry.servedNames, m.plan.model, m.plan.strategy])).toEqual([
      ["pd", ["MiniMaxAI/MiniMax-M2.7"], "MiniMaxAI/MiniMax-M2.7", "prefill-decode-disaggregated"],
      ["tiny", ["tiny-chat", SECOND_MODEL], SECOND_MODEL, "two-role"],
    ]);
    // The recipe's release is named after the model: two releases of one name would be one.
    expect(stack.models[0]!.plan.router?.release).toBe("router-pd");
    expect(stack.models.map((m) => m.compile.keys.length)).toEqual([2, 2]);
  });

  it("gives vLLM the served names when they are not the model id alone, and nothing else changes", () => {
    const stack = planStack(parseStackSettings(onHosts()), catalog);
    const served = (i: number) => stack.models[i]!.plan.roles.flatMap((r) => r.ranks.map((k) => k.flags.find((f) => f.name === "--served-model-name")?.values));
    expect(served(0)).toEqual([undefined]);
    expect(served(1)).toEqual([
      ["tiny-chat", SECOND_MODEL],
      ["tiny-chat", SECOND_MODEL],
      ["tiny-chat", SECOND_MODEL],
    ]);
    // The served name is not part of what RBLN compiles: the compile keys are those of the model alone.
    const alone = planStack(parseStackSettings(onHosts({ models: [{ ...tiny, servedNames: undefined, hosts: ["npu-b", "npu-c"] }] })), catalog);
    expect(alone.models[0]!.plan.roles.map((r) => r.compileKey)).toEqual(stack.models[1]!.plan.roles.map((r) => r.compileKey));
  });

  it("names each model's warnings, says a shared one once, and names the hosts no model uses", () => {
    const stack = planStack(parseStackSettings(onHosts({ insecureSkipHostKeyCheck: true })), catalog);
    const warnings = messagesAt(stack.messages, "warning");
    const skip = warnings.filter((w) => w.includes("insecureSkipHostKeyCheck"));
    expect(skip).toEqual([expect.stringMatching(/^insecureSkipHostKeyCheck: true: /)]);
    expect(warnings).toContain(`hosts[3]: "npu-d" is in no entry of models (nor router.host), so nothing runs there; remove it or list it in a model's hosts`);
    expect(stack.messages.some((m) => m.text.startsWith("tiny: "))).toBe(true);
  });
});

describe("monitoring of a stack of models", () => {
  const rendered = renderStack(planStack(parseStackSettings(onKubernetes()), catalog), { stack: "s", instance: "rbln-serving", secrets: [] });

  it("labels every series with the model's name, and each model alerts on its own series", () => {
    for (const model of rendered.models) {
      const name = model.deployment.entry.name!;
      const monitoring = model.kubernetes!.monitoring!;
      const relabelled = JSON.stringify(monitoring.podMonitors.map((m) => m.object));
      expect(relabelled).toContain(JSON.stringify({ action: "replace", targetLabel: "model", replacement: name }));
      const exprs = (monitoring.prometheusRule.spec as { groups: { rules: { expr: string }[] }[] }).groups[0]!.rules.map((r) => r.expr);
      expect(exprs.every((e) => e.includes(`model="${name}"`))).toBe(true);
      expect(monitoring.dashboard).toBeNull();
    }
  });

  it("has one dashboard and one namespace, the stack's, and writes them once", () => {
    expect(rendered.dashboard?.metadata.name).toBe("rbln-serving-dashboard");
    expect(rendered.namespace?.metadata.name).toBe("rbln-serving");
    const files = Object.keys(renderStackFiles(rendered));
    expect(files.filter((f) => f.endsWith("dashboard-configmap.yaml"))).toEqual(["kubernetes/dashboard-configmap.yaml"]);
    expect(files.filter((f) => f.endsWith("namespace.yaml"))).toEqual(["kubernetes/namespace.yaml"]);
    expect(files).toContain("models/tiny/kubernetes/front-deployment.yaml");
  });

  it("on hosts, labels each scrape target with its model's name", () => {
    const stack = planStack(parseStackSettings(onHosts()), catalog);
    expect(stack.models.flatMap((m) => scrapeTargets(m).map((t) => t.labels.model))).toEqual(["chat", "tiny", "tiny", "tiny"]);
  });
});

const SECRETS = { sshPrivateKey: "key", hfToken: "hf", apiKey: "api" };
const digest = (r: Registration) =>
  createHash("sha256")
    .update(JSON.stringify({ inputs: r.inputs, parent: r.parent, dependencies: [...r.dependencies].sort() }))
    .digest("hex");

/** What ModelServing registers for `settings`, by URN, each with a digest of its inputs, parent and dependencies. */
async function registered(settings: Record<string, unknown>): Promise<Map<string, { name: string; digest: string }>> {
  const { registrations, error } = await runUnderMocks(() => new ModelServing("rbln-serving", { settings, secrets: SECRETS, catalog }), {}, {});
  expect(error).toBeUndefined();
  return new Map(registrations.map((r) => [r.urn, { name: r.name, digest: digest(r) }]));
}

const ofModel = (resources: Map<string, { name: string; digest: string }>, model: string) =>
  new Map([...resources].filter(([, r]) => r.name.startsWith(`rbln-serving-${model}-`)));

describe("changes stay per model (the program under mocks)", async () => {
  const before = await registered(onKubernetes());
  // Each change of model chat, with the stack's own resources it may change: a served name is in the answers' list of every name.
  const changes: [string, Record<string, unknown>, string[]][] = [
    ["its axes", { axes: { spec_decode: "suffix" } }, []],
    ["its replicas", { replicas: 2 }, []],
    ["its extraArgs and extraEnv", { extraArgs: { main: ["--max-log-len", "100"] }, extraEnv: { main: { NOTE: "x" } } }, []],
    ["its served names", { servedNames: ["chat", "MiniMaxAI/MiniMax-M2.7"] }, ["rbln-serving-routing-answers-config", "rbln-serving-routing-answers"]],
  ];
  const SHARED = [
    "rbln-serving",
    "rbln-serving-dashboard",
    "rbln-serving-namespace",
    "rbln-serving-routing",
    "rbln-serving-routing-answers",
    "rbln-serving-routing-answers",
    "rbln-serving-routing-answers-config",
    "rbln-serving-routing-answers-route",
    "rbln-serving-routing-payload-processor",
  ];

  it("every resource is one model's, or the stack's own: the component, the namespace, the dashboard, the payload processor and the answers", () => {
    const shared = [...before.values()].filter((r) => !r.name.startsWith("rbln-serving-chat-") && !r.name.startsWith("rbln-serving-tiny-"));
    expect(shared.map((r) => r.name).sort()).toEqual(SHARED);
    expect(ofModel(before, "chat").size).toBeGreaterThan(5);
    expect(ofModel(before, "tiny").size).toBeGreaterThan(5);
  });

  it.each(changes)(
    "changing model chat's %s changes resources of chat, none of tiny's and of the stack's only those naming every model",
    async (_, change, mayChange) => {
      const after = await registered(onKubernetes([{ ...chat, ...change }, tiny]));
      const changed = [...ofModel(after, "chat")].filter(([urn, r]) => before.get(urn)?.digest !== r.digest);
      expect(changed.length).toBeGreaterThan(0);
      expect([...ofModel(after, "tiny")]).toEqual([...ofModel(before, "tiny")]);
      const shared = [...after].filter(([, r]) => !r.name.startsWith("rbln-serving-chat-"));
      for (const [urn, r] of shared) if (!mayChange.includes(r.name)) expect(r, urn).toEqual(before.get(urn));
    },
  );

  it("changing model tiny changes none of chat's", async () => {
    const after = await registered(onKubernetes([chat, { ...tiny, axes: { tool_calling: "off" } }]));
    expect([...ofModel(after, "chat")]).toEqual([...ofModel(before, "chat")]);
    expect([...ofModel(after, "tiny")]).not.toEqual([...ofModel(before, "tiny")]);
  });

  it("adding or removing model tiny changes none of chat's", async () => {
    const alone = await registered(onKubernetes([chat]));
    expect([...ofModel(alone, "chat")]).toEqual([...ofModel(before, "chat")]);
    expect(ofModel(alone, "tiny").size).toBe(0);
  });
});

it("the shipped catalog serves one model twice under two names", () => {
  const stack = planStack(
    parseStackSettings(
      onKubernetes([
        { ...chat, servedNames: ["minimax-latency"] },
        { ...chat, name: "batch", target: "Throughput", servedNames: ["minimax-batch"] },
      ]),
    ),
    shippedCatalog,
  );
  expect(stack.models.map((m) => m.entry.servedNames)).toEqual([["minimax-latency"], ["minimax-batch"]]);
});
