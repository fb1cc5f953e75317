import { z } from "zod";
import { ShellSyntaxError, splitShellWords } from "../shell";

/**
 * The serving-recipe format: a model page with option axes, strategies, and per strategy and
 * target a grid that builds `vllm serve` commands from a base per role, per-axis deltas and
 * per-rank overrides. Strings in `args`/`envs` are shell text exactly as the recipe page shows them
 * (`--kv-transfer-config '{...}'`, `NAME='value'`); the resolver parses them.
 */

/** Flag name → shell text of that flag with its value, e.g. `"--port": "--port 8000"`. */
const ShellArgs = z.record(z.string().regex(/^--?[A-Za-z0-9][A-Za-z0-9-]*$/, "a flag like --name"), z.string().min(1));
/** Variable name → shell text `NAME=value`. */
const ShellEnvs = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name"), z.string().min(1));

const RankOverride = z.strictObject({ args: ShellArgs, envs: ShellEnvs });

/**
 * The launchers a role may name. vLLM's command line is its `vllm` console script (pyproject:
 * `vllm = "vllm.entrypoints.cli.main:main"`), and of its subcommands only `serve` runs the server,
 * taking the model as its first word (`vllm serve [model_tag] [options]`). The plan puts the model
 * right after the launcher and a host runs the launcher's first word from the install's venv
 * (`<venv>/bin/vllm`), so nothing else is allowed: any other word would run another program from
 * ExecStart, and `python -m vllm.entrypoints.openai.api_server` parses a positional model but
 * serves only `--model` (the move to `args.model` is in `vllm serve`'s subcommand).
 */
const VLLM_LAUNCHERS: readonly string[] = ["vllm serve"];

const Launcher = z.string().refine((text) => VLLM_LAUNCHERS.includes(text), {
  error: (issue) => `${JSON.stringify(issue.input)} is not a vLLM launcher; allowed: ${VLLM_LAUNCHERS.map((l) => JSON.stringify(l)).join(", ")}`,
});

/** One part of a hub id: letters, digits, `-`, `_`, `.`, beginning and ending with a letter, digit or `_`. */
const HUB_ID_PART = "[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?";
const HUB_MODEL_ID = new RegExp(`^${HUB_ID_PART}/${HUB_ID_PART}$`);
const HUB_NAME_MAX = 96;

/**
 * A model id as the Hugging Face hub forms it (huggingface_hub's `validate_repo_id`), with the
 * organisation required: `org/name`, no `--` or `..`, not ending in `.git`, the name at most 96
 * characters. The id reaches vLLM's command line and the download step as one word, so an id
 * that starts with `-` (read as a flag) or holds `..` or a second `/` (read as a path) is refused.
 */
export function isHubModelId(id: string): boolean {
  return HUB_MODEL_ID.test(id) && !id.includes("--") && !id.includes("..") && !id.endsWith(".git") && id.split("/")[1]!.length <= HUB_NAME_MAX;
}

function hubModelIdRefusal(id: unknown): string {
  return `${JSON.stringify(id)} is not a Hugging Face model id; allowed: ORG/NAME of letters, digits, "-", "_" and ".", each part beginning and ending with a letter, digit or "_", without "--" or "..", not ending in ".git", NAME at most ${HUB_NAME_MAX} characters`;
}

const HubModelId = z.string().refine(isHubModelId, { error: (issue) => hubModelIdRefusal(issue.input) });

/** Flag texts already read: every load (one per program run, one per library call) reads the same recipes. */
const flagJsonValues = new Map<string, Readonly<Record<string, unknown>> | undefined>();

/** The JSON object a flag's shell text carries as its value (`--speculative-config '{...}'`), if it carries one. */
export function flagJsonValue(shellText: string): Readonly<Record<string, unknown>> | undefined {
  if (!flagJsonValues.has(shellText)) flagJsonValues.set(shellText, readFlagJsonValue(shellText));
  return flagJsonValues.get(shellText);
}

