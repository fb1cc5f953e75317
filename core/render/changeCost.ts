// What a change costs a running deployment, read from the two renders (`diff`): what it downloads,
// which steps run again (a step reruns when the text it carries changes, as `pulumi up` reruns a
// command whose input changed), which units or pods restart, and how long each role is out of
// service. Times are estimates: a load is the deploy model's 15 minutes (REPLICA_LOAD_SECONDS), a
// compile on the NPUs the recipe's budget (VLLM_ENGINE_READY_TIMEOUT_S); none was measured on NPUs.
import { REPLICA_LOAD_SECONDS } from "../config/defaults";
import { engineReadyTimeoutSeconds } from "../plan/argv";
import { MODEL_WEIGHTS_GB } from "../plan/storage";
import type { Deployment, ModelRef } from "../plan/types";
import type { RenderedDeployment, RenderedHosts, RenderedKubernetes } from "./deployment";
import type { RenderedFrontDoor } from "./hosts/frontDoor/frontDoor";
import { firstHostsOfKeys } from "./hosts/copies";

/** One step whose text changes, appears or goes: `kind` as people name it (install, weights, unit, ...), `where` it runs. */
export interface StepChange {
  kind: string;
  what: string;
  where: string;
  change: "reruns" | "runs" | "removed";
}

/** A unit (hosts) or a Deployment's pods (Kubernetes) that restart, start or stop. */
export interface Restart {
  role: string;
  what: string;
  where: string;
  change: "restarts" | "starts" | "stops";
}

export interface ChangeCost {
  downloads: string[];
  steps: StepChange[];
  restarts: Restart[];
  /** Per role that restarts: how long it is out of service, or that it is not. */
  outages: { role: string; text: string }[];
}

/** Every step of a render by `kind\twhat\twhere`, with the text that makes it rerun when it changes. */
function hostSteps(hosts: RenderedHosts): Map<string, string> {
  const steps = new Map<string, string>();
  const add = (kind: string, what: string, where: string, text: string) => steps.set(`${kind}\t${what}\t${where}`, text);
  for (const host of hosts.waves.flat()) {
    const name = host.placement.host.name;
    add("preflight", "", name, host.preflightScript);
    add("install", "", name, host.installScript);
    if (hosts.weightsHosts.includes(name)) add("weights", "", name, host.weightsScript);
    for (const rank of host.ranks) add("unit", `${rank.role} rank ${rank.rank}`, name, rank.applyScript);
    for (const group of host.groups) add("group", group.role, name, group.applyScript);
  }
  for (const copy of hosts.copies)
    add(
      "copy",
      `${copy.kind === "weights" ? "weights" : "compiled cache"} from ${copy.source.host.name}`,
      copy.dest.host.name,
      copy.allowScript + copy.copyScript + copy.revokeScript,
    );
  for (const pull of hosts.pulls) add("pull", `compiled cache ${pull.step.key}`, pull.host, pull.step.script);
  const compiler = hosts.compileHost;
  if (compiler) {
    const name = compiler.placement.host.name;
    add("preflight", "", name, compiler.preflightScript);
    add("install", "", name, compiler.installScript);
    add("weights", "", name, compiler.weightsScript);
    for (const step of compiler.steps) add("compile", `key ${step.key} (${step.roles.join(", ")})`, name, step.script);
  }
  const door = hosts.frontDoor;
  if (door) {
    addRouterSteps(door, add);
    for (const sidecar of door.sidecars) add("sidecar", "", sidecar.host, sidecar.applyScript);
  }
  return steps;
}

/** The router hosts' steps of a front door: each one's apply step (its files with it) and its hosts' access, and the TLS steps. */
function addRouterSteps(door: Pick<RenderedFrontDoor, "routers" | "tls">, add: (kind: string, what: string, where: string, text: string) => void): void {
  for (const router of door.routers) {
    add("front door", "", router.host.name, router.applyScript + JSON.stringify(router.files));
    for (const access of router.access) add("front door access", access.host, router.host.name, access.accessScript);
  }
  for (const tls of door.tls?.steps ?? []) add("front door TLS", tls.router, door.tls!.host.name, tls.script);
}

