import * as path from "node:path";
import { parseStackSettings } from "../core/config/stackConfig";
import { secretPairingErrors, type SecretKey } from "../core/config/secrets";
import { projectStackDir, readStackFile, type StackFile } from "../core/config/stackFile";
import { ConfigError } from "../core/errors";
import { planDeployment, type Deployment } from "../core/plan/deployment";
import { compareCompileKeys, compileKeyChanges, recompileLines } from "../core/plan/compileKey";
import { diffDeployments, renderPlanDiff } from "../core/plan/diff";
import { resolvePlan } from "../core/plan/resolve";
import type { LaunchPlan } from "../core/plan/types";
import { DEFAULT_MODEL, type RecipeCatalog } from "../core/recipe/catalog";
import { maskedPlan, renderPlanText } from "../core/render/planText";
import { renderStackPlanText } from "../core/render/stackPlanText";
import { changeCost, renderChangeCost } from "../core/render/changeCost";
import { stackFileAgainst } from "./stackAgainst";
import { renderDeployment } from "../core/render/deployment";
import { writeRenderFolder } from "./outputFolder";
import { renderFiles } from "../core/render/files";
import { DEFAULT_INSTANCE } from "../core/render/hosts/names";
import { COMMANDS, isCommand } from "./usage";

export interface CliOptions {
  stack?: string;
  strategy?: string;
  target?: string;
  preset?: string;
  set?: string[];
  model?: string;
  format?: string;
  diff?: string;
  against?: string;
  out?: string;
}

function parseSets(sets: readonly string[] = []): Record<string, string> {
  const axes: Record<string, string> = {};
  for (const pair of sets) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.+)$/.exec(pair);
    if (!match) throw new ConfigError("--set", `"${pair}" is not axis=value, e.g. --set spec_decode=eagle3`);
    const [, axis, value] = match as unknown as [string, string, string];
    if (axis in axes) throw new ConfigError("--set", `axis "${axis}" given twice ("${axes[axis]}", "${value}"); give each axis once`);
    axes[axis] = value;
  }
  return axes;
}

/** The flags that choose what to serve, as stack keys; only the flags given. */
function flagOverrides(options: CliOptions): Record<string, unknown> {
  const overrides: Record<string, unknown> = {};
  for (const key of ["strategy", "target", "preset", "model"] as const) if (options[key] !== undefined) overrides[key] = options[key];
  return overrides;
}

/**
 * A stack's deployment, read as the program reads it, with the selection flags over its keys.
 * `stackDir` is where the stack files are: by default those of the Pulumi project in the working
 * directory (the repository's, or a user's project that installed the package).
 */
export function stackDeployment(
  options: CliOptions,
  catalog: RecipeCatalog,
  stack: string,
  stackDir = projectStackDir(),
): { deployment: Deployment; secrets: SecretKey[] } {
  return fileDeployment(options, catalog, readStackFile(stack, stackDir), true);
}

