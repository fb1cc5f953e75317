// A stack's model deployments: the entries of `models`, or the top level as the one model of a stack
// without it. Each entry is checked in the context of the whole stack and becomes the settings of a
// stack of that model alone (its own keys over the shared ones), which the plan takes one by one.
import { ConfigError, formatPath, listValues } from "../errors";
import { type CrossFieldIssue, crossFieldIssues } from "./crossFieldChecks";
import type { ModelEntry, Settings } from "./schema";

/** The keys of one model deployment: at the top level of a stack of one model, else in each entry of `models`. */
export const MODEL_KEYS = [
  "model",
  "revision",
  "strategy",
  "target",
  "preset",
  "axes",
  "versions",
  "replicas",
  "prefillReplicas",
  "decodeReplicas",
  "extraArgs",
  "extraEnv",
  "compile",
  "autoscaling",
] as const satisfies readonly (keyof Settings & keyof ModelEntry)[];

/** One model deployment of a stack, as the settings of a stack of that model alone. */
export interface ModelEntrySettings {
  /** Its index in `models`; null for a stack without `models`, whose one model is the top level. */
  index: number | null;
  /** models[].name; null for a stack without `models` (its resources keep the names they had). */
  name: string | null;
  /** The names clients may send in the request's model field: servedNames, else the model id. */
  servedNames: string[];
  /** The top-level index of each entry of `settings.hosts`. */
  hostIndexes: number[];
  /** The shared settings with the entry's own keys over them, its hosts resolved; `models` left out. */
  settings: Settings;
}

/**
 * With `models`, the top level sets no key of one model deployment: a key in both places would say
 * twice, differently, what a model runs. `raw` is the stack config before parsing (a default is not a key set).
 */
export function refuseModelKeysBesideModels(raw: Readonly<Record<string, unknown>>): void {
  if (raw.models === undefined) return;
  const beside = MODEL_KEYS.filter((key) => raw[key] !== undefined);
  if (beside.length > 0)
    throw new ConfigError(
      "models",
      `given beside the top-level ${beside.join(", ")}: with models each entry sets its own (its model, strategy, target, ...); move them into the entries of models`,
    );
}

/** The entry's own keys over the shared settings, on the given hosts. */
function entrySettings(settings: Settings, entry: ModelEntry, hosts: Settings["hosts"]): Settings {
  const own = Object.fromEntries(MODEL_KEYS.map((key) => [key, entry[key]]));
  return { ...settings, ...own, hosts, models: undefined };
}

/** The hosts an entry names, in its order, with their top-level indexes; names of no host are left out (the checks refuse them). */
function entryHosts(settings: Settings, entry: ModelEntry): { hosts: Settings["hosts"]; hostIndexes: number[] } {
  const hostIndexes = (entry.hosts ?? []).map((name) => settings.hosts.findIndex((h) => h.name === name)).filter((i) => i >= 0);
  return { hosts: hostIndexes.map((i) => settings.hosts[i]!), hostIndexes };
}

/**
 * The stack's model deployments, in order: each entry of `models`, or the top level alone. An
 * entry's `router.host` that names a host of another model is passed as that host (a server the
 * entry does not place ranks on).
 */
export function modelEntries(settings: Settings): ModelEntrySettings[] {
  if (settings.models === undefined)
    return [{ index: null, name: null, servedNames: [settings.model], hostIndexes: settings.hosts.map((_, i) => i), settings }];
  return settings.models.map((entry, index) => {
    const { hosts, hostIndexes } = entryHosts(settings, entry);
    const own = entrySettings(settings, entry, hosts);
    const routerHost = settings.router.host;
    const shared = typeof routerHost === "string" && !hosts.some((h) => h.name === routerHost) ? settings.hosts.find((h) => h.name === routerHost) : undefined;
    return {
      index,
      name: entry.name,
      servedNames: entry.servedNames ?? [entry.model],
      hostIndexes,
      settings: shared ? { ...own, router: { ...own.router, host: shared } } : own,
    };
  });
}

/**
 * A key path of an entry's settings as a path of the stack: its own keys under `models[i]`, an
 * index into its hosts as the top-level host's, the rest (shared keys) as they are.
 */
export function entryPath(entry: Pick<ModelEntrySettings, "index" | "hostIndexes">, path: readonly PropertyKey[]): PropertyKey[] {
  if (entry.index === null) return [...path];
  const [first, second, ...rest] = path;
  if (first === "hosts" && typeof second === "number") return ["hosts", entry.hostIndexes[second] ?? second, ...rest];
  if (first === "hosts" || (MODEL_KEYS as readonly PropertyKey[]).includes(first as PropertyKey)) return ["models", entry.index, ...path];
  return [...path];
}

/** A refusal's key (`hosts[1].address`, `extraArgs.main`) as entryPath says it. */
export function entryKey(entry: Pick<ModelEntrySettings, "index" | "hostIndexes">, key: string): string {
  const match = /^([A-Za-z]+)(?:\[(\d+)\])?(.*)$/.exec(key);
  if (!match || entry.index === null) return key;
  const [, first, index, rest] = match as unknown as [string, string, string | undefined, string];
  const head = entryPath(entry, index === undefined ? [first] : [first, Number(index)]);
  return `${formatPath(head)}${rest}`;
}