/** The router hosts' steps of a stack of models' one front door, by `kind\twhat\twhere` (hostSteps' keys). */
export function routerSteps(door: Pick<RenderedFrontDoor, "routers" | "tls"> | null): Map<string, string> {
  const steps = new Map<string, string>();
  if (door) addRouterSteps(door, (kind, what, where, text) => steps.set(`${kind}\t${what}\t${where}`, text));
  return steps;
}

/** The Jobs and the router chart of a Kubernetes render: a Job whose spec changes is replaced, so it runs again. */
function kubernetesSteps(kubernetes: RenderedKubernetes): Map<string, string> {
  const { workloads } = kubernetes;
  const steps = new Map<string, string>();
  const job = (object: { metadata?: { name?: string }; spec?: unknown }) => JSON.stringify(object.spec);
  steps.set(`weights Job\t${workloads.weightsJob.metadata?.name}\tthe cluster`, job(workloads.weightsJob));
  for (const compile of workloads.compileJobs) steps.set(`compile Job\t${compile.job.metadata.name} (${compile.role})\tthe cluster`, job(compile.job));
  if (workloads.router) steps.set(`router chart\t${workloads.router.release}\tthe cluster`, JSON.stringify(kubernetes.routerValues));
  return steps;
}

export function stepChanges(before: Map<string, string>, after: Map<string, string>): StepChange[] {
  const split = (id: string) => {
    const [kind = "", what = "", where = ""] = id.split("\t");
    return { kind, what, where };
  };
  return [
    ...[...after].flatMap(([id, text]) => {
      if (before.get(id) === text) return [];
      return [{ ...split(id), change: before.has(id) ? ("reruns" as const) : ("runs" as const) }];
    }),
    ...[...before.keys()].filter((id) => !after.has(id)).map((id) => ({ ...split(id), change: "removed" as const })),
  ];
}

/** Units whose unit file or environment changes restart; a new unit starts, a gone one stops. */
function hostRestarts(before: RenderedHosts | null, after: RenderedHosts | null): Restart[] {
  const units = (hosts: RenderedHosts | null) =>
    new Map((hosts?.waves ?? []).flat().flatMap((h) => h.ranks.map((r) => [`${h.placement.host.name}\t${r.role}\t${r.rank}`, r] as const)));
  const [was, now] = [units(before), units(after)];
  const entry = (id: string, unit: string, change: Restart["change"]): Restart => {
    const [where = "", role = ""] = id.split("\t");
    return { role, what: unit, where, change };
  };
  return [
    ...[...now].flatMap(([id, rank]) => {
      const old = was.get(id);
      if (!old) return [entry(id, rank.unitName, "starts")];
      return old.unitText !== rank.unitText || old.envText !== rank.envText ? [entry(id, rank.unitName, "restarts")] : [];
    }),
    ...[...was].filter(([id]) => !now.has(id)).map(([id, rank]) => entry(id, rank.unitName, "stops")),
  ];
}

/** A Deployment whose pod template changes rolls its pods; a model's that is added starts them, one removed stops them. */
function kubernetesRestarts(before: RenderedKubernetes | null, after: RenderedKubernetes | null): Restart[] {
  const pods = (role: RenderedKubernetes["workloads"]["roles"][number]) => `the pods of Deployment ${role.deployment.metadata.name}`;
  if (!after) return (before?.workloads.roles ?? []).map((role) => ({ role: role.role, what: pods(role), where: "the cluster", change: "stops" }));
  return after.workloads.roles.flatMap((role): Restart[] => {
    const old = before?.workloads.roles.find((r) => r.role === role.role);
    const template = (r: typeof role) => JSON.stringify(r.deployment.spec?.template);
    if (old && template(old) === template(role)) return [];
    return [{ role: role.role, what: pods(role), where: "the cluster", change: old ? "restarts" : "starts" }];
  });
}

