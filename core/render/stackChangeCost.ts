// What a change between two stacks of models costs (`diff`): each model's cost as changeCost gives a
// stack of one model's, a model one side lacks against nothing (added: what it downloads, runs and
// starts; removed: what goes), each under `# model <name>, served as ...` as `plan` and `status`
// print them; then what every model shares: on hosts the router host's one front door, on
// Kubernetes the routing by the body's model.
import { modelLabel } from "../plan/stack";
import { type ChangeCost, changeCost, COST_HEADING, costLines, estimateLines, isFree, type Restart, routerSteps, stepChanges } from "./changeCost";
import type { Deployment } from "../plan/types";
import type { RenderedDeployment } from "./deployment";
import type { RenderedFrontDoor } from "./hosts/frontDoor/frontDoor";
import { ENVOY_DISCOVERY_FILES } from "./hosts/frontDoor/modelsFrontDoor";
import type { RenderedStack } from "./stack";

/** The router-host units whose text depends on more than their unit file: Envoy's on its config (not the routes and clusters it reloads), each model's EPP on its own. */
function unitConfigs(after: RenderedStack, files: Record<string, string>): Map<string, string[]> {
  const configs = new Map<string, string[]>();
  const proxy = Object.keys(files).find((key) => key.endsWith(".front-door-proxy.service"));
  if (proxy)
    configs.set(
      proxy,
      Object.keys(files).filter((key) => key.startsWith("envoy/") && !ENVOY_DISCOVERY_FILES.includes(key)),
    );
  // Each model's EPP unit is named after its deployment id (routerUnits), its config in its folder.
  for (const model of after.models)
    if (model.hosts) configs.set(`systemd/rbln-serving-${model.hosts.id}.front-door-epp.service`, [`models/${model.deployment.entry.name}/epp/epp.yaml`]);
  return configs;
}

/**
 * The router host's units the front door's apply step (front-door-models-apply.sh) starts, restarts
 * or stops: a unit that is new, or whose unit file or config changed; a removed model's EPP and
 * agent, which the step stops once Envoy's routes and clusters no longer have the model.
 */
function routerRestarts(before: RenderedStack, after: RenderedStack): Restart[] {
  return (after.frontDoor?.routers ?? []).flatMap((router) => {
    const was = before.frontDoor?.routers.find((r) => r.host.name === router.host.name)?.files ?? {};
    const now = router.files;
    const configs = unitConfigs(after, now);
    const unit = (key: string) => ({ role: "the front door", what: key.slice("systemd/".length), where: router.host.name });
    const stopped = Object.keys(was)
      .filter((key) => key.startsWith("systemd/") && now[key] === undefined)
      .map((key): Restart => ({ ...unit(key), change: "stops" }));
    return Object.keys(now)
      .filter((key) => key.startsWith("systemd/"))
      .flatMap((key): Restart[] => {
        if (was[key] === undefined) return [{ ...unit(key), change: "starts" }];
        const changed = [key, ...(configs.get(key) ?? [])].some((file) => was[file] !== now[file]);
        return changed ? [{ ...unit(key), change: "restarts" }] : [];
      })
      .concat(stopped);
  });
}

/** The front door's own cost: its router-host steps that rerun, the units they restart, and Envoy's restart, which every model's requests pass. */
function frontDoorCost(before: RenderedStack, after: RenderedStack): ChangeCost {
  const door = (stack: RenderedStack): Pick<RenderedFrontDoor, "routers" | "tls"> | null => stack.frontDoor;
  const restarts = routerRestarts(before, after);
  const envoy = restarts.filter((r) => r.change === "restarts" && r.what.endsWith(".front-door-proxy.service"));
  return {
    downloads: [],
    steps: stepChanges(routerSteps(door(before)), routerSteps(door(after))),
    restarts,
    outages: envoy.map((r) => ({
      role: "front door",
      text: `Envoy restarts on ${r.where}: the requests in flight there fail, every model's, and new ones are refused until it listens again (seconds)`,
    })),
  };
}

/**
 * On Kubernetes, the routing every model shares: the payload processor's release, which is upgraded
 * when its values change, and the answers' Deployment, whose pods roll when its template (it carries
 * the hash of the served names' config) changes.
 */
function routingCost(before: RenderedStack, after: RenderedStack): ChangeCost {
  const release = (stack: RenderedStack) => {
    const chart = stack.routing?.payloadProcessor;
    return new Map(chart ? [[`payload processor chart\t${chart.release}\tthe cluster`, JSON.stringify(chart.values)]] : []);
  };
  const [was, now] = [before.routing?.answers.deployment, after.routing?.answers.deployment];
  const template = (deployment: typeof now) => JSON.stringify(deployment?.spec?.template);
  const restarts: Restart[] =
    now && template(was) !== template(now)
      ? [{ role: "routing", what: `the pods of Deployment ${now.metadata.name}`, where: "the cluster", change: was ? "restarts" : "starts" }]
      : [];
  return { downloads: [], steps: stepChanges(release(before), release(after)), restarts, outages: [] };
}

/** The models of two stacks by name: the first stack's order, then the models only the second has. */
function modelPairs(before: RenderedStack, after: RenderedStack): [RenderedDeployment | null, RenderedDeployment | null][] {
  const names = [...new Set([...before.models, ...after.models].map((m) => m.deployment.entry.name))];
  const find = (stack: RenderedStack, name: string | null) => stack.models.find((m) => m.deployment.entry.name === name) ?? null;
  return names.map((name) => [find(before, name), find(after, name)]);
}

/** A part of a stack's cost under its heading: a model's (the deployment of the stack it is in after the change, else before) or what the models share. */
export interface CostSection {
  heading: string;
  deployment: Deployment | null;
  cost: ChangeCost;
}

/** The cost of a change between two stacks, one of them at least of models, by model, then what the models share; both rendered as the same stack and instance. */
export function stackChangeCost(before: RenderedStack, after: RenderedStack): CostSection[] {
  const models = modelPairs(before, after).map(([was, now]): CostSection => {
    const { deployment } = (now ?? was)!;
    const state = !was ? " (added)" : !now ? " (removed)" : "";
    return {
      deployment,
      cost: changeCost(was, now),
      heading: `# model ${modelLabel(deployment)}, served as ${deployment.entry.servedNames.join(", ")}${state}`,
    };
  });
  const hosts = (after.models[0] ?? before.models[0])!.hosts !== null;
  const shared: CostSection = hosts
    ? { heading: "# the front door on the router host, every model's", deployment: null, cost: frontDoorCost(before, after) }
    : { heading: "# the routing in the cluster, every model's", deployment: null, cost: routingCost(before, after) };
  return [...models, shared];
}

/** The cost as the text diff ends: each section that costs anything under its heading, the estimates once. */
export function renderStackChangeCost(before: RenderedStack, after: RenderedStack): string[] {
  const priced = stackChangeCost(before, after).filter((section) => !isFree(section.cost));
  if (priced.length === 0) return [];
  const models = priced.filter((section) => section.deployment !== null);
  return [
    "",
    COST_HEADING,
    ...priced.flatMap((section) => [section.heading, ...costLines(section.cost)]),
    ...(models.length > 0
      ? estimateLines(
          models.map((m) => m.cost),
          models[0]!.deployment!,
        )
      : []),
  ];
}
