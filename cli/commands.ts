import * as path from "node:path";
import { parseStackSettings } from "../core/config/stackConfig";
import { secretPairingErrors, type SecretKey } from "../core/config/secrets";
import { projectStackDir, readStackFile, type StackFile } from "../core/config/stackFile";
import { ConfigError } from "../core/errors";
import type { Deployment } from "../core/plan/deployment";
import { planStack, type StackPlan } from "../core/plan/stack";
import { compareCompileKeys, compileKeyChanges, recompileLines, type RoleRecompile } from "../core/plan/compileKey";
import { diffDeployments, renderPlanDiff } from "../core/plan/diff";
import { resolvePlan } from "../core/plan/resolve";
import type { LaunchPlan, PlanChange } from "../core/plan/types";
import { DEFAULT_MODEL, type RecipeCatalog } from "../core/recipe/catalog";
import { maskedPlan, messageLines, renderPlanText } from "../core/render/planText";
import { renderStack } from "../core/render/stack";
import { renderStackPlanText } from "../core/render/stackPlanText";
import { changeCost, renderChangeCost } from "../core/render/changeCost";
import { renderStackChangeCost } from "../core/render/stackChangeCost";
import { stackFileAgainst } from "./stackAgainst";
import { renderDeployment } from "../core/render/deployment";
import { writeRenderFolder } from "./outputFolder";
import { renderStackFiles } from "../core/render/files";
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
 * A stack's plan, every model of it, read as the program reads it, with the selection flags over
 * its keys. `stackDir` is where the stack files are: by default those of the Pulumi project in the
 * working directory (the repository's, or a user's project that installed the package).
 */
export function stackPlan(options: CliOptions, catalog: RecipeCatalog, stack: string, stackDir = projectStackDir()): { plan: StackPlan; secrets: SecretKey[] } {
  return fileStackPlan(options, catalog, readStackFile(stack, stackDir), true);
}

/** A stack file's plan with the selection flags over its keys; `warn`: say on stderr what the file lacks (the current file, not an older one). */
function fileStackPlan(options: CliOptions, catalog: RecipeCatalog, file: StackFile, warn: boolean): { plan: StackPlan; secrets: SecretKey[] } {
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
  const plan = planStack(parseStackSettings(merged), catalog);
  // `pulumi up` refuses these; offline, the stack file may simply not hold its secrets yet.
  const missing = new Set(plan.models.flatMap((deployment) => secretPairingErrors(deployment.settings, (key) => secrets.includes(key)).map((e) => e.message)));
  if (warn) for (const message of missing) process.stderr.write(`warning: ${message}\n`);
  return { plan, secrets };
}

/** The one model of a stack's plan; a stack of several is refused, naming the command's way to read them. */
function onlyModel(stack: string, read: { plan: StackPlan; secrets: SecretKey[] }): { deployment: Deployment; secrets: SecretKey[] } {
  const { plan, secrets } = read;
  if (plan.models.length !== 1) throw new ConfigError("--stack", `"${stack}" serves ${plan.models.length} models; this reads a stack of one model`);
  return { deployment: plan.models[0]!, secrets };
}

/** A stack of one model's deployment (stackPlan); a stack of several is refused. */
export function stackDeployment(
  options: CliOptions,
  catalog: RecipeCatalog,
  stack: string,
  stackDir = projectStackDir(),
): { deployment: Deployment; secrets: SecretKey[] } {
  return onlyModel(stack, stackPlan(options, catalog, stack, stackDir));
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

/** A stack of several models: each model's plan under its name, then the stack's notes and warnings once. */
function modelsPlanText(stack: StackPlan, json: boolean): string {
  const models = stack.models.map(({ entry, plan }) => ({ name: entry.name, servedNames: entry.servedNames, plan: maskedPlan(plan) }));
  if (json) return `${JSON.stringify({ models, messages: stack.messages }, null, 2)}\n`;
  const texts = models.map(
    ({ name, servedNames, plan }) => `# model ${name}, served as ${servedNames.join(", ")}\n${renderPlanText({ ...plan, messages: [] })}`,
  );
  return `${texts.join("\n")}${messageLines(stack.messages)
    .map((line) => `${line}\n`)
    .join("")}`;
}

/** A stack's plan in its platform (hosts, addresses, units, the front door; Deployments, Jobs), or the plan of a selection alone. */
function planCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.diff !== undefined || options.against !== undefined) return diffCommand(options, catalog);
  const json = format(options) === "json";
  const read = options.stack === undefined ? undefined : stackPlan(options, catalog, options.stack);
  if (read?.plan.settings.models !== undefined) return modelsPlanText(read.plan, json);
  if (read === undefined || json) {
    const plan = read ? read.plan.models[0]!.plan : planFor(options, catalog);
    return json ? `${JSON.stringify(maskedPlan(plan), null, 2)}\n` : renderPlanText(plan);
  }
  // As the program's own instance on that stack, so units and ids are those `pulumi up` creates.
  return renderStackPlanText(renderDeployment(read.plan.models[0]!, { stack: options.stack!, instance: DEFAULT_INSTANCE, secrets: read.secrets }));
}

