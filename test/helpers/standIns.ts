import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { stringify as stringifyYaml } from "yaml";
import configSchema from "../fixtures/llm-d-router-v0.10.0/config-schema.json";
import type { TestHost } from "./hostNamespace";

const FIXTURES = path.join(__dirname, "..", "fixtures");

/** The images whose repositories the runtime stand-in knows (its program is picked by the last path part). */
export const STAND_IN_IMAGES = {
  endpointPicker: "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
  proxy: "docker.io/envoyproxy/envoy:v1.37.0",
  sidecar: "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
};

/**
 * Puts the front door's stand-ins (test/fixtures/stand-ins, with the llm-d-router facts they read) on
 * a fake host under `dir`, a path the host has to itself (HostOptions.privatePaths): the runtime
 * stand-in keeps its state beside itself, so each host has its own images and containers, and its
 * state's host-address makes "all interfaces" and "loopback" mean the host's own address there.
 * Returns the runtime's path, the RUNTIME the router's units run.
 */
export async function installStandIns(host: TestHost, dir: string): Promise<string> {
  const archive = spawnSync("tar", ["-c", "-C", FIXTURES, "--exclude=__pycache__", "--exclude=*.state", "stand-ins", "llm-d-router-v0.10.0"], { maxBuffer: 64 * 1024 * 1024 });
  if (archive.status !== 0) throw new Error(`tar: ${archive.stderr}`);
  const state = `${dir}/stand-ins/container-runtime-stand-in.state`;
  const result = await host.run(
    `set -e; install -d ${dir}; base64 -d | tar -x -C ${dir}; install -d ${state}; printf '%s' ${host.address} > ${state}/host-address`,
    archive.stdout.toString("base64"),
  );
  if (result.status !== 0 || result.stderr !== "") throw new Error(`installing the stand-ins on ${host.name}: ${result.stderr}`);
  return `${dir}/stand-ins/container-runtime-stand-in`;
}

/** Where the EPP reads its endpoints file, inside its container (its config folder is a volume). */
export const EPP_ENDPOINTS_PATH = "/etc/epp/endpoints.yaml";

/** The chart's default plugins plus file discovery: the aggregated strategies' config. */
export function aggregatedEppConfig(endpointsPath = EPP_ENDPOINTS_PATH): string {
  const config = structuredClone(configSchema.chartDefaultPlugins.config) as Record<string, unknown> & { plugins: unknown[] };
  config.plugins.push({ name: "endpoints", type: "file-discovery", parameters: { path: endpointsPath, watchFile: true } });
  config["dataLayer"] = { discovery: { pluginRef: "endpoints" } };
  return stringifyYaml(config);
}

export interface EndpointEntry {
  name: string;
  address?: string;
  port: string | number;
  role?: string;
}

/** An endpoints file in file discovery's format; an entry without an address gets `defaultAddress`. */
export function endpointsFile(defaultAddress: string, entries: EndpointEntry[]): string {
  return stringifyYaml({
    endpoints: entries.map((e) => ({ name: e.name, address: e.address ?? defaultAddress, port: e.port, ...(e.role ? { labels: { "llm-d.ai/role": e.role } } : {}) })),
  });
}

/** A front-door bootstrap in the shape of test/envoy-fixture.test.ts's (llm-d's docs/discovery.md §4), on the given ports. */
export function frontDoorBootstrap(ports: { listen: number; admin: number; pick: number }, routeTimeout = "3600s"): string {
  return `
node: { id: rbln-serving-front-door, cluster: rbln-serving }
admin:
  address:
    socket_address: { address: 127.0.0.1, port_value: ${ports.admin} }
static_resources:
  listeners:
  - name: inference
    address:
      socket_address: { address: 0.0.0.0, port_value: ${ports.listen} }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: inference
          route_config:
            name: inference
            virtual_hosts:
            - name: inference
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: original_destination_cluster, timeout: ${routeTimeout}, idle_timeout: 600s }
          http_filters:
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service:
                envoy_grpc: { cluster_name: epp, authority: "localhost:9002" }
                timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              message_timeout: 600s
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: epp
    type: STATIC
    connect_timeout: 86400s
    lb_policy: LEAST_REQUEST
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_assignment:
      cluster_name: epp
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: ${ports.pick} }
  - name: original_destination_cluster
    type: ORIGINAL_DST
    connect_timeout: 600s
    lb_policy: CLUSTER_PROVIDED
    original_dst_lb_config: { use_http_header: true, http_header_name: x-gateway-destination-endpoint }
`;
}
