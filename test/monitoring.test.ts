import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { DASHBOARD_FILE, EPP_METRICS, monitoringObjects, routerMonitoringValues } from "../core/render/kubernetes/monitoring";
import { alertRules } from "../core/monitoring/rules";
import { scrapeTargets } from "../core/monitoring/targets";
import { planDeployment } from "../core/plan/deployment";
import { toYaml } from "../core/render/files";
import { renderStackFiles } from "./helpers/render";
import { renderKubernetesWorkloads } from "../core/render/kubernetes/workloads";
import { routerChartValues } from "../core/render/kubernetes/chartValues";
import chartFacts from "./fixtures/llm-d-router-gateway-v0.10.0.json";
import exporterFixture from "./fixtures/rbln-metrics-exporter-v0.2.5.json";
import vllmFixture from "./fixtures/vllm-metrics-v0.30.0.json";
import { knownSeries, seriesNames } from "./helpers/promql";
import { shippedCatalog } from "./helpers/recipes";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";

const RULES_TEST = path.resolve(__dirname, "fixtures/prometheus/rbln-serving-rules.test.yaml");
const dashboard = JSON.parse(fs.readFileSync(DASHBOARD_FILE, "utf8"));
const panelExprs = (): { panel: string; expr: string }[] => dashboard.panels.flatMap((p: any) => p.targets.map((t: any) => ({ panel: p.title, expr: t.expr })));
const ruleExprs = () => alertRules().groups.flatMap((g) => g.rules.map((r) => ({ alert: r.alert, expr: r.expr })));

const prod = (overrides: Record<string, unknown> = {}) => planDeployment(parseStackSettings({ ...readStackFile("prod").raw, ...overrides }), shippedCatalog);
const hosts = (overrides: Record<string, unknown> = {}) =>
  planDeployment(
    parseStackSettings({
      strategy: "aggregated-pipeline-parallel",
      target: "Throughput",
      hosts: [
        { name: "npu-a", address: "fd00::a", hostKey: EXAMPLE_HOST_KEY },
        { name: "npu-b", address: "0:0:0:0:0:0:0:1", hostKey: EXAMPLE_HOST_KEY },
      ],
      replicas: 2,
      ...overrides,
    }),
    shippedCatalog,
  );

