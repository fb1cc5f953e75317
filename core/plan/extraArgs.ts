// The stack's extraArgs and extraEnv on top of a role's recipe: every word read as vLLM's parser
// reads it (core/config/vllmArgv.ts) before any check, so a prefix, alias or `--no-` form of a flag
// is the flag for every check: topology, what the package sets, duplicates, and what it replaces.
import { flagIdentity, type ReadFlag, readVllmWords, withDashes } from "../config/vllmArgv";
import { TOPOLOGY_ENVS, TOPOLOGY_FLAGS } from "../config/vllmOptions";
import { splitCredentialEnv } from "../config/secrets";
import { ConfigError } from "../errors";
import { withFlags } from "./argv";
import { type PlanMessage, warning } from "./messages";
import type { Flag, RolePlan } from "./types";

/** Flags the stack's own settings set (or the package relies on), and what to do instead. */
const SETTING_FLAGS: Readonly<Record<string, string>> = {
  "--revision": "comes from the revision setting; set revision to a commit hash instead",
  "--tokenizer-revision": "comes from the revision setting; set revision to a commit hash instead",
  "--shutdown-timeout": "comes from the rollout.shutdownTimeoutSeconds setting; set that instead",
  "--model": "comes from the model setting (the recipe's model, which the package downloads); choose the model there",
  "--tokenizer": "comes from the model setting: the ranks run offline and load only the models the package downloads; choose the model there",
  "--download-dir": "comes from the cacheRoot setting (the ranks run offline and find the weights only where the package put them); set cacheRoot instead",
  "--hf-token": "comes from the hfToken secret; set it with: pulumi config set --secret hfToken",
  "--help": "prints vLLM's help and exits, so the rank would never serve; leave it out",
  "--enforce-eager":
    "makes vllm-rbln skip its compile and warm-up and save no compiled cache, which compile ahead and the unit step read to tell a load from a compile; leave it out",
};

/** Whether a flag was given as another option string than its own (a prefix, an alias), beyond underscores. */
const abbreviated = (flag: ReadFlag) => withDashes(flag.given).split(".")[0] !== flag.name.split(".")[0];
/** How a flag was given, and how vLLM reads it when that is another option string. */
const asRead = (flag: ReadFlag) => `"${flag.given}"${abbreviated(flag) ? ` (vLLM reads it as ${flag.name.split(".")[0]})` : ""}`;
/** The option a flag sets, without the key of a JSON option. */
const optionOf = (name: string) => flagIdentity(name).split(".")[0]!;

/** The refusal of one flag of extraArgs on its own, if any: it defines the topology, or a setting of the stack sets it. */
function ownedFlagRefusal(flag: ReadFlag, owned: Readonly<Record<string, string>>): string | undefined {
  const option = flag.option.name;
  if ((TOPOLOGY_FLAGS as readonly string[]).includes(option))
    return `${asRead(flag)} defines the serving topology and comes from the recipe; choose a strategy, target or axis instead`;
  const owner = SETTING_FLAGS[option] ?? owned[option];
  return owner === undefined ? undefined : `${asRead(flag)} ${owner}`;
}

/**
 * The refusal of a flag beside the others it would meet on the command line: the same option
 * twice in extraArgs (vLLM reads only the last), or one key of a JSON option beside the whole
 * option (FlexibleArgumentParser appends the keys as one whole value after it, which replaces it).
 */
function clashRefusal(flag: ReadFlag, earlier: readonly ReadFlag[], recipe: readonly Flag[]): string | undefined {
  const twice = earlier.find((other) => flagIdentity(other.name) === flagIdentity(flag.name));
  if (twice) {
    const both = abbreviated(flag) || abbreviated(twice) ? `: "${twice.given}" and "${flag.given}" both set ${optionOf(flag.name)}` : "";
    return `"${flag.given}" is given twice; give each flag once, with all its values (vLLM would read only the last${both})`;
  }
  const dotted = flag.name.includes(".");
  const option = flag.option.name;
  const whole = (name: string) => optionOf(name) === option && name.includes(".") !== dotted;
  const other = earlier.find((f) => whole(f.name))?.name ?? recipe.find((f) => whole(f.name))?.name;
  if (other === undefined) return undefined;
  const where = dotted
    ? `sets one key of ${option}, which ${recipe.some((f) => whole(f.name)) ? "the recipe" : "extraArgs"} gives whole`
    : `gives ${option} whole beside ${other}`;
  return `"${flag.given}" ${where}: vLLM appends the keys as one whole ${option} after it, which replaces it; give ${option} once, whole, with your change in it`;
}

/** The stack's extraArgs of one role as flags vLLM reads the same way, each checked; and a warning per vllm-rbln flag. */
export function extraFlags(
  words: readonly string[],
  key: string,
  recipe: readonly Flag[],
  owned: Readonly<Record<string, string>> = {},
): { flags: Flag[]; warnings: PlanMessage[] } {
  const read = readVllmWords(words);
  if (typeof read === "string") throw new ConfigError(key, read);
  const warnings: PlanMessage[] = [];
  read.forEach((flag, i) => {
    const refusal = ownedFlagRefusal(flag, owned) ?? clashRefusal(flag, read.slice(0, i), recipe);
    if (refusal !== undefined) throw new ConfigError(key, refusal);
    if (flag.rbln)
      warnings.push(
        warning(
          `${key}: ${flag.name} is one of vllm-rbln's --rbln-* flags, read in a newer vllm-rbln than the pinned one and not confirmed for it; if it lacks the flag, the rank exits at start (argparse) and the unit step fails`,
        ),
      );
  });
  return { flags: read.map(({ name, values }) => ({ name, values })), warnings };
}

/**
 * The stack's extraArgs/extraEnv on top of the recipe: a flag the recipe has (in any spelling of it)
 * is replaced in place. `owned`: flags the stack's own settings set here too, with what to set instead.
 */
export function withExtras(
  role: RolePlan,
  extraArgs: readonly string[] | undefined,
  extraEnv: Readonly<Record<string, string>> | undefined,
  owned: Readonly<Record<string, string>> = {},
): { role: RolePlan; warnings: PlanMessage[] } {
  if (!extraArgs?.length && !extraEnv) return { role, warnings: [] };
  for (const name of Object.keys(extraEnv ?? {})) {
    if ((TOPOLOGY_ENVS as readonly string[]).includes(name)) {
      throw new ConfigError(`extraEnv.${role.role}.${name}`, "is set by the recipe or from a secret and may not be overridden here");
    }
  }
  const { flags, warnings } = extraFlags(
    extraArgs ?? [],
    `extraArgs.${role.role}`,
    role.ranks.flatMap((rank) => rank.flags),
    owned,
  );
  const credentials = Object.keys(splitCredentialEnv(extraEnv ?? {}).credentials).map((name) =>
    warning(
      `extraEnv.${role.role}.${name}: its value carries credentials in a URL, which sit in the stack config in plain text; the package treats it as a secret (masked in what it prints, on stdin to the hosts, in a Secret on Kubernetes)`,
    ),
  );
  return {
    // `placeholders` stays the recipe's: the stack's own text is literal, but for a `<POD_IP>`
    // the platform knows, which it binds like the recipe's.
    role: { ...role, ranks: role.ranks.map((rank) => ({ ...withFlags(rank, flags), env: { ...rank.env, ...extraEnv } })) },
    warnings: [...warnings, ...credentials],
  };
}
