export { ModelServing, planServing, type ModelServingArgs, type ServingSecrets } from "./modelServing";
export { NpuHost, type NpuHostArgs, type RankUnit } from "./hosts/npuHost";
export { NpuWorkloads, type NpuWorkloadsArgs, type RoleDeployment } from "./kubernetes/npuWorkloads";
export { LlmdRouter, type LlmdRouterArgs } from "./router/llmdRouter";
export { RecipeCatalog } from "../core/recipe/catalog";
export { resolvePlan } from "../core/plan/resolve";
export type { LaunchPlan, Selection } from "../core/plan/types";
