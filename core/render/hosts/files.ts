import * as path from "node:path";
import { credentialPlaceholder, secretEnvironment, secretPlaceholder, type SecretKey } from "../../config/secrets";
import { renderSecretEnv, type RenderedHost } from "./bundle";
import { renderPipConfig } from "./pip";

/** A host's rendered files for review (`render`): the texts its resources carry, secrets as placeholders; `weights.sh` where the host runs it. */
export function hostFiles(host: RenderedHost, secrets: readonly SecretKey[], downloads: boolean): Record<string, string> {
  const secretEnv = renderSecretEnv(secretEnvironment(secrets, secretPlaceholder));
  const files: Record<string, string> = {
    "preflight.sh": host.preflightScript,
    "install.sh": host.installScript,
    ...(downloads ? { "weights.sh": host.weightsScript } : {}),
    "readiness.sh": host.readinessScript,
    "pip.conf": renderPipConfig(host.pipIndexes, secrets.includes("pipPassword") ? secretPlaceholder("pipPassword") : null),
  };
  for (const rank of host.ranks) {
    const id = `${rank.role}-${rank.rank}`;
    files[`unit-${id}.sh`] = rank.applyScript;
    files[`remove-${id}.sh`] = rank.removeScript;
    files[`systemd/${rank.unitName}`] = rank.unitText;
    const credentials = renderSecretEnv(Object.fromEntries(rank.credentialEnvNames.map((name) => [name, credentialPlaceholder(name)])));
    files[`env/${path.basename(rank.envPath)}`] = rank.envText + secretEnv + credentials;
  }
  for (const group of host.groups) {
    files[`${group.role}-group.sh`] = group.applyScript;
    files[`remove-${group.role}-group.sh`] = group.removeScript;
    files[`${group.role}-group-restart.sh`] = group.scriptText;
    files[`systemd/${group.unitName}`] = group.unitText;
  }
  return files;
}
