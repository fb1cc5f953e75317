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
const OUR_RANKS = `role!="",rank!=""`;
const RANK = "{{ $labels.role }} rank {{ $labels.rank }} ({{ $labels.model }}, {{ $labels.host }}{{ $labels.pod }})";

/** The alerts: a rank down, the front door down, a queue that keeps growing, KV cache nearly full, slow first tokens, preemptions. */
export function alertRules(thresholds: AlertThresholds = DEFAULT_THRESHOLDS): RuleGroups {
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
            expr: `up{role="endpoint-picker"} == 0`,
            for: "2m",
            labels: { severity: "critical" },
            annotations: { summary: "The front door's endpoint picker does not answer /metrics", description: "The llm-d endpoint picker of {{ $labels.model }} on {{ $labels.host }} has been unreachable for 2 minutes: requests through the front door fail." },
          },
          {
            alert: "RblnServingQueueGrowing",
            // The value is the queue now; the other terms say it never emptied and still grows.
            expr: `vllm:num_requests_waiting{${OUR_RANKS}} > 0 and min_over_time(vllm:num_requests_waiting{${OUR_RANKS}}[10m]) > 0 and deriv(vllm:num_requests_waiting{${OUR_RANKS}}[10m]) > 0`,
            for: "5m",
            labels: { severity: "warning" },
            annotations: { summary: "Requests keep queueing", description: `${RANK} has had waiting requests for 10 minutes and the queue keeps growing ({{ $value }} waiting).` },
          },
          {
            alert: "RblnServingKvCacheNearlyFull",
            expr: `vllm:kv_cache_usage_perc{${OUR_RANKS}} > ${thresholds.kvCacheUsage}`,
            for: "5m",
            labels: { severity: "warning" },
            annotations: { summary: "KV cache nearly full", description: `${RANK} engine {{ $labels.engine }} uses {{ $value | humanizePercentage }} of its KV cache.` },
          },
          {
            alert: "RblnServingTtftHigh",
            expr: `histogram_quantile(0.95, sum by (le, model, role, rank, host, pod) (rate(vllm:time_to_first_token_seconds_bucket{${OUR_RANKS}}[5m]))) > ${thresholds.ttftP95Seconds}`,
            for: "10m",
            labels: { severity: "warning" },
            annotations: { summary: "Time to first token is high", description: `${RANK} TTFT p95 is {{ $value | humanizeDuration }} (threshold ${thresholds.ttftP95Seconds}s).` },
          },
          {
            alert: "RblnServingPreemptions",
            expr: `sum by (model, role, rank, host, pod) (increase(vllm:num_preemptions_total{${OUR_RANKS}}[5m])) > 0`,
            for: "5m",
            labels: { severity: "warning" },
            annotations: { summary: "vLLM preempts requests", description: `${RANK} preempted {{ $value }} requests in 5 minutes: KV cache too small for the load.` },
          },
        ],
      },
    ],
  };
}
