import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { stringify as stringifyYaml } from "yaml";
import { envoyBootstrap } from "../../core/render/hosts/frontDoor/envoy";
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
  const archive = spawnSync("tar", ["-c", "-C", FIXTURES, "--exclude=__pycache__", "--exclude=*.state", "stand-ins", "llm-d-router-v0.10.0"], {
    maxBuffer: 64 * 1024 * 1024,
  });
  if (archive.status !== 0) throw new Error(`tar: ${archive.stderr}`);
  const state = `${dir}/stand-ins/container-runtime-stand-in.state`;
  const result = await host.run(
    `set -e; install -d ${dir}; base64 -d | tar -x -C ${dir}; install -d ${state}; printf '%s' ${host.address} > ${state}/host-address`,
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
