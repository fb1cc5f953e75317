import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { warning } from "../core/plan/messages";
import { parse as parseYaml } from "yaml";
import { ScaledObject as ScaledObjectModel } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { renderDeployment } from "../core/render/deployment";
import { renderFiles, toYaml } from "../core/render/files";
import { compileLock } from "../core/render/kubernetes/compileLock";
import { KUBERNETES_DEFAULTS } from "../core/render/kubernetes/defaults";
import { COMPILE_KEY_LABEL } from "../core/render/kubernetes/role";
import { unavailableCount } from "../core/rollout/waves";
import type { RenderedScaler } from "../core/render/kubernetes/scaledObjects";
import { runProgram } from "../program";
import { DEFAULT_DURATIONS } from "../bench/deployModel";
import { drainCover, scalerTimings } from "../bench/scaling";
import keda from "./fixtures/keda.json";
import { validateEndpointPickerConfig } from "./helpers/eppConfig";
import { autoscalingSeries, checkScaledObjectOnBoth } from "./helpers/keda";
import { ofType, runUnderMocks } from "./helpers/pulumiHarness";
import { shippedCatalog } from "./helpers/recipes";
import { freePort } from "./helpers/sshd";

/* eslint-disable @typescript-eslint/no-explicit-any */

const SCALING = { enabled: true, maxReplicas: 4 };
const prodRaw = readStackFile("prod").raw;
const { preset: _preset, ...prodWithoutPreset } = prodRaw;
const aggregatedRaw = { ...prodWithoutPreset, strategy: "aggregated-data-expert-parallel", target: "Throughput", replicas: 2 };

const disaggregated = (autoscaling: object = SCALING, overrides: Record<string, unknown> = {}) =>
  planDeployment(parseStackSettings({ ...prodRaw, autoscaling, ...overrides }), shippedCatalog);
const aggregated = (autoscaling: object = SCALING, overrides: Record<string, unknown> = {}) =>
  planDeployment(parseStackSettings({ ...aggregatedRaw, autoscaling, ...overrides }), shippedCatalog);
const kubernetesOf = (deployment: ReturnType<typeof disaggregated>) =>
  renderDeployment(deployment, { stack: "prod", instance: "rbln-serving", secrets: [] }).kubernetes!;
