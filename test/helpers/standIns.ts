import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { stringify as stringifyYaml } from "yaml";
import { envoyBootstrap } from "../../core/render/hosts/frontDoor/envoy";
import { renderScript } from "../../core/template";
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
 * Puts the front door's stand-ins (test/fixtures/stand-ins, with the llm-d-router facts they read and the Lua harness the Envoy stand-in runs scripts in) on
 * a fake host under `dir`, a path the host has to itself (HostOptions.privatePaths): the runtime
 * stand-in keeps its state beside itself, so each host has its own images and containers, and its
 * state's host-address makes "all interfaces" and "loopback" mean the host's own address there
 * (not with `ownNetwork`: a host on a network of its own has its own loopback).
 * Returns the runtime's path, the RUNTIME the router's units run.
 */
export async function installStandIns(host: TestHost, dir: string, { ownNetwork = false } = {}): Promise<string> {
  const archive = spawnSync("tar", ["-c", "-C", FIXTURES, "--exclude=__pycache__", "--exclude=*.state", "stand-ins", "llm-d-router-v0.10.0", "lua"], {
    maxBuffer: 64 * 1024 * 1024,
  });
  if (archive.status !== 0) throw new Error(`tar: ${archive.stderr}`);
  const state = `${dir}/stand-ins/container-runtime-stand-in.state`;
  const result = await host.run(
    // A host on a network of its own (HostOptions.network) has its own loopback: there "loopback" means loopback.
    `set -e; install -d ${dir}; base64 -d | tar -x -C ${dir}; install -d ${state}; ${ownNetwork ? "true" : `printf '%s' ${host.address} > ${state}/host-address`}`,
    archive.stdout.toString("base64"),
  );
  if (result.status !== 0 || result.stderr !== "") throw new Error(`installing the stand-ins on ${host.name}: ${result.stderr}`);
  return `${dir}/stand-ins/container-runtime-stand-in`;
}

/** The nft stand-in beside an installed runtime stand-in: for hosts that share this machine's network namespace, where a loaded rule set would be this machine's. */
export function nftCheckOnly(runtime: string): string {
  return path.join(path.dirname(runtime), "nft-check-only-stand-in");
}

/** Where the EPP reads its endpoints file, inside its container (its config folder is a volume). */
export const EPP_ENDPOINTS_PATH = "/etc/epp/endpoints.yaml";

/** The chart's default plugins plus file discovery: the aggregated strategies' config. */
export function aggregatedEppConfig(endpointsPath = EPP_ENDPOINTS_PATH): string {
  const config = structuredClone(configSchema.chartDefaultPlugins.config) as Record<string, unknown> & { plugins: unknown[] };
  config.plugins.push({ name: "endpoints", type: "file-discovery", parameters: { path: endpointsPath, watchFile: true } });
  config.dataLayer = { discovery: { pluginRef: "endpoints" } };
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
    endpoints: entries.map((e) => ({
      name: e.name,
      address: e.address ?? defaultAddress,
      port: e.port,
      ...(e.role ? { labels: { "llm-d.ai/role": e.role } } : {}),
    })),
  });
}

/** The front door's bootstrap as core renders it, on the given ports (admin and picker on loopback): the stand-in Envoy runs the text the router host gets. */
export function frontDoorBootstrap(ports: { listen: number; admin: number; pick: number }, requestTimeoutSeconds = 3600, apiKeyConfigPath?: string): string {
  return envoyBootstrap({
    listenAddress: "0.0.0.0",
    port: ports.listen,
    adminPort: ports.admin,
    eppGrpcPort: ports.pick,
    requestTimeoutSeconds,
    apiKeyConfigPath,
  });
}

/**
 * The stack's TLS for router hosts named `routers`, made by the script the first router host runs
 * (core/render/hosts/scripts/front-door-tls.sh) in `stateDir`, and written for each router host as its
 * apply step writes them: `<dir of that router>/tls/{ca.crt,tls.crt,tls.key}`.
 */
export function writeRouterTls(stateDir: string, routers: Record<string, string>): void {
  for (const [name, dir] of Object.entries(routers)) {
    const script = renderScript("core/render/hosts/scripts/front-door-tls.sh", "test", {
      host_name: "test",
      state_dir: stateDir,
      id: "test",
      routers: [name],
      days: 1,
    });
    const made = spawnSync("bash", ["-c", script], { encoding: "utf8" });
    if (made.status !== 0) throw new Error(`front-door-tls.sh: ${made.stderr}`);
    const lines = made.stdout
      .trim()
      .split("\n")
      .map((line) => line.split(" "));
    const [ca, own] = [lines.find((l) => l[0] === "ca")!, lines.find((l) => l[0] === name)!];
    fs.mkdirSync(path.join(dir, "tls"), { recursive: true });
    fs.writeFileSync(path.join(dir, "tls", "ca.crt"), Buffer.from(ca[1]!, "base64"));
    fs.writeFileSync(path.join(dir, "tls", "tls.crt"), Buffer.from(own[1]!, "base64"));
    fs.writeFileSync(path.join(dir, "tls", "tls.key"), Buffer.from(own[2]!, "base64"), { mode: 0o600 });
  }
}

/** The bootstrap of one of two router hosts, as core renders it, on the given ports, with the health checks every `intervalSeconds` instead of 5 (to keep the tests short). */
export function failoverBootstrap(
  ports: { listen: number; admin: number; pick: number; health: number },
  self: { name: string; address: string; port: number },
  peer: { name: string; address: string; port: number },
  intervalSeconds = 5,
): string {
  return envoyBootstrap({
    listenAddress: "0.0.0.0",
    port: ports.listen,
    adminPort: ports.admin,
    eppGrpcPort: ports.pick,
    requestTimeoutSeconds: 3600,
    failover: { eppHealthPort: ports.health, self, peers: [peer], tlsDir: "/etc/envoy/tls" },
  }).replace("interval: 5s\n", `interval: ${intervalSeconds}s\n`);
}