/** A stack file's deployment with the selection flags over its keys; `warn`: say on stderr what the file lacks (the current file, not an older one). */
function fileDeployment(options: CliOptions, catalog: RecipeCatalog, file: StackFile, warn: boolean): { deployment: Deployment; secrets: SecretKey[] } {
  const { raw, secrets, warnings } = file;
  if (warn) for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`);
  const sets = parseSets(options.set);
  const axes = raw.axes;
  // --set adds to the stack's axes; axes that are no map stay as given, for validation to refuse.
  const isMap = axes === undefined || (axes !== null && typeof axes === "object" && !Array.isArray(axes));
  const merged = {
    ...raw,
    ...flagOverrides(options),
    ...(Object.keys(sets).length > 0 && isMap ? { axes: { ...(axes as object | undefined), ...sets } } : {}),
  };
  const deployment = planDeployment(parseStackSettings(merged), catalog);
  // `pulumi up` refuses these; offline, the stack file may simply not hold its secrets yet.
  if (warn)
    for (const missing of secretPairingErrors(deployment.settings, (key) => secrets.includes(key))) process.stderr.write(`warning: ${missing.message}\n`);
  return { deployment, secrets };
}

/** A stack's plan (flags override its keys), or a plan from flags alone. */
export function planFor(options: CliOptions, catalog: RecipeCatalog, stack = options.stack): LaunchPlan {
  if (stack !== undefined) return stackDeployment(options, catalog, stack).deployment.plan;
  if (options.strategy === undefined) throw new ConfigError("--strategy", "required without --stack (or give --stack NAME)");
  if (options.target === undefined) throw new ConfigError("--target", "required without --stack, e.g. --target Throughput");
  if (options.preset !== undefined && options.preset !== "recommended")
    throw new ConfigError("--preset", `unknown preset "${options.preset}"; allowed: "recommended"`);
  const model = options.model ?? DEFAULT_MODEL;
  return resolvePlan(catalog.get(model), { model, strategy: options.strategy, target: options.target, preset: options.preset, axes: parseSets(options.set) });
}

function format(options: CliOptions): "text" | "json" {
  const value = options.format ?? "text";
  if (value !== "text" && value !== "json") throw new ConfigError("--format", `unknown format "${value}"; allowed: "text", "json"`);
  return value;
}

/** A stack's plan in its platform (hosts, addresses, units, the front door; Deployments, Jobs), or the plan of a selection alone. */
function planCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.diff !== undefined || options.against !== undefined) return diffCommand(options, catalog);
  const json = format(options) === "json";
  if (options.stack === undefined || json) {
    const plan = planFor(options, catalog);
    return json ? `${JSON.stringify(maskedPlan(plan), null, 2)}\n` : renderPlanText(plan);
  }
  const { deployment, secrets } = stackDeployment(options, catalog, options.stack);
  // As the program's own instance on that stack, so units and ids are those `pulumi up` creates.
  return renderStackPlanText(renderDeployment(deployment, { stack: options.stack, instance: DEFAULT_INSTANCE, secrets }));
}

/**
 * What changes from one config to another: `--stack A --diff B` from A to B; `--stack S --against
 * FILE|GIT-REF` from that file (or S's file at that git ref) to S's file as it is now. Both are
 * rendered as the program's instance on the stack given, so the cost names the units it changes.
 */
function diffCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.stack === undefined || (options.diff === undefined) === (options.against === undefined))
    throw new ConfigError(
      options.diff !== undefined && options.against !== undefined ? "--against" : "--diff",
      "compares two configs: --stack A --diff B, or --stack S --against FILE|GIT-REF (not both)",
    );
  const stack = options.stack;
  const [a, b] =
    options.against !== undefined
      ? [fileDeployment(options, catalog, stackFileAgainst(stack, options.against, projectStackDir()), false), stackDeployment(options, catalog, stack)]
      : [stackDeployment(options, catalog, stack), stackDeployment(options, catalog, options.diff!)];
  const changes = diffDeployments(a.deployment, b.deployment, a.secrets, b.secrets);
  const recompiles = changes.length > 0 ? compareCompileKeys(a.deployment.plan, b.deployment.plan) : [];
  if (format(options) === "json") return `${JSON.stringify([...changes, ...compileKeyChanges(recompiles)], null, 2)}\n`;
  const render = (side: typeof a) => renderDeployment(side.deployment, { stack, instance: DEFAULT_INSTANCE, secrets: side.secrets });
  const cost = changes.length > 0 ? renderChangeCost(changeCost(render(a), render(b)), b.deployment) : [];
  return `${renderPlanDiff(changes)}${recompileLines(recompiles)
    .map((line) => `${line.level}: ${line.text}\n`)
    .join("")}${cost.map((line) => `${line}\n`).join("")}`;
}

/** Writes the texts the stack's resources carry into `--out`, secrets as placeholders; returns a file list. */
function renderCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.stack === undefined) throw new ConfigError("--stack", "required: render --stack NAME --out DIR");
  if (options.out === undefined) throw new ConfigError("--out", "required: render --stack NAME --out DIR");
  const out = options.out;
  const { deployment, secrets } = stackDeployment(options, catalog, options.stack);
  // Named as the program's own instance on that stack, so the files show the names `pulumi up` creates.
  const files = renderFiles(renderDeployment(deployment, { stack: options.stack, instance: DEFAULT_INSTANCE, secrets }));
  writeRenderFolder(out, files);
  return Object.keys(files)
    .map((f) => `${path.join(out, f)}\n`)
    .join("");
}

/** Any option a command does not read is refused rather than ignored. */
export function refuseUnusedOptions(command: string, options: object): void {
  if (!isCommand(command)) return;
  const allowed: readonly string[] = COMMANDS[command].options;
  for (const [key, value] of Object.entries(options)) {
    if (value !== undefined && !allowed.includes(key)) {
      throw new ConfigError(
        `--${key}`,
        `not an option of ${command}${command === "render" && key === "format" ? " (render writes files; --format is for plan and diff)" : ""}; ${command} takes ${allowed.map((o) => `--${o}`).join(", ")}`,
      );
    }
  }
}

/** Runs one CLI command and returns what it prints on stdout. */
export function runCommand(command: string, options: CliOptions, catalog: RecipeCatalog): string {
  refuseUnusedOptions(command, options);
  switch (command) {
    case "plan":
      return planCommand(options, catalog);
    case "diff":
      return diffCommand(options, catalog);
    case "render":
      return renderCommand(options, catalog);
    default:
      throw new ConfigError("command", `unknown command "${command}"; allowed: "plan", "render", "diff", "status", "recipe"`);
  }
}