const refusal = (plan: () => unknown) => {
  try {
    plan();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("not refused");
};

/** The series our ScaledObjects may query: vLLM's, the EPP's, and kube-state-metrics' (scaleToZero reads the Deployment's replicas). */
const series = new Set([...autoscalingSeries(), ...keda.facts["metrics.kubeStateMetrics"].value.map((m) => m.name)]);

describe("autoscaling settings", () => {
  it("are off by default: fixed replicas", () => {
    expect(planDeployment(parseStackSettings(prodRaw), shippedCatalog).autoscaling).toBeNull();
  });

  it("refuse hosts in one line (the servers are fixed), and say the key does nothing there when off", () => {
    const dev = readStackFile("dev").raw;
    expect(refusal(() => planDeployment(parseStackSettings({ ...dev, autoscaling: SCALING }), shippedCatalog))).toBe(
      "autoscaling.enabled: true is refused with platform: hosts: the servers are fixed; set the replicas and hosts you have, or use platform: kubernetes",
    );
    const off = planDeployment(parseStackSettings({ ...dev, autoscaling: { maxReplicas: 4 } }), shippedCatalog);
    expect(off.plan.messages).toContainEqual(warning("autoscaling: does nothing with platform: hosts; remove it or choose the platform that reads it"));
  });

  it("refuse limits that cross, naming the key that set each: maxReplicas below minReplicas, or below a role's replicas", () => {
    expect(refusal(() => disaggregated({ enabled: true, minReplicas: 3, maxReplicas: 2 }))).toBe(
      "autoscaling.maxReplicas: 2 is below prefill's minReplicas 3 (autoscaling.minReplicas); give at least 3",
    );
    expect(refusal(() => disaggregated({ enabled: true, maxReplicas: 4, roles: { decode: { maxReplicas: 1, minReplicas: 2 } } }))).toBe(
      "autoscaling.roles.decode.maxReplicas: 1 is below decode's minReplicas 2 (autoscaling.roles.decode.minReplicas); give at least 2",
    );
    expect(refusal(() => disaggregated({ enabled: true, maxReplicas: 2 }, { decodeReplicas: 3 }))).toBe(
      "autoscaling.maxReplicas: 2 is below decode's minReplicas 3 (decodeReplicas); give at least 3",
    );
    expect(refusal(() => disaggregated({ enabled: true }))).toBe(
      "autoscaling.roles.prefill.maxReplicas: required with autoscaling.enabled: true (or autoscaling.maxReplicas for every role); at least minReplicas 1",
    );
  });

  it("refuse limits for a role the strategy lacks", () => {
    expect(refusal(() => disaggregated({ ...SCALING, roles: { main: { maxReplicas: 2 } } }))).toBe(
      'autoscaling.roles.main: strategy "prefill-decode-disaggregated" has no role "main"; allowed: "prefill", "decode"',
    );
    expect(refusal(() => aggregated({ ...SCALING, roles: { decode: { target: 2 } } }))).toBe(
      'autoscaling.roles.decode: strategy "aggregated-data-expert-parallel" has no role "decode"; allowed: "main"',
    );
  });

  it("refuse zero replicas unless scaleToZero says so, and scaleToZero where nothing would wake a role", () => {
    expect(refusal(() => disaggregated({ ...SCALING, minReplicas: 0 }))).toBe(
      "autoscaling.minReplicas: 0 lets prefill scale to zero, which needs autoscaling.scaleToZero: true; otherwise at least 1",
    );
    expect(disaggregated({ ...SCALING, minReplicas: 0, scaleToZero: true }).autoscaling!.roles.map((r) => r.minReplicas)).toEqual([0, 0]);
    expect(refusal(() => aggregated({ ...SCALING, minReplicas: 0, scaleToZero: true }))).toMatch(
      /^autoscaling\.scaleToZero: true needs a strategy behind the llm-d router: without it no request waits anywhere/,
    );
  });

  it("refuse autoscaling without the monitoring KEDA reads, a Prometheus address that is no URL, and an unknown key", () => {
    expect(refusal(() => disaggregated(SCALING, { monitoring: { enabled: false } }))).toBe(
      "autoscaling.enabled: true needs monitoring.enabled: true: KEDA reads the series the PodMonitors have Prometheus scrape",
    );
    expect(refusal(() => disaggregated({ ...SCALING, prometheusAddress: "prometheus:9090" }))).toMatch(
      /^autoscaling\.prometheusAddress: .* \(got "prometheus:9090"\)$/,
    );
    expect(refusal(() => disaggregated({ ...SCALING, roles: { decode: { maxReplica: 3 } } }))).toBe(
      "autoscaling.roles.decode.maxReplica: unknown key; allowed: minReplicas, maxReplicas, target",
    );
  });

  it("resolve per role: the role's own limits over the stack-wide ones, minReplicas from the role's replicas, the compiled batch from max_num_seqs", () => {
    const { autoscaling } = disaggregated(
      { enabled: true, maxReplicas: 6, prometheusAddress: "http://prom.obs.svc:9090", roles: { prefill: { maxReplicas: 2, target: 4 } } },
      { decodeReplicas: 3 },
    );
    expect(autoscaling).toEqual({
      prometheusAddress: "http://prom.obs.svc:9090",
      scaleToZero: false,
      roles: [
        // prefill: one rank, max_num_seqs 4; decode: 4 data-parallel ranks of max_num_seqs 4.
        { role: "prefill", minReplicas: 1, maxReplicas: 2, compiledBatch: 4, target: 4 },
        { role: "decode", minReplicas: 3, maxReplicas: 6, compiledBatch: 16 },
      ],
    });
    // One process with 4 data-parallel engines of max_num_seqs 4; the default address is the operator's Service in monitoring.namespace.
    expect(aggregated(SCALING, { monitoring: { enabled: true, namespace: "obs" } }).autoscaling).toMatchObject({
      prometheusAddress: "http://prometheus-operated.obs.svc:9090",
      roles: [{ role: "main", minReplicas: 2, compiledBatch: 16 }],
    });
  });
});

describe("the ScaledObjects", () => {
  const variants = {
    disaggregated: disaggregated(),
    "disaggregated, scaleToZero": disaggregated({ ...SCALING, minReplicas: 0, scaleToZero: true }),
    aggregated: aggregated(),
  };

  it("one per served role, for its Deployment; each valid against KEDA's CRD schema (@kubernetes-models/keda) and checkScaledObject; none with autoscaling off", () => {
    expect(kubernetesOf(planDeployment(parseStackSettings(prodRaw), shippedCatalog)).scalers).toEqual([]);
    for (const [name, deployment] of Object.entries(variants)) {
      const { scalers, workloads } = kubernetesOf(deployment);
      expect(
        scalers.map((s) => s.role),
        name,
      ).toEqual(deployment.plan.roles.map((r) => r.role));
      for (const scaler of scalers) {
        const object = scaler.object as any;
        expect(() => new ScaledObjectModel(object).validate(), `${name} ${scaler.role}`).not.toThrow();
        expect(checkScaledObjectOnBoth(object, { series }), `${name} ${scaler.role}`).toEqual([]);
        const target = workloads.roles.find((r) => r.role === scaler.role)!.deployment;
        expect(object.spec.scaleTargetRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: target.metadata.name });
        expect(object.metadata.namespace).toBe(target.metadata.namespace);
        // Its Deployment's labels, so that selectors and `kubectl get -l` find the scaler with its role.
        expect(Object.keys(target.metadata.labels ?? {}).length).toBeGreaterThan(0);
        expect(object.metadata.labels).toEqual(target.metadata.labels);
      }
    }
  });

  it("neither KEDA 2.19 nor 2.20 warns about or refuses any of them: pollingInterval and cooldownPeriod only at a minimum of 0, names that fit", () => {
    const longest = (deployment: ReturnType<typeof disaggregated>) => {
      // The longest instance name the workloads take (Kubernetes' 63 characters per object name).
      for (let length = 63; length > 0; length--) {
        try {
          return { length, rendered: renderDeployment(deployment, { stack: "prod", instance: "i".repeat(length), secrets: [] }).kubernetes! };
        } catch {}
      }
      throw new Error("no instance name renders");
    };
    const cases = {
      ...variants,
      // Scale to zero allowed, but a role's own minimum above it: that one is above zero.
      "scaleToZero, decode at least 2": disaggregated({ ...SCALING, minReplicas: 0, scaleToZero: true, roles: { decode: { minReplicas: 2 } } }),
      "aggregated, minimum 3": aggregated({ ...SCALING, minReplicas: 3 }),
    };
    for (const [name, deployment] of Object.entries(cases)) {
      const long = longest(deployment);
      for (const { scalers } of [kubernetesOf(deployment), long.rendered]) {
        for (const scaler of scalers) {
          const spec = scaler.object.spec;
          expect(checkScaledObjectOnBoth(scaler.object, { series }), `${name} ${scaler.role} ${scaler.scaledObject}`).toEqual([]);
          expect(spec.pollingInterval === undefined && spec.cooldownPeriod === undefined, `${name} ${scaler.role}`).toBe(spec.minReplicaCount > 0);
          expect(scaler.hpa).toBe(`keda-hpa-${scaler.scaledObject}`);
        }
      }
      // The longest names there are: the launch ConfigMap (`<deployment>-launch-<10 hex>`, at most 63) keeps them within KEDA's 54.
      expect(long.length, name).toBeGreaterThan(30);
      expect(Math.max(...long.rendered.scalers.map((s) => s.scaledObject.length)), name).toBe(63 - "-launch-".length - 10);
    }
    for (const scaler of kubernetesOf(variants.disaggregated).scalers) expect(scaler.scaledObject).toBe(scaler.deployment);
  });

  it("the CRD schema really checks: it refuses a fallback behavior KEDA does not know", () => {
    const object = structuredClone(kubernetesOf(variants.disaggregated).scalers[0]!.object) as any;
    object.spec.fallback.behavior = "sometimes";
    expect(() => new ScaledObjectModel(object).validate()).toThrow(/behavior/);
  });

  it("follow the load time: scale up no sooner than a replica loads (the deploy model's figure), down gently, hold on failures", () => {
    for (const scaler of kubernetesOf(variants.disaggregated).scalers) {
      const { spec } = scaler.object;
      const { scaleUp, scaleDown } = spec.advanced.horizontalPodAutoscalerConfig.behavior;
      expect(KUBERNETES_DEFAULTS.autoscaling.loadSeconds).toBe(DEFAULT_DURATIONS.loadSeconds);
      expect(scaleUp!.stabilizationWindowSeconds).toBeGreaterThanOrEqual(DEFAULT_DURATIONS.loadSeconds);
      expect(scaleUp!.policies).toEqual([{ type: "Percent", value: 100, periodSeconds: DEFAULT_DURATIONS.loadSeconds }]);
      expect(scaleDown!.stabilizationWindowSeconds).toBeGreaterThanOrEqual(300);
      expect(scaleDown!.policies).toEqual([{ type: "Pods", value: 1, periodSeconds: 300 }]);
      expect(spec.fallback).toEqual({ failureThreshold: 3, replicas: 1, behavior: "currentReplicasIfHigher" });
      expect([spec.minReplicaCount, spec.maxReplicaCount]).toEqual([1, 4]);
    }
  });

  it("scale each role on its own signal: decode on the picker's pool-wide queue, prefill and main on their own vLLM queue; both on running requests against the compiled batch", () => {
    const triggers = (deployment: ReturnType<typeof disaggregated>) =>
      Object.fromEntries(
        kubernetesOf(deployment).scalers.map((s) => [
          s.role,
          s.object.spec.triggers.map((t) => ({ name: t.name, metricType: t.metricType, threshold: t.metadata.threshold, query: t.metadata.query })),
        ]),
      );
    const pd = triggers(disaggregated({ ...SCALING, roles: { decode: { target: 2 } } }));
    expect(pd.decode!.map((t) => [t.name, t.metricType, t.threshold])).toEqual([
      ["waiting", "Value", "2"],
      ["running", "Value", "12.8"],
    ]);
    expect(pd.decode![0]!.query).toMatch(/^\(\(\(sum\(llm_d_epp_flow_control_queue_size\{namespace="llm-serving",model="MiniMaxAI\/MiniMax-M2.7"\}\)\)/);
    expect(pd.prefill!.map((t) => [t.name, t.threshold])).toEqual([
      ["waiting", "1"],
      ["running", "3.2"],
    ]);
    expect(pd.prefill![0]!.query).toContain('sum(vllm:num_requests_waiting{namespace="llm-serving",pod=~"rbln-serving-prefill-[a-z0-9]+-[a-z0-9]+"})');
    const main = triggers(aggregated()).main!;
    expect(main[0]!.query).toContain('sum(vllm:num_requests_waiting{namespace="llm-serving",pod=~"rbln-serving-main-[a-z0-9]+-[a-z0-9]+"})');
    expect(main[1]!.threshold).toBe("12.8");
  });

  it("write each threshold as one number with one precision: the trigger's metadata and the query's hold value alike", () => {
    const holds = (query: string) => [...query.matchAll(/vector\(([^)]*)\)/g)].map((m) => m[1]!).filter((v) => v !== "0");
    const cases = [
      disaggregated({ ...SCALING, roles: { decode: { target: 1.23456 }, prefill: { target: 0.1 + 0.2 } } }),
      // The class: scale to zero (the hold value under another branch), the aggregated strategy, a target at the precision's floor.
      disaggregated({ ...SCALING, minReplicas: 0, scaleToZero: true, roles: { decode: { target: 2.0004999 } } }),
      aggregated({ ...SCALING, roles: { main: { target: 0.001 } } }),
      ...Object.values(variants),
    ];
    const seen: string[] = [];
    for (const deployment of cases) {
      for (const scaler of kubernetesOf(deployment).scalers) {
        for (const trigger of scaler.object.spec.triggers) {
          const { threshold, query } = trigger.metadata;
          expect(threshold, `${scaler.role} ${trigger.name}`).toMatch(/^\d+(\.\d{1,3})?$/);
          expect(holds(query), `${scaler.role} ${trigger.name}: ${query}`).toEqual(expect.arrayContaining([threshold]));
          for (const hold of holds(query)) expect(hold === threshold || /^\d+(\.\d{1,3})?$/.test(hold), hold).toBe(true);
          seen.push(`${scaler.role} ${trigger.name} ${threshold}`);
        }
      }
    }
    expect(seen.slice(0, 4)).toEqual(["prefill waiting 0.3", "prefill running 3.2", "decode waiting 1.235", "decode running 12.8"]);
    expect(seen).toContain("decode waiting 2");
    expect(seen).toContain("main waiting 0.001");
  });

  it("refuse a target the threshold's 3 decimals would write as 0", () => {
    expect(refusal(() => disaggregated({ ...SCALING, roles: { decode: { target: 0.0004 } } }))).toBe(
      "autoscaling.roles.decode.target: at least 0.001: the scaler writes its threshold with 3 decimals, and a smaller one would be 0 (got 0.0004)",
    );
  });

  it("leave replicas to KEDA: no Deployment sets spec.replicas; the rollout and the PodDisruptionBudget take the same count, the floor's", () => {
    const deployment = disaggregated({ enabled: true, maxReplicas: 8, roles: { decode: { minReplicas: 4 } } }, { rollout: { maxUnavailable: "50%" } });
    for (const role of kubernetesOf(deployment).workloads.roles) {
      const spec = role.deployment.spec as any;
      expect(spec.replicas, role.role).toBeUndefined();
      const expected = unavailableCount(role.scaling!.minReplicas, "50%");
      expect(spec.strategy, role.role).toEqual({ type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: expected } });
      expect(role.podDisruptionBudget.spec!.maxUnavailable, role.role).toBe(expected);
    }
    // 50% of the floors (1 and 4): one prefill pod, two decode pods at any count.
    expect(kubernetesOf(deployment).workloads.roles.map((r) => r.maxUnavailable)).toEqual([1, 2]);
  });

  it("tell the pods of the role's compile key apart: a pod label the PodMonitor turns into compile_key, and the EPP's flowControl gate for its queue", () => {
    const deployment = variants.disaggregated;
    const { workloads, monitoring, routerValues } = kubernetesOf(deployment);
    for (const role of workloads.roles) {
      const compileKey = deployment.plan.roles.find((r) => r.role === role.role)!.compileKey;
      expect((role.deployment.spec as any).template.metadata.labels[COMPILE_KEY_LABEL]).toBe(compileKey);
    }
    const endpoints = (monitoring!.podMonitors.find((m) => m.id === "vllm")!.object.spec as any).podMetricsEndpoints;
    for (const endpoint of endpoints) {
      expect(endpoint.relabelings).toContainEqual({
        action: "replace",
        sourceLabels: ["__meta_kubernetes_pod_label_rbln_serving_io_compile_key"],
        targetLabel: "compile_key",
      });
    }
    const epp = (routerValues as any).router.epp;
    const config = epp.pluginsCustomConfig[epp.pluginsConfigFile];
    expect(parseYaml(config).featureGates).toEqual(["flowControl"]);
    expect(validateEndpointPickerConfig(config)).toEqual([]);
    // Without autoscaling: no gate, no label, no relabelling.
    const fixed = kubernetesOf(planDeployment(parseStackSettings(prodRaw), shippedCatalog));
    const fixedEpp = (fixed.routerValues as any).router.epp;
    expect(parseYaml(fixedEpp.pluginsCustomConfig[fixedEpp.pluginsConfigFile]).featureGates).toBeUndefined();
    expect(JSON.stringify(fixed.workloads.roles.map((r) => r.deployment)) + JSON.stringify(fixed.monitoring)).not.toMatch(/compile[-_]key/);
  });

  it("are written by render as kubernetes/<role>-scaledobject.yaml", () => {
    const files = renderFiles(renderDeployment(variants.disaggregated, { stack: "prod", instance: "rbln-serving", secrets: [] }));
    expect(parseYaml(files["kubernetes/decode-scaledobject.yaml"]!)).toEqual(kubernetesOf(variants.disaggregated).scalers[1]!.object);
    expect(Object.keys(files).filter((f) => f.endsWith("-scaledobject.yaml"))).toEqual([
      "kubernetes/prefill-scaledobject.yaml",
      "kubernetes/decode-scaledobject.yaml",
    ]);
  });
});

