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
  /** With several router hosts: the EPP's gRPC health port on loopback, and the peers this Envoy falls back to. */
  failover?: EppFailover;
  /**
   * With `apiKey`: where Envoy reads the API key filter's config, in its container (apiKeyFilterConfig
   * writes it; the apply step puts it there from its stdin, so the key is in no script or bootstrap).
   */
  apiKeyConfigPath?: string;
  /** A stack of models: each model's served names and EPP, routed by the body's model (modelRoutes.ts); the EPP of eppGrpcPort otherwise. */
  models?: readonly ModelDoor[];
}

/** A front door of several router hosts: each Envoy serves its EPP to the peers over mutual TLS, and falls back to theirs. */
export interface EppFailover {
  /** The EPP's grpc.health.v1 server (plaintext, loopback), probed for the local EPP. */
  eppHealthPort: number;
  /** This router host's name (its certificate's DNS name) and the address and port its peers reach its EPP at. */
  self: { name: string; address: string; port: number };
  /** The other router hosts: their names (the DNS names their certificates carry) and where their Envoys serve their EPPs. */
  peers: { name: string; address: string; port: number }[];
  /** Where Envoy reads the stack's CA and this host's certificate and key (tls.crt, tls.key, ca.crt). */
  tlsDir: string;
}

/**
 * The failover settings of llm-d-router PR #2228 (docs/operations.md §4, after v0.10.0; the values
 * are test/fixtures/llm-d-router-v0.10.0/epp-ha.json's): a gRPC health check of each EPP, and
 * outlier detection that ejects the local EPP at its first refused connection.
 */
export const EPP_FAILOVER = {
  healthCheck: { interval: "5s", timeout: "1s", unhealthyThreshold: 2, healthyThreshold: 3 },
  healthService: "envoy.service.ext_proc.v3.ExternalProcessor",
  outlier: { consecutiveLocalOriginFailure: 1, enforcingConsecutiveLocalOriginFailure: 100, maxEjectionPercent: 50, baseEjectionTime: "30s" },
  healthyPanicThreshold: 10,
  connectTimeout: "0.250s",
} as const;

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

const socket = (address: string, port: number) => ({ socket_address: { address: socketAddress(address), port_value: port } });
// Functions, not constants: YAML would write a second use of one object as an alias.
const routerFilter = () => ({ name: "envoy.filters.http.router", typed_config: typed("envoy.extensions.filters.http.router.v3.Router") });
const http2 = () => ({
  "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": typed("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", {
    explicit_http_config: { http2_protocol_options: {} },
  }),
});
const HCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

function bootstrapConfig(input: EnvoyInput) {
  const timeout = `${input.requestTimeoutSeconds}s`;
  const failover = input.failover;
  return {
    node: { id: "rbln-serving-front-door", cluster: "rbln-serving" },
    admin: { address: socket("127.0.0.1", input.adminPort) },
    static_resources: {
      listeners: [frontDoorListener(input, timeout), ...(failover ? [peerEppListener(failover, timeout)] : [])],
      clusters: [
        ...eppClusters(input),
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

/** The listener clients reach: every request asks the EPP (ext_proc), then goes where its header says. */
function frontDoorListener(input: EnvoyInput, timeout: string) {
  // A stream the local EPP refused or reset before answering (it stops, or died) is tried once more: by then outlier
  // detection has ejected it, and a peer's takes the stream. One it answered is never retried (Envoy's `reset`).
  const retry = input.failover ? { retry_policy: { retry_on: "connect-failure,refused-stream,reset", num_retries: 1 } } : {};
  return {
    name: "front-door",
    address: socket(input.listenAddress, input.port),
    filter_chains: [
      {
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            typed_config: typed(HCM, {
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
                    grpc_service: { ...eppService(input), ...retry },
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
                routerFilter(),
              ],
            }),
          },
        ],
      },
    ],
  };
}

/** A cluster of the EPP on this host's loopback, over HTTP/2 (gRPC). */
function localEppCluster(name: string, port: number, connectTimeout: string = EPP_FAILOVER.connectTimeout) {
  return {
    name,
    type: "STATIC",
    connect_timeout: connectTimeout,
    lb_policy: "LEAST_REQUEST",
    typed_extension_protocol_options: http2(),
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: socket("127.0.0.1", port) } }] }] },
  };
}

/** The stack's CA and this host's certificate, as a TLS context: for the peers' connections in, and this host's out. */
function tlsContext(failover: EppFailover, peerNames: readonly string[]) {
  return {
    tls_certificates: [{ certificate_chain: { filename: `${failover.tlsDir}/tls.crt` }, private_key: { filename: `${failover.tlsDir}/tls.key` } }],
    validation_context: {
      trusted_ca: { filename: `${failover.tlsDir}/ca.crt` },
      // The stack's CA signs only its router hosts' certificates; each names its host.
      match_typed_subject_alt_names: peerNames.map((name) => ({ san_type: "DNS", matcher: { exact: name } })),
    },
    alpn_protocols: ["h2"],
  };
}