/** Without models the top level is the one model, so it names its strategy and target. Checked before the other checks across keys. */
export function topLevelSelection(s: Settings): CrossFieldIssue[] {
  if (s.models !== undefined) return [];
  return (["strategy", "target"] as const).flatMap((key) =>
    s[key] === undefined ? [{ path: [key], message: `required: the ${key} the recipe verifies, or a list of models each with its own` }] : [],
  );
}

/** Names, served names and hosts each belong to one entry: a name names its resources, a served name routes to one pool, a host's NPUs serve one model. */
function entriesAreDistinct(s: Settings): CrossFieldIssue[] {
  const issues: CrossFieldIssue[] = [];
  const names = new Map<string, number>();
  const served = new Map<string, string>();
  const hostOf = new Map<string, number>();
  for (const [i, entry] of (s.models ?? []).entries()) {
    const earlier = names.get(entry.name);
    if (earlier !== undefined) issues.push({ path: ["models", i, "name"], message: `duplicate of models[${earlier}].name "${entry.name}"`, hideValue: true });
    names.set(entry.name, i);
    for (const [j, name] of (entry.servedNames ?? [entry.model]).entries()) {
      const by = served.get(name);
      const path = entry.servedNames ? ["models", i, "servedNames", j] : ["models", i, "servedNames"];
      const what = entry.servedNames ? `"${name}"` : `"${name}" (the model id, served when servedNames is unset)`;
      if (by !== undefined)
        issues.push({ path, message: `${what} is served by ${by} too: a request names one model; give each model names of its own`, hideValue: true });
      served.set(name, `models[${i}]`);
    }
    for (const [j, host] of (entry.hosts ?? []).entries()) {
      const path = ["models", i, "hosts", j];
      if (!s.hosts.some((h) => h.name === host)) issues.push({ path, message: `names no entry of hosts; allowed: ${listValues(s.hosts.map((h) => h.name))}` });
      else if (hostOf.has(host))
        issues.push({
          path,
          message: `"${host}" is listed by models[${hostOf.get(host)}] too: a server's NPUs and ports serve one model (its ranks take the NPUs and ports their recipe names)`,
          hideValue: true,
        });
      hostOf.set(host, i);
    }
  }
  return issues;
}

/** The front door routes each request by its model field: it must exist, and reach every model. */
function frontDoorRoutesModels(s: Settings): CrossFieldIssue[] {
  if (s.models === undefined) return [];
  if (s.platform === "hosts" && s.router.host === undefined && s.router.hosts === undefined)
    return [
      {
        path: ["router", "host"],
        message:
          "required with models: on hosts one front door (Envoy and an endpoint picker per model) routes each request by its model field; give it a server (a host {name, address, user, port, hostKey}) or the name of an entry of hosts (or several router hosts in router.hosts)",
      },
    ];
  if (s.platform !== "kubernetes") return [];
  if (s.kubernetes.gateway === undefined)
    return [
      {
        path: ["kubernetes", "gateway"],
        message:
          "required with models: each model's HTTPRoute attaches to the Gateway and matches the model name the payload processor reads from the request body; give the Gateway {name, namespace}",
      },
    ];
  if (s.kubernetes.provider === "none")
    return [
      {
        path: ["kubernetes", "provider"],
        message:
          '"none" hooks no body-based routing into the Gateway (the payload processor\'s chart renders its ext_proc hook for istio and gke only), so no request of models would find its route; choose istio or gke',
        hideValue: true,
      },
    ];
  return [];
}

/** On hosts each model runs on hosts of its own. */
function entriesHaveHosts(s: Settings): CrossFieldIssue[] {
  if (s.platform !== "hosts") return [];
  return (s.models ?? []).flatMap((entry, i) =>
    entry.hosts === undefined ? [{ path: ["models", i, "hosts"], message: "required with platform: hosts: the names of the entries of hosts it runs on" }] : [],
  );
}

/**
 * Each entry's own keys under the checks across keys, in the context of the whole stack (its keys
 * over the shared ones, every host): only what they refuse of the entry's keys, since the top level
 * was checked already.
 */
function entryKeysChecked(s: Settings): CrossFieldIssue[] {
  return (s.models ?? []).flatMap((entry, index) => {
    const whole = entrySettings(s, entry, s.hosts);
    const context = { index, hostIndexes: s.hosts.map((_, i) => i) };
    return crossFieldIssues(whole)
      .map((issue) => ({ ...issue, path: entryPath(context, issue.path) }))
      .filter((issue) => issue.path[0] === "models");
  });
}

/** What the checks of models refuse, after the other checks across keys, in order: distinct entries, the front door, the entries' hosts and keys. */
export function modelIssues(settings: Settings): CrossFieldIssue[] {
  return [entriesAreDistinct, frontDoorRoutesModels, entriesHaveHosts, entryKeysChecked].flatMap((check) => check(settings));
}