/** The models the new config needs that the old one did not have (a new draft, another revision), and the new packages or image. */
function downloads(before: RenderedDeployment | null, after: RenderedDeployment | null): string[] {
  if (!after) return [];
  const key = (m: ModelRef) => `${m.id}@${m.revision ?? ""}`;
  const had = new Set(before?.deployment.plan.models.map(key));
  const by = after.hosts ? `by ${after.hosts.weightsHosts.join(", ")}` : "by the weights Job";
  const copied = after.hosts?.copies.filter((c) => c.kind === "weights").map((c) => c.dest.host.name) ?? [];
  const models = after.deployment.plan.models
    .filter((m) => !had.has(key(m)))
    .map((m) => {
      const size = MODEL_WEIGHTS_GB[m.id] === undefined ? "size not listed in core/plan/storage.ts" : `about ${MODEL_WEIGHTS_GB[m.id]} GB`;
      const what = m.use === "draft" ? `the draft model of ${m.roles.join(", ")}` : "the model";
      return `${m.id}${m.revision ? `@${m.revision.slice(0, 12)}` : ""} (${what}, ${size}) from the hub ${by}${copied.length > 0 ? `, copied to ${copied.join(", ")}` : ""}`;
    });
  const versions = (d: Deployment) => new Map(d.plan.packages.map((p) => [p.name, p.version]));
  const [old, now] = [before ? versions(before.deployment) : new Map<string, string>(), versions(after.deployment)];
  const packages = [...now]
    .filter(([name, version]) => old.get(name) !== version)
    .map(([name, version]) => `${name} ${old.get(name) ?? "(new)"} -> ${version}`);
  const image = (d: Deployment) => d.settings.kubernetes.image;
  return [
    ...models,
    ...(after.hosts && packages.length > 0 ? [`the packages ${packages.join(", ")} (pip, into a new venv on every host)`] : []),
    ...(after.kubernetes && (!before || image(before.deployment) !== image(after.deployment))
      ? [`the image ${image(after.deployment)} on every node that runs a pod`]
      : []),
  ];
}

/** The estimates the cost states: a load from a compiled cache (the deploy model's) and the recipe's compile budget, in minutes. */
export function estimateMinutes(deployment: Deployment, role: string): { load: number; compile: number } {
  const rank = deployment.plan.roles.find((r) => r.role === role)?.ranks[0];
  return { load: REPLICA_LOAD_SECONDS / 60, compile: Math.round(engineReadyTimeoutSeconds(rank?.env ?? {}) / 60) };
}

/** How long a restarting server of `role` is out: a compile on its NPUs when the key changes without compile ahead, else a load. */
function restartOutage(before: Deployment, after: Deployment, role: string): { compiles: boolean; text: string; load: string } {
  const { load, compile } = estimateMinutes(after, role);
  const key = (d: Deployment) => d.plan.roles.find((r) => r.role === role)?.compileKey;
  const compiles = key(before) !== key(after) && after.compile.mode === "off";
  const unlessPulled = after.compile.registry ? ", unless the registry has the key" : "";
  const loadText = `about ${load} min (a load from the compiled cache)`;
  return {
    compiles,
    text: compiles ? `up to ${compile} min (a compile on its NPUs, the recipe's budget${unlessPulled}), then a load` : loadText,
    load: loadText,
  };
}

function hostOutage(before: Deployment, after: RenderedDeployment, hosts: RenderedHosts, role: string, restarted: readonly string[]): string {
  const { settings, frontDoor } = after.deployment;
  const servers = hosts.waves
    .flat()
    .filter((h) => h.ranks.some((r) => r.role === role))
    .map((h) => h.placement.host.name);
  const out = restartOutage(before, after.deployment, role);
  if (servers.length === 1) {
    if (frontDoor && !settings.rollout.allowEmptyFrontDoor)
      return `refused once it serves: ${servers[0]} is its only server behind the front door, so its unit steps refuse the restart; add a server of the role in a deploy of its own, or set rollout.allowEmptyFrontDoor: true to take the outage: ${out.text}`;
    return `out of service while its only server ${servers[0]} restarts: ${out.text}`;
  }
  const atOnce = Math.max(...hosts.waves.map((wave) => wave.filter((h) => restarted.includes(h.placement.host.name)).length));
  const each = !out.compiles
    ? `each out ${out.text}`
    : settings.cache.shared
      ? `the first wave's out ${out.text} while one compiles into the shared cache, the others ${out.load}`
      : `the first out ${out.text}, the others ${out.load} after they copy its cache`;
  const where = frontDoor ? "the front door drains each first, and the others serve" : "clients must send to the other replicas' endpoints meanwhile";
  return `no outage: at most ${atOnce} of its ${servers.length} servers restart at once (rollout.maxUnavailable ${settings.rollout.maxUnavailable}); ${where}; ${each}`;
}

