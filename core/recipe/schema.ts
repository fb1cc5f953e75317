import { z } from "zod";

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

export const RoleTemplate = z.strictObject({
  role: z.string().regex(/^[a-z][a-z0-9-]*$/, "a lower-case role name"),
  launcher: z.string().min(1),
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
  model: z.string().min(1),
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
  nodes: z.string().regex(/^[1-9][0-9]*$/).nullable(),
  options: z.array(StrategyOption).min(1),
});

const PageAxis = z.strictObject({
  axis: z.string(),
  title: z.string(),
  options: z.array(z.strictObject({ label: z.string(), value: z.string() })).min(1),
});

export const PackageInstall = z.strictObject({
  package: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "a PyPI project name"),
  version: z.string().min(1),
  extras: z.array(z.string().regex(/^[A-Za-z0-9_-]+$/)),
  extraIndexUrls: z.array(z.url()),
  /** null: always installed; otherwise only when every axis has the given value. */
  when: z.record(z.string(), z.string()).nullable(),
  /** A module the package provides: importing it checks the install. */
  import: z.string().regex(/^[A-Za-z_][A-Za-z0-9_.]*$/, "a Python module name"),
});

export const Recipe = z
  .looseObject({
    model: z.string().min(1),
    name: z.string(),
    provider: z.string(),
    hf: z.string(),
    client: z.string(),
    installLine: z.string(),
    axes: z.array(PageAxis),
    strategies: z.array(Strategy).min(1),
    installs: z.array(PackageInstall).min(1),
    /** Package indexes that take the account credentials (the `pipPassword` secret). */
    credentialedIndexUrls: z.array(z.url()),
  })
  .superRefine((recipe, ctx) => {
    recipe.strategies.forEach((strategy, s) => {
      strategy.options.forEach((option, o) => {
        const path = ["strategies", s, "options", o, "grid"];
        const grid = option.grid;
        const roles = new Set(grid.base.map((r) => r.role));
        if (strategy.nodes !== null && Number(strategy.nodes) !== grid.base.length) {
          ctx.addIssue({ code: "custom", path: ["strategies", s, "nodes"], message: `${strategy.nodes} nodes but ${grid.base.length} roles; a multi-node strategy places one role per node` });
        }
        for (const [axis, values] of Object.entries(grid.modes)) {
          if (!values.includes("off")) ctx.addIssue({ code: "custom", path: [...path, "modes", axis], message: "a mode axis needs an \"off\" value" });
        }
        for (const [axis, value] of Object.entries(grid.option_base)) {
          if (!grid.options[axis]?.includes(value)) ctx.addIssue({ code: "custom", path: [...path, "option_base", axis], message: `"${value}" is not one of the axis's options` });
        }
        for (const key of Object.keys(grid.deltas)) {
          const [axis, value] = key.split("=") as [string, string];
          const values = grid.modes[axis] ?? grid.options[axis];
          if (!values?.includes(value)) ctx.addIssue({ code: "custom", path: [...path, "deltas", key], message: "names an axis value the grid does not list" });
          for (const role of Object.keys(grid.deltas[key]!)) {
            if (!roles.has(role)) ctx.addIssue({ code: "custom", path: [...path, "deltas", key, role], message: "names a role the grid has no base for" });
          }
        }
        for (const [axis, value] of Object.entries(grid.recommended ?? {})) {
          const values = grid.modes[axis] ?? grid.options[axis];
          if (!values?.includes(value)) ctx.addIssue({ code: "custom", path: [...path, "recommended", axis], message: `"${value}" is not a value of this grid` });
        }
      });
    });
  });

export type Recipe = z.infer<typeof Recipe>;
export type Strategy = z.infer<typeof Strategy>;
export type StrategyOption = z.infer<typeof StrategyOption>;
export type Grid = z.infer<typeof Grid>;
export type RoleTemplate = z.infer<typeof RoleTemplate>;
export type RouterBlock = z.infer<typeof RouterBlock>;
export type PackageInstall = z.infer<typeof PackageInstall>;