describe("the program under mocks, with autoscaling on", () => {
  for (const [name, config] of [
    ["prefill-decode-disaggregated", { ...prodRaw, autoscaling: SCALING }],
    ["aggregated-data-expert-parallel", { ...aggregatedRaw, autoscaling: SCALING }],
  ] as const) {
    it(`${name}: a ScaledObject per served role for its Deployment, applied before it; no Deployment sets replicas; a second run registers the same`, async () => {
      const first = await runUnderMocks(runProgram, config, {});
      expect(first.error).toBeUndefined();
      const deployments = ofType(first.registrations, "kubernetes:apps/v1:Deployment");
      const scalers = ofType(first.registrations, "kubernetes:keda.sh/v1alpha1:ScaledObject");
      expect(scalers.map((s) => s.inputs.spec.scaleTargetRef.name).sort()).toEqual(deployments.map((d) => d.inputs.metadata.name).sort());
      for (const deployment of deployments) {
        expect(deployment.inputs.spec.replicas, deployment.name).toBeUndefined();
        const scaler = scalers.find((s) => s.inputs.spec.scaleTargetRef.name === deployment.inputs.metadata.name)!;
        expect(deployment.dependencies, deployment.name).toContain(scaler.urn);
        for (const trigger of scaler.inputs.spec.triggers) expect(checkScaledObjectOnBoth(scaler.inputs, { series }), trigger.name).toEqual([]);
      }
      // What Pulumi sends does not depend on the run: a second `pulumi up` has nothing to change, and never replicas.
      const second = await runUnderMocks(runProgram, config, {});
      const inputsOf = (run: typeof first) => run.registrations.filter((r) => /Deployment|ScaledObject/.test(r.type)).map((r) => [r.urn, r.inputs]);
      expect(inputsOf(second)).toEqual(inputsOf(first));
    });
  }
});

