import { stringify } from "yaml";
import type { LaunchPlan } from "../../../plan/types";
import { AGGREGATED_PICKER, pickerConfig } from "../../pickerConfig";

/** The plugin that reads the endpoints file: the EPP then runs without Kubernetes (llm-d-router v0.10.0, docs/discovery.md). */
export const FILE_DISCOVERY = "file-discovery";

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
