import type { SecretKey } from "../../core/config/secrets";
import type { Deployment } from "../../core/plan/types";
import { renderDeployment } from "../../core/render/deployment";
import { renderFiles } from "../../core/render/files";
import { DEFAULT_INSTANCE } from "../../core/render/hosts/names";

/** What `render --stack <stack>` writes for a deployment: the program's instance on that stack. */
export function renderStackFiles(deployment: Deployment, secrets: readonly SecretKey[], stack: string): Record<string, string> {
  return renderFiles(renderDeployment(deployment, { stack, instance: DEFAULT_INSTANCE, secrets }));
}