function readFlagJsonValue(shellText: string): Readonly<Record<string, unknown>> | undefined {
  try {
    const value: unknown = JSON.parse(splitShellWords(shellText)[1] ?? "");
    return value !== null && typeof value === "object" && !Array.isArray(value) ? Object.freeze(value as Record<string, unknown>) : undefined;
  } catch (error) {
    // Shell text that does not split is refused, with its path, by the catalog's shell check.
    if (error instanceof SyntaxError || error instanceof ShellSyntaxError) return undefined;
    throw error;
  }
}

/** The flag whose JSON value names a draft model that vLLM loads and the download step fetches. */
const SPECULATIVE_CONFIG_FLAG = "--speculative-config";

export const RoleTemplate = z.strictObject({
  role: z.string().regex(/^[a-z][a-z0-9-]*$/, "a lower-case role name"),
  launcher: Launcher,
  args: ShellArgs,
  envs: ShellEnvs,
  /** null: the role runs one process (rank 0). */
  ranks: z.array(RankOverride).min(1).nullable(),
  scale: z.string().nullable(),
  varies: z.array(z.string()).nullable(),
});

const RoleDelta = z.strictObject({
  add_args: ShellArgs,
  add_envs: ShellEnvs,
  del_args: z.array(z.string()),
  del_envs: z.array(z.string()),
});

const RouterStep = z.strictObject({ node: z.string(), cmd: z.string() });
export const RouterBlock = z.strictObject({ role: z.string(), nodes: z.array(RouterStep).min(1) });

const AxisValues = z.record(z.string(), z.array(z.string()).min(1));

export const Grid = z.strictObject({
  model: HubModelId,
  base: z.array(RoleTemplate).min(1),
  /** Keyed `axis=value`, then by role. */
  deltas: z.record(z.string().regex(/^[a-z_]+=[A-Za-z0-9_.-]+$/, "axis=value"), z.record(z.string(), RoleDelta)),
  /** Mode axes: every one has an `off` that the base command already encodes. */
  modes: AxisValues,
  /** Option axes: their default is `option_base`. */
  options: AxisValues,
  option_base: z.record(z.string(), z.string()),
  recommended: z.record(z.string(), z.string()).nullable(),
  router: RouterBlock.nullable(),
  excluded: z.array(z.unknown()),
});

export const StrategyOption = z.strictObject({
  target: z.string().min(1),
  npus: z.number().int().positive(),
  skus: z.array(z.string()).min(1),
  verified: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "a YYYY-MM-DD date"),
  grid: Grid,
  label: z.string().nullable(),
  note: z.string().nullable(),
  modelImpl: z.string().nullable(),
  attn: z.string().nullable(),
  features: z.record(z.string(), z.unknown()),
});

export const Strategy = z.strictObject({
  slug: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "a slug"),
  label: z.string(),
  tag: z.string(),
  variant: z.string(),
  /** null: one node; otherwise the number of nodes, one per role of the grid. */
  nodes: z
    .string()
    .regex(/^[1-9][0-9]*$/)
    .nullable(),
  options: z.array(StrategyOption).min(1),
});

const PageAxis = z.strictObject({
  axis: z.string(),
  title: z.string(),
  options: z.array(z.strictObject({ label: z.string(), value: z.string() })).min(1),
});

/**
 * A package index: http(s), and without `user:password@`, since a recipe is shared text; the
 * stack's `pip.username` and `pipPassword` secret supply the credentials.
 */
const IndexUrl = z.url({ protocol: /^https?$/, error: "an http(s) URL" }).refine((value) => {
  // zod runs this check after a failed url check too; that one already refuses a non-URL.
  const url = URL.canParse(value) ? new URL(value) : undefined;
  return url === undefined || (url.username === "" && url.password === "");
}, "a URL without user:password@; a host's credentials are the stack's pip.username and pipPassword secret");

export const PackageInstall = z.strictObject({
  package: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "a PyPI project name"),
  version: z.string().min(1),
  extras: z.array(z.string().regex(/^[A-Za-z0-9_-]+$/)),
  extraIndexUrls: z.array(IndexUrl),
  /** null: always installed; otherwise only when every axis has the given value. */
  when: z.record(z.string(), z.string()).nullable(),
  /** A module the package provides: importing it checks the install. */
  import: z.string().regex(/^[A-Za-z_][A-Za-z0-9_.]*$/, "a Python module name"),
});

