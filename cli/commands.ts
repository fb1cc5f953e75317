import * as fs from "node:fs";
import * as path from "node:path";
import { parseStackSettings, type SecretKey } from "../core/config/stackConfig";
import { projectStackDir, readStackFile } from "../core/config/stackFile";
import { ConfigError } from "../core/errors";
import { planDeployment, type Deployment } from "../core/plan/deployment";
import { compareCompileKeys, compileKeyChanges, recompileLines } from "../core/cache/compileKey";
import { diffPlans, renderPlanDiff } from "../core/plan/diff";
import { resolvePlan } from "../core/plan/resolve";
import type { LaunchPlan } from "../core/plan/types";
import { DEFAULT_MODEL, type RecipeCatalog } from "../core/recipe/catalog";
import { renderPlanText } from "../core/render/planText";
import { renderFiles } from "../core/render/files";

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

/** A stack's deployment, with the selection flags overriding its keys. */
export function stackDeployment(options: CliOptions, catalog: RecipeCatalog, stack: string): { deployment: Deployment; secrets: SecretKey[] } {
  // The stacks of the Pulumi project in the working directory: the repository's, or a user's project that installed the package.
  const { raw, secrets } = readStackFile(stack, projectStackDir());
  const axes = typeof raw["axes"] === "object" && raw["axes"] !== null ? (raw["axes"] as Record<string, unknown>) : {};
  const merged = { ...raw, ...flagOverrides(options), axes: { ...axes, ...parseSets(options.set) } };
  return { deployment: planDeployment(parseStackSettings(merged), catalog), secrets };
}

/** A stack's plan (flags override its keys), or a plan from flags alone. */
export function planFor(options: CliOptions, catalog: RecipeCatalog, stack = options.stack): LaunchPlan {
  if (stack !== undefined) return stackDeployment(options, catalog, stack).deployment.plan;
  if (options.strategy === undefined) throw new ConfigError("--strategy", "required without --stack (or give --stack NAME)");
  if (options.target === undefined) throw new ConfigError("--target", "required without --stack, e.g. --target Throughput");
  if (options.preset !== undefined && options.preset !== "recommended") throw new ConfigError("--preset", `unknown preset "${options.preset}"; allowed: "recommended"`);
  const model = options.model ?? DEFAULT_MODEL;
  return resolvePlan(catalog.get(model), { model, strategy: options.strategy, target: options.target, preset: options.preset, axes: parseSets(options.set) });
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
  const [before, after] = [planFor(options, catalog), planFor(options, catalog, options.diff)];
  const changes = diffPlans(before, after);
  const recompiles = changes.length > 0 ? compareCompileKeys(before, after) : [];
  if (format(options) === "json") return `${JSON.stringify([...changes, ...compileKeyChanges(recompiles)], null, 2)}\n`;
  return renderPlanDiff(changes) + recompileLines(recompiles).map((line) => `warning: ${line}\n`).join("");
}

/** Writes the texts the stack's resources carry into `--out`, secrets as placeholders; returns a file list. */
function renderCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.stack === undefined) throw new ConfigError("--stack", "required: render --stack NAME --out DIR");
  if (options.out === undefined) throw new ConfigError("--out", "required: render --stack NAME --out DIR");
  const out = options.out;
  const { deployment, secrets } = stackDeployment(options, catalog, options.stack);
  const files = renderFiles(deployment, secrets);
  for (const [relative, content] of Object.entries(files)) {
    const target = path.join(out, relative);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, content, { mode: relative.endsWith(".sh") ? 0o755 : 0o644 });
  }
  return Object.keys(files).map((f) => `${path.join(out, f)}\n`).join("");
}

/** Runs one CLI command and returns what it prints on stdout. */
export function runCommand(command: string, options: CliOptions, catalog: RecipeCatalog): string {
  switch (command) {
    case "plan":
      return planCommand(options, catalog);
    case "diff":
      return diffCommand(options, catalog);
    case "render":
      return renderCommand(options, catalog);
    default:
      throw new ConfigError("command", `unknown command "${command}"; allowed: "plan", "render", "diff", "status"`);
  }
}
