import type { StackSettings } from "../../config/stackConfig";
import type { RouterIntent } from "../../plan/types";
import { endpointPickerConfig } from "../pickerConfig";

/**
 * The recipe's router intent (read once by the resolver, core/plan/routerIntent.ts) in the
 * llm-d-router-gateway chart's real layout.
 */

/** Where llm-d publishes its charts (the recipe names only the chart). */
export const LLM_D_CHART_REPOSITORY = "oci://ghcr.io/llm-d/charts";

/** The router chart and version the recipe's router block installs, for a model whose recipe has none (core/render/kubernetes/modelRouting.ts). */
export const ROUTER_CHART = { chart: "llm-d-router-gateway", version: "v0.10.0" } as const;

/** What the chart values take from the stack config. */
export type RouterSettings = Pick<StackSettings, "kubernetes" | "router" | "autoscaling">;

/**
 * The endpoint picker's replicas: two, which makes the chart run them active-passive with leader
 * election (routerlib's _deployment.yaml at v0.10.0: `--ha-enable-leader-election` when replicas > 1),
 * so a lost pod's standby, whose datastore is kept warm, takes over.
 */
export const EPP_REPLICAS = 2;

/**
 * The labels the chart's EPP pods carry and its Deployment selects on, in gateway mode (routerlib's
 * _helpers.tpl at v0.10.0, llm-d-router.selectorLabels and llm-d-router.name: the release name in
 * lower case, cut to 40 characters, and `-epp`).
 */
export function eppPodLabels(release: string): Record<string, string> {
  return { "llm-d-router-gateway": `${release.toLowerCase().trim().slice(0, 40)}-epp` };
}

/** The EPP feature gate whose queue (llm_d_epp_flow_control_queue_size) the decode scaler reads. */
export const FLOW_CONTROL_GATE = "flowControl";

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
        replicas: EPP_REPLICAS,
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