function kubernetesOutage(before: Deployment, after: RenderedDeployment, kubernetes: RenderedKubernetes, role: string): string {
  const workload = kubernetes.workloads.roles.find((r) => r.role === role)!;
  const out = restartOutage(before, after.deployment, role);
  const replicas = workload.scaling ? `${workload.scaling.minReplicas}-${workload.scaling.maxReplicas}` : String(workload.replicas);
  const each = out.compiles ? `the first pod ${out.text}, the others ${out.load}` : `each ${out.text}`;
  if (workload.deployment.spec?.strategy?.type === "Recreate")
    return `out of service while its Deployment replaces its one pod (Recreate): ${out.text}, and the pod's scheduling and image pull`;
  return `no outage: ${workload.maxUnavailable} of its ${replicas} pods at a time (maxSurge 0) while the others serve; ${each}`;
}

/** Per role with a restart: how long it is out of service, or that it is not, by the estimates above. */
function roleOutages(before: RenderedDeployment, after: RenderedDeployment, restarts: readonly Restart[]): ChangeCost["outages"] {
  const roles = [...new Set(restarts.filter((r) => r.change === "restarts").map((r) => r.role))];
  return roles.map((role) => {
    const restarted = restarts.filter((r) => r.role === role && r.change === "restarts").map((r) => r.where);
    const text = after.hosts
      ? hostOutage(before.deployment, after, after.hosts, role, restarted)
      : kubernetesOutage(before.deployment, after, after.kubernetes!, role);
    return { role, text };
  });
}

/**
 * Without compile ahead a key that changes is compiled in a unit's or a pod's first start, on its
 * NPUs: no step of its own, so it is named here, where it runs (pulled instead when a registry has it).
 */
function compilesInStarts(before: Deployment | null, after: RenderedDeployment | null): StepChange[] {
  if (!after) return [];
  const { deployment } = after;
  if (deployment.compile.mode !== "off") return [];
  const old = new Set(before?.plan.roles.map((r) => r.compileKey));
  const firsts = after.hosts
    ? firstHostsOfKeys(
        deployment,
        after.hosts.waves.map((wave) => wave.map((h) => h.placement)),
      )
    : [];
  return deployment.compile.keys
    .filter((k) => !old.has(k.key))
    .map((k) => ({
      kind: "compile",
      what: `key ${k.key} (${k.roles.join(", ")}) on the NPUs of ${
        after.hosts
          ? "its first unit, in its start"
          : `the first pod of ${k.roles.map((role) => after.kubernetes!.workloads.roles.find((r) => r.role === role)?.deployment.metadata.name).join(", ")}`
      }${deployment.compile.registry ? ", unless the registry has it" : ""}`,
      where: after.hosts ? (firsts.find((f) => f.key === k.key)?.placement.host.name ?? "") : "the cluster",
      change: "runs" as const,
    }));
}

/**
 * The cost of changing a deployment from `before` to `after`; both rendered with the same stack and
 * instance, so names match. A model of a stack of models that one side lacks is null there: added,
 * everything it has runs and starts; removed, everything it had is removed and stops.
 */
