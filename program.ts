import * as pulumi from "@pulumi/pulumi";
import * as runtimeConfig from "@pulumi/pulumi/runtime/config";
import { readConfigEntries } from "./core/config/configEntries";
import { CONFIG_NAMESPACE } from "./core/config/stackConfig";
import { ConfigError } from "./core/errors";
import { ModelServing, type ModelServingArgs, type ServingSecrets } from "./components/modelServing";
import { DEFAULT_INSTANCE } from "./core/render/hosts/names";

// Internal to the SDK (not in its typings), and what tells an encrypted entry: the language host
// lists the secret keys beside the config (PULUMI_CONFIG_SECRET_KEYS).
const { isConfigSecret } = runtimeConfig as unknown as { isConfigSecret: (fullKey: string) => boolean };

/** The one place the program reads stack config: every `rbln-serving:` key, as the offline commands read it; secrets as secrets. */
export function readStackConfig(): { settings: ModelServingArgs["settings"]; secrets: ServingSecrets; warnings: string[] } {
  // Validated by ModelServing (zod), which names the key path of any fault.
  const reading = readConfigEntries(pulumi.runtime.allConfig(), isConfigSecret);
  const config = new pulumi.Config(CONFIG_NAMESPACE);
  const secrets: ServingSecrets = Object.fromEntries(reading.secrets.map((key) => [key, config.requireSecret(key)]));
  return { settings: reading.settings as ModelServingArgs["settings"], secrets, warnings: reading.warnings };
}

/** The stack's resources and outputs. A bad config ends the run with one line and registers nothing. */
export function runProgram() {
  let serving: ModelServing;
  let warnings: string[];
  try {
    const config = readStackConfig();
    warnings = config.warnings;
    for (const warning of warnings) pulumi.log.warn(warning);
    // The offline commands assume this name, so `render` shows the unit names this creates.
    serving = new ModelServing(DEFAULT_INSTANCE, { settings: config.settings, secrets: config.secrets });
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
    notes: serving.notes,
    scrapeTargets: serving.scrapeTargets,
    compileKeys: serving.compileKeys,
    models: serving.models,
  };
}
