import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { ConfigError } from "../core/errors";
import { planDeployment } from "../core/plan/deployment";
import { diffPlans, renderPlanDiff } from "../core/plan/diff";
import { resolvePlan } from "../core/plan/resolve";
import type { LaunchPlan } from "../core/plan/types";
import { DEFAULT_MODEL, type RecipeCatalog } from "../core/recipe/catalog";
import { renderPlanText } from "../core/render/planText";

export interface CliOptions {
  stack?: string;
  strategy?: string;
  target?: string;
  preset?: string;
  set?: string[];
  model?: string;
  format?: string;
  diff?: string;
  out?: string;
}

function parseSets(sets: readonly string[] = []): Record<string, string> {
  return Object.fromEntries(
    sets.map((pair) => {
      const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.+)$/.exec(pair);
      if (!match) throw new ConfigError("--set", `"${pair}" is not axis=value, e.g. --set spec_decode=eagle3`);
      return [match[1]!, match[2]!];
    }),
  );
}

/** The flags that choose what to serve, as stack keys; only the flags given. */
function flagOverrides(options: CliOptions): Record<string, unknown> {
  const overrides: Record<string, unknown> = {};
  for (const key of ["strategy", "target", "preset", "model"] as const) if (options[key] !== undefined) overrides[key] = options[key];
  return overrides;
}

/** A stack's plan (flags override its keys), or a plan from flags alone. */
export function planFor(options: CliOptions, catalog: RecipeCatalog, stack = options.stack): LaunchPlan {
  const sets = parseSets(options.set);
  if (stack !== undefined) {
    const { raw } = readStackFile(stack);
    const axes = typeof raw["axes"] === "object" && raw["axes"] !== null ? (raw["axes"] as Record<string, unknown>) : {};
    const merged = { ...raw, ...flagOverrides(options), axes: { ...axes, ...sets } };
    return planDeployment(parseStackSettings(merged), catalog).plan;
  }
  if (options.strategy === undefined) throw new ConfigError("--strategy", "required without --stack (or give --stack NAME)");
  if (options.target === undefined) throw new ConfigError("--target", "required without --stack, e.g. --target Throughput");
  if (options.preset !== undefined && options.preset !== "recommended") throw new ConfigError("--preset", `unknown preset "${options.preset}"; allowed: "recommended"`);
  const model = options.model ?? DEFAULT_MODEL;
  return resolvePlan(catalog.get(model), { model, strategy: options.strategy, target: options.target, preset: options.preset, axes: sets });
}

function format(options: CliOptions): "text" | "json" {
  const value = options.format ?? "text";
  if (value !== "text" && value !== "json") throw new ConfigError("--format", `unknown format "${value}"; allowed: "text", "json"`);
  return value;
}

function planCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.diff !== undefined) return diffCommand(options, catalog);
  const plan = planFor(options, catalog);
  return format(options) === "json" ? `${JSON.stringify(plan, null, 2)}\n` : renderPlanText(plan);
}

function diffCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.stack === undefined || options.diff === undefined) throw new ConfigError("--diff", "compares two stacks: --stack A --diff B");
  const changes = diffPlans(planFor(options, catalog), planFor(options, catalog, options.diff));
  return format(options) === "json" ? `${JSON.stringify(changes, null, 2)}\n` : renderPlanDiff(changes);
}

/** Runs one CLI command and returns what it prints on stdout. */
export function runCommand(command: string, options: CliOptions, catalog: RecipeCatalog): string {
  switch (command) {
    case "plan":
      return planCommand(options, catalog);
    case "diff":
      return diffCommand(options, catalog);
    default:
      throw new ConfigError("command", `unknown command "${command}"; allowed: "plan", "diff"`);
  }
}