/**
 * The EPP's ext_proc cluster of a front door with several router hosts, as llm-d-router PR #2228
 * builds it: this host's EPP at priority 0 (health from its plaintext gRPC health port on loopback),
 * the peers' at priority 1 through their Envoys over mutual TLS, gRPC health checks and outlier
 * detection that ejects an EPP at its first local-origin failure.
 */
function failoverEppCluster(input: EnvoyInput, failover: EppFailover) {
  const check = EPP_FAILOVER.healthCheck;
  const outlier = EPP_FAILOVER.outlier;
  return {
    name: "epp",
    type: "STATIC",
    connect_timeout: EPP_FAILOVER.connectTimeout,
    lb_policy: "LEAST_REQUEST",
    typed_extension_protocol_options: http2(),
    common_lb_config: { healthy_panic_threshold: { value: EPP_FAILOVER.healthyPanicThreshold }, ignore_new_hosts_until_first_hc: true },
    health_checks: [
      {
        timeout: check.timeout,
        interval: check.interval,
        unhealthy_threshold: check.unhealthyThreshold,
        healthy_threshold: check.healthyThreshold,
        reuse_connection: false,
        grpc_health_check: { service_name: EPP_FAILOVER.healthService },
      },
    ],
    outlier_detection: {
      split_external_local_origin_errors: true,
      consecutive_local_origin_failure: outlier.consecutiveLocalOriginFailure,
      enforcing_consecutive_local_origin_failure: outlier.enforcingConsecutiveLocalOriginFailure,
      max_ejection_percent: outlier.maxEjectionPercent,
      base_ejection_time: outlier.baseEjectionTime,
    },
    transport_socket_matches: failover.peers.map((peer) => ({
      name: `peer-${peer.name}`,
      match: { router: peer.name },
      transport_socket: {
        name: "envoy.transport_sockets.tls",
        typed_config: typed(UPSTREAM_TLS, { sni: peer.name, common_tls_context: tlsContext(failover, [peer.name]) }),
      },
    })),
    load_assignment: {
      cluster_name: "epp",
      endpoints: [
        {
          priority: 0,
          lb_endpoints: [{ endpoint: { address: socket("127.0.0.1", input.eppGrpcPort), health_check_config: { port_value: failover.eppHealthPort } } }],
        },
        {
          priority: 1,
          lb_endpoints: failover.peers.map((peer) => ({
            endpoint: { address: socket(peer.address, peer.port) },
            metadata: { filter_metadata: { "envoy.transport_socket_match": { router: peer.name } } },
          })),
        },
      ],
    },
  };
}

const UPSTREAM_TLS = "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
const DOWNSTREAM_TLS = "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";

/**
 * Where the peers' Envoys reach this host's EPP: mutual TLS with the stack's certificates (the EPP
 * v0.10.0 cannot check a client's certificate, so it stays plaintext on loopback), gRPC health
 * checks to its health port, the rest to its ext_proc port. No route timeout: an ext_proc stream
 * lasts as long as its request.
 */
function peerEppListener(failover: EppFailover, timeout: string) {
  const to = (cluster: string) => ({ cluster, timeout: "0s" });
  return {
    name: "peer-epp",
    address: socket(failover.self.address, failover.self.port),
    filter_chains: [
      {
        transport_socket: {
          name: "envoy.transport_sockets.tls",
          typed_config: typed(DOWNSTREAM_TLS, {
            require_client_certificate: true,
            common_tls_context: tlsContext(
              failover,
              failover.peers.map((p) => p.name),
            ),
          }),
        },
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            typed_config: typed(HCM, {
              stat_prefix: "peer_epp",
              codec_type: "HTTP2",
              stream_idle_timeout: timeout,
              route_config: {
                name: "peer-epp",
                virtual_hosts: [
                  {
                    name: "peer-epp",
                    domains: ["*"],
                    routes: [
                      { match: { prefix: "/grpc.health.v1.Health/" }, route: to("local_epp_health") },
                      { match: { prefix: "/" }, route: to("local_epp") },
                    ],
                  },
                ],
              },
              http_filters: [routerFilter()],
            }),
          },
        ],
      },
    ],
  };
}

/** The EPPs' clusters: the one EPP's (with its peers' on several router hosts), or each model's on this host. */
function eppClusters(input: EnvoyInput) {
  const failover = input.failover;
  // Several router hosts and models together are not rendered yet: a stack of models on hosts is refused before this (core/render/stack.ts).
  if (input.models && failover) throw new Error("a front door of several router hosts carries one model's EPP only");
  if (input.models) return input.models.map((m) => localEppCluster(m.eppCluster, m.eppGrpcPort, "10s"));
  if (!failover) return [localEppCluster("epp", input.eppGrpcPort, "10s")];
  return [failoverEppCluster(input, failover), localEppCluster("local_epp", input.eppGrpcPort), localEppCluster("local_epp_health", failover.eppHealthPort)];
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
