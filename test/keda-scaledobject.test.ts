import { describe, expect, it } from "vitest";
import keda from "./fixtures/keda.json";
import keda220 from "./fixtures/keda-v2.20.json";
import { autoscalingSeries, checkScaledObject, checkScaledObjectOnBoth, checkScaledObjectV220 } from "./helpers/keda";

const PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090";
const series = autoscalingSeries();
const fill = (query: string) =>
  query
    .replace("${NAMESPACE}", "rbln-serving")
    .replace("${EPP_SERVICE}", "rbln-serving-epp")
    .replace("${MODEL}", "MiniMaxAI/MiniMax-M2.7")
    .replace("${INFERENCE_POOL}", "rbln-serving");

/** llm-d's queue-signal ScaledObject (keda.json llmd.kedaEpp.queue), aimed at our decode Deployment. */
function queueScaledObject(): Record<string, any> {
  const guide = structuredClone(keda.facts["llmd.kedaEpp.queue"].value); // the tests mutate it
  return {
    apiVersion: "keda.sh/v1alpha1",
    kind: "ScaledObject",
    metadata: { name: "decode", namespace: "rbln-serving" },
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "rbln-serving-decode" },
      pollingInterval: guide.pollingInterval,
      cooldownPeriod: guide.cooldownPeriod,
      minReplicaCount: guide.minReplicaCount,
      maxReplicaCount: guide.maxReplicaCount,
      fallback: { failureThreshold: 3, replicas: 2, behavior: "currentReplicasIfHigher" },
      advanced: { horizontalPodAutoscalerConfig: { name: guide.hpaName, behavior: guide.behavior } },
      triggers: guide.triggers.map((t) => ({
        type: "prometheus",
        name: t.name,
        metricType: t.metricType,
        metadata: { serverAddress: PROMETHEUS, query: fill(t.query), threshold: t.threshold, ignoreNullValues: "false" },
      })),
    },
  };
}

function tokenAware(role: "prefill" | "decode"): Record<string, any> {
  const guide = keda.facts[role === "prefill" ? "llmd.tokenAware.prefill" : "llmd.tokenAware.decode"].value;
  const behavior = structuredClone(keda.facts["llmd.tokenAware.prefill"].value.behavior);
  return {
    apiVersion: "keda.sh/v1alpha1",
    kind: "ScaledObject",
    metadata: { name: role, annotations: { "autoscaling.keda.sh/paused": "false" } },
    spec: {
      scaleTargetRef: { name: `rbln-serving-${role}` },
      minReplicaCount: guide.minReplicaCount,
      maxReplicaCount: guide.maxReplicaCount,
      pollingInterval: guide.pollingInterval,
      advanced: { horizontalPodAutoscalerConfig: { behavior } },
      triggers: [
        {
          type: "prometheus",
          metricType: "AverageValue",
          metadata: {
            serverAddress: PROMETHEUS,
            query: guide.query,
            threshold: guide.threshold,
            activationThreshold: guide.activationThreshold,
            unsafeSsl: "false",
          },
        },
      ],
    },
  };
}

describe("checkScaledObject: ScaledObjects KEDA v2.19.0 takes", () => {
  it("llm-d's queue-signal ScaledObject, with a fallback", () => {
    expect(checkScaledObject(queueScaledObject(), { series })).toEqual([]);
  });

  it("llm-d's token-aware prefill and decode ScaledObjects", () => {
    expect(checkScaledObject(tokenAware("prefill"), { series })).toEqual([]);
    expect(checkScaledObject(tokenAware("decode"), { series })).toEqual([]);
  });

  it("every fallback behavior, paused-replicas, an idle count below min, a Value trigger", () => {
    for (const behavior of keda.facts["scaledObject.fallback"].value.fields.behavior.enum) {
      const so = queueScaledObject();
      so.spec.fallback.behavior = behavior;
      so.spec.idleReplicaCount = 0;
      so.spec.triggers[1].metricType = "Value";
      so.metadata.annotations = { "autoscaling.keda.sh/paused-replicas": "1" };
      expect(checkScaledObject(so, { series }), behavior).toEqual([]);
    }
  });
});

