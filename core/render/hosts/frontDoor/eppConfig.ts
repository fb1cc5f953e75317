import { stringify } from "yaml";
import type { LaunchPlan } from "../../../plan/types";
import { EPP_CONFIG_API_VERSION, pickerConfig, type EndpointPickerConfig } from "../../pickerConfig";

/** The plugin that reads the endpoints file: the EPP then runs without Kubernetes (llm-d-router v0.10.0, docs/discovery.md). */
export const FILE_DISCOVERY = "file-discovery";

/**
 * The aggregated strategies' picker, whose recipe has no router: the llm-d-router-gateway chart's own
 * default-plugins.yaml at v0.10.0 (queue depth, KV-cache use and prefix-cache hits, one profile; the
 * loader adds the single-profile handler and the max-score picker).
 */
const AGGREGATED_PICKER: EndpointPickerConfig = {
  apiVersion: EPP_CONFIG_API_VERSION,
  kind: "EndpointPickerConfig",
  plugins: [
    { type: "queue-scorer" },
    { type: "kv-cache-utilization-scorer" },
    { type: "prefix-cache-scorer" },
    { type: "metrics-data-source", parameters: { scheme: "http", path: "/metrics", insecureSkipVerify: true } },
    { type: "core-metrics-extractor" },
  ],
  schedulingProfiles: [
    {
      name: "default",
      plugins: [
        { pluginRef: "queue-scorer", weight: 2 },
        { pluginRef: "kv-cache-utilization-scorer", weight: 2 },
        { pluginRef: "prefix-cache-scorer", weight: 3 },
      ],
    },
  ],
};

/**
 * The EPP's config on hosts: the recipe's router intent (the same plugins and profiles the chart
 * values carry), or the chart's defaults for a strategy without one, plus file discovery watching
 * `endpointsPath` (as the EPP sees it in its container).
 */
export function fileModePickerConfig(plan: Pick<LaunchPlan, "router">, endpointsPath: string): string {
  const picker = plan.router ? pickerConfig(plan.router.values) : AGGREGATED_PICKER;
  return stringify({
    ...picker,
    plugins: [...picker.plugins, { type: FILE_DISCOVERY, parameters: { path: endpointsPath, watchFile: true } }],
    dataLayer: { ...picker.dataLayer, discovery: { pluginRef: FILE_DISCOVERY } },
  });
}
