import { stringify as stringifyYaml } from "yaml";
import type { StackSettings } from "../config/stackConfig";
import type { RecipeRouterValues, RouterIntent } from "../plan/types";

/**
 * The recipe's router intent (read once by the resolver, core/plan/routerIntent.ts) in the
 * llm-d-router-gateway chart's real layout.
 */

/** Where llm-d publishes its charts (the recipe names only the chart). */
export const LLM_D_CHART_REPOSITORY = "oci://ghcr.io/llm-d/charts";
/** The EndpointPickerConfig version the v0.10.0 picker reads. */
export const EPP_CONFIG_API_VERSION = "llm-d.ai/v1alpha1";

/** What the chart values take from the stack config. */
export type RouterSettings = Pick<StackSettings, "kubernetes" | "router" | "autoscaling">;

/** The EPP feature gate whose queue (llm_d_epp_flow_control_queue_size) the decode scaler reads. */
export const FLOW_CONTROL_GATE = "flowControl";

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

/** The chart values in the llm-d-router-gateway v0.10.0 layout (keys listed in test/fixtures). */
export function routerChartValues(intent: RouterIntent, strategy: string, settings: RouterSettings): Record<string, unknown> {
  const { values } = intent;
  const { gateway, provider } = settings.kubernetes;
  const image = values.endpoint_picker.image;
  const slash = image.lastIndexOf("/");
  const colon = image.lastIndexOf(":");
  const configFile = `${strategy}.yaml`;
  return {
    router: {
      epp: {
        image: { registry: image.slice(0, slash), repository: image.slice(slash + 1, colon), tag: image.slice(colon + 1), pullPolicy: "IfNotPresent" },
        extProcPort: values.endpoint_picker.ext_proc_port,
        pluginsConfigFile: configFile,
        // With autoscaling, flow control queues requests in the picker when the pool is saturated: the scaler's signal.
        pluginsCustomConfig: { [configFile]: endpointPickerConfig(values, settings.autoscaling.enabled ? [FLOW_CONTROL_GATE] : []) },
        // Helm merges these over the chart's requests (8 CPUs, 8Gi) and limit (16Gi), key by key.
        ...(settings.router.pickerResources ? { resources: settings.router.pickerResources } : {}),
      },
      inferencePool: { create: true, failureMode: values.inference_pool.failure_mode },
      modelServers: {
        type: "vllm",
        protocol: "http",
        matchLabels: values.inference_pool.match_labels,
        targetPorts: values.inference_pool.target_ports.map((number) => ({ number })),
      },
    },
    provider: { name: provider },
    httpRoute: gateway
      ? {
          create: true,
          inferenceGatewayName: gateway.name,
          ...(gateway.namespace ? { inferenceGatewayNamespace: gateway.namespace } : {}),
          // The chart's default is 300s, which cuts a long streamed generation at 5 minutes.
          requestTimeout: settings.router.requestTimeout,
        }
      : { create: false },
  };
}
