// The package's public API, in one place: what `import ... from "rbln-serving"` gives.

// Components (type tokens in the `index` module: rbln-serving:index:<Name>).
export { ModelServing, planServing, planServingStack, type ModelOutput, type ModelServingArgs, type ServingSecrets } from "./modelServing";
export { NpuHost, type NpuHostArgs, type RankUnit } from "./hosts/npuHost";
export { NpuWorkloads, type NpuWorkloadsArgs, type RoleDeployment } from "./kubernetes/npuWorkloads";
export { LlmdRouter, type LlmdRouterArgs } from "./router/llmdRouter";
export { FrontDoor, type FrontDoorArgs } from "./router/frontDoor";
export { ModelRouting, type ModelRoutingArgs } from "./router/modelRouting";

// Recipes: the catalog, the format, and importing a published recipe page.
export { RecipeCatalog, DEFAULT_MODEL, DEFAULT_RECIPE_DIR, parseRecipe } from "../core/recipe/catalog";
export type { Recipe, Strategy, StrategyOption, PackageInstall } from "../core/recipe/schema";
export { importRecipePage, type ImportedRecipe } from "../core/recipe/import";

// Plans: selection → launch plan, and the plan types.
export { resolvePlan } from "../core/plan/resolve";
export { planDeployment, type Deployment, type HostPlacement } from "../core/plan/deployment";
export { planStack, type StackPlan } from "../core/plan/stack";
export { diffPlans } from "../core/plan/diff";
export type { LaunchPlan, Selection, Flag, RankPlan, RolePlan, NodePlan, PackagePlan, PlanChange } from "../core/plan/types";

// Settings: the stack config's schema and its errors.
export { parseStackSettings, type StackSettings } from "../core/config/stackConfig";
export { ConfigError } from "../core/errors";
