// A stack's plan: one deployment per model (the entries of `models`, or the top level alone) and what
// they share. Each model is planned as a stack of that model alone (core/plan/deployment.ts); the
// checks across models (shared role-keyed settings, hosts no model uses) are here.
import { parse as parseYaml } from "yaml";
import { modelEntries } from "../config/models";
import type { StackSettings } from "../config/stackConfig";
import { ConfigError, listValues } from "../errors";
import type { RecipeCatalog } from "../recipe/catalog";
import { planModelDeployment } from "./deployment";
import { refuseFrontDoorPortClashes } from "./frontDoor";
import { stackPortInventory } from "./ports";
import { type PlanMessage, warning } from "./messages";
import type { Deployment } from "./types";

export interface StackPlan {
  /** The stack's settings as given: the shared keys, and `models` if any. */
  settings: StackSettings;
  /** One deployment per model, in the order of `models` (one for a stack without it). */
  models: Deployment[];
  /** The models' warnings and notes, each once; a model's own name the model it is about. */
  messages: PlanMessage[];
}

/** The label a model's metrics and scrape targets carry as `model`: its entry's name, or the model id for a stack without models (as before models). */
export function modelLabel(deployment: Pick<Deployment, "entry" | "plan">): string {
  return deployment.entry.name ?? deployment.plan.model;
}

/** kubernetes.resources is shared by every model: each role it names is a role of some model. */
function checkSharedRoles(settings: StackSettings, models: readonly Deployment[]): void {
  const roles = [...new Set(models.flatMap((m) => m.plan.roles.map((r) => r.role)))];
  for (const role of Object.keys(settings.kubernetes.resources))
    if (!roles.includes(role)) throw new ConfigError(`kubernetes.resources.${role}`, `no model's strategy has a role "${role}"; allowed: ${listValues(roles)}`);
}

/** The models' messages once each: one every model gives as it is, another with the name of the model it is about. */
function stackMessages(settings: StackSettings, models: readonly Deployment[]): PlanMessage[] {
  if (settings.models === undefined) return models[0]!.plan.messages;
  const key = (m: PlanMessage) => `${m.level}\u0000${m.text}`;
  const everywhere = (message: PlanMessage) => models.every((m) => m.plan.messages.some((other) => key(other) === key(message)));
  const messages = new Map<string, PlanMessage>();
  const add = (message: PlanMessage) => messages.set(key(message), message);
  for (const model of models)
    for (const message of model.plan.messages) add(everywhere(message) ? message : { ...message, text: `${model.entry.name}: ${message.text}` });
  const used = new Set([...settings.models.flatMap((m) => m.hosts ?? []), ...(typeof settings.router.host === "string" ? [settings.router.host] : [])]);
  settings.hosts.forEach((host, i) => {
    if (settings.platform === "hosts" && !used.has(host.name))
      add(warning(`hosts[${i}]: "${host.name}" is in no entry of models (nor router.host), so nothing runs there; remove it or list it in a model's hosts`));
  });
  settings.models.forEach((model, i) => {
    if (settings.platform === "kubernetes" && model.hosts !== undefined)
      add(warning(`models[${i}].hosts: does nothing with platform: kubernetes; remove it or choose the platform that reads it`));
  });
  return [...messages.values()];
}

/**
 * On Kubernetes the router chart writes a model's first served name unquoted into its HTTPRoute
 * (httpRoute.baseModel, test/fixtures/llm-d-router-v0.10.0/multi-model.json): Helm's YAML must read
 * it back as that text (YAML 1.1 and 1.2 alike), or the route matches another value or is refused.
 */
function checkRouteNames(settings: StackSettings, models: readonly Deployment[]): void {
  if (settings.platform !== "kubernetes") return;
  models.forEach((model, i) => {
    const name = model.entry.servedNames[0]!;
    if ([parseYaml(name, { version: "1.1" }), parseYaml(name)].every((read) => read === name)) return;
    const [key, what] = settings.models![i]!.servedNames
      ? [`models[${i}].servedNames[0]`, "first served name"]
      : [`models[${i}].model`, "model id (its served name)"];
    throw new ConfigError(
      key,
      `"${name}": the router chart writes the ${what} unquoted into the model's HTTPRoute (httpRoute.baseModel), where YAML reads it as something else than this text; put first a name YAML reads as text`,
    );
  });
}

/** The plan of every model of the stack; throws one ConfigError naming the stack's key path. */
export function planStack(settings: StackSettings, catalog: RecipeCatalog): StackPlan {
  const models = modelEntries(settings).map((entry) => planModelDeployment(entry, catalog));
  if (settings.models !== undefined) {
    checkSharedRoles(settings, models);
    checkRouteNames(settings, models);
  }
  // The router host carries every model's EPP, each on its own ports: checked against every model's ranks.
  if (models[0]!.frontDoor)
    refuseFrontDoorPortClashes(
      settings,
      stackPortInventory(models),
      models.map((m) => m.entry.name),
    );
  return { settings, models, messages: stackMessages(settings, models) };
}