describe("checkScaledObject: refusals, each naming the path", () => {
  const refused = (mutate: (so: Record<string, any>) => void, options = { series }) => {
    const so = queueScaledObject();
    mutate(so);
    return checkScaledObject(so, options);
  };

  it("a fallback behavior KEDA does not know, or a negative threshold", () => {
    expect(refused((so) => (so.spec.fallback.behavior = "sometimes"))).toEqual([
      'spec.fallback.behavior: "sometimes" is not one of static, currentReplicas, currentReplicasIfHigher, currentReplicasIfLower',
    ]);
    expect(refused((so) => (so.spec.fallback.failureThreshold = -1))).toEqual(["spec.fallback.failureThreshold: -1 is outside 0..2147483647"]);
    expect(refused((so) => delete so.spec.fallback.replicas)).toEqual(["spec.fallback.replicas: required"]);
  });

  it("a misspelt spec field, which KEDA's schema (and @kubernetes-models/keda) would accept and ignore", () => {
    expect(refused((so) => (so.spec.polingInterval = 15))[0]).toMatch(/^spec\.polingInterval: unknown field; allowed: scaleTargetRef, pollingInterval,/);
  });

  it("an int32 field given as a string", () => {
    expect(refused((so) => (so.spec.pollingInterval = "15"))).toEqual(['spec.pollingInterval: "15" is not an integer']);
  });

  it("min above max, idle not below min", () => {
    expect(refused((so) => (so.spec.minReplicaCount = 9))).toEqual(["spec.minReplicaCount: 9 is above maxReplicaCount 8"]);
    expect(refused((so) => (so.spec.idleReplicaCount = 1))).toEqual(["spec.idleReplicaCount: 1 must be below minReplicaCount 1"]);
  });

  it("a metricType the HPA refuses for an external scaler", () => {
    expect(refused((so) => (so.spec.triggers[0].metricType = "Utilization"))).toEqual([
      'spec.triggers[0].metricType: "Utilization" is not one of AverageValue, Value for an external scaler',
    ]);
  });

  it("prometheus metadata: a missing threshold, a misspelt key, a threshold that is no number, a non-boolean flag, a bad timeout", () => {
    expect(refused((so) => delete so.spec.triggers[0].metadata.threshold)).toEqual(["spec.triggers[0].metadata.threshold: required"]);
    expect(refused((so) => (so.spec.triggers[0].metadata.ignoreNullValue = "false"))[0]).toMatch(
      /^spec\.triggers\[0\]\.metadata\.ignoreNullValue: unknown field/,
    );
    expect(refused((so) => (so.spec.triggers[0].metadata.threshold = "one"))).toEqual(['spec.triggers[0].metadata.threshold: "one" is not a number']);
    expect(refused((so) => (so.spec.triggers[0].metadata.ignoreNullValues = "maybe"))).toEqual([
      'spec.triggers[0].metadata.ignoreNullValues: "maybe" is not a boolean',
    ]);
    expect(refused((so) => (so.spec.triggers[0].metadata.timeout = "soon"))).toEqual([
      'spec.triggers[0].metadata.timeout: "soon" is neither a duration ("30s") nor milliseconds',
    ]);
    expect(refused((so) => (so.spec.triggers[0].metadata.threshold = 1))).toEqual([
      "spec.triggers[0].metadata.threshold: 1 is not a string (KEDA metadata is a map of strings)",
    ]);
  });

  it("a query selecting a series nobody exports (only when the series are given)", () => {
    const typo = (so: Record<string, any>) => (so.spec.triggers[0].metadata.query = "sum(llm_d_epp_queue_size)");
    expect(refused(typo)).toEqual(['spec.triggers[0].metadata.query: selects "llm_d_epp_queue_size", which no known exporter exposes']);
    expect(refused(typo, { series: undefined as never })).toEqual([]);
  });

  it("two triggers of one name, a trigger without type, no triggers at all", () => {
    expect(refused((so) => (so.spec.triggers[1].name = so.spec.triggers[0].name))).toEqual([
      'spec.triggers[1].name: "epp-queue-size" is also the name of triggers[0]; names must be unique',
    ]);
    expect(refused((so) => delete so.spec.triggers[0].type)[0]).toBe("spec.triggers[0].type: required");
    expect(refused((so) => (so.spec.triggers = []))).toEqual(["spec.triggers: needs at least one trigger"]);
    expect(refused((so) => delete so.spec.triggers)).toEqual(["spec.triggers: required"]);
  });

  it("a fallback with only cpu/memory triggers", () => {
    expect(refused((so) => (so.spec.triggers = [{ type: "cpu", metricType: "Utilization", metadata: { value: "60" } }]))).toEqual([
      "spec.fallback: needs at least one trigger that is not cpu or memory",
    ]);
  });

  it("useCachedMetrics on a cron trigger", () => {
    expect(
      refused((so) =>
        so.spec.triggers.push({
          type: "cron",
          useCachedMetrics: true,
          metadata: { timezone: "UTC", start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: "2" },
        }),
      ),
    ).toEqual(["spec.triggers[2].useCachedMetrics: not supported for the cron scaler"]);
  });

  it("HPA behavior: a policy type the HPA does not know, a zero period, an unknown direction", () => {
    const behavior = (so: Record<string, any>) => so.spec.advanced.horizontalPodAutoscalerConfig.behavior;
    expect(refused((so) => (behavior(so).scaleUp.policies[0].type = "Percentage"))).toEqual([
      'spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.policies[0].type: "Percentage" is not one of Pods, Percent',
    ]);
    expect(refused((so) => (behavior(so).scaleDown.policies[0].periodSeconds = 0))).toEqual([
      "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies[0].periodSeconds: 0 is outside 1..2147483647",
    ]);
    expect(refused((so) => (behavior(so).scaleSideways = {}))[0]).toMatch(
      /^spec\.advanced\.horizontalPodAutoscalerConfig\.behavior\.scaleSideways: unknown field/,
    );
  });

  it("a pause annotation KEDA would read as true, an annotation KEDA does not read, a scaleTargetRef without name", () => {
    expect(refused((so) => (so.metadata.annotations = { "autoscaling.keda.sh/paused": "no" }))).toEqual([
      'metadata.annotations["autoscaling.keda.sh/paused"]: "no" is not "true" or "false" (KEDA would read it as true)',
    ]);
    expect(refused((so) => (so.metadata.annotations = { "autoscaling.keda.sh/pause": "true" }))[0]).toMatch(
      /^metadata\.annotations\["autoscaling\.keda\.sh\/pause"\]: not an annotation KEDA reads/,
    );
    expect(refused((so) => (so.metadata.annotations = { "autoscaling.keda.sh/paused-replicas": "two" }))).toEqual([
      'metadata.annotations["autoscaling.keda.sh/paused-replicas"]: "two" is not a replica count',
    ]);
    expect(refused((so) => delete so.spec.scaleTargetRef.name)).toEqual(["spec.scaleTargetRef.name: required"]);
  });

  it("the wrong kind or apiVersion", () => {
    expect(refused((so) => (so.apiVersion = "keda.k8s.io/v1alpha1"))).toEqual(['apiVersion: "keda.k8s.io/v1alpha1" is not keda.sh/v1alpha1']);
    expect(refused((so) => (so.kind = "ScaledJob"))).toEqual(['kind: "ScaledJob" is not ScaledObject']);
  });
});

