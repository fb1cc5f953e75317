import type { z } from "zod";
import { otherPlatformKeys, StackSettings, TOPOLOGY_ENVS, TOPOLOGY_FLAGS, VLLM_SHORT_ALIASES } from "../config/stackConfig";
import { ConfigError, listValues } from "../errors";
import type { RecipeCatalog } from "../recipe/catalog";
import { durationSeconds } from "../config/defaults";
import { withFlags } from "./argv";
import { withCompileKeys } from "./compileKey";
import { withRevision } from "./models";
import { resolvePlan } from "./resolve";
import { checkWeightsStorage } from "./storage";
import type { Deployment, Flag, LaunchPlan, RolePlan } from "./types";

export type { Deployment, HostPlacement } from "./types";

/**
 * The flag vLLM reads a word as: a short alias as its long name, and `_` as `-` up to any `.`
 * (FlexibleArgumentParser's normalisation; `--json-flag.key` sets one key of a JSON flag).
 */
export function canonicalFlag(name: string): string {
  if (!name.startsWith("--")) return VLLM_SHORT_ALIASES[name] ?? name;
  const dot = name.indexOf(".");
  return dot < 0 ? name.replace(/_/g, "-") : name.slice(0, dot).replace(/_/g, "-") + name.slice(dot);
}

/**
 * The topology flag a canonical flag would set in vLLM, if any: the flag itself, its `--no-`
 * negation, one `.key` of it, or an abbreviation argparse expands to it (argparse takes any
 * unambiguous prefix of a long flag, and of a multi-character short one).
 */
function topologyFlagOf(canonical: string): string | undefined {
  const base = canonical.split(".")[0]!;
  if (base.startsWith("--")) {
    const positive = base.startsWith("--no-") ? `--${base.slice(5)}` : base;
    return TOPOLOGY_FLAGS.find((flag) => flag === positive || (base.length > 2 && flag.startsWith(base)));
  }
  const alias = Object.keys(VLLM_SHORT_ALIASES).find((short) => short.startsWith(base) && (TOPOLOGY_FLAGS as readonly string[]).includes(VLLM_SHORT_ALIASES[short]!));
  return alias === undefined ? undefined : VLLM_SHORT_ALIASES[alias];
}

/** Flags the stack's own settings set on every rank, and the setting to change instead. */
const SETTING_FLAGS: Readonly<Record<string, string>> = {
  "--revision": "revision setting; set revision to a commit hash instead",
  "--tokenizer-revision": "revision setting; set revision to a commit hash instead",
  "--shutdown-timeout": "rollout.shutdownTimeoutSeconds setting; set that instead",
};

/** `--flag value value --other --name=value` → grouped flags under vLLM's spelling; a word that starts with `-` opens a flag. */
function groupFlags(words: readonly string[], key: string): Flag[] {
  const flags: Flag[] = [];
  for (const word of words) {
    if (word.startsWith("-")) {
      const equals = word.indexOf("=");
      const given = equals < 0 ? word : word.slice(0, equals);
      const topology = topologyFlagOf(canonicalFlag(given));
      if (topology !== undefined) {
        throw new ConfigError(key, `"${given}"${given === topology ? "" : ` (vLLM reads it as ${topology})`} defines the serving topology and comes from the recipe; choose a strategy, target or axis instead`);
      }
      const owner = SETTING_FLAGS[canonicalFlag(given)];
      if (owner !== undefined) throw new ConfigError(key, `"${given}" comes from the ${owner}`);
      if (flags.some((f) => f.name === canonicalFlag(given))) {
        throw new ConfigError(key, `"${given}" is given twice; give each flag once, with all its values (vLLM would read only the last)`);
      }
      flags.push({ name: canonicalFlag(given), values: equals < 0 ? [] : [word.slice(equals + 1)] });
    } else if (flags.length === 0) throw new ConfigError(key, `"${word}" comes before any flag; give flags such as ["--max-log-len", "100"]`);
    else flags[flags.length - 1]!.values.push(word);
  }
  return flags;
}

/** The stack's extraArgs/extraEnv on top of the recipe: a flag the recipe has is replaced in place. */
function withExtras(role: RolePlan, extraArgs: readonly string[] | undefined, extraEnv: Readonly<Record<string, string>> | undefined): RolePlan {
  if (!extraArgs?.length && !extraEnv) return role;
  const extras = groupFlags(extraArgs ?? [], `extraArgs.${role.role}`);
  for (const name of Object.keys(extraEnv ?? {})) {
    if ((TOPOLOGY_ENVS as readonly string[]).includes(name)) {
      throw new ConfigError(`extraEnv.${role.role}.${name}`, "is set by the recipe or from a secret and may not be overridden here");
    }
  }
  return {
    ...role,
    // `placeholders` stays the recipe's: the stack's own text is literal, but for a `<POD_IP>`
    // the platform knows, which it binds like the recipe's.
    ranks: role.ranks.map((rank) => ({ ...withFlags(rank, extras), env: { ...rank.env, ...extraEnv } })),
  };
}

