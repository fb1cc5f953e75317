import { createHash } from "node:crypto";
import { hostPort, httpUrl } from "../../../address";
import { durationSeconds } from "../../../config/defaults";
import type { Host } from "../../../config/stackConfig";
import type { ScrapeTarget } from "../../../monitoring/targets";
import { FRONT_DOOR_PORTS } from "../../../plan/frontDoor";
import type { Deployment, FrontDoorPlan } from "../../../plan/types";
import { hostCacheLayout } from "../cacheLayout";
import { hostWaves } from "../../../rollout/hostWaves";
import { HOST_DEFAULTS } from "../defaults";
import { frontDoorAccess, readyTimeoutSeconds, switchSeconds } from "../rank";
import { HOST_SCRIPT_DIR } from "../scripts";
import { execStartLine } from "../systemd";
import { packageFile, renderScript, renderTemplate } from "../../../template";
import { envoyBootstrap } from "./envoy";
import { fileModePickerConfig } from "./eppConfig";

const AGENT_FILE = `${HOST_SCRIPT_DIR}/front-door.py`;
/** Where the EPP and Envoy see their files, in their containers. */
const EPP_DIR = "/etc/epp";
const ENVOY_DIR = "/etc/envoy";

/** A decode host's routing sidecar: its unit and the step that applies it. */
export interface RenderedSidecar {
  host: string;
  unitName: string;
  unitText: string;
  applyScript: string;
  removeScript: string;
}

/** The front door on hosts, rendered: the router host's steps and files, and the sidecars'. */
export interface RenderedFrontDoor {
  /** The router host, reached over SSH. */
  host: Host;
  /** Where clients send every request. */
  url: string;
  /** Makes the key the stack's hosts drain with, and lets it into the router host; stdout: the key. */
  accessScript: string;
  revokeScript: string;
  applyScript: string;
  removeScript: string;
  /** What the router host holds, by path under the deployment's folder there, for `render`. */
  files: Record<string, string>;
  sidecars: RenderedSidecar[];
  /** The EPP's metrics endpoint, for Prometheus beside the ranks'. */
  scrapeTarget: ScrapeTarget;
}

export interface FrontDoorOptions {
  /** The deployment id (`deploymentId`): it names the units, containers and folders. */
  id: string;
  /** The container runtime's path: `router.runtime`'s binary, or a test's stand-in. */
  runtimePath?: string;
  /** root's authorized_keys on the router host, where the hosts' key goes. */
  authorizedKeysFile?: string;
}

/** A container's systemd unit: run in the foreground by the runtime, stopped with the runtime's own stop. */
function containerUnit(description: string, runtime: string, daemon: string | null, container: string, lines: readonly (readonly string[])[]): string {
  const stop = HOST_DEFAULTS.frontDoor.containerStopSeconds;
  return renderTemplate("core/render/hosts/templates/container.service", {
    managed_marker: HOST_DEFAULTS.managedMarker,
    description,
    runtime_service: daemon,
    runtime,
    container,
    exec_start: execStartLine([[runtime, "run", "--rm", "--name", container, "--pull", "never"], ...lines]),
    stop_s: stop,
    timeout_stop_s: stop + 30,
  });
}