/** Runs a promtool unit test file; the output on failure. */
function promtoolTest(tests: object): { status: number | null; output: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "scaler-queries-"));
  fs.writeFileSync(path.join(dir, "test.yaml"), toYaml(tests));
  const run = spawnSync("promtool", ["test", "rules", path.join(dir, "test.yaml")], { encoding: "utf8" });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe("the scalers' queries, evaluated by Prometheus (promtool test rules)", () => {
  const scalerOf = (deployment: ReturnType<typeof disaggregated>, role: string): RenderedScaler =>
    kubernetesOf(deployment).scalers.find((s) => s.role === role)!;
  const queryOf = (scaler: RenderedScaler, trigger: string) => scaler.object.spec.triggers.find((t) => t.name === trigger)!.metadata.query;
  const pod = (deployment: string, i: number) => `${deployment}-5d4f8b7c9-pod${i}`;
  /** vLLM series of a pod, as our PodMonitor labels them, with its compile key. */
  const vllm = (name: string, podName: string, key: string, values: string, namespace = "llm-serving") => ({
    series: `${name}{namespace="${namespace}",pod="${podName}",compile_key="${key}",role="r",rank="0",model_name="m",engine="0"}`,
    values,
  });
  const queue = (values: string) => ({
    series:
      'llm_d_epp_flow_control_queue_size{namespace="llm-serving",model="MiniMaxAI/MiniMax-M2.7",fairness_id="f",priority="0",inference_pool="p",model_name="m",target_model_name="m"}',
    values,
  });
  const value = (expr: string, v: number) => ({ expr, eval_time: "1m", exp_samples: [{ labels: "{}", value: v }] });

  it("decode behind the router: the picker's queue per serving replica once a pod of the current compile key serves; the threshold (hold) until then, also across a change of key", () => {
    const decode = scalerOf(disaggregated(), "decode");
    const key = disaggregated().plan.roles.find((r) => r.role === "decode")!.compileKey;
    const [waiting, running] = [queryOf(decode, "waiting"), queryOf(decode, "running")];
    const name = decode.deployment;
    const run = promtoolTest({
      evaluation_interval: "1m",
      tests: [
        {
          name: "a change of compile key while the scaler exists: the old key's pods serve, the new key compiles; 10 queued",
          interval: "1m",
          input_series: [
            vllm("vllm:num_requests_running", pod(name, 1), "0ldc0mpi1ek3y00", "16 16"),
            vllm("vllm:num_requests_running", pod(name, 2), "0ldc0mpi1ek3y00", "16 16"),
            queue("10 10"),
          ],
          promql_expr_test: [value(waiting, 1), value(running, 12.8)],
        },
        {
          name: "a pod of the new key serves beside an old one: 10 queued over 2 serving pods; 24 running over 2",
          interval: "1m",
          input_series: [
            vllm("vllm:num_requests_running", pod(name, 1), "0ldc0mpi1ek3y00", "16 16"),
            vllm("vllm:num_requests_running", pod(name, 2), key, "8 8"),
            queue("10 10"),
          ],
          promql_expr_test: [value(waiting, 5), value(running, 12)],
        },
        {
          name: "nothing queued (the picker never queued: no series): 0, so the HPA may scale down",
          interval: "1m",
          input_series: [vllm("vllm:num_requests_running", pod(name, 1), key, "0 0")],
          promql_expr_test: [value(waiting, 0), value(running, 0)],
        },
        {
          name: "no pod serves (a first deploy compiling), or only another namespace's pod of the key: hold",
          interval: "1m",
          input_series: [vllm("vllm:num_requests_running", pod(name, 1), key, "4 4", "other-namespace"), queue("7 7")],
          promql_expr_test: [value(waiting, 1), value(running, 12.8)],
        },
      ],
    });
    expect(run.output).toContain("SUCCESS");
    expect(run.status, run.output).toBe(0);
  });

  it("scaleToZero: at zero replicas the picker's queue wakes the role, and an empty queue keeps it at zero; with replicas and no pod of the key serving, hold", () => {
    const deployment = disaggregated({ ...SCALING, minReplicas: 0, scaleToZero: true });
    const prefill = scalerOf(deployment, "prefill");
    const [waiting, running] = [queryOf(prefill, "waiting"), queryOf(prefill, "running")];
    const replicas = (v: string) => ({
      series: `kube_deployment_spec_replicas{namespace="llm-serving",deployment="${prefill.deployment}",job="kube-state-metrics"}`,
      values: v,
    });
    const run = promtoolTest({
      evaluation_interval: "1m",
      tests: [
        {
          name: "zero replicas, 3 queued: 3 wakes it",
          interval: "1m",
          input_series: [replicas("0 0"), queue("3 3")],
          promql_expr_test: [value(waiting, 3), value(running, 0)],
        },
        {
          name: "zero replicas, nothing queued: 0 keeps it there",
          interval: "1m",
          input_series: [replicas("0 0")],
          promql_expr_test: [value(waiting, 0), value(running, 0)],
        },
        {
          name: "one replica loading, 3 queued: hold",
          interval: "1m",
          input_series: [replicas("1 1"), queue("3 3")],
          promql_expr_test: [value(waiting, 1), value(running, 3.2)],
        },
      ],
    });
    expect(run.output).toContain("SUCCESS");
    expect(run.status, run.output).toBe(0);
  });

  it("aggregated: the role's own vLLM queue per serving replica", () => {
    const main = scalerOf(aggregated(), "main");
    const key = aggregated().plan.roles[0]!.compileKey;
    const run = promtoolTest({
      evaluation_interval: "1m",
      tests: [
        {
          name: "two pods of the key, 3 and 5 waiting: 4 per replica",
          interval: "1m",
          input_series: [
            vllm("vllm:num_requests_running", pod(main.deployment, 1), key, "16 16"),
            vllm("vllm:num_requests_running", pod(main.deployment, 2), key, "16 16"),
            vllm("vllm:num_requests_waiting", pod(main.deployment, 1), key, "3 3"),
            vllm("vllm:num_requests_waiting", pod(main.deployment, 2), key, "5 5"),
            // Another deployment's pods in the namespace do not count.
            vllm("vllm:num_requests_waiting", pod("rbln-serving-other", 1), key, "50 50"),
          ],
          promql_expr_test: [value(queryOf(main, "waiting"), 4), value(queryOf(main, "running"), 16)],
        },
      ],
    });
    expect(run.output).toContain("SUCCESS");
    expect(run.status, run.output).toBe(0);
  });
});

