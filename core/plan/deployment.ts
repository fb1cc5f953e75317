import type { z } from "zod";
import { otherPlatformKeys, StackSettings } from "../config/stackConfig";
import { checkServingAddresses } from "../config/crossFieldChecks";
import { ConfigError, listValues } from "../errors";
import { entryKey, modelEntries, type ModelEntrySettings } from "../config/models";
import type { RecipeCatalog } from "../recipe/catalog";
import { durationSeconds } from "../config/defaults";
import { withFlags } from "./argv";
import { withExtras } from "./extraArgs";
import { COMPILE_AHEAD_SERVING_ENV, compileMessages, loadsCompiledAhead, planCompileAhead, refuseCompileOnlyServing } from "./compileAhead";
import { withCompileKeys } from "./compileKey";
import { modelsOf, withRevision } from "./modelRefs";
import { checkIndexCredentials, pipIndexUrls } from "./pipIndexes";
import { resolveAutoscaling, roleReplicas } from "./replicas";
import { resolvePlan } from "./resolve";
import { routerHostEntries } from "../config/routerHosts";
import { planFrontDoor } from "./frontDoor";
import { note, type PlanMessage, warning } from "./messages";
import { checkWeightsStorage } from "./storage";
import type { Deployment, Flag, HostPlacement, LaunchPlan } from "./types";

export type { Deployment, HostPlacement } from "./types";

/** Each setting's value when left out, to tell the ones a stack sets. */
const SETTING_DEFAULTS: Readonly<Record<string, unknown>> = Object.fromEntries(
  Object.entries(StackSettings.shape).map(([key, schema]) => [key, (schema as z.ZodType).safeParse(undefined).data]),
);

/** Where the stack's own settings weaken or do nothing: warnings, each with what to do (the plan's and the stack's `warnings`). */
function settingsWarnings(settings: StackSettings): PlanMessage[] {
  const warnings: string[] = [];
  if (settings.platform === "hosts" && settings.insecureSkipHostKeyCheck) {
    warnings.push(
      "insecureSkipHostKeyCheck: true: SSH host keys are not checked, so whatever answers at a host's address runs the scripts as root and receives the secrets",
    );
  }
  if (settings.rollout.shutdownTimeoutSeconds === 0) {
    warnings.push(
      "rollout.shutdownTimeoutSeconds: 0: a stopping rank aborts its in-flight requests at once (vLLM's --shutdown-timeout 0), so every restart cuts the requests it serves; give the seconds a request may take to finish",
    );
  }
  for (const key of otherPlatformKeys(settings.platform)) {
    if (JSON.stringify(settings[key as keyof StackSettings]) !== JSON.stringify(SETTING_DEFAULTS[key])) {
      const why = settings.platform === "kubernetes" && key === "versions" ? " (the image fixes the versions)" : "";
      warnings.push(`${key}: does nothing with platform: ${settings.platform}${why}; remove it or choose the platform that reads it`);
    }
  }
  // The front door's own settings: the chart deploys the router on Kubernetes.
  const routerDefaults = SETTING_DEFAULTS.router as Record<string, unknown>;
  for (const key of settings.platform === "kubernetes"
    ? (["host", "hosts", "virtualAddress", "runtime", "images", "port"] as const)
    : (["pickerResources"] as const)) {
    if (JSON.stringify(settings.router[key]) !== JSON.stringify(routerDefaults[key])) {
      warnings.push(`router.${key}: does nothing with platform: ${settings.platform}; remove it or choose the platform that reads it`);
    }
  }
  return warnings.map(warning);
}

/** How many replicas a node has: its role's (the disaggregated strategy counts prefill and decode apart, xPyD; a node of several roles has replicas). */
export function nodeReplicas(settings: StackSettings, plan: LaunchPlan, node: number): number {
  const roles = plan.roles.filter((r) => r.node === node);
  return roles.length === 1 ? roleReplicas(settings, roles[0]!.role) : settings.replicas;
}

/**
 * Where each node of each replica runs. `hosts` lists the first node's servers (every replica's),
 * then the next node's: for the disaggregated strategy the prefill servers, then the decode
 * servers. A single-node strategy has one server per replica.
 */
function placeHosts(settings: StackSettings, plan: LaunchPlan): HostPlacement[] {
  const counts = plan.nodes.map((node) => nodeReplicas(settings, plan, node.index));
  const needed = counts.reduce((a, b) => a + b, 0);
  if (settings.hosts.length !== needed) {
    if (plan.nodes.length === 1)
      throw new ConfigError(
        "hosts",
        `${settings.hosts.length} given; strategy "${plan.strategy}" with replicas: ${settings.replicas} needs exactly ${needed} (1 per replica)`,
      );
    const servers = plan.nodes.map((node, i) => `${counts[i]} ${node.roles.join("+")}`).join(" servers, then ");
    throw new ConfigError("hosts", `${settings.hosts.length} given; strategy "${plan.strategy}" needs exactly ${needed}: ${servers} servers, in that order`);
  }
  let next = 0;
  return plan.nodes.flatMap((node, n) =>
    Array.from({ length: counts[n]! }, (_, replica) => {
      const host = settings.hosts[next++]!;
      const proxy = host.proxy ?? settings.sshProxy;
      return { replica, node: node.index, host: proxy ? { ...host, proxy } : host };
    }),
  );
}

