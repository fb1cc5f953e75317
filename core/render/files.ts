import type { SecretKey } from "../config/stackConfig";
import type { Deployment } from "../plan/deployment";
import { renderHost } from "./hosts/bundle";
import { hostFiles } from "./hosts/files";

/** Every file `render` writes for a stack, by path under the output folder. */
export function renderFiles(deployment: Deployment, secrets: readonly SecretKey[]): Record<string, string> {
  const files: Record<string, string> = {};
  for (const placement of deployment.placements) {
    for (const [name, content] of Object.entries(hostFiles(renderHost(deployment, placement), secrets))) {
      files[`hosts/${placement.host.name}/${name}`] = content;
    }
  }
  return files;
}
