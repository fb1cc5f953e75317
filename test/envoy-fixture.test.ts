import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ENVOY_FIXTURE_DIR, EXTENSIONS, PGV_CHECKED, PGV_NOT_ENFORCED_BY_ENVOY, envoyRoot, validateEnvoyBootstrap } from "./helpers/envoyBootstrap";
import llmd from "./fixtures/envoy-v1.37.0/llm-d-router-v0.10.0-envoy.json";
import sources from "./fixtures/envoy-v1.37.0/sources.json";
import sources11 from "./fixtures/envoy-v1.37.11/sources.json";

/**
 * The bootstrap llm-d-router v0.10.0 docs/discovery.md §4 describes (see the llm-d fixture), with our
 * changes: admin on 127.0.0.1:9901 instead of 19000, a route timeout of 3600s instead of 600s for
 * long generations, a node identity and an access log on stdout.
 */
const BOOTSTRAP = `
node:
  id: rbln-serving-front-door
  cluster: rbln-serving
admin:
  address:
    socket_address: { address: 127.0.0.1, port_value: 9901 }
static_resources:
  listeners:
  - name: inference
    address:
      socket_address: { address: 0.0.0.0, port_value: 8080 }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: inference
          access_log:
          - name: envoy.access_loggers.stdout
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog
          route_config:
            name: inference
            virtual_hosts:
            - name: inference
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route:
                  cluster: original_destination_cluster
                  timeout: 3600s
                  idle_timeout: 600s
          http_filters:
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service:
                envoy_grpc:
                  cluster_name: epp
                  authority: localhost:9002
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
        explicit_http_config:
          http2_protocol_options: {}
    load_assignment:
      cluster_name: epp
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: { address: 127.0.0.1, port_value: 9002 }
  - name: original_destination_cluster
    type: ORIGINAL_DST
    connect_timeout: 600s
    lb_policy: CLUSTER_PROVIDED
    circuit_breakers:
      thresholds:
      - max_connections: 10000
        max_pending_requests: 10000
        max_requests: 10000
    original_dst_lb_config:
      use_http_header: true
      http_header_name: x-gateway-destination-endpoint
`;

/** Replaces exactly one occurrence of `from`, so a mutation that no longer applies fails loudly. */
function mutate(from: string, to: string, text = BOOTSTRAP): string {
  const at = text.indexOf(from);
  if (at < 0 || text.indexOf(from, at + 1) >= 0) throw new Error(`mutation target must occur once: ${from}`);
  return text.slice(0, at) + to + text.slice(at + from.length);
}

function expectRefused(yaml: string, ...fragments: string[]) {
  const problems = validateEnvoyBootstrap(yaml);
  expect(problems.length, "expected at least one problem").toBeGreaterThan(0);
  for (const fragment of fragments) expect(problems.join("\n")).toContain(fragment);
}

const ROUTER_FILTER = `          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`;

describe("the fixture", () => {
  it("names Envoy v1.37.0 and the commits its definitions came from", () => {
    expect(sources.envoy.release).toBe("v1.37.0");
    expect(sources.envoy.tagCommit).toMatch(/^[0-9a-f]{40}$/);
    expect(sources.envoy.image).toBe("docker.io/envoyproxy/envoy:v1.37.0");
    for (const source of sources.sources) {
      expect(source.commit).toMatch(/^[0-9a-f]{40}$/);
      expect(source.files.length).toBeGreaterThan(0);
    }
    const readme = readFileSync(path.join(ENVOY_FIXTURE_DIR, "README.md"), "utf8");
    for (const source of sources.sources) expect(readme).toContain(source.commit);
  });

  it("resolves every root type and every typed_config type the validator knows, from the v1.37.11 descriptor, a superset of v1.37.0's", () => {
    const root = envoyRoot();
    expect(sources11.descriptor.roots).toEqual(expect.arrayContaining(sources.descriptor.roots));
    for (const name of sources11.descriptor.roots) expect(root.lookupType(name).fullName).toBe(`.${name}`);
    for (const name of Object.keys(EXTENSIONS)) expect(sources11.descriptor.roots).toContain(name);
  });

  it("keeps the protoc-gen-validate rules, repeated values included", () => {
    const root = envoyRoot();
    const port = root.lookupType("envoy.config.core.v3.SocketAddress").fields.port_value;
    expect(port?.options?.["(validate.rules)"]).toEqual({ uint32: { lte: 65535 } });
    const strict = root.lookupType("envoy.extensions.filters.http.router.v3.Router").fields.strict_check_headers;
    expect(strict?.options?.["(validate.rules)"].repeated.items.string.in).toHaveLength(5);
  });

  it("has no PGV rule the validator neither checks nor knows Envoy leaves unchecked", () => {
    const seen = new Set<string>();
    const collect = (kind: string, rules: Record<string, unknown>) => {
      for (const [rule, value] of Object.entries(rules)) {
        seen.add(`${kind}.${rule}`);
        if (["items", "keys", "values"].includes(rule)) {
          for (const [k, v] of Object.entries(value as Record<string, Record<string, unknown>>)) collect(k, v);
        }
      }
    };
    const walk = (node: any) => {
      if (!node || typeof node !== "object") return;
      const rules = node.options?.["(validate.rules)"];
      if (rules) for (const [kind, r] of Object.entries(rules)) collect(kind, r as Record<string, unknown>);
      for (const child of Object.values(node)) walk(child);
    };
    walk(JSON.parse(readFileSync(path.join(ENVOY_FIXTURE_DIR, "descriptor.json"), "utf8")));
    expect(seen.size).toBeGreaterThan(20);
    const unknown = [...seen].filter((k) => !PGV_CHECKED.has(k) && !PGV_NOT_ENFORCED_BY_ENVOY.has(k));
    expect(unknown).toEqual([]);
  });
});

