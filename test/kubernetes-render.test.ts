import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { Namespace, PersistentVolumeClaim, Secret, Service, ConfigMap } from "kubernetes-models/v1";
import { Deployment as DeploymentModel } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodMonitor, PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { bindRank } from "../core/plan/bind";
import { planDeployment } from "../core/plan/deployment";
import { readRouterIntent, routerChartValues } from "../core/router/chartValues";
import { renderFiles } from "../core/render/files";
import { renderKubernetesWorkloads, type KubeObject } from "../core/render/kubernetes/workloads";
import { shippedCatalog } from "./helpers/recipes";
import chartFacts from "./fixtures/llm-d-router-gateway-v0.10.0.json";

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  Namespace,
  PersistentVolumeClaim,
  Secret,
  Service,
  ConfigMap,
  Deployment: DeploymentModel,
  NetworkPolicy,
  PodMonitor,
  PrometheusRule,
};

function kubernetesDeployment(overrides: Record<string, unknown> = {}) {
  return planDeployment(parseStackSettings({ ...readStackFile("prod").raw, ...overrides }), shippedCatalog);
}

const variants = [
  kubernetesDeployment(),
  kubernetesDeployment({ preset: undefined, axes: { lmcache: "cpu", spec_decode: "suffix", prefix_caching: "on" }, target: "Latency", decodeReplicas: 3 }),
  kubernetes({ strategy: "aggregated-data-expert-parallel", target: "Latency", replicas: 2 }),
  kubernetes({ strategy: "aggregated-pipeline-parallel", target: "Throughput", axes: { lmcache: "rds" } }),
];

function kubernetes(overrides: Record<string, unknown>) {
  const { preset: _, ...raw } = readStackFile("prod").raw;
  return planDeployment(parseStackSettings({ ...raw, ...overrides }), shippedCatalog);
}

