import { isPackageVersion } from "../config/fields";
import { ConfigError, listValues } from "../errors";
import type { Grid, Recipe, RoleTemplate, StrategyOption } from "../recipe/schema";
import { ShellSyntaxError, splitShellWords } from "../shell";
import { PLACEHOLDER } from "./argv";
import { withCompileKeys } from "./compileKey";
import { OFFLINE_ENV } from "../config/defaults";
import { modelsOf } from "./modelRefs";
import { readRouterIntent, routerNotes } from "./routerIntent";
import type { Flag, LaunchPlan, NodePlan, PackagePlan, RankPlan, RolePlan, Selection } from "./types";

const DEFAULT_VLLM_PORT = 8000;

/** Split once per distinct recipe string: the same texts recur in every plan. */
const wordCache = new Map<string, string[]>();
function words(text: string): string[] {
  let cached = wordCache.get(text);
  if (!cached) {
    try {
      cached = splitShellWords(text);
    } catch (error) {
      if (error instanceof ShellSyntaxError) throw new ConfigError("recipe", error.message);
      throw error;
    }
    wordCache.set(text, cached);
  }
  return cached;
}

/** `rebel-compiler` → `rebelCompiler`: the key of `versions` for a package. */
export function versionKeyOf(packageName: string): string {
  return packageName.toLowerCase().replace(/[-_.]+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

export function findOption(recipe: Recipe, strategySlug: string, target: string): StrategyOption {
  const strategy = recipe.strategies.find((s) => s.slug === strategySlug);
  if (!strategy) {
    throw new ConfigError(
      "strategy",
      `unknown strategy "${strategySlug}" for model "${recipe.model}"; allowed: ${listValues(recipe.strategies.map((s) => s.slug))}`,
    );
  }
  const option = strategy.options.find((o) => o.target === target);
  if (!option) {
    throw new ConfigError("target", `"${target}" is not offered by strategy "${strategySlug}"; allowed: ${listValues(strategy.options.map((o) => o.target))}`);
  }
  return option;
}

/** Every axis the grid verifies, mode axes first, in recipe order. */
export function gridAxes(grid: Grid): { axis: string; values: string[]; fallback: string }[] {
  return [
    ...Object.entries(grid.modes).map(([axis, values]) => ({ axis, values, fallback: "off" })),
    ...Object.entries(grid.options).map(([axis, values]) => ({ axis, values, fallback: grid.option_base[axis] ?? values[0]! })),
  ];
}

/** Resolves every axis: defaults, then the preset, then explicit values; refuses what the grid does not verify. */
export function resolveAxes(recipe: Recipe, strategySlug: string, option: StrategyOption, selection: Selection): Record<string, string> {
  const grid = option.grid;
  const axes = gridAxes(grid);
  const where = `model "${recipe.model}", strategy "${strategySlug}", target "${option.target}"`;
  const explicit = selection.axes ?? {};
  for (const [axis, value] of Object.entries(explicit)) {
    const verified = axes.find((a) => a.axis === axis);
    const page = recipe.axes.find((a) => a.axis === axis);
    if (!verified) {
      if (page) throw new ConfigError(`axes.${axis}`, `axis "${axis}" is not verified for ${where}; verified axes: ${listValues(axes.map((a) => a.axis))}`);
      throw new ConfigError(`axes.${axis}`, `unknown axis "${axis}"; allowed: ${listValues(axes.map((a) => a.axis))}`);
    }
    if (!verified.values.includes(value)) {
      const notVerified = page?.options.some((o) => o.value === value);
      const what = notVerified ? `"${value}" is not verified for ${where}` : `unknown value "${value}"`;
      throw new ConfigError(`axes.${axis}`, `${what}; verified values: ${listValues(verified.values)}`);
    }
  }
  let preset: Record<string, string> = {};
  if (selection.preset !== undefined) {
    if (selection.preset !== "recommended") {
      throw new ConfigError("preset", `unknown preset "${String(selection.preset)}"; allowed: "recommended"`);
    }
    if (!grid.recommended) throw new ConfigError("preset", `"recommended" is not offered for ${where}; leave preset unset and choose axes`);
    preset = grid.recommended;
  }
  return Object.fromEntries(axes.map(({ axis, fallback }) => [axis, explicit[axis] ?? preset[axis] ?? fallback]));
}

function parseFlag(flag: string, text: string): Flag {
  const [name, ...values] = words(text);
  if (name !== flag) throw new ConfigError(`recipe arg ${flag}`, `shell text ${JSON.stringify(text)} does not start with the flag`);
  return { name, values };
}

function parseEnv(name: string, text: string): string {
  const parsed = words(text);
  const prefix = `${name}=`;
  if (parsed.length !== 1 || !parsed[0]!.startsWith(prefix)) {
    throw new ConfigError(`recipe env ${name}`, `shell text ${JSON.stringify(text)} is not one ${name}=value word`);
  }
  return parsed[0]!.slice(prefix.length);
}

function placeholdersIn(texts: readonly string[]): string[] {
  const found = new Set<string>();
  for (const text of texts) for (const match of text.matchAll(PLACEHOLDER)) found.add(match[1]!);
  return [...found].sort();
}

/** The base args/envs of a role with every selected axis delta applied, in recipe order. */
function roleTexts(grid: Grid, role: RoleTemplate, selected: Record<string, string>) {
  const args = new Map(Object.entries(role.args));
  const envs = new Map(Object.entries(role.envs));
  for (const [axis, value] of Object.entries(selected)) {
    const delta = grid.deltas[`${axis}=${value}`]?.[role.role];
    if (!delta) continue;
    for (const key of delta.del_args) args.delete(key);
    for (const key of delta.del_envs) envs.delete(key);
    for (const [key, text] of Object.entries(delta.add_args)) args.set(key, text);
    for (const [key, text] of Object.entries(delta.add_envs)) envs.set(key, text);
  }
  return { args, envs };
}

function resolveRank(model: string, launcher: string[], npus: number, rank: number, args: Map<string, string>, envs: Map<string, string>): RankPlan {
  const flags = [...args].map(([flag, text]) => parseFlag(flag, text));
  const env = { ...Object.fromEntries([...envs].map(([name, text]) => [name, parseEnv(name, text)])), ...OFFLINE_ENV };
  const argv = [...launcher, model, ...flags.flatMap((f) => [f.name, ...f.values])];
  const port = flags.find((f) => f.name === "--port")?.values[0];
  const visible = env.RBLN_VISIBLE_DEVICES;
  return {
    rank,
    argv,
    env,
    ports: [port === undefined ? DEFAULT_VLLM_PORT : Number(port)],
    devices: visible === undefined ? Array.from({ length: npus }, (_, i) => i) : visible.split(",").map(Number),
    placeholders: placeholdersIn([...argv, ...Object.values(env)]),
    flags,
  };
}

function resolveRoles(option: StrategyOption, selected: Record<string, string>, multiNode: boolean): RolePlan[] {
  const grid = option.grid;
  return grid.base.map((role, index) => {
    const { args, envs } = roleTexts(grid, role, selected);
    const launcher = words(role.launcher);
    const overrides = role.ranks ?? [{ args: {}, envs: {} }];
    const ranks = overrides.map((override, rank) => {
      const rankArgs = new Map(args);
      const rankEnvs = new Map(envs);
      for (const [key, text] of Object.entries(override.args)) rankArgs.set(key, text);
      for (const [key, text] of Object.entries(override.envs)) rankEnvs.set(key, text);
      return resolveRank(grid.model, launcher, option.npus, rank, rankArgs, rankEnvs);
    });
    return { role: role.role, node: multiNode ? index : 0, ranks, compileKey: "" };
  });
}

function resolvePackages(recipe: Recipe, selected: Record<string, string>, versions: Readonly<Record<string, string>>): PackagePlan[] {
  const keys = recipe.installs.map((i) => versionKeyOf(i.package));
  for (const [key, version] of Object.entries(versions)) {
    if (!keys.includes(key)) throw new ConfigError(`versions.${key}`, `unknown package key; allowed: ${listValues(keys)}`);
    if (!isPackageVersion(version)) throw new ConfigError(`versions.${key}`, `"${version}" is not a version number such as "0.12.0"`);
  }
  return recipe.installs
    .filter((install) => Object.entries(install.when ?? {}).every(([axis, value]) => selected[axis] === value))
    .map((install) => {
      const versionKey = versionKeyOf(install.package);
      const version = versions[versionKey] ?? install.version;
      const extras = install.extras.length > 0 ? `[${install.extras.join(",")}]` : "";
      return {
        name: install.package,
        version,
        extras: [...install.extras],
        versionKey,
        requirement: `${install.package}${extras}==${version}`,
        extraIndexUrls: [...install.extraIndexUrls],
        importName: install.import,
      };
    });
}

/** Selection → launch plan: the exact `vllm serve` command, environment, NPUs and ports of every rank. */
export function resolvePlan(recipe: Recipe, selection: Selection): LaunchPlan {
  const option = findOption(recipe, selection.strategy, selection.target);
  const strategy = recipe.strategies.find((s) => s.slug === selection.strategy)!;
  const selected = resolveAxes(recipe, selection.strategy, option, selection);
  const multiNode = strategy.nodes !== null;
  const roles = resolveRoles(option, selected, multiNode);
  const router = option.grid.router ? readRouterIntent(option.grid.router) : null;
  const nodes: NodePlan[] = (multiNode ? roles.map((r) => [r.role]) : [roles.map((r) => r.role)]).map((nodeRoles, index) => ({
    index,
    roles: nodeRoles,
    npus: option.npus,
    skus: [...option.skus],
  }));
  return withCompileKeys({
    model: option.grid.model,
    strategy: strategy.slug,
    target: option.target,
    preset: selection.preset ?? null,
    verified: option.verified,
    selection: selected,
    nodes,
    roles,
    packages: resolvePackages(recipe, selected, selection.versions ?? {}),
    revision: null,
    models: modelsOf(roles, null),
    credentialedIndexUrls: [...recipe.credentialedIndexUrls],
    router,
    client: recipe.client,
    messages: router ? routerNotes(router, { roles }) : [],
  });
}

/** Every (strategy, target, axes) combination a recipe verifies. */
export function* allSelections(recipe: Recipe): Generator<Selection> {
  for (const strategy of recipe.strategies) {
    for (const option of strategy.options) {
      const axes = gridAxes(option.grid);
      const total = axes.reduce((n, a) => n * a.values.length, 1);
      for (let i = 0; i < total; i++) {
        let rest = i;
        const chosen: Record<string, string> = {};
        for (const { axis, values } of axes) {
          chosen[axis] = values[rest % values.length]!;
          rest = Math.floor(rest / values.length);
        }
        yield { model: recipe.model, strategy: strategy.slug, target: option.target, axes: chosen };
      }
    }
  }
}
