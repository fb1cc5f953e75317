import { stringify } from "yaml";
import { socketAddress } from "../../../address";
import { directResponseLimit } from "../../modelAnswers";
import { bodyToHeaderFilters, type ModelDoor, modelVirtualHost } from "./modelRoutes";

/** What the front door's Envoy is given: where it listens and how long a request may run. */
export interface EnvoyInput {
  /** The front door's address (all interfaces: 0.0.0.0) and port. */
  listenAddress: string;
  port: number;
  /** Envoy's admin server, on loopback only. */
  adminPort: number;
  /** The EPP's ext_proc gRPC server, on the router host's loopback. */
  eppGrpcPort: number;
  /** How long one request may run (router.requestTimeout): also how long it may go without a byte, since a long prompt's prefill sends none. */
  requestTimeoutSeconds: number;
  /**
   * With `apiKey`: where Envoy reads the API key filter's config, in its container (apiKeyFilterConfig
   * writes it; the apply step puts it there from its stdin, so the key is in no script or bootstrap).
   */
  apiKeyConfigPath?: string;
  /** A stack of models: each model's served names and EPP, routed by the body's model (modelRoutes.ts); the EPP of eppGrpcPort otherwise. */
  models?: readonly ModelDoor[];
}

/** The header the EPP sets for Envoy's ORIGINAL_DST cluster (llm-d-router v0.10.0 docs/discovery.md). */
export const DESTINATION_HEADER = "x-gateway-destination-endpoint";
/** The header the EPP's disaggregation sets for the routing sidecar: the prefill server's host:port (sidecar-flags.json). */
export const PREFILL_HEADER = "x-prefiller-host-port";
/** The API key filter: its name, which is also its ECDS resource's name, and its config's type. */
export const API_KEY_FILTER = "rbln-serving-api-key";
const API_KEY_AUTH = "envoy.extensions.filters.http.api_key_auth.v3.ApiKeyAuth";

const typed = (type: string, config: Record<string, unknown> = {}) => ({ "@type": `type.googleapis.com/${type}`, ...config });

/**
 * Envoy's bootstrap for the front door, as llm-d-router v0.10.0's docs/discovery.md gives it: an
 * ext_proc filter that asks the EPP for every request (headers and trailers sent, bodies streamed
 * both ways) and an ORIGINAL_DST cluster that sends the request where the EPP's header says. No
 * retries: the EPP picked the endpoint, and a retry would go to the same one.
 */
export function envoyBootstrap(input: EnvoyInput): string {
  return stringify(bootstrapConfig(input), { lineWidth: 0 });
}

function bootstrapConfig(input: EnvoyInput) {
  const timeout = `${input.requestTimeoutSeconds}s`;
  return {
    node: { id: "rbln-serving-front-door", cluster: "rbln-serving" },
    admin: { address: socket("127.0.0.1", input.adminPort) },
    static_resources: {
      listeners: [
        {
          name: "front-door",
          address: socket(input.listenAddress, input.port),
          filter_chains: [
            {
              filters: [
                {
                  name: "envoy.filters.network.http_connection_manager",
                  typed_config: typed("envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", {
                    stat_prefix: "front_door",
                    // Envoy's default of 5 minutes without a byte would cut a long prompt's prefill.
                    stream_idle_timeout: timeout,
                    access_log: [{ name: "envoy.access_loggers.stdout", typed_config: typed("envoy.extensions.access_loggers.stream.v3.StdoutAccessLog") }],
                    route_config: routeConfig(input, timeout),
                    http_filters: [
                      ...requestGuards(input),
                      ...(input.models ? bodyToHeaderFilters() : []),
                      {
                        name: "envoy.filters.http.ext_proc",
                        typed_config: typed("envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor", {
                          // With models every route names its model's EPP (or none); this default is the first's.
                          grpc_service: eppService(input),
                          processing_mode: {
                            request_header_mode: "SEND",
                            response_header_mode: "SEND",
                            request_body_mode: "FULL_DUPLEX_STREAMED",
                            response_body_mode: "FULL_DUPLEX_STREAMED",
                            request_trailer_mode: "SEND",
                            response_trailer_mode: "SEND",
                          },
                          message_timeout: "600s",
                        }),
                      },
                      { name: "envoy.filters.http.router", typed_config: typed("envoy.extensions.filters.http.router.v3.Router") },
                    ],
                  }),
                },
              ],
            },
          ],
        },
      ],
      clusters: [
        ...(input.models ? input.models.map((m) => eppCluster(m.eppCluster, m.eppGrpcPort)) : [eppCluster("epp", input.eppGrpcPort)]),
        {
          name: "original_destination_cluster",
          type: "ORIGINAL_DST",
          connect_timeout: "10s",
          lb_policy: "CLUSTER_PROVIDED",
          circuit_breakers: { thresholds: [{ max_connections: 10000, max_pending_requests: 10000, max_requests: 10000 }] },
          original_dst_lb_config: { use_http_header: true, http_header_name: DESTINATION_HEADER },
        },
      ],
    },
  };
}

