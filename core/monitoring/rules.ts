import { thresholdText } from "./queries";
/** A Prometheus alerting rule, as rule files and PrometheusRule objects write it. */
export interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  labels: { severity: "critical" | "warning" };
  annotations: { summary: string; description: string };
}

export interface RuleGroups {
  groups: { name: string; rules: AlertRule[] }[];
}

/** Thresholds of the alerts; the defaults suit a 204,800-token model on RBLN-CR13. */
export interface AlertThresholds {
  /** TTFT p95 above this many seconds for 10 minutes alerts. */
  ttftP95Seconds: number;
  /** KV-cache usage (0-1) above this for 5 minutes alerts. */
  kvCacheUsage: number;
}

export const DEFAULT_THRESHOLDS: AlertThresholds = { ttftP95Seconds: 30, kvCacheUsage: 0.95 };

/** The series of our ranks: every scrape target carries these labels (file_sd or PodMonitor relabelling). */
const RANK_LABELS = `role!="",rank!=""`;
const RANK = "{{ $labels.role }} rank {{ $labels.rank }} ({{ $labels.model }}, {{ $labels.host }}{{ $labels.pod }})";

/**
 * The alerts: a rank down, the front door down, a queue that keeps growing, KV cache nearly full,
 * slow first tokens, preemptions. With `model`, only that model's series (its `model` label): the
 * rules of one model deployment of a stack of several, each model's own object.
 */
export function alertRules(thresholds: AlertThresholds = DEFAULT_THRESHOLDS, model?: string): RuleGroups {
  const ofModel = model === undefined ? "" : `,model=${JSON.stringify(model)}`;
  const OUR_RANKS = `${RANK_LABELS}${ofModel}`;
  return {
    groups: [
      {
        name: "rbln-serving",
        rules: [
          {
            alert: "RblnServingRankDown",
            expr: `up{${OUR_RANKS}} == 0`,
            for: "2m",
            labels: { severity: "critical" },
            annotations: { summary: "A vLLM rank does not answer /metrics", description: `${RANK} has been unreachable for 2 minutes.` },
          },
          {
            alert: "RblnServingFrontDoorDown",
            // The front door's endpoint picker on hosts: without it no request reaches any rank.
            expr: `up{role="endpoint-picker"${ofModel}} == 0`,
            for: "2m",
            labels: { severity: "critical" },
            annotations: {
              summary: "The front door's endpoint picker does not answer /metrics",
              description:
                "The llm-d endpoint picker of {{ $labels.model }} on {{ $labels.host }} has been unreachable for 2 minutes: requests through the front door fail.",
            },
          },
          {
            alert: "RblnServingQueueGrowing",
            // The value is the queue now; the other terms say it never emptied and still grows.
            expr: `vllm:num_requests_waiting{${OUR_RANKS}} > 0 and min_over_time(vllm:num_requests_waiting{${OUR_RANKS}}[10m]) > 0 and deriv(vllm:num_requests_waiting{${OUR_RANKS}}[10m]) > 0`,
            for: "5m",
            labels: { severity: "warning" },
            annotations: {
              summary: "Requests keep queueing",
              description: `${RANK} has had waiting requests for 10 minutes and the queue keeps growing ({{ $value }} waiting).`,
            },
          },
          {
            alert: "RblnServingKvCacheNearlyFull",
            expr: `vllm:kv_cache_usage_perc{${OUR_RANKS}} > ${thresholdText(thresholds.kvCacheUsage)}`,
            for: "5m",
            labels: { severity: "warning" },
            annotations: {
              summary: "KV cache nearly full",
              description: `${RANK} engine {{ $labels.engine }} uses {{ $value | humanizePercentage }} of its KV cache.`,
            },
          },
          {
            alert: "RblnServingTtftHigh",
            expr: `histogram_quantile(0.95, sum by (le, model, role, rank, host, pod) (rate(vllm:time_to_first_token_seconds_bucket{${OUR_RANKS}}[5m]))) > ${thresholdText(thresholds.ttftP95Seconds)}`,
            for: "10m",
            labels: { severity: "warning" },
            annotations: {
              summary: "Time to first token is high",
              description: `${RANK} TTFT p95 is {{ $value | humanizeDuration }} (threshold ${thresholdText(thresholds.ttftP95Seconds)}s).`,
            },
          },
          {
            alert: "RblnServingPreemptions",
            expr: `sum by (model, role, rank, host, pod) (increase(vllm:num_preemptions_total{${OUR_RANKS}}[5m])) > 0`,
            for: "5m",
            labels: { severity: "warning" },
            annotations: {
              summary: "vLLM preempts requests",
              description: `${RANK} preempted {{ $value }} requests in 5 minutes: KV cache too small for the load.`,
            },
          },
        ],
      },
    ],
  };
}

