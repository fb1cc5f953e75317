import { parseStackSettings } from "./config/stackConfig";
import { withCompileAhead } from "./compile/ahead";
import { planDeployment } from "./plan/deployment";
import type { Deployment } from "./plan/types";
import type { RecipeCatalog } from "./recipe/catalog";

/**
 * A stack's keys as `pulumi up` and the offline commands both plan them: validated, planned, and
 * checked for compile ahead. The one way in, so plan, render and diff show what the program deploys.
 */
export function planStack(keys: Record<string, unknown>, catalog: RecipeCatalog): Deployment {
  return withCompileAhead(planDeployment(parseStackSettings(keys), catalog));
}
