import { stringify as stringifyYaml } from "yaml";
import type { RecipeRouterValues } from "../plan/types";

/**
 * The endpoint picker's config from the recipe's router intent: one text for both platforms, the
 * chart's plugins file on Kubernetes and the file-mode EPP's config on hosts.
 */

/** The EndpointPickerConfig version the v0.10.0 picker reads. */
export const EPP_CONFIG_API_VERSION = "llm-d.ai/v1alpha1";

/** An EndpointPickerConfig (llm-d-router v0.10.0's config file), as data. */
export interface EndpointPickerConfig {
  apiVersion: string;
  kind: "EndpointPickerConfig";
  featureGates?: string[];
  plugins: { type: string; name?: string; parameters?: Record<string, unknown> }[];
  schedulingProfiles: { name: string; plugins: { pluginRef: string; weight?: number }[] }[];
  dataLayer?: Record<string, unknown>;
}

/** The recipe's plugins and profiles as an EndpointPickerConfig, in the picker's own keys, with the feature gates named. */
export function pickerConfig(values: RecipeRouterValues, featureGates: readonly string[] = []): EndpointPickerConfig {
  const picker = values.endpoint_picker;
  return {
    apiVersion: EPP_CONFIG_API_VERSION,
    kind: "EndpointPickerConfig",
    ...(featureGates.length > 0 ? { featureGates: [...featureGates] } : {}),
    plugins: picker.plugins,
    schedulingProfiles: picker.scheduling_profiles.map((profile) => ({
      name: profile.name,
      plugins: profile.plugins.map((p) => (p.weight === undefined ? { pluginRef: p.ref } : { pluginRef: p.ref, weight: p.weight })),
    })),
  };
}

/** The EndpointPickerConfig file, as YAML text, with the recipe's plugins and profiles (and the feature gates named). */
export function endpointPickerConfig(values: RecipeRouterValues, featureGates: readonly string[] = []): string {
  return stringifyYaml(pickerConfig(values, featureGates));
}

/**
 * The aggregated strategies' picker, whose recipe has no router: the llm-d-router-gateway chart's own
 * default-plugins.yaml at v0.10.0 (queue depth, KV-cache use and prefix-cache hits, one profile; the
 * loader adds the single-profile handler and the max-score picker).
 */
export const AGGREGATED_PICKER: EndpointPickerConfig = {
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