function promtool(...args: string[]) {
  const run = spawnSync("promtool", args, { encoding: "utf8" });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe("metric names", () => {
  it("the fixtures say where they come from and list what the dashboard needs", () => {
    expect(vllmFixture.tag).toBe("v0.30.0");
    expect(vllmFixture.source).toMatch(/vllm-project\/vllm/);
    expect(vllmFixture.metrics.length).toBe(41);
    expect(exporterFixture.source).toMatch(/RBLN-SW\/rbln-metrics-exporter tag v0\.2\.5/);
    expect(exporterFixture.metrics.every((m) => m.legacy.startsWith("RBLN_DEVICE_STATUS:") && m.current.startsWith("rbln_npu_"))).toBe(true);
  });

  it("finds the series of an expression, and flags a name vLLM does not export", () => {
    expect(
      seriesNames('histogram_quantile(0.95, sum by (le, role) (rate(vllm:time_to_first_token_seconds_bucket{role=~"$role"}[$__rate_interval]))) > 30'),
    ).toEqual(["vllm:time_to_first_token_seconds_bucket"]);
    expect(seriesNames("(rbln_npu_power or RBLN_DEVICE_STATUS:CARD_POWER) / up")).toEqual(["rbln_npu_power", "RBLN_DEVICE_STATUS:CARD_POWER", "up"]);
    const known = knownSeries();
    // Names of older vLLM releases, or a counter without its _total, are not on the list.
    for (const stale of ["vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket", "vllm:num_preemptions", "vllm:generation_tokens"])
      expect(known.has(stale), stale).toBe(false);
  });

  it("every dashboard panel and every alert uses only series on the fixtures", () => {
    const known = knownSeries();
    for (const { panel, expr } of panelExprs()) for (const name of seriesNames(expr)) expect(known.has(name), `${panel}: ${name}`).toBe(true);
    for (const { alert, expr } of ruleExprs()) for (const name of seriesNames(expr)) expect(known.has(name), `${alert}: ${name}`).toBe(true);
  });
});

describe("dashboard", () => {
  it("is a Grafana dashboard with the panels the issue asks for and namespace, model and role variables", () => {
    expect(dashboard).toMatchObject({ uid: "rbln-serving", schemaVersion: expect.any(Number) });
    expect(dashboard.templating.list.map((v: any) => v.name)).toEqual(["datasource", "namespace", "model", "role"]);
    const ids = dashboard.panels.map((p: any) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels) {
      expect(panel.datasource, panel.title).toEqual({ type: "prometheus", uid: "${datasource}" });
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets) expect(target.refId, panel.title).toMatch(/^[A-Z]$/);
    }
    const exprs = panelExprs()
      .map((p) => p.expr)
      .join("\n");
    for (const needle of [
      "vllm:request_success_total",
      "vllm:prompt_tokens_total",
      "vllm:generation_tokens_total",
      "vllm:time_to_first_token_seconds_bucket",
      "vllm:inter_token_latency_seconds_bucket",
      "vllm:e2e_request_latency_seconds_bucket",
      "vllm:num_requests_running",
      "vllm:num_requests_waiting",
      "vllm:kv_cache_usage_perc",
      "vllm:prefix_cache_hits_total",
      "vllm:spec_decode_num_accepted_tokens_total",
      "vllm:num_preemptions_total",
      "up{",
      "histogram_quantile(0.5,",
      "histogram_quantile(0.95,",
      "histogram_quantile(0.99,",
    ]) {
      expect(exprs, needle).toContain(needle);
    }
    // NPU panels read either name set of the exporter.
    for (const { legacy, current } of exporterFixture.metrics.filter((m) => m.current !== "rbln_npu_health")) {
      expect(exprs).toContain(`(${current} or ${legacy})`);
    }
  });

  it("every panel query parses as PromQL (promtool, with Grafana's variables bound)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dashboard-"));
    const bind = (expr: string) => expr.replaceAll("$__rate_interval", "5m").replace(/\$[a-z]+/g, ".*");
    const rules = { groups: [{ name: "dashboard", rules: panelExprs().map((p, i) => ({ record: `dashboard:panel_${i}`, expr: bind(p.expr) })) }] };
    fs.writeFileSync(path.join(dir, "dashboard.yaml"), toYaml(rules));
    const run = promtool("check", "rules", path.join(dir, "dashboard.yaml"));
    expect(run.output).toContain(`SUCCESS: ${panelExprs().length} rules found`);
    expect(run.status).toBe(0);
  });
});