/**
 * What the stack's topology on hosts means. Notes: replicas without a front door, what file
 * discovery does not run, and a role with one server whose outage the stack accepts. A warning: a
 * role with one server whose changes the unit steps will refuse until a server is added or the
 * outage is accepted.
 */
function frontDoorMessages(deployment: Deployment): PlanMessage[] {
  const { settings, plan, frontDoor } = deployment;
  if (settings.platform !== "hosts") return [];
  if (!frontDoor) {
    return settings.replicas > 1
      ? [
          note(
            `router.host: unset, so the ${settings.replicas} replicas are ${settings.replicas} endpoints (stack output endpoints) and clients spread their requests over them; set router.host for one front door`,
          ),
        ]
      : [];
  }
  const messages = [
    note(
      "router: on hosts the endpoint picker discovers endpoints from a file, without Kubernetes: InferenceObjective, InferenceModelRewrite and the k8s-notification-source data-layer plugin do not run there",
    ),
  ];
  if (frontDoor.routers.length > 1 && !frontDoor.virtualAddress) {
    const addresses = frontDoor.routers.map((r) => r.address).join(", ");
    messages.push(
      warning(
        `router.virtualAddress: unset, so no address moves between the router hosts: clients (or a DNS name with every address, and a short TTL) must be given ${addresses}, use one, and on a refused or reset connection, or a 503 from a draining router host, retry the request on another; a request cut mid-answer is lost`,
      ),
    );
  }
  for (const role of plan.roles) {
    const hosts = new Set(frontDoor.endpoints.filter((e) => e.role === role.role).map((e) => e.host));
    if (hosts.size !== 1) continue;
    const outage = `router: role ${role.role} has one server behind the front door, so a change that restarts it leaves the role without an endpoint while it restarts`;
    // Says what the stack does now: a unit step refuses that change, or takes the outage the stack allows.
    messages.push(
      settings.rollout.allowEmptyFrontDoor
        ? note(`${outage}; rollout.allowEmptyFrontDoor is true, so its unit steps take that outage (add a replica to avoid it)`)
        : warning(`${outage}; its unit steps refuse that unless rollout.allowEmptyFrontDoor is true (or add a replica)`),
    );
  }
  return messages;
}

/**
 * What a chosen axis value needs of the servers that no setting or check here covers: `lmcache: rds`
 * (which `preset: recommended` picks) offloads to RBLN Direct Storage, set up outside the package.
 */
function selectionNotes(plan: LaunchPlan): PlanMessage[] {
  if (plan.selection.lmcache !== "rds") return [];
  return [
    note(
      "lmcache: rds offloads the KV cache to RBLN Direct Storage: every NPU server needs a dedicated NVMe drive that RDS takes over and a driver with RDS, which nothing here sets up or checks (docs/configuration.md#lmcache-rds)",
    ),
  ];
}

/**
 * Each role as its ranks serve: the package's --shutdown-timeout and the entry's served names, compile-only's keyed variables where
 * a rank loads a cache compiled ahead (docs/compile-ahead.md), then the stack's extraArgs and extraEnv.
 */
function servingRoles(entry: ModelEntrySettings, base: LaunchPlan, shutdownTimeoutSeconds: number) {
  const { settings } = entry;
  const packageFlags = [{ name: "--shutdown-timeout", values: [String(shutdownTimeoutSeconds)] }, ...servedNameFlags(entry)];
  const owned: Record<string, string> = entry.index === null ? {} : { "--served-model-name": "comes from models[].servedNames; list the names there" };
  const aheadEnv = loadsCompiledAhead(settings, base.packages) ? COMPILE_AHEAD_SERVING_ENV : {};
  return base.roles.map((role) =>
    withExtras(
      { ...role, ranks: role.ranks.map((rank) => ({ ...withFlags(rank, packageFlags), env: { ...rank.env, ...aheadEnv } })) },
      settings.extraArgs[role.role],
      settings.extraEnv[role.role],
      owned,
    ),
  );
}

/** vLLM serves the entry's names when they are not the model id alone (its own default): aliases reach the engine as sent. */
function servedNameFlags(entry: ModelEntrySettings): Flag[] {
  const [first, ...rest] = entry.servedNames;
  return rest.length === 0 && first === entry.settings.model ? [] : [{ name: "--served-model-name", values: entry.servedNames }];
}

/** An entry of models keeps the recipe's router release apart from the other models' (its objects are named after it). */
function entryRouter(plan: LaunchPlan, entry: ModelEntrySettings): LaunchPlan {
  return entry.name === null || plan.router === null ? plan : { ...plan, router: { ...plan.router, release: `${plan.router.release}-${entry.name}` } };
}