/**
 * Two stacks' changes model by model, matched by name (a stack without models is one model of no
 * name): each change's scope prefixed with its model's name; a model in one stack only is one line.
 */
function modelChanges(a: { plan: StackPlan; secrets: SecretKey[] }, b: { plan: StackPlan; secrets: SecretKey[] }) {
  const names = [...new Set([...a.plan.models, ...b.plan.models].map((m) => m.entry.name))];
  const find = (stack: StackPlan, name: string | null) => stack.models.find((m) => m.entry.name === name);
  const changes: PlanChange[] = [];
  const recompiles: RoleRecompile[] = [];
  for (const name of names) {
    const [before, after] = [find(a.plan, name), find(b.plan, name)];
    const prefix = (scope: string) => (name === null ? scope : `${name}: ${scope}`);
    if (!before || !after) {
      changes.push({ scope: "models", kind: before ? "removed" : "added", item: String(name) });
      continue;
    }
    const modelChanges = diffDeployments(before, after, a.secrets, b.secrets);
    changes.push(...modelChanges.map((c) => ({ ...c, scope: prefix(c.scope) })));
    if (modelChanges.length > 0) recompiles.push(...compareCompileKeys(before.plan, after.plan).map((r) => ({ ...r, role: prefix(r.role) })));
  }
  return { changes, recompiles };
}

/**
 * The cost of a change between two stacks (units restarted, ...), both rendered as the program's
 * instance on `stack`: between stacks of one model, that model's; else per model under its name,
 * and what the models share (the router host's front door, the routing in the cluster) once.
 */
function stackCost(stack: string, a: { plan: StackPlan; secrets: SecretKey[] }, b: { plan: StackPlan; secrets: SecretKey[] }): string[] {
  const render = (side: typeof a) => renderStack(side.plan, { stack, instance: DEFAULT_INSTANCE, secrets: side.secrets });
  const [before, after] = [render(a), render(b)];
  if (a.plan.settings.models === undefined && b.plan.settings.models === undefined)
    return renderChangeCost(changeCost(before.models[0]!, after.models[0]!), b.plan.models[0]!);
  return renderStackChangeCost(before, after);
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
      ? [fileStackPlan(options, catalog, stackFileAgainst(stack, options.against, projectStackDir()), false), stackPlan(options, catalog, stack)]
      : [stackPlan(options, catalog, stack), stackPlan(options, catalog, options.diff!)];
  const { changes, recompiles } = modelChanges(a, b);
  if (format(options) === "json") return `${JSON.stringify([...changes, ...compileKeyChanges(recompiles)], null, 2)}\n`;
  const cost = changes.length > 0 ? stackCost(stack, a, b) : [];
  return `${renderPlanDiff(changes)}${recompileLines(recompiles)
    .map((line) => `${line.level}: ${line.text}\n`)
    .join("")}${cost.map((line) => `${line}\n`).join("")}`;
}

/** Writes the texts the stack's resources carry into `--out`, secrets as placeholders; returns a file list. */
function renderCommand(options: CliOptions, catalog: RecipeCatalog): string {
  if (options.stack === undefined) throw new ConfigError("--stack", "required: render --stack NAME --out DIR");
  if (options.out === undefined) throw new ConfigError("--out", "required: render --stack NAME --out DIR");
  const out = options.out;
  const { plan, secrets } = stackPlan(options, catalog, options.stack);
  // Named as the program's own instance on that stack, so the files show the names `pulumi up` creates.
  const files = renderStackFiles(renderStack(plan, { stack: options.stack, instance: DEFAULT_INSTANCE, secrets }));
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