export function changeCost(before: RenderedDeployment | null, after: RenderedDeployment | null): ChangeCost {
  const hosts = (before ?? after)!.hosts !== null;
  const same = before === null || after === null || (before.hosts === null) === (after.hosts === null);
  const steps = [
    ...(!same
      ? []
      : hosts
        ? stepChanges(before?.hosts ? hostSteps(before.hosts) : new Map(), after?.hosts ? hostSteps(after.hosts) : new Map())
        : stepChanges(before?.kubernetes ? kubernetesSteps(before.kubernetes) : new Map(), after?.kubernetes ? kubernetesSteps(after.kubernetes) : new Map())),
    ...compilesInStarts(before?.deployment ?? null, after),
  ];
  const restarts = !same
    ? []
    : hosts
      ? hostRestarts(before?.hosts ?? null, after?.hosts ?? null)
      : kubernetesRestarts(before?.kubernetes ?? null, after?.kubernetes ?? null);
  const outages = before && after ? roleOutages(before, after, restarts) : [];
  return { downloads: downloads(before, after), steps, restarts, outages };
}

/** A host's unit steps of one role as one item: `units decode ranks 0, 1, 2, 3`. */
function unitsByRole(steps: readonly StepChange[]): StepChange[] {
  const out: StepChange[] = [];
  for (const step of steps) {
    const unit = step.kind === "unit" ? /^(\S+) rank (\d+)$/.exec(step.what) : null;
    const same = unit ? out.find((o) => o.kind === "units" && o.where === step.where && o.what.startsWith(`${unit[1]} ranks `)) : undefined;
    if (!unit) out.push(step);
    else if (same) same.what += `, ${unit[2]}`;
    else out.push({ ...step, kind: "units", what: `${unit[1]} ranks ${unit[2]}` });
  }
  return out.map((s) => (s.kind === "units" && !s.what.includes(",") ? { ...s, kind: "unit", what: s.what.replace(" ranks ", " rank ") } : s));
}

/** The heading of the cost, as the text diff ends. */
export const COST_HEADING = "cost of the change (from the plans; times are estimates, none measured on NPUs):";

/** Nothing to download, run or restart. */
export const isFree = (cost: ChangeCost) => cost.downloads.length + cost.steps.length + cost.restarts.length === 0;

/** The cost as the text diff ends: downloads, steps, restarts, time out of service; the estimates said once. */
export function renderChangeCost(cost: ChangeCost, after: Deployment): string[] {
  if (isFree(cost)) return [];
  return ["", COST_HEADING, ...costLines(cost), ...estimateLines([cost], after)];
}

/** The estimates behind the outages, once, where any was given. */
export function estimateLines(costs: readonly ChangeCost[], after: Deployment): string[] {
  if (!costs.some((cost) => cost.outages.length > 0)) return [];
  const { load } = estimateMinutes(after, after.plan.roles[0]?.role ?? "");
  return [`  (a load is the deploy model's ${load} min, REPLICA_LOAD_SECONDS; a compile the recipe's VLLM_ENGINE_READY_TIMEOUT_S, an upper bound)`];
}

/** One cost's lines: downloads, steps by host, restarts by host, each role's time out of service. */
export function costLines(cost: ChangeCost): string[] {
  const byWhere = <T extends { where: string }>(items: readonly T[], show: (item: T) => string) =>
    [...new Set(items.map((i) => i.where))].map(
      (where) =>
        `${where}: ${items
          .filter((i) => i.where === where)
          .map(show)
          .join(", ")}`,
    );
  return [
    ...cost.downloads.map((d) => `  download  ${d}`),
    ...(["reruns", "runs", "removed"] as const).flatMap((change) =>
      byWhere(unitsByRole(cost.steps.filter((s) => s.change === change)), (s) => (s.what ? `${s.kind} ${s.what}` : s.kind)).map(
        (line) => `  ${{ reruns: "reruns   ", runs: "runs     ", removed: "removes  " }[change]} ${line}`,
      ),
    ),
    ...(["restarts", "starts", "stops"] as const).flatMap((change) =>
      byWhere(
        cost.restarts.filter((r) => r.change === change),
        (r) => r.what,
      ).map((line) => `  ${change.padEnd(9)} ${line}`),
    ),
    ...cost.outages.map((o) => `  out       ${o.role}: ${o.text}`),
  ];
}