/** The keys of a stack of one role name per role; with models, kubernetes.resources is shared and checked against every model's roles (core/plan/stack.ts). */
function checkRoleKeys(settings: StackSettings, entry: ModelEntrySettings, base: LaunchPlan): void {
  const roleNames = base.roles.map((r) => r.role);
  const byRoleKeys = [
    ["extraArgs", settings.extraArgs],
    ["extraEnv", settings.extraEnv],
    ...(entry.index === null ? ([["kubernetes.resources", settings.kubernetes.resources]] as const) : []),
    ["autoscaling.roles", settings.autoscaling.roles],
  ] as const;
  for (const [field, byRole] of byRoleKeys) {
    for (const role of Object.keys(byRole)) {
      if (!roleNames.includes(role))
        throw new ConfigError(`${field}.${role}`, `strategy "${base.strategy}" has no role "${role}"; allowed: ${listValues(roleNames)}`);
    }
  }
}

/** One model deployment of the stack (core/config/models.ts); a refusal names the stack's key path. */
export function planModelDeployment(entry: ModelEntrySettings, catalog: RecipeCatalog): Deployment {
  try {
    return planEntry(entry, catalog);
  } catch (error) {
    if (error instanceof ConfigError && entry.index !== null) throw new ConfigError(entryKey(entry, error.key), error.detail);
    throw error;
  }
}

/**
 * The deployment of a stack of one model: its top level, or its one entry of models. A stack of
 * several models is planned with planStack (core/plan/stack.ts).
 */
export function planDeployment(settings: StackSettings, catalog: RecipeCatalog): Deployment {
  const entries = modelEntries(settings);
  if (entries.length !== 1) throw new Error(`planDeployment plans a stack of one model, not ${entries.length}: use planStack`);
  return planModelDeployment(entries[0]!, catalog);
}

function planEntry(entry: ModelEntrySettings, catalog: RecipeCatalog): Deployment {
  const { settings } = entry;
  const recipe = catalog.get(settings.model);
  checkWeightsStorage(settings);
  const base = resolvePlan(recipe, {
    model: settings.model,
    strategy: settings.strategy!,
    target: settings.target!,
    preset: settings.preset,
    axes: settings.axes,
    versions: settings.versions,
  });
  const roleNames = base.roles.map((r) => r.role);
  checkRoleKeys(settings, entry, base);
  // In-flight requests get this long to finish when a rank stops: by default as long as the front door lets a request run.
  const shutdownTimeoutSeconds = settings.rollout.shutdownTimeoutSeconds ?? durationSeconds(settings.router.requestTimeout);
  const extras = servingRoles(entry, base, shutdownTimeoutSeconds);
  const plan: LaunchPlan = withCompileKeys(
    withRevision(
      entryRouter(
        {
          ...base,
          roles: extras.map((e) => e.role),
          // extraArgs may name another draft model, or none.
          models: modelsOf(
            extras.map((e) => e.role),
            null,
          ),
          messages: [...base.messages, ...selectionNotes(base), ...settingsWarnings(settings), ...extras.flatMap((e) => e.warnings)],
        },
        entry,
      ),
      settings.revision,
    ),
    settings.platform === "kubernetes" ? (settings.kubernetes.image ?? null) : null,
  );

  const roleReplicas = { prefillReplicas: settings.prefillReplicas, decodeReplicas: settings.decodeReplicas };
  for (const [key, value] of Object.entries(roleReplicas)) {
    const role = key.replace("Replicas", "");
    if (value !== undefined && !roleNames.includes(role)) throw new ConfigError(key, `applies only to a strategy with a "${role}" role; use replicas`);
  }

  let placements: HostPlacement[] = [];
  if (settings.platform === "hosts") {
    if (plan.router && routerHostEntries(settings.router).length === 0) {
      throw new ConfigError(
        "router.host",
        `required: strategy "${plan.strategy}" routes through the llm-d router's front door; on hosts give it a server (a host {name, address, user, port, hostKey}, any Linux server with podman or docker) or the name of an entry of hosts`,
      );
    }
    placements = placeHosts(settings, plan);
  }
  if (settings.platform === "hosts") {
    checkServingAddresses(
      placements.map((p) => p.host),
      placements.map((p) => plan.roles.filter((role) => role.node === p.node).flatMap((role) => role.ranks.flatMap((rank) => rank.ports))),
    );
    checkIndexCredentials(settings.pip, pipIndexUrls(settings.pip, plan));
  }
  refuseCompileOnlyServing(settings);
  const deployment: Deployment = {
    settings,
    entry: { name: entry.name, servedNames: entry.servedNames },
    plan,
    placements,
    shutdownTimeoutSeconds,
    autoscaling: resolveAutoscaling(settings, plan),
    frontDoor: settings.platform === "hosts" ? planFrontDoor(settings, plan, placements) : null,
    compile: planCompileAhead(settings, plan),
  };
  return { ...deployment, plan: { ...plan, messages: [...plan.messages, ...frontDoorMessages(deployment), ...compileMessages(settings, plan)] } };
}