export const Recipe = z
  .looseObject({
    model: HubModelId,
    name: z.string(),
    provider: z.string(),
    hf: z.string(),
    client: z.string(),
    installLine: z.string(),
    axes: z.array(PageAxis),
    strategies: z.array(Strategy).min(1),
    installs: z.array(PackageInstall).min(1),
    /** Package indexes that take the account credentials (the `pipPassword` secret). */
    credentialedIndexUrls: z.array(IndexUrl),
  })
  .superRefine((recipe, ctx) => {
    recipe.strategies.forEach((strategy, s) => {
      strategy.options.forEach((option, o) => {
        const path = ["strategies", s, "options", o, "grid"];
        const grid = option.grid;
        const roles = new Set(grid.base.map((r) => r.role));
        if (strategy.nodes !== null && Number(strategy.nodes) !== grid.base.length) {
          ctx.addIssue({
            code: "custom",
            path: ["strategies", s, "nodes"],
            message: `${strategy.nodes} nodes but ${grid.base.length} roles; a multi-node strategy places one role per node`,
          });
        }
        for (const [axis, values] of Object.entries(grid.modes)) {
          if (!values.includes("off")) ctx.addIssue({ code: "custom", path: [...path, "modes", axis], message: 'a mode axis needs an "off" value' });
        }
        for (const [axis, value] of Object.entries(grid.option_base)) {
          if (!grid.options[axis]?.includes(value))
            ctx.addIssue({ code: "custom", path: [...path, "option_base", axis], message: `"${value}" is not one of the axis's options` });
        }
        for (const key of Object.keys(grid.deltas)) {
          const [axis, value] = key.split("=") as [string, string];
          const values = grid.modes[axis] ?? grid.options[axis];
          if (!values?.includes(value)) ctx.addIssue({ code: "custom", path: [...path, "deltas", key], message: "names an axis value the grid does not list" });
          for (const role of Object.keys(grid.deltas[key]!)) {
            if (!roles.has(role)) ctx.addIssue({ code: "custom", path: [...path, "deltas", key, role], message: "names a role the grid has no base for" });
          }
        }
        for (const [where, args] of shellArgMaps(grid)) {
          const text = args[SPECULATIVE_CONFIG_FLAG];
          const draft = text === undefined ? undefined : flagJsonValue(text)?.model;
          if (draft !== undefined && (typeof draft !== "string" || !isHubModelId(draft))) {
            ctx.addIssue({ code: "custom", path: [...path, ...where, SPECULATIVE_CONFIG_FLAG], message: `draft model ${hubModelIdRefusal(draft)}` });
          }
        }
        for (const [axis, value] of Object.entries(grid.recommended ?? {})) {
          const values = grid.modes[axis] ?? grid.options[axis];
          if (!values?.includes(value))
            ctx.addIssue({ code: "custom", path: [...path, "recommended", axis], message: `"${value}" is not a value of this grid` });
        }
      });
    });
  });

/** Every flag map of a grid that reaches a command line, with its path in the grid. */
function* shellArgMaps(grid: z.infer<typeof Grid>): Generator<[PropertyKey[], Record<string, string>]> {
  for (const [r, role] of grid.base.entries()) {
    yield [["base", r, "args"], role.args];
    for (const [k, rank] of (role.ranks ?? []).entries()) yield [["base", r, "ranks", k, "args"], rank.args];
  }
  for (const [key, roles] of Object.entries(grid.deltas)) {
    for (const [role, delta] of Object.entries(roles)) yield [["deltas", key, role, "add_args"], delta.add_args];
  }
}

export type Recipe = z.infer<typeof Recipe>;
export type Strategy = z.infer<typeof Strategy>;
export type StrategyOption = z.infer<typeof StrategyOption>;
export type Grid = z.infer<typeof Grid>;
export type RoleTemplate = z.infer<typeof RoleTemplate>;
export type RouterBlock = z.infer<typeof RouterBlock>;
export type PackageInstall = z.infer<typeof PackageInstall>;
