import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";

/**
 * What the front door's Envoy does with a request, from its rendered bootstrap, by the rules of the
 * pieces at v1.37 (test/fixtures/envoy-v1.37.11/facts.json), so a test can send thousands of requests
 * through it without an Envoy binary:
 *
 * - header_mutation's removals, in filter order;
 * - json_to_metadata (jsonToMetadata.behaviour): the content type against allow_content_types_regex
 *   (a full match, as RE2's) or none with allow_empty_content_type; a body over the route's
 *   request_body_buffer_limit is answered 413; a JSON object's string `model` into the namespace
 *   on_present names; no body, another body or no `model`: no metadata (no on_missing, no on_error);
 * - the Lua filter's script, run by real LuaJIT (Envoy's Lua) through
 *   test/fixtures/lua/envoy-handle-harness.lua, all requests in one run; the route is selected again
 *   after it only with its clear_route_cache on (lua.clearRouteCache), else on the headers before it;
 * - the route: the virtual host's routes in order, the first whose path (prefix or exact) and header
 *   matches (`:method` as a header, `exact`) all hold; its direct response, or its cluster and the
 *   ext_proc cluster its ExtProcPerRoute names (the filter's own when it names none).
 */

export interface EnvoyRequest {
  method: string;
  path: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  body?: string;
}

export type EnvoyOutcome = { status: number; body: string } | { cluster: string; eppCluster: string | null; headers: Record<string, string> };

const HARNESS = path.resolve(__dirname, "../fixtures/lua/envoy-handle-harness.lua");
const typeOf = (config: any) => String(config?.["@type"] ?? "").replace(/^.*\//, "");
const hex = (text: string | undefined) => (text === undefined ? "-" : Buffer.from(text, "utf8").toString("hex"));
const unhex = (text: string) => (text === "-" ? undefined : Buffer.from(text, "hex").toString("utf8"));

/** Runs `script`'s envoy_on_request under LuaJIT once per input: the metadata's model and the client's header in, the header out. */
export function runLuaHeaderStage(
  script: string,
  namespace: string,
  header: string,
  inputs: readonly { model: string | undefined; header: string | undefined }[],
): (string | undefined)[] {
  const scriptFile = path.join(os.tmpdir(), `envoy-lua-${process.pid}-${Date.now()}.lua`);
  fs.writeFileSync(scriptFile, script);
  const stdin = inputs.map((i) => `${hex(i.model)}\t${hex(i.header)}\n`).join("");
  const run = spawnSync("luajit", [HARNESS, scriptFile, namespace, header], { input: stdin, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  fs.rmSync(scriptFile, { force: true });
  if (run.status !== 0) throw new Error(`luajit: ${run.stderr || run.error}`);
  const lines = run.stdout.split("\n").slice(0, -1);
  if (lines.length !== inputs.length) throw new Error(`luajit answered ${lines.length} of ${inputs.length} requests`);
  return lines.map(unhex);
}

interface FrontDoorConfig {
  filters: any[];
  virtualHost: any;
}

function frontDoorConfig(bootstrapYaml: string): FrontDoorConfig {
  const bootstrap = parseYaml(bootstrapYaml);
  const listener = bootstrap.static_resources.listeners.find((l: any) => l.name === "front-door");
  const hcm = listener.filter_chains[0].filters[0].typed_config;
  return { filters: hcm.http_filters, virtualHost: hcm.route_config.virtual_hosts[0] };
}

/** json_to_metadata on one request: the model it puts in metadata, or a 413 status. */
function readModel(config: any, request: EnvoyRequest, bufferLimit: number): { model?: string; namespace?: string } | { status: number } {
  const rules = config.request_rules;
  const type = request.headers["content-type"];
  const allowed =
    type === undefined ? Boolean(rules.allow_empty_content_type) : new RegExp(`^(?:${rules.allow_content_types_regex?.regex ?? "$^"})$`).test(type);
  if (!allowed || request.body === undefined || request.body === "") return {};
  if (Buffer.byteLength(request.body) > bufferLimit) return { status: 413 };
  let doc: unknown;
  try {
    doc = JSON.parse(request.body);
  } catch {
    return {};
  }
  const rule = rules.rules[0];
  const key = rule.selectors[0].key;
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return {};
  const value = (doc as Record<string, unknown>)[key];
  return typeof value === "string" ? { model: value, namespace: rule.on_present.metadata_namespace } : {};
}

function matches(route: any, request: EnvoyRequest, headers: Record<string, string>): boolean {
  const { match } = route;
  if (match.prefix !== undefined && !request.path.startsWith(match.prefix)) return false;
  if (match.path !== undefined && request.path.split("?")[0] !== match.path) return false;
  return (match.headers ?? []).every((h: any) => (h.name === ":method" ? request.method : headers[h.name]) === h.string_match.exact);
}

/** Every request through the front door's filters and routes, in one LuaJIT run. */
export function routeThroughFrontDoor(bootstrapYaml: string, requests: readonly EnvoyRequest[]): EnvoyOutcome[] {
  const { filters, virtualHost } = frontDoorConfig(bootstrapYaml);
  const removed = filters
    .filter((f) => typeOf(f.typed_config).endsWith("HeaderMutation"))
    .flatMap((f) => f.typed_config.mutations.request_mutations.map((m: any) => m.remove));
  const jsonToMetadata = filters.find((f) => typeOf(f.typed_config).endsWith("JsonToMetadata"))?.typed_config;
  const lua = filters.find((f) => typeOf(f.typed_config).endsWith("lua.v3.Lua"))?.typed_config;
  const extProc = filters.find((f) => typeOf(f.typed_config).endsWith("ExternalProcessor")).typed_config;
  const limit = Number(virtualHost.request_body_buffer_limit ?? 1024 * 1024);
  const header = (lua?.default_source_code.inline_string.match(/local HEADER = "([^"]+)"/) ?? [])[1] as string;
  const namespace = (lua?.default_source_code.inline_string.match(/local NAMESPACE = "([^"]+)"/) ?? [])[1] as string;
  const read = requests.map((request) => {
    const headers = Object.fromEntries(Object.entries(request.headers).filter(([name]) => !removed.includes(name)));
    const model = jsonToMetadata ? readModel(jsonToMetadata, request, limit) : {};
    return { request, headers, model };
  });
  const luaInputs = read.map(({ headers, model }) => ({
    model: "model" in model && model.namespace === namespace ? model.model : undefined,
    header: headers[header],
  }));
  const set = lua ? runLuaHeaderStage(lua.default_source_code.inline_string, namespace, header, luaInputs) : luaInputs.map((i) => i.header);
  return read.map(({ request, headers, model }, i) => {
    if ("status" in model) return { status: model.status, body: "" };
    const after: Record<string, string> = { ...headers };
    if (lua) {
      delete after[header];
      if (set[i] !== undefined) after[header] = set[i]!;
    }
    const reselect = lua?.clear_route_cache === true;
    const route = virtualHost.routes.find((r: any) => matches(r, request, reselect || !lua ? after : headers));
    if (!route) return { status: 404, body: "" };
    if (route.direct_response) return { status: route.direct_response.status, body: route.direct_response.body.inline_string };
    const perRoute = route.typed_per_filter_config?.["envoy.filters.http.ext_proc"];
    const eppCluster = perRoute?.disabled
      ? null
      : (perRoute?.overrides?.grpc_service?.envoy_grpc?.cluster_name ?? extProc.grpc_service.envoy_grpc.cluster_name);
    return { cluster: route.route.cluster, eppCluster, headers: after };
  });
}
