import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE, foreignKeyWarnings, SECRET_KEYS, type SecretKey } from "./core/config/stackConfig";
import { ConfigError } from "./core/errors";
import { ModelServing, type ModelServingArgs, type ServingSecrets } from "./components/modelServing";
import { DEFAULT_INSTANCE } from "./core/render/hosts/names";

/** The one place the program reads stack config: every `rbln-serving:` key, secrets as secrets. */
export function readStackConfig(): { settings: ModelServingArgs["settings"]; secrets: ServingSecrets; warnings: string[] } {
  const prefix = `${CONFIG_NAMESPACE}:`;
  const warnings = foreignKeyWarnings(Object.keys(pulumi.runtime.allConfig()));
  // Validated by ModelServing (zod), which names the key path of any fault.
  const settings = Object.fromEntries(
    Object.entries(pulumi.runtime.allConfig())
      .filter(([key]) => key.startsWith(prefix))
      .map(([key, value]) => [key.slice(prefix.length), value] as const)
      // Secrets are read below, as secrets.
      .filter(([key]) => !(SECRET_KEYS as readonly string[]).includes(key)),
  ) as ModelServingArgs["settings"];
  const config = new pulumi.Config(CONFIG_NAMESPACE);
  const secrets: ServingSecrets = {};
  for (const key of SECRET_KEYS) {
    const value = config.getSecret(key);
    if (value !== undefined) secrets[key as SecretKey] = value;
  }
  return { settings, secrets, warnings };
}

/** The stack's resources and outputs. A bad config ends the run with one line and registers nothing. */
export function runProgram() {
  const { settings, secrets, warnings } = readStackConfig();
  for (const warning of warnings) pulumi.log.warn(warning);
  let serving: ModelServing;
  try {
    // The offline commands assume this name, so `render` shows the unit names this creates.
    serving = new ModelServing(DEFAULT_INSTANCE, { settings, secrets });
  } catch (error) {
    if (error instanceof ConfigError) throw new pulumi.RunError(`rbln-serving:${error.message}`);
    throw error;
  }
  return {
    endpoints: serving.endpoints,
    curl: serving.curl,
    units: serving.units,
    modelRevision: serving.modelRevision,
    deployments: serving.deployments,
    selection: serving.selection,
    warnings: [...warnings, ...serving.warnings],
    scrapeTargets: serving.scrapeTargets,
    compileKeys: serving.compileKeys,
  };
}