describe("alert rules", () => {
  it("pass promtool check rules, as the hosts rules file and as the PrometheusRule's spec", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rules-"));
    const files = renderStackFiles(hosts(), [], "dev");
    fs.writeFileSync(path.join(dir, "hosts.yaml"), files["prometheus/rbln-serving-rules.yaml"]!);
    const k8s = monitoringObjects(prod(), renderKubernetesWorkloads(prod(), { instance: "rbln-serving", namespace: "llm-serving" }, []), "rbln-serving")!;
    fs.writeFileSync(path.join(dir, "kubernetes.yaml"), toYaml(k8s.prometheusRule.spec));
    const run = promtool("check", "rules", path.join(dir, "hosts.yaml"), path.join(dir, "kubernetes.yaml"));
    expect(run.output.match(/SUCCESS: 6 rules found/g), run.output).toHaveLength(2);
    expect(run.status).toBe(0);
  });

  it("write each threshold as the scalers do: one number, three decimals at most", () => {
    const exprs = alertRules({ ttftP95Seconds: 0.1 + 0.2, kvCacheUsage: 0.9500004 })
      .groups.flatMap((g) => g.rules)
      .map((r) => `${r.expr} ${r.annotations.description}`)
      .join("\n");
    expect(exprs).toContain(`vllm:kv_cache_usage_perc{role!="",rank!=""} > 0.95 `);
    expect(exprs).toContain("> 0.3 ");
    expect(exprs).toContain("(threshold 0.3s)");
    expect(exprs).not.toMatch(/0\.3000|0\.9500/);
  });

  it("fire as promtool test rules expects: rank down, queue growing, KV cache full, TTFT p95, preemptions", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rules-test-"));
    fs.writeFileSync(path.join(dir, "rbln-serving-rules.yaml"), renderStackFiles(hosts(), [], "dev")["prometheus/rbln-serving-rules.yaml"]!);
    fs.copyFileSync(RULES_TEST, path.join(dir, "rules.test.yaml"));
    const run = promtool("test", "rules", path.join(dir, "rules.test.yaml"));
    expect(run.output).toContain("SUCCESS");
    expect(run.status, run.output).toBe(0);
  });

  it("of one model of several fire on that model's series only: the same tests pass for model m, and none fires for another", () => {
    const run = (model: string) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rules-model-"));
      fs.writeFileSync(path.join(dir, "rbln-serving-rules.yaml"), toYaml(alertRules(undefined, model)));
      fs.copyFileSync(RULES_TEST, path.join(dir, "rules.test.yaml"));
      return promtool("test", "rules", path.join(dir, "rules.test.yaml"));
    };
    // The fixture's series are all of model "m".
    expect(run("m").status, run("m").output).toBe(0);
    const other = run("other");
    expect(other.status).not.toBe(0);
    expect(other.output).toContain("alertname: RblnServingRankDown");
    expect(other.output).toMatch(/got:\s*\[\]/);
    expect(alertRules(undefined, "chat").groups[0]!.rules.every((r) => r.expr.includes('model="chat"'))).toBe(true);
  });
});

describe("scraping on hosts", () => {
  it("lists every rank's metrics endpoint with host, role, rank, model and strategy; render writes it as targets.json", () => {
    const deployment = hosts();
    const targets = scrapeTargets(deployment);
    expect(targets).toEqual([
      {
        targets: ["[fd00::a]:8000"],
        labels: { host: "npu-a", role: "main", rank: "0", model: "MiniMaxAI/MiniMax-M2.7", strategy: "aggregated-pipeline-parallel" },
      },
      {
        targets: ["[::1]:8000"],
        labels: { host: "npu-b", role: "main", rank: "0", model: "MiniMaxAI/MiniMax-M2.7", strategy: "aggregated-pipeline-parallel" },
      },
    ]);
    expect(JSON.parse(renderStackFiles(deployment, [], "dev")["prometheus/targets.json"]!)).toEqual(targets);
    expect(scrapeTargets(prod())).toEqual([]);
  });
});