/** The front door's units, env-less: the EPP (gRPC on loopback only), Envoy (host network), the agent. */
function routerUnits(frontDoor: FrontDoorPlan, id: string, runtime: string, stateDir: string, agentPath: string) {
  const daemon = frontDoor.runtime === "docker" ? "docker.service" : null;
  const name = (part: string) => ({ unit: `rbln-serving-${id}.front-door-${part}.service`, container: `rbln-serving-${id}-${part}` });
  const [epp, proxy, agent] = [name("epp"), name("proxy"), name("agent")];
  const ports = FRONT_DOOR_PORTS;
  return {
    names: [epp.unit, proxy.unit, agent.unit],
    epp: containerUnit(`rbln-serving front door ${id}: endpoint picker`, runtime, daemon, epp.container, [
      // The EPP has no bind-address flag: its ports are published, gRPC and health on loopback only, so
      // Envoy alone reaches them and --secure-serving=false stays on this host.
      ["--publish", `127.0.0.1:${ports.eppGrpc}:${ports.eppGrpc}`],
      ["--publish", `127.0.0.1:${ports.eppHealth}:${ports.eppHealth}`],
      ["--publish", `${frontDoor.listenAddress}:${ports.eppMetrics}:${ports.eppMetrics}`],
      ["--volume", `${stateDir}/epp:${EPP_DIR}:ro,z`],
      [frontDoor.images.endpointPicker],
      [`--config-file=${EPP_DIR}/epp.yaml`],
      [`--pool-name=${id}`, `--pool-namespace=${HOST_DEFAULTS.frontDoor.poolNamespace}`],
      ["--secure-serving=false", "--tracing=false"],
      [`--grpc-port=${ports.eppGrpc}`, `--grpc-health-port=${ports.eppHealth}`, `--metrics-port=${ports.eppMetrics}`],
    ]),
    proxy: containerUnit(`rbln-serving front door ${id}: Envoy`, runtime, daemon, proxy.container, [
      ["--network", "host"],
      ["--volume", `${stateDir}/envoy:${ENVOY_DIR}:ro,z`],
      [frontDoor.images.proxy],
      ["-c", `${ENVOY_DIR}/envoy.yaml`, "--log-level", "info"],
    ]),
    agent: renderTemplate("core/render/hosts/templates/agent.service", {
      managed_marker: HOST_DEFAULTS.managedMarker,
      description: `rbln-serving front door ${id}: endpoints agent`,
      agent_path: agentPath,
      state_dir: stateDir,
    }),
  };
}