describe("the scalers' alerts", () => {
  it("pass promtool check rules and fire as promtool test rules expects: fallback, at maxReplicas for 15 minutes, unavailable longer than a load", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "scaler-alerts-"));
    const { monitoring } = kubernetesOf(disaggregated());
    const groups = (monitoring!.prometheusRule.spec as any).groups;
    expect(groups.map((g: any) => g.name)).toEqual(["rbln-serving", "rbln-serving-autoscaling"]);
    fs.writeFileSync(path.join(dir, "rbln-serving-autoscaling-rules.yaml"), toYaml(monitoring!.prometheusRule.spec));
    fs.copyFileSync(path.resolve(__dirname, "fixtures/prometheus/rbln-serving-autoscaling.test.yaml"), path.join(dir, "test.yaml"));
    const check = spawnSync("promtool", ["check", "rules", path.join(dir, "rbln-serving-autoscaling-rules.yaml")], { encoding: "utf8" });
    expect(check.stdout).toContain("SUCCESS: 9 rules found");
    const run = spawnSync("promtool", ["test", "rules", path.join(dir, "test.yaml")], { encoding: "utf8" });
    expect(run.stdout + run.stderr).toContain("SUCCESS");
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
});

describe("a pod the scaler adds loads the compiled cache (real bash, the rendered compile lock)", () => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "scaled-pod-"));
  const pods: ChildProcess[] = [];
  afterAll(() => {
    for (const pod of pods) pod.kill("SIGKILL");
    fs.rmSync(work, { recursive: true, force: true });
  });
  // A stand-in for vLLM: answers /health after 1 s (its compile or load).
  const LAUNCH = `#!/usr/bin/env bash
exec python3 -c '
import http.server, sys, time
ready = time.time() + 1
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200 if time.time() >= ready else 503); self.end_headers()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' "$PORT"
`;
  const start = (name: string, key: string, port: number, cacheRoot: string) => {
    const launchDir = path.join(work, name);
    fs.mkdirSync(launchDir);
    const lock = compileLock(key, cacheRoot, [port], launchDir, { pollSeconds: 1 });
    fs.writeFileSync(path.join(launchDir, lock.file), lock.text);
    fs.writeFileSync(path.join(launchDir, "launch.sh"), LAUNCH);
    let output = "";
    const pod = spawn(lock.command[0]!, lock.command.slice(1), {
      env: { PATH: process.env.PATH, PORT: String(port), LEASE_OWNER: name },
      stdio: ["ignore", "ignore", "pipe"],
    });
    pod.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    pods.push(pod);
    return () => output;
  };
  const until = async (check: () => boolean, what: string) => {
    for (let i = 0; i < 200; i++) {
      if (check()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`timed out waiting for ${what}`);
  };

  it("once a pod of the key has served (the scaler's gate opens only then), a new pod finds the marker and loads; it never takes the compile lease", async () => {
    const cacheRoot = path.join(work, "vllm");
    fs.mkdirSync(cacheRoot);
    const first = start("first", "abc123", await freePort(), cacheRoot);
    await until(() => first().includes("complete"), "the first pod's compile");
    expect(fs.existsSync(path.join(cacheRoot, "rbln-serving-locks", "compile-abc123.done"))).toBe(true);
    const scaled = start("scaled", "abc123", await freePort(), cacheRoot);
    await until(() => scaled().includes("loading what the writer made"), "the scaled pod's start");
    expect(scaled()).not.toContain("writing as");
    // A pod of another key (a change) would compile: the gate keeps the scaler from adding it.
    const changed = start("changed", "def456", await freePort(), cacheRoot);
    await until(() => changed().includes("writing as changed"), "the new key's compile");
  });
});

