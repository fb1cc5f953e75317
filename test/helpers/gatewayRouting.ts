import { parse as parseYaml } from "yaml";
import chartFacts from "../fixtures/llm-d-router-gateway-v0.10.0.json";

/**
 * The routing of a Kubernetes stack of models, as the pieces that do it at the pinned versions decide
 * it, so a test can send requests through the rendered objects:
 *
 * - `chartHttpRoute`: the HTTPRoute llm-d-router-gateway v0.10.0 renders from its values
 *   (config/charts/llm-d-router-gateway/templates/httproute.yaml @ 71f4f099, in
 *   test/fixtures/llm-d-router-v0.10.0/multi-model.json's facts).
 * - `payloadProcessorHeaders`: the headers the payload processor v0.1.0-rc.1 sets from a request
 *   body with its default plugins (test/fixtures/payload-processor/v0.1.0-rc.1.json).
 * - `selectRule`: which HTTPRoute rule a Gateway picks for a request, Gateway API v1.5.1's
 *   precedence (test/fixtures/gateway-api-v1.5.1/httproute.json); null where it answers 404.
 * - `directResponse`: what an Envoy bootstrap's routes answer without an upstream.
 */

export interface GatewayRequest {
  method: string;
  path: string;
  /** Header names in any case. */
  headers: Record<string, string>;
}

interface HeaderMatch {
  type?: string;
  name: string;
  value: string;
}
interface RouteMatch {
  path?: { type?: string; value?: string };
  method?: string;
  headers?: HeaderMatch[];
  queryParams?: unknown[];
}
interface RouteRule {
  matches?: RouteMatch[];
  backendRefs?: { group?: string; kind?: string; name: string; port?: number }[];
}
export interface HttpRoute {
  metadata: { name: string; namespace?: string };
  spec: { parentRefs?: unknown[]; rules: RouteRule[] };
}

/** The HTTPRoute the chart renders for `values` (null without httpRoute.create), as templates/httproute.yaml writes it. */
export function chartHttpRoute(values: Record<string, any>, release: string, namespace: string): HttpRoute | null {
  const route = values.httpRoute ?? {};
  if (!route.create) return null;
  const headers: HeaderMatch[] = [
    ...(route.baseModel ? [{ type: "Exact", name: "X-Gateway-Base-Model-Name", value: String(route.baseModel) }] : []),
    // Helm ranges over a map in sorted key order.
    ...Object.keys(route.headerMatches ?? {})
      .sort()
      .map((name) => ({ type: "Exact", name, value: String(route.headerMatches[name]) })),
  ];
  const gateway = route.inferenceGatewayName ?? chartFacts.defaults["httpRoute.inferenceGatewayName" as keyof typeof chartFacts.defaults];
  return {
    metadata: { name: release, namespace },
    spec: {
      parentRefs: [
        {
          group: "gateway.networking.k8s.io",
          kind: "Gateway",
          name: gateway,
          ...(route.inferenceGatewayNamespace ? { namespace: route.inferenceGatewayNamespace } : {}),
        },
      ],
      rules: [
        {
          backendRefs: [{ group: "inference.networking.k8s.io", kind: "InferencePool", name: release }],
          matches: [{ path: { type: "PathPrefix", value: "/" }, ...(headers.length > 0 ? { headers } : {}) }],
          ...(String(values.provider?.name ?? "none").toLowerCase() !== "gke" ? { timeouts: { request: route.requestTimeout ?? "300s" } } : {}),
        },
      ],
    },
  };
}

/** The payload processor's ConfigMaps as it reads them: labelled ipp-managed, in its own namespace; base model → itself, each adapter → its base. */
function baseModels(configMaps: readonly any[], namespace: string): Map<string, string> {
  const bases = new Map<string, string>();
  for (const configMap of configMaps) {
    if (configMap.metadata.namespace !== namespace || configMap.metadata.labels?.["inference.llm-d.ai/ipp-managed"] !== "true") continue;
    const base = String(configMap.data?.baseModel ?? "").trim();
    if (!base) continue;
    bases.set(base, base);
    for (const adapter of (parseYaml(configMap.data?.adapters ?? "") ?? []) as string[]) bases.set(String(adapter), base);
  }
  return bases;
}

