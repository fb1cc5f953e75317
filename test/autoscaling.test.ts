import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { shippedCatalog } from "./helpers/recipes";

/* eslint-disable @typescript-eslint/no-explicit-any */

const SCALING = { enabled: true, maxReplicas: 4 };
const prodRaw = readStackFile("prod").raw;
const { preset: _preset, ...prodWithoutPreset } = prodRaw;
const aggregatedRaw = { ...prodWithoutPreset, strategy: "aggregated-data-expert-parallel", target: "Throughput", replicas: 2 };

const disaggregated = (autoscaling: object = SCALING, overrides: Record<string, unknown> = {}) => planDeployment(parseStackSettings({ ...prodRaw, autoscaling, ...overrides }), shippedCatalog);
const aggregated = (autoscaling: object = SCALING, overrides: Record<string, unknown> = {}) => planDeployment(parseStackSettings({ ...aggregatedRaw, autoscaling, ...overrides }), shippedCatalog);
const refusal = (plan: () => unknown) => {
  try {
    plan();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("not refused");
};


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
    expect(off.plan.warnings).toContain("autoscaling: does nothing with platform: hosts; remove it or choose the platform that reads it");
  });

  it("refuse limits that cross, naming the key that set each: maxReplicas below minReplicas, or below a role's replicas", () => {
    expect(refusal(() => disaggregated({ enabled: true, minReplicas: 3, maxReplicas: 2 }))).toBe(
      "autoscaling.maxReplicas: 2 is below prefill's minReplicas 3 (autoscaling.minReplicas); give at least 3",
    );
    expect(refusal(() => disaggregated({ enabled: true, maxReplicas: 4, roles: { decode: { maxReplicas: 1, minReplicas: 2 } } }))).toBe(
      "autoscaling.roles.decode.maxReplicas: 1 is below decode's minReplicas 2 (autoscaling.roles.decode.minReplicas); give at least 2",
    );
    expect(refusal(() => disaggregated({ enabled: true, maxReplicas: 2 }, { decodeReplicas: 3 }))).toBe("autoscaling.maxReplicas: 2 is below decode's minReplicas 3 (decodeReplicas); give at least 3");
    expect(refusal(() => disaggregated({ enabled: true }))).toBe("autoscaling.roles.prefill.maxReplicas: required with autoscaling.enabled: true (or autoscaling.maxReplicas for every role); at least minReplicas 1");
  });

  it("refuse limits for a role the strategy lacks", () => {
    expect(refusal(() => disaggregated({ ...SCALING, roles: { main: { maxReplicas: 2 } } }))).toBe('autoscaling.roles.main: strategy "prefill-decode-disaggregated" has no role "main"; allowed: "prefill", "decode"');
    expect(refusal(() => aggregated({ ...SCALING, roles: { decode: { target: 2 } } }))).toBe('autoscaling.roles.decode: strategy "aggregated-data-expert-parallel" has no role "decode"; allowed: "main"');
  });

  it("refuse zero replicas unless scaleToZero says so, and scaleToZero where nothing would wake a role", () => {
    expect(refusal(() => disaggregated({ ...SCALING, minReplicas: 0 }))).toBe("autoscaling.minReplicas: 0 lets prefill scale to zero, which needs autoscaling.scaleToZero: true; otherwise at least 1");
    expect(disaggregated({ ...SCALING, minReplicas: 0, scaleToZero: true }).autoscaling!.roles.map((r) => r.minReplicas)).toEqual([0, 0]);
    expect(refusal(() => aggregated({ ...SCALING, minReplicas: 0, scaleToZero: true }))).toMatch(/^autoscaling\.scaleToZero: true needs a strategy behind the llm-d router: without it no request waits anywhere/);
  });

  it("refuse autoscaling without the monitoring KEDA reads, a Prometheus address that is no URL, and an unknown key", () => {
    expect(refusal(() => disaggregated(SCALING, { monitoring: { enabled: false } }))).toBe("autoscaling.enabled: true needs monitoring.enabled: true: KEDA reads the series the PodMonitors have Prometheus scrape");
    expect(refusal(() => disaggregated({ ...SCALING, prometheusAddress: "prometheus:9090" }))).toMatch(/^autoscaling\.prometheusAddress: .* \(got "prometheus:9090"\)$/);
    expect(refusal(() => disaggregated({ ...SCALING, roles: { decode: { maxReplica: 3 } } }))).toBe("autoscaling.roles.decode.maxReplica: unknown key; allowed: minReplicas, maxReplicas, target");
  });

  it("resolve per role: the role's own limits over the stack-wide ones, minReplicas from the role's replicas, the compiled batch from max_num_seqs", () => {
    const { autoscaling } = disaggregated({ enabled: true, maxReplicas: 6, prometheusAddress: "http://prom.obs.svc:9090", roles: { prefill: { maxReplicas: 2, target: 4 } } }, { decodeReplicas: 3 });
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
    expect(aggregated(SCALING, { monitoring: { enabled: true, namespace: "obs" } }).autoscaling).toMatchObject({ prometheusAddress: "http://prometheus-operated.obs.svc:9090", roles: [{ role: "main", minReplicas: 2, compiledBatch: 16 }] });
  });
});