/** The names a role's scaler alerts select: what core/render/kubernetes/scaledObjects.ts renders for it. */
export interface ScaledRole {
  namespace: string;
  deployment: string;
  scaledObject: string;
  /** The HPA KEDA owns for the ScaledObject. */
  hpa: string;
}

export interface ScalingAlertTimings {
  /** A replica's start from the compiled cache: pods unavailable longer than this alert. */
  loadSeconds: number;
  /** Failed trigger reads for this long mean KEDA serves its fallback (failureThreshold + 1 polls). */
  fallbackAfterSeconds: number;
}

/**
 * Alerts on the scalers of one Kubernetes stack (autoscaling on): a ScaledObject in fallback, a role
 * at maxReplicas for 15 minutes, pods unavailable longer than a load takes. KEDA has no fallback
 * series: its trigger errors (keda_scaler_detail_errors_total) keep rising while it serves the
 * fallback. The HPA and Deployment series are kube-state-metrics'.
 */
export function scalingAlertRules(roles: readonly ScaledRole[], timings: ScalingAlertTimings): RuleGroups["groups"][number] {
  const namespaces = [...new Set(roles.map((r) => r.namespace))];
  const anyOf = (names: string[]) => JSON.stringify(names.join("|"));
  const inNamespace = `namespace=${anyOf(namespaces)}`;
  const hpas = `${inNamespace},horizontalpodautoscaler=~${anyOf(roles.map((r) => r.hpa))}`;
  const window = `${timings.fallbackAfterSeconds}s`;
  return {
    name: "rbln-serving-autoscaling",
    rules: [
      {
        alert: "RblnServingScalerFallback",
        // KEDA's metrics carry the ScaledObject's name; its namespace label may be renamed by the scrape (exported_namespace).
        expr: `sum by (scaledObject) (increase(keda_scaler_detail_errors_total{scaledObject=~${anyOf(roles.map((r) => r.scaledObject))}}[${window}])) > 0`,
        for: window,
        labels: { severity: "warning" },
        annotations: {
          summary: "A scaler cannot read its trigger and keeps the current replicas",
          description: `ScaledObject {{ $labels.scaledObject }} has failed to query Prometheus for ${window}: KEDA serves its fallback (the current replicas, at least minReplicas) and scales neither way until the query works.`,
        },
      },
      {
        alert: "RblnServingScalerAtMax",
        expr: `kube_horizontalpodautoscaler_status_current_replicas{${hpas}} >= kube_horizontalpodautoscaler_spec_max_replicas{${hpas}}`,
        for: "15m",
        labels: { severity: "warning" },
        annotations: {
          summary: "A role runs at its maxReplicas",
          description:
            "{{ $labels.horizontalpodautoscaler }} has run {{ $value }} replicas, its maximum, for 15 minutes: requests queue; raise autoscaling maxReplicas if the nodes have NPUs to spare.",
        },
      },
      {
        alert: "RblnServingPodsUnavailable",
        expr: `kube_deployment_status_replicas_unavailable{${inNamespace},deployment=~${anyOf(roles.map((r) => r.deployment))}} > 0`,
        for: `${timings.loadSeconds}s`,
        labels: { severity: "warning" },
        annotations: {
          summary: "Pods stay unavailable longer than a load takes",
          description: `{{ $value }} pods of {{ $labels.deployment }} have been unavailable for longer than a start from the compiled cache takes (${timings.loadSeconds}s): a compile, a crash loop, or no node with free NPUs.`,
        },
      },
    ],
  };
}