/** The front door of a hosts deployment with `router.host`: the router host's steps and files, the sidecars' steps. */
export function renderFrontDoor(deployment: Deployment, options: FrontDoorOptions): RenderedFrontDoor {
  const frontDoor = deployment.frontDoor!;
  const { settings, plan } = deployment;
  const { id } = options;
  const defaults = HOST_DEFAULTS.frontDoor;
  const runtime = options.runtimePath ?? defaults.runtimes[frontDoor.runtime];
  const stateDir = `${settings.installRoot}/router/${id}`;
  const agentText = packageFile(AGENT_FILE);
  // Named by its content: the access key's forced command names the agent it was made with.
  const agentPath = `${settings.installRoot}/bin/front-door-${createHash("sha256").update(agentText).digest("hex").slice(0, 12)}.py`;
  const units = routerUnits(frontDoor, id, runtime, stateDir, agentPath);
  const cache = hostCacheLayout(settings);
  // Each endpoint's rollout wave: a drain does not wait for a server that changes only after it.
  const waveOf = new Map(hostWaves(deployment).flatMap((wave, k) => wave.map((p) => [p.host.name, k] as const)));
  const desired = {
    namespace: defaults.poolNamespace,
    endpoints: frontDoor.endpoints.map((e) => ({ ...e, wave: waveOf.get(e.host)! })),
    allowEmpty: settings.rollout.allowEmptyFrontDoor,
    // A role's other server may be starting, even compiling: wait as long as a rank may take to serve.
    drainWaitSeconds: Math.max(...plan.roles.map((role) => readyTimeoutSeconds(cache, role.ranks[0]!.env))),
    settleSeconds: defaults.settleSeconds,
    // A drained endpoint that served throughout this was not restarted: its unit step ended without.
    switchBoundSeconds: switchSeconds(deployment),
    intervalSeconds: defaults.intervalSeconds,
    probeTimeoutSeconds: defaults.probeTimeoutSeconds,
  };
  const files = {
    "epp/epp.yaml": fileModePickerConfig(plan, `${EPP_DIR}/endpoints.yaml`),
    "envoy/envoy.yaml": envoyBootstrap({ listenAddress: frontDoor.listenAddress, port: frontDoor.port, adminPort: FRONT_DOOR_PORTS.envoyAdmin, eppGrpcPort: FRONT_DOOR_PORTS.eppGrpc, requestTimeoutSeconds: durationSeconds(settings.router.requestTimeout) }),
    "desired.json": `${JSON.stringify(desired, null, 2)}\n`,
  };
  const host = frontDoor.host;
  const access = { host_name: host.name, state_dir: stateDir, authorized_keys: options.authorizedKeysFile ?? HOST_DEFAULTS.copy.authorizedKeys, tag: `rbln-serving-front-door ${id}` };
  const sidecars = frontDoor.sidecars.map((sidecar): RenderedSidecar => {
    const placement = deployment.placements.find((p) => p.host.name === sidecar.host)!;
    const unitName = `rbln-serving-${id}.sidecar.service`;
    const unitPath = `${HOST_DEFAULTS.systemdUnitDir}/${unitName}`;
    const ports = Array.from({ length: sidecar.dataParallelSize }, (_, r) => sidecar.port + r);
    const unitText = containerUnit(`rbln-serving ${id}: routing sidecar`, runtime, frontDoor.runtime === "docker" ? "docker.service" : null, `rbln-serving-${id}-sidecar`, [
      ["--network", "host"],
      [frontDoor.images.sidecar],
      [`--port=${sidecar.port}`, `--model-server-port=${sidecar.modelServerPort}`, `--data-parallel-size=${sidecar.dataParallelSize}`],
      // Plain HTTP: Envoy and the EPP reach the ports over it.
      ["--kv-connector=nixlv2", "--secure-proxy=false"],
    ]);
    const door = frontDoorAccess(deployment, placement.host, () => true)!;
    return {
      host: sidecar.host,
      unitName,
      unitText,
      applyScript: renderScript(`${HOST_SCRIPT_DIR}/sidecar-apply.sh`, `routing sidecar ${unitName} on ${sidecar.host}`, {
        host_name: sidecar.host,
        runtime,
        images: [frontDoor.images.sidecar],
        unit: unitName,
        unit_path: unitPath,
        unit_text: unitText,
        ports: ports.map(String),
        ready_timeout_s: defaults.sidecarReadyTimeoutSeconds,
        router_ssh_address: door.address,
        router_ssh_port: door.port,
        router_ssh_host_key: door.hostKey,
        router_ssh_bind: door.bind,
        front_door_endpoint: door.endpoints.join(" "),
      }),
      removeScript: renderScript(`${HOST_SCRIPT_DIR}/sidecar-remove.sh`, `remove ${unitName} from ${sidecar.host}`, { host_name: sidecar.host, unit: unitName, unit_path: unitPath }),
    };
  });
  return {
    host,
    url: httpUrl(frontDoor.address, frontDoor.port),
    accessScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-access.sh`, `the stack's hosts' key to the front door on ${host.name}`, {
      ...access,
      from_addresses: [...new Set(deployment.placements.map((p) => p.host.address))].join(","),
      agent_path: agentPath,
    }),
    revokeScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-revoke.sh`, `remove the hosts' front door key from ${host.name}`, access),
    applyScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-apply.sh`, `front door ${id} on ${host.name}: EPP, Envoy and the endpoints agent`, {
      host_name: host.name,
      state_dir: stateDir,
      runtime,
      images: [frontDoor.images.endpointPicker, frontDoor.images.proxy],
      agent_path: agentPath,
      agent_text: agentText,
      epp_config: files["epp/epp.yaml"],
      envoy_config: files["envoy/envoy.yaml"],
      desired_json: files["desired.json"],
      unit_dir: HOST_DEFAULTS.systemdUnitDir,
      units: units.names,
      epp_unit: units.epp,
      proxy_unit: units.proxy,
      agent_unit: units.agent,
      // The front door listens there (or everywhere: then on loopback too).
      probe_address: frontDoor.listenAddress === "0.0.0.0" ? "127.0.0.1" : frontDoor.listenAddress,
      front_door_port: frontDoor.port,
      epp_metrics_port: FRONT_DOOR_PORTS.eppMetrics,
      ready_timeout_s: defaults.readyTimeoutSeconds,
    }),
    removeScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-remove.sh`, `remove front door ${id} from ${host.name}`, { host_name: host.name, state_dir: stateDir, unit_dir: HOST_DEFAULTS.systemdUnitDir, units: units.names }),
    files: { ...files, ...Object.fromEntries(units.names.map((name, i) => [`systemd/${name}`, [units.epp, units.proxy, units.agent][i]!])) },
    sidecars,
    scrapeTarget: {
      targets: [hostPort(frontDoor.address, FRONT_DOOR_PORTS.eppMetrics)],
      // No rank: the dashboard's and the alerts' rank panels leave it out.
      labels: { host: host.name, role: "endpoint-picker", rank: "", model: plan.model, strategy: plan.strategy },
    },
  };
}
