// What the front door of a stack of models answers itself, on both platforms: `GET /v1/models` with
// every served name, and 404 for a model no entry serves, in the shape of vLLM's (OpenAI's) errors,
// never a 429 or 503 of a pool that does not exist. Envoy sends both as direct responses.
import { stringify } from "yaml";
import { socketAddress } from "../address";

/** `GET /v1/models` through the front door: every served name of every model, as vLLM's /v1/models lists its own. */
export function modelListBody(servedNames: readonly string[]): string {
  return JSON.stringify({ object: "list", data: servedNames.map((id) => ({ id, object: "model", created: 0, owned_by: "rbln-serving" })) });
}

/** The answer to a request for a model no entry serves: vLLM's ErrorResponse shape, status 404. */
export const UNKNOWN_MODEL_BODY = JSON.stringify({
  error: {
    message: "The model in the request is not served here; GET /v1/models lists the models served.",
    type: "NotFoundError",
    param: "model",
    code: 404,
  },
});

const JSON_HEADER = [{ header: { key: "content-type", value: "application/json" } }];

/** Envoy routes (RouteConfiguration routes) that answer `GET /v1/models` and, last, every other request with 404 JSON. */
export function answerRoutes(servedNames: readonly string[]) {
  return {
    models: {
      name: "models",
      match: { path: "/v1/models", headers: [{ name: ":method", string_match: { exact: "GET" } }] },
      direct_response: { status: 200, body: { inline_string: modelListBody(servedNames) } },
      response_headers_to_add: JSON_HEADER,
    },
    unknown: {
      name: "unknown-model",
      match: { prefix: "/" },
      direct_response: { status: 404, body: { inline_string: UNKNOWN_MODEL_BODY } },
      response_headers_to_add: JSON_HEADER,
    },
  };
}

/** Envoy refuses a direct response body over this unless the route config raises it (RouteConfiguration.max_direct_response_body_size_bytes). */
const DEFAULT_DIRECT_RESPONSE_LIMIT = 4096;

/** The route config's limit on a direct response's body: Envoy's 4 KiB, or more when the list of served names is longer. */
export function directResponseLimit(servedNames: readonly string[]): { max_direct_response_body_size_bytes?: number } {
  const longest = Math.max(Buffer.byteLength(modelListBody(servedNames)), Buffer.byteLength(UNKNOWN_MODEL_BODY));
  return longest > DEFAULT_DIRECT_RESPONSE_LIMIT ? { max_direct_response_body_size_bytes: longest } : {};
}

const typed = (type: string, config: Record<string, unknown> = {}) => ({ "@type": `type.googleapis.com/${type}`, ...config });

/**
 * A bootstrap for an Envoy that answers only: `GET /v1/models`, else 404 JSON. On Kubernetes it is
 * the backend of the stack's catch-all route (a request of no served model matches no model's
 * HTTPRoute), with no admin server and no cluster.
 */
export function answerBootstrap(listenAddress: string, port: number, servedNames: readonly string[]): string {
  const routes = answerRoutes(servedNames);
  const config = {
    node: { id: "rbln-serving-answers", cluster: "rbln-serving" },
    static_resources: {
      listeners: [
        {
          name: "answers",
          address: { socket_address: { address: socketAddress(listenAddress), port_value: port } },
          filter_chains: [
            {
              filters: [
                {
                  name: "envoy.filters.network.http_connection_manager",
                  typed_config: typed("envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", {
                    stat_prefix: "answers",
                    route_config: {
                      name: "answers",
                      ...directResponseLimit(servedNames),
                      virtual_hosts: [{ name: "answers", domains: ["*"], routes: [routes.models, routes.unknown] }],
                    },
                    http_filters: [{ name: "envoy.filters.http.router", typed_config: typed("envoy.extensions.filters.http.router.v3.Router") }],
                  }),
                },
              ],
            },
          ],
        },
      ],
    },
  };
  return stringify(config, { lineWidth: 0 });
}