describe("validateEnvoyBootstrap", () => {
  it("accepts the front-door bootstrap", () => {
    expect(validateEnvoyBootstrap(BOOTSTRAP)).toEqual([]);
  });

  it("the bootstrap follows the llm-d settings it does not change on purpose", () => {
    const b = parse(BOOTSTRAP);
    const [epp, dst] = b.static_resources.clusters;
    const hcm = b.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
    const extProc = hcm.http_filters[0].typed_config;
    expect(hcm.http_filters.map((f: { name: string }) => f.name)).toEqual(llmd.httpFilters);
    expect(extProc.processing_mode).toEqual(llmd.extProc.processingMode);
    expect(extProc.grpc_service.envoy_grpc.cluster_name).toBe(llmd.extProc.grpcCluster);
    expect(extProc.message_timeout).toBe(llmd.extProc.messageTimeout);
    expect(epp.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: llmd.eppCluster.endpoint.address,
      port_value: llmd.eppCluster.endpoint.port,
    });
    expect({ type: dst.type, lb_policy: dst.lb_policy, ...dst.original_dst_lb_config }).toEqual({
      type: llmd.destinationCluster.type,
      lb_policy: llmd.destinationCluster.lb_policy,
      ...llmd.destinationCluster.original_dst_lb_config,
    });
    expect(b.admin.address.socket_address).toEqual({ address: "127.0.0.1", port_value: 9901 });
    expect(hcm.route_config.virtual_hosts[0].routes[0].route.timeout).toBe("3600s");
  });

  it("accepts lowerCamelCase JSON names as Envoy's loader does", () => {
    const camel = mutate("stat_prefix: inference", "statPrefix: inference");
    expect(validateEnvoyBootstrap(mutate("port_value: 9901", "portValue: 9901", camel))).toEqual([]);
  });

  it("reads YAML scalars as Envoy does: quoted numbers are strings, keys tagged !ignore are dropped", () => {
    expect(validateEnvoyBootstrap(mutate("port_value: 9901", 'port_value: "9901"'))).toEqual([]);
    expect(validateEnvoyBootstrap(mutate("  cluster: rbln-serving\n", "  cluster: rbln-serving\n  !ignore scratch: {any: thing}\n"))).toEqual([]);
    // yaml-cpp reads a plain `on` as a boolean, which a string field refuses.
    expectRefused(mutate("  cluster: rbln-serving\n", "  cluster: on\n"), "Node.cluster", "expected string");
  });

  describe("refuses", () => {
    it("an unknown field at every depth", () => {
      expectRefused(`${BOOTSTRAP}bogus: 1\n`, "envoy.config.bootstrap.v3.Bootstrap: unknown field", "bogus");
      expectRefused(
        mutate("  - name: inference\n    address:", "  - name: inference\n    bogus: 1\n    address:"),
        "envoy.config.listener.v3.Listener: unknown field",
      );
      expectRefused(mutate("stat_prefix: inference", "stat_prefix: inference\n          bogus: 1"), "HttpConnectionManager: unknown field");
      expectRefused(
        mutate("request_header_mode: SEND", "request_header_mode: SEND\n                bogus_mode: SEND"),
        "envoy.extensions.filters.http.ext_proc.v3.ProcessingMode: unknown field",
        "bogus_mode",
      );
      expectRefused(mutate("http_header_name: x-gateway", "header_name: x-gateway"), "OriginalDstLbConfig: unknown field");
    });

    it("an enum name the enum does not have, and one in another case", () => {
      expectRefused(mutate("request_body_mode: FULL_DUPLEX_STREAMED", "request_body_mode: FULL_DUPLEX"), "unknown enum value", "FULL_DUPLEX");
      expectRefused(mutate("lb_policy: LEAST_REQUEST", "lb_policy: least_request"), "Cluster.lb_policy: unknown enum value");
      expectRefused(mutate("type: STATIC", "type: 17"), "17 is not a value of envoy.config.cluster.v3.Cluster.DiscoveryType");
    });

    it("an unknown @type, and an @type without a host", () => {
      expectRefused(
        mutate("envoy.extensions.filters.http.router.v3.Router", "envoy.extensions.filters.http.router.v3.Routr"),
        "unknown @type: envoy.extensions.filters.http.router.v3.Routr",
      );
      expectRefused(mutate("type.googleapis.com/envoy.extensions.access_loggers", "envoy.extensions.access_loggers"), "should start with type.googleapis.com/");
    });

    it("a typed_config of the wrong type for its filter", () => {
      // An upstream-options message where an HTTP filter goes.
      expectRefused(
        mutate(
          "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
          "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        ),
        "HttpProtocolOptions is not an extension of envoy.filters.http",
      );
      // The router's message under the ext_proc filter's name.
      const routerAsExtProc = mutate(
        `              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service:
                envoy_grpc:
                  cluster_name: epp
                  authority: localhost:9002
                timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              message_timeout: 600s
`,
        `              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`,
      );
      expectRefused(routerAsExtProc, "envoy.filters.http.ext_proc is configured by envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor");
      // A network filter that gets an HTTP filter's message.
      expectRefused(
        mutate(
          "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
          "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
        ),
        "unknown field",
      );
      // Protocol options under a key that is not the options' name.
      expectRefused(
        mutate("      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n", "      envoy.filters.network.http_connection_manager:\n"),
        "the key must be envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
      );
    });

    it("a duration not written as Envoy's JSON mapping writes it, or out of range", () => {
      expectRefused(mutate("timeout: 3600s", "timeout: 3600"), "google.protobuf.Duration: expected duration string");
      expectRefused(mutate("timeout: 3600s", "timeout: 1h"), "invalid duration");
      expectRefused(mutate("timeout: 3600s", "timeout: {seconds: 3600}"), "expected duration string");
      expectRefused(mutate("connect_timeout: 86400s", "connect_timeout: 0s"), "static_resources.clusters[0].connect_timeout: 0s must be > 0s");
      expectRefused(mutate("message_timeout: 600s", "message_timeout: 7200s"), "message_timeout: 7200s must be <= 3600s");
    });

    it("a oneof set twice", () => {
      expectRefused(mutate("port_value: 9901", "port_value: 9901, named_port: admin"), "multiple values for oneof port_specifier");
      expectRefused(mutate('match: { prefix: "/" }', 'match: { prefix: "/", path: "/v1" }'), "multiple values for oneof path_specifier");
      expectRefused(
        mutate("          route_config:\n", "          rds: { route_config_name: x }\n          route_config:\n"),
        "multiple values for oneof route_specifier",
      );
    });

    it("what protoc-gen-validate refuses: ports out of range, empty strings, required oneofs", () => {
      expectRefused(mutate("port_value: 9901", "port_value: 70000"), "admin.address.socket_address.port_value: 70000 must be <= 65535");
      expectRefused(mutate("address: 127.0.0.1, port_value: 9901", "address: '', port_value: 9901"), "socket_address.address: must be at least 1");
      expectRefused(mutate("stat_prefix: inference", "generate_request_id: true"), "HttpConnectionManager>.stat_prefix: must be at least 1");
      expectRefused(mutate('match: { prefix: "/" }', "match: {}"), "one of prefix, path, safe_regex");
      expectRefused(mutate("      - name: envoy.filters.network.http_connection_manager\n", "      - name: ''\n"), "filters[0].name: must be at least 1");
    });

    it("what Envoy refuses when it builds the filters and clusters", () => {
      expectRefused(
        mutate("request_trailer_mode: SEND", "request_trailer_mode: SKIP"),
        "request_body_mode FULL_DUPLEX_STREAMED needs request_trailer_mode SEND",
      );
      expectRefused(mutate("lb_policy: CLUSTER_PROVIDED", "lb_policy: ROUND_ROBIN"), "LB policy ROUND_ROBIN is not valid for cluster type ORIGINAL_DST");
      expectRefused(mutate("lb_policy: LEAST_REQUEST", "lb_policy: CLUSTER_PROVIDED"), "CLUSTER_PROVIDED is not valid for cluster type STATIC");
      expectRefused(mutate("cluster: original_destination_cluster", "cluster: original_dst"), 'unknown cluster "original_dst"');
      expectRefused(mutate("cluster_name: epp\n                  authority", "cluster_name: ep\n                  authority"), 'unknown cluster "ep"');
      expectRefused(mutate("use_http_header: true", "use_http_header: false"), "http_header_name is set but use_http_header is false");
      const routerFirst = mutate(ROUTER_FILTER, "").replace("          http_filters:\n", `          http_filters:\n${ROUTER_FILTER}`);
      expectRefused(routerFirst, "terminal filter envoy.filters.http.router must be the last filter");
    });

    it("YAML Envoy would read differently or not at all", () => {
      expectRefused(mutate("stat_prefix: inference", "stat_prefix: inference\n          stat_prefix: other"), "YAML: Map keys must be unique");
      expectRefused("- just\n- a list\n", "the bootstrap must be a mapping");
      expectRefused("admin: [unclosed\n", "YAML:");
    });
  });
});