describe("rendered Kubernetes objects", () => {
  it("every object validates against the Kubernetes API schema", () => {
    let count = 0;
    for (const deployment of variants) {
      for (const [file, text] of Object.entries(renderFiles(deployment, ["hfToken", "apiKey"]))) {
        if (!file.startsWith("kubernetes/")) continue;
        const object = parseYaml(text) as KubeObject;
        const Model = MODELS[object.kind];
        expect(Model, `${file}: ${object.kind}`).toBeDefined();
        expect(() => new Model!(object).validate(), file).not.toThrow();
        count++;
      }
    }
    expect(count).toBeGreaterThan(20);
  });

  it("puts the secrets only in the Secret, as references elsewhere", () => {
    const files = renderFiles(variants[0]!, ["hfToken", "apiKey"]);
    expect(parseYaml(files["kubernetes/secret.yaml"]!).stringData).toEqual({ HF_TOKEN: "<secret:hfToken>", VLLM_API_KEY: "<secret:apiKey>" });
    const decode = parseYaml(files["kubernetes/decode-deployment.yaml"]!);
    expect(decode.spec.template.spec.containers[0].env).toContainEqual({ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "rbln-serving-secrets", key: "HF_TOKEN" } } });
    for (const [file, text] of Object.entries(files)) if (file !== "kubernetes/secret.yaml") expect(text, file).not.toContain("<secret:");
  });

  it("lets the picker reach every decode rank through the sidecar, and only live prefill ports", () => {
    const workloads = renderKubernetesWorkloads(variants[0]!, { instance: "rbln-serving", namespace: "llm-serving" }, []);
    const [prefill, decode] = workloads.roles.map((r) => r.deployment as any);
    const prefillPod = prefill.spec.template;
    const decodePod = decode.spec.template;
    expect(prefillPod.metadata.labels).toMatchObject({ "llm-d.ai/guide": "pd-disaggregation", "llm-d.ai/role": "prefill" });
    expect(prefillPod.metadata.annotations).toEqual({ "llm-d.ai/active-ports": "8000" });
    expect(prefillPod.spec.initContainers).toBeUndefined();
    expect(prefillPod.spec.containers[0].ports.map((p: any) => p.containerPort)).toEqual([8000]);
    expect(decodePod.metadata.labels).toMatchObject({ "llm-d.ai/guide": "pd-disaggregation", "llm-d.ai/role": "decode" });
    expect(decodePod.metadata.annotations).toEqual({ "llm-d.ai/active-ports": "8000,8001,8002,8003" });
    const [sidecar] = decodePod.spec.initContainers;
    expect(sidecar).toMatchObject({
      name: "routing-proxy",
      image: "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
      restartPolicy: "Always",
      args: ["--port=8000", "--model-server-port=8200", "--data-parallel-size=4", "--kv-connector=nixlv2", "--secure-proxy=false"],
    });
    expect(sidecar.ports.map((p: any) => p.containerPort)).toEqual([8000, 8001, 8002, 8003]);
    const vllm = decodePod.spec.containers[0];
    expect(vllm.ports.map((p: any) => p.containerPort)).toEqual([8200, 8201, 8202, 8203]);
    expect(vllm.resources.limits).toEqual({ "rebellions.ai/npu": "4" });
    for (const deployment of [prefill, decode]) {
      expect(deployment.spec.strategy).toEqual({ type: "Recreate" });
      const container = deployment.spec.template.spec.containers[0];
      const startupBudget = container.startupProbe.periodSeconds * container.startupProbe.failureThreshold;
      expect(startupBudget).toBeGreaterThanOrEqual(9600);
      expect(deployment.spec.progressDeadlineSeconds).toBeGreaterThan(startupBudget);
      expect(container.readinessProbe.exec.command.slice(3)).toEqual(["/v1/models", ...container.ports.map((p: any) => String(p.containerPort))]);
      expect(container.livenessProbe.exec.command[3]).toBe("/health");
      expect(deployment.spec.template.spec.volumes).toContainEqual({ name: "dshm", emptyDir: { medium: "Memory" } });
    }
    const pool = routerChartValues(workloads.router!, "prefill-decode-disaggregated", { provider: "none" }) as any;
    expect(pool.router.modelServers.targetPorts).toEqual([8000, 8001, 8002, 8003].map((number) => ({ number })));
    expect(Object.entries(pool.router.modelServers.matchLabels).every(([k, v]) => decodePod.metadata.labels[k] === v && prefillPod.metadata.labels[k] === v)).toBe(true);
  });

  it("lets only the gateway, the endpoint picker and the peer role reach the vLLM pods", () => {
    const workloads = renderKubernetesWorkloads(variants[0]!, { instance: "rbln-serving", namespace: "llm-serving" }, []);
    const policy = workloads.networkPolicy as any;
    expect(policy.spec.podSelector).toEqual({ matchLabels: { "app.kubernetes.io/instance": "rbln-serving" } });
    expect(policy.spec.ingress).toEqual([
      { from: [{ podSelector: { matchLabels: { "app.kubernetes.io/instance": "rbln-serving" } } }] },
      {
        from: [{ podSelector: { matchLabels: { "llm-d-router-gateway": "router-epp" } } }, { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "gateway-system" } } }],
        ports: [8000, 8001, 8002, 8003, 8200, 8201, 8202, 8203].map((port) => ({ protocol: "TCP", port })),
      },
      // monitoring.enabled in the prod stack: the monitoring namespace, on the ranks' own ports (not the sidecar's).
      { from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }], ports: [8000, 8200, 8201, 8202, 8203].map((port) => ({ protocol: "TCP", port })) },
    ]);
    expect(renderKubernetesWorkloads(variants[2]!, { instance: "x", namespace: "n" }, []).networkPolicy).toBeNull();
  });

  it("refuses an instance name that cannot prefix Kubernetes names", () => {
    expect(() => renderKubernetesWorkloads(variants[0]!, { instance: "Bad_Name", namespace: "n" }, [])).toThrow(/^name: "Bad_Name" cannot prefix Kubernetes object names/);
    const long = "a".repeat(40);
    expect(() => renderKubernetesWorkloads(variants[0]!, { instance: long, namespace: "n" }, [])).toThrow(/^name: "a{40}" makes the ConfigMap name "a{40}-prefill-launch-[0-9a-f]{10}" longer than 63 characters/);
  });

  it("scales roles separately: replicas for aggregated, prefillReplicas and decodeReplicas for xPyD", () => {
    const [prefill, decode] = renderKubernetesWorkloads(variants[1]!, { instance: "x", namespace: "n" }, []).roles;
    expect([prefill!.replicas, decode!.replicas]).toEqual([1, 3]);
    expect(renderKubernetesWorkloads(variants[2]!, { instance: "x", namespace: "n" }, []).roles.map((r) => (r.deployment as any).spec.replicas)).toEqual([2]);
  });

  it("launch scripts start exactly the plan's commands under real bash, POD_IP bound at run time", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "launch-"));
    // A stand-in vllm: records its argv and env (NUL-separated), then the last decode rank exits 3.
    fs.writeFileSync(
      path.join(dir, "vllm"),
      `#!/usr/bin/env bash\nport=none\nfor a in "$@"; do [ "$prev" = --port ] && port=$a; prev=$a; done\nprintf '%s\\0' "$@" > "$OUT/$port.argv"\nenv -0 > "$OUT/$port.env"\n[ "$port" = 8203 ] && { sleep 1; exit 3; }\n[ "$port" = 8000 ] && exit 0\nexec sleep 30\n`,
      { mode: 0o755 },
    );
    const deployment = variants[0]!;
    const workloads = renderKubernetesWorkloads(deployment, { instance: "rbln-serving", namespace: "llm-serving" }, []);
    for (const role of workloads.roles) {
      const out = fs.mkdtempSync(path.join(dir, `${role.role}-`));
      const result = spawnSync("bash", ["-c", role.launchScript], { env: { PATH: `${dir}:${process.env.PATH}`, POD_IP: "10.9.8.7", OUT: out }, encoding: "utf8", timeout: 60_000 });
      const plan = deployment.plan.roles.find((r) => r.role === role.role)!;
      expect(result.status, result.stderr).toBe(role.role === "decode" ? 3 : 0);
      for (const rank of plan.ranks) {
        const bound = bindRank(rank, { POD_IP: "10.9.8.7", EPP_HOST: workloads.eppHost! }, "kubernetes");
        const argv = fs.readFileSync(path.join(out, `${rank.ports[0]}.argv`), "utf8").split("\0").slice(0, -1);
        expect(["vllm", ...argv]).toEqual(bound.argv);
        const env = Object.fromEntries(fs.readFileSync(path.join(out, `${rank.ports[0]}.env`), "utf8").split("\0").filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
        expect(env).toMatchObject(bound.env);
      }
    }
  });
});