describe("scraping on Kubernetes", () => {
  const workloadsOf = (deployment = prod()) => renderKubernetesWorkloads(deployment, { instance: "rbln-serving", namespace: "llm-serving" }, []);

  it("scrapes /metrics on every rank port (prefill 8000, decode 8200-8203), not the sidecar's, labelled by role, rank, model and strategy", () => {
    const workloads = workloadsOf();
    const objects = monitoringObjects(prod(), workloads, "rbln-serving")!;
    const vllm = objects.podMonitors.find((m) => m.id === "vllm")!.object as any;
    expect(vllm.spec.selector).toEqual({ matchLabels: { "app.kubernetes.io/instance": "rbln-serving" } });
    const scraped = vllm.spec.podMetricsEndpoints.map((endpoint: any) => {
      const label = (name: string) => endpoint.relabelings.find((r: any) => r.targetLabel === name)?.replacement;
      const role = workloads.roles.find((r) => r.role === label("role"))!;
      const containerPort = (role.deployment as any).spec.template.spec.containers
        .flatMap((c: any) => c.ports ?? [])
        .find((p: any) => p.name === endpoint.port).containerPort;
      expect(endpoint.relabelings[0]).toEqual({
        action: "keep",
        sourceLabels: ["__meta_kubernetes_pod_label_app_kubernetes_io_component"],
        regex: label("role"),
      });
      expect([endpoint.path, label("model"), label("strategy")]).toEqual(["/metrics", "MiniMaxAI/MiniMax-M2.7", "prefill-decode-disaggregated"]);
      return `${label("role")}/${label("rank")}:${containerPort}`;
    });
    expect(scraped).toEqual(["prefill/0:8000", "decode/0:8200", "decode/1:8201", "decode/2:8202", "decode/3:8203"]);
  });

  it("scrapes the endpoint picker where the v0.10.0 chart serves its metrics, and opens them to Prometheus", () => {
    const epp = monitoringObjects(prod(), workloadsOf(), "rbln-serving")!.podMonitors.find((m) => m.id === "epp")!.object as any;
    expect(epp.spec.selector).toEqual({ matchLabels: { "llm-d-router-gateway": "router-epp" } });
    expect(epp.spec.podMetricsEndpoints[0]).toMatchObject({ port: EPP_METRICS.port, path: "/metrics" });
    const values = routerMonitoringValues(prod(), routerChartValues(prod().plan.router!, "prefill-decode-disaggregated", prod().settings)) as any;
    expect(values.router.monitoring).toEqual({ prometheus: { auth: { enabled: false } } });
    expect(Object.keys(chartFacts.keys)).toContain("router.monitoring.prometheus.auth.enabled");
    expect(values.router.epp.extProcPort).toBe(9002);
  });

  it("puts the dashboard in a ConfigMap the Grafana sidecar picks up, in the monitoring namespace", () => {
    const { dashboard: configMap, prometheusRule } = monitoringObjects(
      prod({ monitoring: { enabled: true, namespace: "observability" } }),
      workloadsOf(),
      "rbln-serving",
    )!;
    expect(configMap!.metadata).toMatchObject({ namespace: "observability", labels: { grafana_dashboard: "1" } });
    expect(JSON.parse((configMap as any).data["rbln-serving.json"])).toEqual(dashboard);
    expect((prometheusRule as any).spec).toEqual(alertRules());
  });

  it("admits the monitoring namespace on exactly the rank ports, and adds nothing with monitoring off", () => {
    const lastRules = workloadsOf(prod({ monitoring: { enabled: true, namespace: "observability" } })).roles.map((r) => [
      r.role,
      (r.networkPolicy as any).spec.ingress.at(-1),
    ]);
    const monitoringRule = (ports: number[]) => ({
      from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "observability" } } }],
      ports: ports.map((port) => ({ protocol: "TCP", port })),
    });
    expect(Object.fromEntries(lastRules)).toEqual({ prefill: monitoringRule([8000]), decode: monitoringRule([8200, 8201, 8202, 8203]) });
    const offDeployment = prod({ monitoring: { enabled: false } });
    for (const role of workloadsOf(offDeployment).roles)
      expect(JSON.stringify((role.networkPolicy as any).spec.ingress)).not.toMatch(/monitoring|observability/);
    expect(monitoringObjects(offDeployment, workloadsOf(offDeployment), "rbln-serving")).toBeNull();
    const files = Object.keys(renderStackFiles(offDeployment, [], "dev"));
    expect(files.filter((f) => /podmonitor|prometheusrule|dashboard/.test(f))).toEqual([]);
    expect(parseYaml(renderStackFiles(offDeployment, [], "dev")["router/values.yaml"]!).router.monitoring).toBeUndefined();
  });
});