describe("checkScaledObjectV220: what KEDA v2.20 adds, from keda-v2.20.json", () => {
  /** llm-d's queue ScaledObject as both versions take it silently: min >= 1, so no pollingInterval or cooldownPeriod. */
  const silent = () => {
    const so = queueScaledObject();
    delete so.spec.pollingInterval;
    delete so.spec.cooldownPeriod;
    return so;
  };
  const v220 = (mutate: (so: Record<string, any>) => void) => {
    const so = silent();
    mutate(so);
    return checkScaledObjectV220(so);
  };
  const COOLDOWN = `spec.cooldownPeriod: ${keda220.facts["warn.cooldownPeriod"].value.warning}`;
  const POLLING = `spec.pollingInterval: ${keda220.facts["warn.pollingInterval"].value.warning}`;

  it("takes llm-d's ScaledObject without pollingInterval and cooldownPeriod, on both versions", () => {
    expect(checkScaledObjectOnBoth(silent(), { series })).toEqual([]);
  });

  it("warns about cooldownPeriod and pollingInterval above zero, whatever their value, unless idleReplicaCount is 0 or (polling) a trigger caches metrics", () => {
    expect(v220((so) => (so.spec.cooldownPeriod = 300))).toEqual({ refusals: [], warnings: [COOLDOWN] });
    expect(v220((so) => (so.spec.pollingInterval = 30))).toEqual({ refusals: [], warnings: [POLLING] });
    expect(checkScaledObjectOnBoth(queueScaledObject(), { series })).toEqual([`KEDA 2.20 warns: ${COOLDOWN}`, `KEDA 2.20 warns: ${POLLING}`]);
    // The silencers the fixture lists.
    const both = (more: (so: Record<string, any>) => void) => (so: Record<string, any>) => {
      Object.assign(so.spec, { pollingInterval: 15, cooldownPeriod: 300 });
      more(so);
    };
    expect(v220(both((so) => Object.assign(so.spec, { minReplicaCount: 0 }))).warnings).toEqual([]);
    expect(v220(both((so) => Object.assign(so.spec, { idleReplicaCount: 0 }))).warnings).toEqual([]);
    expect(v220(both((so) => Object.assign(so.spec.triggers[0], { useCachedMetrics: true }))).warnings).toEqual([COOLDOWN]);
    // v2.19 never warns.
    expect(checkScaledObject(queueScaledObject(), { series })).toEqual([]);
  });

  it("refuses a name over 63 characters and an HPA name over 63 (keda-hpa-<name>: a name over 54), unless the HPA is named", () => {
    const name = (length: number) => (so: Record<string, any>) => (so.metadata.name = "s".repeat(length));
    const noHpaName = (so: Record<string, any>) => delete so.spec.advanced.horizontalPodAutoscalerConfig.name;
    expect(v220((so) => name(54)(so) && noHpaName(so)).refusals).toEqual([]);
    expect(v220((so) => name(55)(so) && noHpaName(so)).refusals).toEqual([`HPA name "keda-hpa-${"s".repeat(55)}" is 64 characters; at most 63`]);
    expect(v220(name(63)).refusals).toEqual([]);
    expect(v220(name(64)).refusals).toEqual([`metadata.name: "${"s".repeat(64)}" is 64 characters; at most 63`]);
    expect(v220((so) => (so.spec.advanced.horizontalPodAutoscalerConfig.name = "h".repeat(64))).refusals).toEqual([
      `HPA name "${"h".repeat(64)}" is 64 characters; at most 63`,
    ]);
    // v2.19 takes them all.
    expect(checkScaledObject({ ...silent(), metadata: { name: "s".repeat(80) } }, { series })).toEqual([]);
  });

  it("refuses bad replica bounds in the webhook and the CRD's rule, with the HPA's minimum of 1 for 0", () => {
    expect(v220((so) => (so.spec.minReplicaCount = 9)).refusals).toEqual([
      "spec.minReplicaCount: the HPA's minimum 9 is above maxReplicaCount 8",
      "spec.minReplicaCount: 9 is above maxReplicaCount 8 (the CRD's rule)",
    ]);
    expect(v220((so) => Object.assign(so.spec, { minReplicaCount: 0, idleReplicaCount: 1 })).refusals).toEqual([
      "spec.idleReplicaCount: 1 must be below the HPA's minimum 1",
    ]);
    expect(v220((so) => Object.assign(so.spec, { minReplicaCount: 101, maxReplicaCount: undefined })).refusals).toContain(
      "spec.minReplicaCount: 101 is above maxReplicaCount 100 (the CRD's rule)",
    );
  });

  it("refuses what the new CRD markers refuse: minimums, empty names and types, no triggers, unknown enums", () => {
    expect(v220((so) => (so.spec.pollingInterval = 0)).refusals).toEqual(["spec.pollingInterval: 0 is below the CRD's minimum 1"]);
    expect(v220((so) => (so.spec.maxReplicaCount = 0)).refusals).toContain("spec.maxReplicaCount: 0 is below the CRD's minimum 1");
    expect(v220((so) => (so.spec.fallback.replicas = -1)).refusals).toEqual(["spec.fallback.replicas: -1 is below the CRD's minimum 0"]);
    expect(v220((so) => (so.spec.scaleTargetRef.name = "")).refusals).toEqual(["spec.scaleTargetRef.name: empty"]);
    expect(v220((so) => (so.spec.triggers[0].type = "")).refusals).toEqual(["spec.triggers[0].type: empty"]);
    expect(v220((so) => (so.spec.triggers = [])).refusals).toEqual(["spec.triggers: fewer than 1"]);
    expect(v220((so) => (so.spec.triggers[0].authenticationRef = { name: "a", kind: "Secret" })).refusals).toEqual([
      'spec.triggers[0].authenticationRef.kind: "Secret" is not one of TriggerAuthentication, ClusterTriggerAuthentication',
    ]);
    expect(v220((so) => (so.spec.fallback.behavior = "sometimes")).refusals).toEqual([
      'spec.fallback.behavior: "sometimes" is not one of static, currentReplicas, currentReplicasIfHigher, currentReplicasIfLower, scalingModifiers',
    ]);
  });

  it("refuses fallback behavior scalingModifiers without a formula; v2.19's CRD refuses the value itself", () => {
    expect(v220((so) => (so.spec.fallback.behavior = "scalingModifiers")).refusals).toEqual([
      "spec.fallback.behavior: scalingModifiers needs spec.advanced.scalingModifiers.formula",
    ]);
    const withFormula = (so: Record<string, any>) => {
      so.spec.fallback.behavior = "scalingModifiers";
      so.spec.advanced.scalingModifiers = { formula: "epp-queue-size" };
    };
    expect(v220(withFormula).refusals).toEqual([]);
    const so = silent();
    withFormula(so);
    expect(checkScaledObjectOnBoth(so, { series })[0]).toMatch(/^KEDA 2\.19: spec\.fallback\.behavior: "scalingModifiers" is not one of/);
  });
});