describe("router chart values", () => {
  const intent = readRouterIntent(variants[0]!.plan.router!);
  const values = routerChartValues(intent, "prefill-decode-disaggregated", { provider: "istio", gateway: { name: "gw", namespace: "gw-ns" } }) as any;

  function leafPaths(value: unknown, prefix = ""): string[] {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return [prefix];
    return Object.entries(value).flatMap(([k, v]) => (prefix === "router.epp.pluginsCustomConfig" ? [prefix] : leafPaths(v, prefix ? `${prefix}.${k}` : k)));
  }

  it("uses only keys the v0.10.0 chart reads, and every key it requires", () => {
    const known = Object.keys(chartFacts.keys);
    const used = [...new Set(leafPaths(values))];
    for (const key of used) expect(known.some((k) => key === k || key.startsWith(`${k}.`)), key).toBe(true);
    for (const key of chartFacts.required) expect(used.some((k) => k.startsWith(key)), key).toBe(true);
    expect(chartFacts.failureModes).toContain(values.router.inferencePool.failureMode);
    expect(chartFacts.providers).toContain(values.provider.name);
    expect(JSON.stringify(values)).not.toMatch(/endpoint_picker|ext_proc_port|scheduling_profiles|failure_mode|match_labels|target_ports|"ref"/);
    expect(values.httpRoute).toEqual({ create: true, inferenceGatewayName: "gw", inferenceGatewayNamespace: "gw-ns" });
    expect([`${chartFacts.chart.replace(/\/[^/]+$/, "")}/${intent.chart}`, intent.version]).toEqual([chartFacts.chart, chartFacts.version]);
  });

  it("holds an EndpointPickerConfig the v0.10.0 picker reads, with the recipe's plugins and weights", () => {
    const file = values.router.epp.pluginsConfigFile;
    const config = parseYaml(values.router.epp.pluginsCustomConfig[file]);
    expect(config.apiVersion).toBe(chartFacts.eppConfigApiVersion);
    expect(config.kind).toBe("EndpointPickerConfig");
    const defined = new Set(config.plugins.map((p: any) => p.name ?? p.type));
    for (const plugin of config.plugins) expect(chartFacts.pluginTypes, plugin.type).toContain(plugin.type);
    expect(config.schedulingProfiles.map((p: any) => p.name).sort()).toEqual(["decode", "prefill"]);
    for (const profile of config.schedulingProfiles) {
      for (const entry of profile.plugins) {
        expect(defined.has(entry.pluginRef), entry.pluginRef).toBe(true);
        expect(Object.keys(entry).every((k) => k === "pluginRef" || k === "weight")).toBe(true);
      }
      const recipe = intent.values.endpoint_picker.scheduling_profiles.find((p) => p.name === profile.name)!;
      expect(profile.plugins).toEqual(recipe.plugins.map((p) => ({ pluginRef: p.ref, ...(p.weight === undefined ? {} : { weight: p.weight }) })));
    }
    expect(config.plugins).toEqual(intent.values.endpoint_picker.plugins);
  });

  it("says in the plan where the recipe's router settings do nothing", () => {
    expect(variants[0]!.plan.warnings).toEqual([
      expect.stringMatching(/approx-prefix-cache-producer does not read them/),
      expect.stringMatching(/lruCapacityPerServer: 1024 is ignored while autoTune is on/),
    ]);
    expect(kubernetes({ strategy: "aggregated-data-expert-parallel", target: "Latency" }).plan.warnings).toEqual([]);
  });
});

describe("the Dockerfile", () => {
  it("pins exactly the recipe's packages, every one of them", () => {
    const dockerfile = fs.readFileSync(path.resolve(__dirname, "../Dockerfile"), "utf8");
    const recipe = shippedCatalog.get("MiniMaxAI/MiniMax-M2.7");
    for (const install of recipe.installs) {
      const arg = install.package.toUpperCase().replace(/-/g, "_") + "_VERSION";
      expect(dockerfile).toContain(`ARG ${arg}=${install.version}\n`);
      expect(dockerfile).toContain(`"${install.package}${install.extras.length ? `[${install.extras.join(",")}]` : ""}==\${${arg}}"`);
      expect(dockerfile).toContain(install.import);
    }
  });
});
