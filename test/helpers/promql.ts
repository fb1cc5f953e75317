import vllmFixture from "../fixtures/vllm-metrics-v0.30.0.json";
import exporterFixture from "../fixtures/rbln-metrics-exporter-v0.2.5.json";
import eppFixture from "../fixtures/llm-d-router-v0.10.0/metrics.json";

const KEYWORDS = new Set(["and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "inf", "nan"]);

/**
 * The series names a PromQL expression selects: identifiers that are not functions, keywords,
 * label names in `{}`/`by (...)`, durations or Grafana variables.
 */
export function seriesNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, "")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\$\{?[A-Za-z_]+\}?/g, "");
  const names = new Set<string>();
  for (const match of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const after = stripped.slice(match.index! + match[0].length).trimStart();
    if (after.startsWith("(") || KEYWORDS.has(match[0].toLowerCase())) continue;
    names.add(match[0]);
  }
  return [...names];
}

/** Every series name vLLM (the fixture's tag), the RBLN exporter (both name sets) and the llm-d endpoint picker (v0.10.0) expose, and Prometheus' `up`. */
export function knownSeries(): Set<string> {
  const known = new Set<string>(["up"]);
  for (const { name, type } of vllmFixture.metrics) {
    if (type === "counter") known.add(`${name}_total`);
    else if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) known.add(`${name}${suffix}`);
    else known.add(name);
  }
  for (const { legacy, current } of exporterFixture.metrics) known.add(legacy).add(current);
  // The picker's names carry their own _total.
  for (const { name, type } of eppFixture.metrics) {
    if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) known.add(`${name}${suffix}`);
    else known.add(name);
  }
  return known;
}
