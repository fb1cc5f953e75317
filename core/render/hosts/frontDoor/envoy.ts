import { createHash } from "node:crypto";
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
}

/**
 * The Envoy of a stack of models: where it listens, and each model's served names and EPP. Its
 * routes and the EPPs' clusters are files of their own, which Envoy reads again when one is moved
 * into place (RDS and CDS from a path_config_source), so adding or removing a model changes them and
 * never the bootstrap: Envoy takes the change without a restart, and the other models' requests go on.
 */
export interface ModelsEnvoyInput extends Omit<EnvoyInput, "eppGrpcPort" | "failover"> {
  models: readonly ModelDoor[];
  /** Where Envoy reads the routes (RDS) and the EPPs' clusters (CDS), in its container. */
  routesPath: string;
  clustersPath: string;
  /** With several router hosts: each model's EPP falls back to the peers' EPPs of that model, as one model's does (EppFailover). */
  failover?: ModelsFailover;
}

/**
 * A front door of several router hosts carrying several models: the peers, reached as for one model,
 * and where Envoy reads the routes of its peer listener (RDS), which take a peer's stream to this
 * host's EPP of the model its authority names.
 */
export type ModelsFailover = Omit<EppFailover, "eppHealthPort"> & { peerRoutesPath: string };

/** A stack of models' Envoy files: the bootstrap, which no model changes, and the routes and clusters it discovers from files. */
export interface ModelsEnvoy {
  bootstrap: string;
  routes: string;
  clusters: string;
  /** The names of the clusters file's clusters, which the apply step waits to see Envoy run. */
  clusterNames: string[];
  /** With several router hosts: the peer listener's routes, a virtual host per model; null with one. */
  peerRoutes: string | null;
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

/** The route config's name, which the RDS file's one resource carries. */
const ROUTES_NAME = "front-door";
/**
 * ext_proc's own grpc_service with models: every route names its model's EPP or turns ext_proc off, so
 * none uses it; an empty cluster of the bootstrap keeps it from naming a model, which would tie the
 * bootstrap to that model.
 */
const NO_MODEL_CLUSTER = "epp-no-model";

const pathSource = (path: string) => ({ path_config_source: { path }, resource_api_version: "V3" });

/** A discovery file: Envoy's DiscoveryResponse of `type`, its version the resources' hash (Envoy shows it in /config_dump). */
function discoveryFile(type: string, resources: readonly Record<string, unknown>[]): string {
  const typedResources = resources.map((r) => typed(type, r));
  // Named by kind, so YAML never reads a hash of digits as a number.
  const version = `${type.slice(type.lastIndexOf(".") + 1).toLowerCase()}-${createHash("sha256").update(JSON.stringify(typedResources)).digest("hex").slice(0, 16)}`;
  return stringify({ version_info: version, resources: typedResources }, { lineWidth: 0 });
}

/** Each model's EPP on this host, as the peer listener reaches it: its ext_proc port and its health port. */
const localCluster = (model: ModelDoor) => `${model.eppCluster}-local`;
const localHealthCluster = (model: ModelDoor) => `${model.eppCluster}-local-health`;

/** The Envoy of a stack of models (ModelsEnvoyInput): the bootstrap, the routes by served name, each model's EPP cluster. */
export function modelsEnvoy(input: ModelsEnvoyInput): ModelsEnvoy {
  const timeout = `${input.requestTimeoutSeconds}s`;
  const { failover } = input;
  const paths = { routesPath: input.routesPath, clustersPath: input.clustersPath, peerRoutesPath: failover?.peerRoutesPath };
  const bootstrap = bootstrapConfig({ ...input, eppGrpcPort: 0, failover: failover && { ...failover, eppHealthPort: 0 }, models: paths });
  const routes = {
    name: ROUTES_NAME,
    ...directResponseLimit(input.models.flatMap((m) => m.servedNames)),
    virtual_hosts: [modelVirtualHost(input.models, "original_destination_cluster", timeout, failover ? EPP_RETRY : {})],
  };
  const clusters = input.models.flatMap((m) =>
    failover
      ? [
          failoverEppCluster(m.eppCluster, m.eppGrpcPort, { ...failover, eppHealthPort: m.eppHealthPort }, m.eppCluster),
          localEppCluster(localCluster(m), m.eppGrpcPort),
          localEppCluster(localHealthCluster(m), m.eppHealthPort),
        ]
      : [localEppCluster(m.eppCluster, m.eppGrpcPort, "10s")],
  );
  // A peer's stream names its model's EPP in its authority (the route's grpc_service): a virtual host per model.
  const peerRoutes = {
    name: PEER_ROUTES_NAME,
    virtual_hosts: input.models.map((m) => peerVirtualHost(m.eppCluster, [m.eppCluster], localCluster(m), localHealthCluster(m))),
  };
  return {
    bootstrap: stringify(bootstrap, { lineWidth: 0 }),
    routes: discoveryFile("envoy.config.route.v3.RouteConfiguration", [routes]),
    clusters: discoveryFile("envoy.config.cluster.v3.Cluster", clusters),
    clusterNames: clusters.map((c) => c.name),
    peerRoutes: failover ? discoveryFile("envoy.config.route.v3.RouteConfiguration", [peerRoutes]) : null,
  };
}

/** The bootstrap's input: one model's, or with `models` the discovery files' paths of a stack of models. */
type BootstrapInput = EnvoyInput & { models?: { routesPath: string; clustersPath: string; peerRoutesPath?: string } };

/**
 * A stream the local EPP refused or reset before answering (it stops, or died) is tried once more: by
 * then outlier detection has ejected it, and a peer's takes the stream. One it answered is never
 * retried (Envoy's `reset`).
 */
const EPP_RETRY = { retry_policy: { retry_on: "connect-failure,refused-stream,reset", num_retries: 1 } };

const socket = (address: string, port: number) => ({ socket_address: { address: socketAddress(address), port_value: port } });
// Functions, not constants: YAML would write a second use of one object as an alias.
const routerFilter = () => ({ name: "envoy.filters.http.router", typed_config: typed("envoy.extensions.filters.http.router.v3.Router") });
const http2 = () => ({
  "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": typed("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", {
    explicit_http_config: { http2_protocol_options: {} },
  }),
});
const HCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

function bootstrapConfig(input: BootstrapInput) {
  const timeout = `${input.requestTimeoutSeconds}s`;
  const failover = input.failover;
  return {
    node: { id: "rbln-serving-front-door", cluster: "rbln-serving" },
    admin: { address: socket("127.0.0.1", input.adminPort) },
    ...(input.models ? { dynamic_resources: { cds_config: pathSource(input.models.clustersPath) } } : {}),
    static_resources: {
      listeners: [frontDoorListener(input, timeout), ...(failover ? [peerEppListener(failover, timeout, input.models?.peerRoutesPath)] : [])],
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
function frontDoorListener(input: BootstrapInput, timeout: string) {
  const retry = input.failover ? EPP_RETRY : {};
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
              ...(input.models
                ? { rds: { config_source: pathSource(input.models.routesPath), route_config_name: ROUTES_NAME } }
                : { route_config: routeConfig(timeout) }),
              http_filters: [
                ...requestGuards(input),
                ...(input.models ? bodyToHeaderFilters() : []),
                {
                  name: "envoy.filters.http.ext_proc",
                  typed_config: typed("envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor", {
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
function tlsContext(failover: Pick<EppFailover, "tlsDir">, peerNames: readonly string[]) {
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
function failoverEppCluster(name: string, eppGrpcPort: number, failover: EppFailover, authority?: string) {
  const check = EPP_FAILOVER.healthCheck;
  const outlier = EPP_FAILOVER.outlier;
  return {
    name,
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
        // With models, the authority names the model: a peer's Envoy takes the check to its EPP of that model.
        grpc_health_check: { service_name: EPP_FAILOVER.healthService, ...(authority ? { authority } : {}) },
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
      cluster_name: name,
      endpoints: [
        {
          priority: 0,
          lb_endpoints: [{ endpoint: { address: socket("127.0.0.1", eppGrpcPort), health_check_config: { port_value: failover.eppHealthPort } } }],
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
function peerEppListener(failover: Omit<EppFailover, "eppHealthPort">, timeout: string, routesPath?: string) {
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
              // With models its routes are a file of their own, a virtual host per model (modelsEnvoy).
              ...(routesPath
                ? { rds: { config_source: pathSource(routesPath), route_config_name: PEER_ROUTES_NAME } }
                : { route_config: { name: PEER_ROUTES_NAME, virtual_hosts: [peerVirtualHost("peer-epp", ["*"], "local_epp", "local_epp_health")] } }),
              http_filters: [routerFilter()],
            }),
          },
        ],
      },
    ],
  };
}

const PEER_ROUTES_NAME = "peer-epp";

/** The peer listener's way to one EPP on this host: gRPC health checks to its health port, the rest to its ext_proc port. */
function peerVirtualHost(name: string, domains: string[], eppCluster: string, healthCluster: string) {
  const to = (cluster: string) => ({ cluster, timeout: "0s" });
  return {
    name,
    domains,
    routes: [
      { match: { prefix: "/grpc.health.v1.Health/" }, route: to(healthCluster) },
      { match: { prefix: "/" }, route: to(eppCluster) },
    ],
  };
}

/** The bootstrap's EPP clusters: the one EPP's (with its peers' on several router hosts); with models, only the empty one (each model's comes by CDS). */
function eppClusters(input: BootstrapInput) {
  const failover = input.failover;
  if (input.models) return [{ name: NO_MODEL_CLUSTER, type: "STATIC", connect_timeout: "1s", typed_extension_protocol_options: http2() }];
  if (!failover) return [localEppCluster("epp", input.eppGrpcPort, "10s")];
  return [
    failoverEppCluster("epp", input.eppGrpcPort, failover),
    localEppCluster("local_epp", input.eppGrpcPort),
    localEppCluster("local_epp_health", failover.eppHealthPort),
  ];
}

/** The ext_proc filter's own EPP: the one EPP, or with models the empty cluster no route uses. */
function eppService(input: BootstrapInput) {
  if (input.models) return { envoy_grpc: { cluster_name: NO_MODEL_CLUSTER }, timeout: "10s" };
  return { envoy_grpc: { cluster_name: "epp", authority: `localhost:${input.eppGrpcPort}` }, timeout: "10s" };
}

/** One model's route config: every request to the EPP's destination. */
function routeConfig(timeout: string) {
  const cluster = "original_destination_cluster";
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