describe("the benchmark's figures, read from the rendered objects (bench/scaling.ts)", () => {
  it("a lower bound from a step in load to a new replica serving is the scale-up window less one HPA sync, plus a load; two scale-downs are 5 minutes apart at least", () => {
    const { scalers, workloads } = kubernetesOf(disaggregated());
    const timings = scalerTimings(scalers, workloads, DEFAULT_DURATIONS.loadSeconds);
    expect(timings.map((t) => [t.role, t.stepToServingLowerBoundMinutes, t.minutesBetweenScaleDowns])).toEqual([
      ["prefill", (900 - 15 + 900) / 60, 5],
      ["decode", (900 - 15 + 900) / 60, 5],
    ]);
    // What the bound leaves out is said, with the rendered probe periods.
    expect(timings[0]!.notModelled.join("; ")).toMatch(/HPA's sync .*scheduling and the image pull.*startup and readiness probes \(up to \d+ s and \d+ s\)/);
  });

  it("the grace period covers preStop plus --shutdown-timeout, and a pod spec where it does not is caught", () => {
    const { workloads } = kubernetesOf(disaggregated());
    expect(drainCover(workloads).map((d) => [d.role, d.preStopSeconds, d.shutdownTimeoutSeconds, d.gracePeriodSeconds, d.covered])).toEqual([
      ["prefill", 15, 3600, 3645, true],
      ["decode", 15, 3600, 3645, true],
    ]);
    const short = structuredClone(workloads);
    short.roles[1]!.deployment.spec!.template!.spec!.terminationGracePeriodSeconds = 120;
    expect(drainCover(short).map((d) => d.covered)).toEqual([true, false]);
  });
});