const socket = (address: string, port: number) => ({ socket_address: { address: socketAddress(address), port_value: port } });

/** An EPP's ext_proc cluster: its gRPC server on the router host's loopback, over HTTP/2. */
function eppCluster(name: string, port: number) {
  return {
    name,
    type: "STATIC",
    connect_timeout: "10s",
    lb_policy: "LEAST_REQUEST",
    typed_extension_protocol_options: {
      "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": typed("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", {
        explicit_http_config: { http2_protocol_options: {} },
      }),
    },
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: socket("127.0.0.1", port) } }] }] },
  };
}

/** The ext_proc filter's own EPP: the one EPP, or with models the first model's. */
function eppService(input: EnvoyInput) {
  const [cluster, port] = input.models ? [input.models[0]!.eppCluster, input.models[0]!.eppGrpcPort] : ["epp", input.eppGrpcPort];
  return { envoy_grpc: { cluster_name: cluster, authority: `localhost:${port}` }, timeout: "10s" };
}

/** Every request to the EPP's destination; with models, by the body's model to its model's EPP (modelRoutes.ts). */
function routeConfig(input: EnvoyInput, timeout: string) {
  const cluster = "original_destination_cluster";
  if (input.models)
    return {
      name: "front-door",
      ...directResponseLimit(input.models.flatMap((m) => m.servedNames)),
      virtual_hosts: [modelVirtualHost(input.models, cluster, timeout)],
    };
  return {
    name: "front-door",
    virtual_hosts: [{ name: "front-door", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster, timeout, idle_timeout: timeout } }] }],
  };
}

/** The filters a request passes before the EPP is asked, in order: the API key (with apiKey), then the headers only the EPP may set. */
function requestGuards(input: EnvoyInput) {
  return [...(input.apiKeyConfigPath ? [apiKeyFilter(input.apiKeyConfigPath)] : []), eppOnlyHeaders()];
}

/**
 * `apiKey` on every path, as vLLM checks it on its own API paths only (`/invocations` and others it
 * leaves open): envoy.filters.http.api_key_auth answers 401 without `Authorization: Bearer <key>`.
 * Its config holds the key, so it comes from a file of its own (ECDS from a path), which the apply
 * step writes from its stdin: the bootstrap, and so `pulumi preview`, show only the path. A file
 * Envoy cannot read leaves the filter without config, and Envoy answers 500: never open.
 */
function apiKeyFilter(path: string) {
  return {
    name: API_KEY_FILTER,
    config_discovery: { config_source: { path_config_source: { path }, resource_api_version: "V3" }, type_urls: [`type.googleapis.com/${API_KEY_AUTH}`] },
  };
}

/** The API key filter's config, the file apiKeyConfigPath names: a secret, since it holds the key. JSON, which Envoy reads by the file's .json. */
export function apiKeyFilterConfig(key: string): string {
  const filter = typed(API_KEY_AUTH, {
    credentials: [{ key, client: "rbln-serving" }],
    // The header vLLM reads too, passed on: "Bearer " is taken off before the key is compared.
    key_sources: [{ header: "authorization" }],
  });
  return `${JSON.stringify({ resources: [typed("envoy.config.core.v3.TypedExtensionConfig", { name: API_KEY_FILTER, typed_config: filter })] }, null, 2)}\n`;
}

/**
 * A client's own copy of a header only the EPP may set is removed before the EPP is asked: the EPP
 * sets the destination always, but the prefill server only when it disaggregates, and otherwise
 * passes a client's on, which the routing sidecar would send the prefill request to
 * (llm-d-router v0.10.0: the EPP adds headers, and removes none).
 */
function eppOnlyHeaders() {
  return {
    name: "envoy.filters.http.header_mutation",
    typed_config: typed("envoy.extensions.filters.http.header_mutation.v3.HeaderMutation", {
      mutations: { request_mutations: [DESTINATION_HEADER, PREFILL_HEADER].map((header) => ({ remove: header })) },
    }),
  };
}
