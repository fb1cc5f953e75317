import chartFacts from "../fixtures/llm-d-router-gateway-v0.10.0.json";

/** Every leaf key path of chart values (`router.epp.image.tag`); the picker's config files count as one. */
export function leafPaths(value: unknown, prefix = ""): string[] {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return [prefix];
  return Object.entries(value).flatMap(([k, v]) => (prefix === "router.epp.pluginsCustomConfig" ? [prefix] : leafPaths(v, prefix ? `${prefix}.${k}` : k)));
}

/**
 * What llm-d-router-gateway v0.10.0 would not take of `values`: a key its templates do not read, a
 * key it requires and lacks, a failure mode or provider it does not know
 * (test/fixtures/llm-d-router-gateway-v0.10.0.json).
 */
export function chartKeyProblems(values: Record<string, any>): string[] {
  const known = Object.keys(chartFacts.keys);
  const used = [...new Set(leafPaths(values))];
  return [
    ...used.filter((key) => !known.some((k) => key === k || key.startsWith(`${k}.`))).map((key) => `${key}: not read by the chart`),
    ...chartFacts.required.filter((key) => !used.some((k) => k.startsWith(key))).map((key) => `${key}: required by the chart`),
    ...(chartFacts.failureModes.includes(values.router?.inferencePool?.failureMode)
      ? []
      : [`router.inferencePool.failureMode: ${values.router?.inferencePool?.failureMode}`]),
    ...(chartFacts.providers.includes(values.provider?.name) ? [] : [`provider.name: ${values.provider?.name}`]),
  ];
}