/**
 * The headers the payload processor sets (it replaces a client's), or its 400 for a body that is not
 * JSON. A body with a model sets X-Gateway-Model-Name to it and X-Gateway-Base-Model-Name to its base
 * model, "" for an unknown one; a body without a model sets neither.
 */
export function payloadProcessorHeaders(body: string, configMaps: readonly any[], namespace: string): { status: 400 } | { set: Record<string, string> } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { status: 400 };
  }
  const model = parsed !== null && typeof parsed === "object" ? (parsed as { model?: unknown }).model : undefined;
  if (model === undefined || model === null || model === "") return { set: {} };
  const name = String(model);
  return { set: { "X-Gateway-Model-Name": name, "X-Gateway-Base-Model-Name": baseModels(configMaps, namespace).get(name) ?? "" } };
}

const headerValue = (request: GatewayRequest, name: string) => Object.entries(request.headers).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];

function pathMatches(match: RouteMatch, path: string): boolean {
  const type = match.path?.type ?? "PathPrefix";
  const value = match.path?.value ?? "/";
  if (type === "Exact") return path === value;
  if (type !== "PathPrefix") throw new Error(`path match type ${type} is implementation-specific`);
  const prefix = value.replace(/\/$/, "");
  return prefix === "" || path === prefix || path.startsWith(`${prefix}/`);
}

function matches(match: RouteMatch, request: GatewayRequest): boolean {
  if (!pathMatches(match, request.path)) return false;
  if (match.method && match.method !== request.method) return false;
  return (match.headers ?? []).every((h) => {
    if ((h.type ?? "Exact") !== "Exact") throw new Error(`header match type ${h.type} is implementation-specific`);
    if (h.value.length < 1) throw new Error(`header ${h.name}: a value of at least 1 character`);
    return headerValue(request, h.name) === h.value;
  });
}

/** Precedence of a match: exact path, prefix length, method, header count, query count (greater first). */
function rank(match: RouteMatch): number[] {
  const exact = match.path?.type === "Exact" ? 1 : 0;
  return [
    exact,
    exact ? 0 : (match.path?.value ?? "/").replace(/\/$/, "").length,
    match.method ? 1 : 0,
    match.headers?.length ?? 0,
    match.queryParams?.length ?? 0,
  ];
}

function compareRanks(a: readonly number[], b: readonly number[]): number {
  const i = a.findIndex((v, j) => v !== b[j]);
  return i < 0 ? 0 : a[i]! - b[i]!;
}

/**
 * The rule a Gateway sends `request` to among `routes` (all attached to its listener, listed oldest
 * first), by Gateway API's precedence; null when none matches (the Gateway's own 404).
 */
export function selectRule(request: GatewayRequest, routes: readonly HttpRoute[]): { route: HttpRoute; rule: RouteRule } | null {
  let best: { route: HttpRoute; rule: RouteRule; rank: number[] } | null = null;
  for (const route of routes)
    for (const rule of route.spec.rules)
      for (const match of rule.matches ?? [{ path: { type: "PathPrefix", value: "/" } }]) {
        if (!matches(match, request)) continue;
        const r = rank(match);
        // Strictly greater: on a tie the older route, then the earlier rule, keeps it.
        if (best === null || compareRanks(r, best.rank) > 0) best = { route, rule, rank: r };
      }
  return best && { route: best.route, rule: best.rule };
}

/** What an Envoy bootstrap's first listener answers itself: the first route whose path (or prefix) and header matches fit, if it is a direct response. */
export function directResponse(bootstrapYaml: string, request: GatewayRequest): { status: number; body: string } | null {
  const bootstrap = parseYaml(bootstrapYaml);
  const manager = bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const routes: any[] = manager.route_config.virtual_hosts[0].routes;
  for (const route of routes) {
    const m = route.match;
    const pathFits = m.path !== undefined ? request.path === m.path : request.path.startsWith(m.prefix);
    const headersFit = (m.headers ?? []).every((h: any) =>
      h.name === ":method" ? request.method === h.string_match.exact : headerValue(request, h.name) === h.string_match?.exact,
    );
    if (pathFits && headersFit) return route.direct_response ? { status: route.direct_response.status, body: route.direct_response.body.inline_string } : null;
  }
  return null;
}