/** Each setting's value when left out, to tell the ones a stack sets. */
const SETTING_DEFAULTS: Readonly<Record<string, unknown>> = Object.fromEntries(Object.entries(StackSettings.shape).map(([key, schema]) => [key, (schema as z.ZodType).safeParse(undefined).data]));

/** Where the stack's own settings weaken or do nothing, for people to read (the plan's and the stack's `warnings`). */
function settingsWarnings(settings: StackSettings): string[] {
  const warnings: string[] = [];
  if (settings.platform === "hosts" && settings.insecureSkipHostKeyCheck) {
    warnings.push("insecureSkipHostKeyCheck: true: SSH host keys are not checked, so whatever answers at a host's address runs the scripts as root and receives the secrets");
  }
  for (const key of otherPlatformKeys(settings.platform)) {
    if (JSON.stringify(settings[key as keyof StackSettings]) !== JSON.stringify(SETTING_DEFAULTS[key])) {
      const why = settings.platform === "kubernetes" && key === "versions" ? " (the image fixes the versions)" : "";
      warnings.push(`${key}: does nothing with platform: ${settings.platform}${why}; remove it or choose the platform that reads it`);
    }
  }
  return warnings;
}

export function planDeployment(settings: StackSettings, catalog: RecipeCatalog): Deployment {
  const recipe = catalog.get(settings.model);
  checkWeightsStorage(settings);
  const base = resolvePlan(recipe, {
    model: settings.model,
    strategy: settings.strategy,
    target: settings.target,
    preset: settings.preset,
    axes: settings.axes,
    versions: settings.versions,
  });
  const roleNames = base.roles.map((r) => r.role);
  for (const [field, byRole] of [["extraArgs", settings.extraArgs], ["extraEnv", settings.extraEnv], ["kubernetes.resources", settings.kubernetes.resources]] as const) {
    for (const role of Object.keys(byRole)) {
      if (!roleNames.includes(role)) throw new ConfigError(`${field}.${role}`, `strategy "${base.strategy}" has no role "${role}"; allowed: ${listValues(roleNames)}`);
    }
  }
  // In-flight requests get this long to finish when a rank stops: by default as long as the front door lets a request run.
  const shutdownTimeoutSeconds = settings.rollout.shutdownTimeoutSeconds ?? durationSeconds(settings.router.requestTimeout);
  const shutdown = [{ name: "--shutdown-timeout", values: [String(shutdownTimeoutSeconds)] }];
  const plan: LaunchPlan = withCompileKeys(
    withRevision(
      {
        ...base,
        roles: base.roles.map((role) =>
          withExtras({ ...role, ranks: role.ranks.map((rank) => withFlags(rank, shutdown)) }, settings.extraArgs[role.role], settings.extraEnv[role.role]),
        ),
        warnings: [...base.warnings, ...settingsWarnings(settings)],
      },
      settings.revision,
    ),
    settings.platform === "kubernetes" ? (settings.kubernetes.image ?? null) : null,
  );

  const roleReplicas = { prefillReplicas: settings.prefillReplicas, decodeReplicas: settings.decodeReplicas };
  for (const [key, value] of Object.entries(roleReplicas)) {
    const role = key.replace("Replicas", "");
    if (value !== undefined && (settings.platform !== "kubernetes" || !roleNames.includes(role))) {
      throw new ConfigError(key, `applies only to a strategy with a "${role}" role on platform: kubernetes; use replicas`);
    }
  }

  if (settings.platform === "hosts") {
    if (plan.router) {
      throw new ConfigError("platform", `strategy "${plan.strategy}" needs the llm-d router, which routes to Kubernetes pods; use platform: kubernetes`);
    }
    const needed = plan.nodes.length * settings.replicas;
    if (settings.hosts.length !== needed) {
      throw new ConfigError("hosts", `${settings.hosts.length} given; strategy "${plan.strategy}" with replicas: ${settings.replicas} needs exactly ${needed} (${plan.nodes.length} per replica)`);
    }
  }
  const placements =
    settings.platform === "hosts"
      ? settings.hosts.map((host, i) => {
          const proxy = host.proxy ?? settings.sshProxy;
          return { replica: Math.floor(i / plan.nodes.length), node: i % plan.nodes.length, host: proxy ? { ...host, proxy } : host };
        })
      : [];
  return { settings, plan, placements, shutdownTimeoutSeconds };
}
