// The front door of a stack of models on hosts (issue 30): Envoy reads the `model` field of each
// request body into a header, picks the route of that served name, and asks that model's endpoint
// picker (ext_proc) where to send it. Every piece is Envoy's own at v1.37
// (test/fixtures/envoy-v1.37.11/facts.json): json_to_metadata parses the body, a five-line Lua
// script (model-header.lua) copies the name into the header, routes match it, and each route's
// ExtProcPerRoute overrides the ext_proc filter's grpc_service with its model's EPP.
import { packageFile } from "../../../template";
import { answerRoutes } from "../../modelAnswers";

/** The header the model routes match; the Lua stage sets it from the body, replacing a client's. Gateway API's name for it, as on Kubernetes. */
export const MODEL_HEADER = "x-gateway-base-model-name";
/** Where json_to_metadata puts the body's model, under the key `model`: model-header.lua reads it there. */
export const MODEL_METADATA_NAMESPACE = "rbln-serving.model";
/**
 * The largest request body the front door takes: json_to_metadata holds the whole body to read it,
 * and Envoy's default buffer (1 MiB per connection) would answer 413 to a long conversation.
 */
export const MAX_REQUEST_BODY_BYTES = 32 * 1024 * 1024;
const LUA_FILE = "core/render/hosts/frontDoor/model-header.lua";
const EXT_PROC = "envoy.filters.http.ext_proc";

/** One model behind the front door: its entry's name, the names clients send, and its EPP's ext_proc cluster and ports. */
export interface ModelDoor {
  name: string;
  servedNames: readonly string[];
  eppCluster: string;
  eppGrpcPort: number;
  /** Its EPP's gRPC health port, which a front door of several router hosts checks. */
  eppHealthPort: number;
}

/** The ext_proc cluster of a model's EPP. */
export function eppClusterName(model: string): string {
  return `epp-${model}`;
}

const typed = (type: string, config: Record<string, unknown> = {}) => ({ "@type": `type.googleapis.com/${type}`, ...config });

/** The Lua script of the body-to-header stage, as shipped. */
export function modelHeaderScript(): string {
  return packageFile(LUA_FILE);
}

/**
 * The body-to-header stage, before ext_proc: json_to_metadata reads `model` from a JSON body (an
 * `application/json` content type with or without parameters, or none) into metadata; the Lua filter
 * sets the header from it (clear_route_cache: the route is selected again, so ext_proc's per-route
 * override is the model's). No model, another body or a name that cannot be a header: no header, and
 * the request takes the route of an unknown model.
 */
export function bodyToHeaderFilters() {
  return [
    {
      name: "envoy.filters.http.json_to_metadata",
      typed_config: typed("envoy.extensions.filters.http.json_to_metadata.v3.JsonToMetadata", {
        request_rules: {
          rules: [{ selectors: [{ key: "model" }], on_present: { metadata_namespace: MODEL_METADATA_NAMESPACE, key: "model", type: "STRING" } }],
          allow_content_types_regex: { regex: "application/json(;.*)?" },
          allow_empty_content_type: true,
        },
      }),
    },
    {
      name: "envoy.filters.http.lua",
      typed_config: typed("envoy.extensions.filters.http.lua.v3.Lua", {
        default_source_code: { inline_string: modelHeaderScript() },
        clear_route_cache: true,
      }),
    },
  ];
}

/**
 * ext_proc on one route: asks the model's EPP through its cluster, the authority naming the model (a
 * peer router host's Envoy routes by it); `retry`, the retry policy of a front door of several router
 * hosts (the override replaces the filter's whole grpc_service, its retry policy too).
 */
function eppOverride(model: ModelDoor, retry: Record<string, unknown>) {
  return typed("envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute", {
    overrides: { grpc_service: { envoy_grpc: { cluster_name: model.eppCluster, authority: model.eppCluster }, timeout: "10s", ...retry } },
  });
}

/** The routes the front door answers itself ask no EPP. */
const NO_EPP = { [EXT_PROC]: typed("envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute", { disabled: true }) };

/**
 * The front door's virtual host for several models: `GET /v1/models` answered with every served name,
 * a route per served name (its header, exactly) to the EPP's destination through its model's EPP,
 * and every other request 404 JSON, as on Kubernetes (core/render/modelAnswers.ts).
 */
export function modelVirtualHost(models: readonly ModelDoor[], cluster: string, timeout: string, retry: Record<string, unknown> = {}) {
  const answers = answerRoutes(models.flatMap((m) => m.servedNames));
  const served = models.flatMap((model) =>
    model.servedNames.map((name) => ({
      name: `${model.name}:${name}`,
      match: { prefix: "/", headers: [{ name: MODEL_HEADER, string_match: { exact: name } }] },
      route: { cluster, timeout, idle_timeout: timeout },
      typed_per_filter_config: { [EXT_PROC]: eppOverride(model, retry) },
    })),
  );
  return {
    name: "front-door",
    domains: ["*"],
    request_body_buffer_limit: MAX_REQUEST_BODY_BYTES,
    routes: [{ ...answers.models, typed_per_filter_config: NO_EPP }, ...served, { ...answers.unknown, typed_per_filter_config: NO_EPP }],
  };
}
