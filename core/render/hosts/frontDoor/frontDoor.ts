import { createHash } from "node:crypto";
import { hostPort, httpUrl, publishSpec } from "../../../address";
import { durationSeconds } from "../../../config/defaults";
import type { Host } from "../../../config/schema";
import type { ScrapeTarget } from "../../../monitoring/targets";
import { frontDoorAddresses } from "../../../plan/frontDoor";
import { modelLabel } from "../../../plan/stack";
import { type EppPorts, FRONT_DOOR_PORTS, modelEppPorts, PEER_EPP_PORT } from "../../../plan/ports";
import type { Deployment, FrontDoorPlan, RouterPlacement } from "../../../plan/types";
import { hostCacheLayout } from "../cacheLayout";
import { hostWaves } from "../../../rollout/hostWaves";
import { HOST_DEFAULTS } from "../defaults";
import { frontDoorStateDir, sidecarUnitName } from "../names";
import { frontDoorAccess } from "../rank";
import {
  commandStepWaits,
  containerStopTimeoutSeconds,
  drainWaitSeconds,
  frontDoorApplyWaits,
  sidecarStepWaits,
  timeoutsOf,
  tlsStepWaits,
  type StepTimeouts,
} from "../stepTimeouts";
import { frontDoorSettings, HOST_SCRIPT_DIR } from "../scripts";
import { execStartLine, quoteExecWord } from "../systemd";
import { packageFile, renderScript, renderTemplate } from "../../../template";
import { secretPlaceholder } from "../../../config/secrets";
import { apiKeyFilterConfig, envoyBootstrap } from "./envoy";
import { fileModePickerConfig } from "./eppConfig";
import { keepalivedConfig } from "./keepalived";
import { sidecarFirewall } from "./sidecarFirewall";

const AGENT_FILE = `${HOST_SCRIPT_DIR}/front-door.py`;
/** Where the EPP and Envoy see their files, in their containers. */
const EPP_DIR = "/etc/epp";
export const ENVOY_DIR = "/etc/envoy";
/** The API key filter's config, in Envoy's folder (ECDS from a file, read by its .json). */
export const API_KEY_CONFIG = "api-key.json";

/** A decode host's routing sidecar: its unit and the step that applies it. */
export interface RenderedSidecar {
  host: string;
  unitName: string;
  unitText: string;
  applyScript: string;
  removeScript: string;
  /** Its step's Pulumi timeouts: the image pull, the drain of the host's endpoints, the restart and the answer (stepTimeouts.ts). */
  timeouts: StepTimeouts;
}

/** One host's key to the front door, for its own endpoints only: made and let in on the router host (stdout: the key), and revoked. */
export interface RenderedDrainAccess {
  /** The host whose steps drain with it. */
  host: string;
  accessScript: string;
  revokeScript: string;
}

/** One router host of the front door, rendered: its steps and files. */
export interface RenderedRouterHost {
  /** The router host, reached over SSH. */
  host: Host;
  /** Where this router host's Envoy takes requests (its own address; clients use the front door's urls). */
  url: string;
  /** A key per host with endpoints behind the front door, on this router host, in the stack's order of hosts. */
  access: RenderedDrainAccess[];
  /**
   * The apply step; its stdin: with several router hosts, the CA and this host's certificate and key
   * (its tls step's stdout), then with `apiKey` Envoy's API key filter config.
   */
  applyScript: string;
  removeScript: string;
  /** What the router host holds, by path under the deployment's folder there, for `render` (the API key as a placeholder). */
  files: Record<string, string>;
  /** With `apiKey`: where the apply step writes Envoy's API key filter config (apiKeyFilterConfig) from its stdin; null without. */
  apiKeyConfig: string | null;
  /** The Pulumi timeouts of the router host's steps, from what each waits for (stepTimeouts.ts). */
  timeouts: { apply: StepTimeouts; access: StepTimeouts };
}

/** The front door on hosts, rendered: each router host's steps and files, and the sidecars'. */
export interface RenderedFrontDoor {
  /** The router hosts, in the stack's order: their steps run one after the other, so a change rolls. */
  routers: RenderedRouterHost[];
  /**
   * With several router hosts: on the first, a step per router host that makes the stack's CA (once)
   * and that host's certificate (core/render/hosts/scripts/front-door-tls.sh); its stdout (a secret) is what that
   * host's apply step reads. Null with one router host.
   */
  tls: { host: Host; steps: { router: string; script: string; removeScript: string }[]; timeouts: StepTimeouts } | null;
  /** Where clients send every request: the virtual address, else each router host. */
  urls: string[];
  sidecars: RenderedSidecar[];
  /** Each router host's EPP metrics endpoint, for Prometheus beside the ranks'. */
  scrapeTargets: ScrapeTarget[];
}

export interface FrontDoorOptions {
  /** The deployment id (`deploymentId`): it names the units, containers and folders. */
  id: string;
  /** The container runtime's path: `router.runtime`'s binary, or a test's stand-in. */
  runtimePath?: string;
  /** nft's path on the decode hosts, or a test's stand-in. */
  firewallPath?: string;
  /** `apiKey` is set: Envoy asks every request for it. */
  apiKey?: boolean;
  /** root's authorized_keys on the router host, where the hosts' key goes. */
  authorizedKeysFile?: string;
  /** A model of a stack of models: its EPP's slot (modelEppSlots), which gives its ports; the one EPP's ports otherwise. */
  eppSlot?: number;
}

/** What every part of one front door's rendering shares. */
export interface DoorContext {
  deployment: Deployment;
  frontDoor: FrontDoorPlan;
  id: string;
  /** The container runtime's path on the router and decode hosts. */
  runtime: string;
  /** The runtime's daemon unit, which the containers' units need (docker); none for podman. */
  daemon: string | null;
  /** nft on the decode hosts. */
  firewall: string;
  /** `apiKey` is set. */
  apiKey: boolean;
  /** The deployment's folder on the router host. */
  stateDir: string;
  /** The endpoints agent's text and where it goes, named by its content: the access key's forced command names the agent it was made with. */
  agent: { text: string; path: string };
  /** This deployment's EPP's ports on the router host: the one EPP's, or its model's (modelEppPorts). */
  ports: EppPorts;
}

export function doorContext(deployment: Deployment, options: FrontDoorOptions): DoorContext {
  const frontDoor = deployment.frontDoor!;
  const { installRoot } = deployment.settings;
  const text = packageFile(AGENT_FILE);
  return {
    deployment,
    frontDoor,
    id: options.id,
    runtime: options.runtimePath ?? HOST_DEFAULTS.frontDoor.runtimes[frontDoor.runtime],
    daemon: frontDoor.runtime === "docker" ? "docker.service" : null,
    firewall: options.firewallPath ?? HOST_DEFAULTS.frontDoor.firewall,
    apiKey: options.apiKey ?? false,
    stateDir: frontDoorStateDir(installRoot, options.id),
    agent: { text, path: `${installRoot}/bin/front-door-${createHash("sha256").update(text).digest("hex").slice(0, 12)}.py` },
    ports: modelEppPorts(options.eppSlot ?? null),
  };
}

/**
 * A container's systemd unit: run in the foreground by the runtime, stopped with the runtime's own
 * stop (SIGTERM, then `stop` seconds); `before`, a command each start runs first.
 */
function containerUnit(
  door: DoorContext,
  description: string,
  container: string,
  lines: readonly (readonly string[])[],
  options: { stop?: number; before?: readonly string[] } = {},
): string {
  const { stop = HOST_DEFAULTS.frontDoor.containerStopSeconds, before } = options;
  return renderTemplate("core/render/hosts/templates/container.service", {
    managed_marker: HOST_DEFAULTS.managedMarker,
    description,
    runtime_service: door.daemon,
    runtime: door.runtime,
    container,
    exec_start_before: before ? `ExecStartPre=${before.map(quoteExecWord).join(" ")}` : null,
    exec_start: execStartLine([[door.runtime, "run", "--rm", "--name", container, "--pull", "never"], ...lines]),
    stop_s: stop,
    timeout_stop_s: containerStopTimeoutSeconds(stop),
  });
}

/** Several router hosts: each Envoy falls back to the peers' EPPs, over mutual TLS. */
export const failsOver = (door: DoorContext) => door.frontDoor.routers.length > 1;

/** A router host as its peers reach its EPPs: its name (its certificate's), address and peer port. */
export const peerEpp = (r: RouterPlacement) => ({ name: r.host.name, address: r.address, port: PEER_EPP_PORT });

/** The front door's units on one router host, env-less: the EPP (gRPC on loopback only), Envoy (host network), the agent, and keepalived with a virtual address. */
export function routerUnits(door: DoorContext, router: RouterPlacement) {
  const { frontDoor, id, stateDir } = door;
  const name = (part: string) => ({ unit: `rbln-serving-${id}.front-door-${part}.service`, container: `rbln-serving-${id}-${part}` });
  const [epp, proxy, agent, vrrp] = [name("epp"), name("proxy"), name("agent"), name("keepalived")];
  const ports = door.ports;
  const failover = failsOver(door);
  return {
    names: [epp.unit, proxy.unit, agent.unit],
    epp: containerUnit(
      door,
      `rbln-serving front door ${id}: endpoint picker`,
      epp.container,
      [
        // The EPP has no bind-address flag: its ports are published, gRPC and health on loopback only, so
        // Envoy alone reaches them and --secure-serving=false stays on this host (the peers' Envoys reach it through this Envoy, over TLS).
        ["--publish", publishSpec("127.0.0.1", ports.eppGrpc)],
        ["--publish", publishSpec("127.0.0.1", ports.eppHealth)],
        ["--publish", publishSpec(router.listenAddress, ports.eppMetrics)],
        ["--volume", `${stateDir}/epp:${EPP_DIR}:ro,z`],
        [frontDoor.images.endpointPicker],
        [`--config-file=${EPP_DIR}/epp.yaml`],
        [`--pool-name=${id}`, `--pool-namespace=${HOST_DEFAULTS.frontDoor.poolNamespace}`],
        ["--secure-serving=false", "--tracing=false"],
        [`--grpc-port=${ports.eppGrpc}`, `--grpc-health-port=${ports.eppHealth}`, `--metrics-port=${ports.eppMetrics}`],
      ],
      // Its stop lets its streams finish (v0.10.0's gracefulStop), while Envoy sends new requests to a peer's EPP.
      failover ? { stop: eppStopSeconds(door) } : {},
    ),
    proxy: containerUnit(door, `rbln-serving front door ${id}: Envoy`, proxy.container, [
      ["--network", "host"],
      ["--volume", `${stateDir}/envoy:${ENVOY_DIR}:ro,z`],
      [frontDoor.images.proxy],
      ["-c", `${ENVOY_DIR}/envoy.yaml`, "--log-level", "info"],
      ...(failover ? [["--drain-time-s", String(HOST_DEFAULTS.frontDoor.failover.envoyDrainSeconds), "--drain-strategy", "immediate"]] : []),
    ]),
    agent: renderTemplate("core/render/hosts/templates/agent.service", {
      managed_marker: HOST_DEFAULTS.managedMarker,
      description: `rbln-serving front door ${id}: endpoints agent`,
      agent_path: door.agent.path,
      state_dir: stateDir,
    }),
    keepalived: frontDoor.virtualAddress
      ? {
          name: vrrp.unit,
          text: renderTemplate("core/render/hosts/templates/keepalived.service", {
            managed_marker: HOST_DEFAULTS.managedMarker,
            description: `rbln-serving front door ${id}: keepalived (VRRP) for ${frontDoor.virtualAddress}`,
            proxy_unit: proxy.unit,
            keepalived: HOST_DEFAULTS.frontDoor.failover.keepalived,
            config: `${stateDir}/keepalived/keepalived.conf`,
            name: vrrp.container,
          }),
        }
      : null,
  };
}

/** What the agent keeps the EPP's endpoints file to (desired.json): every endpoint with its rollout wave, and the drain's bounds. */
function desiredEndpoints(deployment: Deployment, frontDoor: FrontDoorPlan) {
  const { settings } = deployment;
  const defaults = HOST_DEFAULTS.frontDoor;
  const cache = hostCacheLayout(settings);
  // Each endpoint's rollout wave: a drain does not wait for a server that changes only after it.
  const waveOf = new Map(hostWaves(deployment).flatMap((wave, k) => wave.map((p) => [p.host.name, k] as const)));
  return {
    namespace: defaults.poolNamespace,
    endpoints: frontDoor.endpoints.map((e) => ({ ...e, wave: waveOf.get(e.host)! })),
    allowEmpty: settings.rollout.allowEmptyFrontDoor,
    // A role's other server may be starting, even compiling: wait as long as a rank may take to serve.
    drainWaitSeconds: drainWaitSeconds(deployment, cache),
    settleSeconds: defaults.settleSeconds,
    // A drain its step stopped renewing (the step died, or cannot reach the router) ends after this.
    drainLeaseSeconds: defaults.drainLeaseSeconds,
    intervalSeconds: defaults.intervalSeconds,
    probeTimeoutSeconds: defaults.probeTimeoutSeconds,
  };
}

/** One router host's config files: the EPP's, Envoy's bootstrap, the agent's desired endpoints, and keepalived's with a virtual address. */
export function routerFiles(door: DoorContext, router: RouterPlacement) {
  const { deployment, frontDoor } = door;
  const peers = frontDoor.routers.filter((r) => r !== router);
  return {
    "epp/epp.yaml": fileModePickerConfig(deployment.plan, `${EPP_DIR}/endpoints.yaml`),
    "envoy/envoy.yaml": envoyBootstrap({
      listenAddress: router.listenAddress,
      port: frontDoor.port,
      adminPort: FRONT_DOOR_PORTS.envoyAdmin,
      eppGrpcPort: door.ports.eppGrpc,
      requestTimeoutSeconds: durationSeconds(deployment.settings.router.requestTimeout),
      failover: failsOver(door)
        ? { eppHealthPort: door.ports.eppHealth, self: peerEpp(router), peers: peers.map(peerEpp), tlsDir: `${ENVOY_DIR}/tls` }
        : undefined,
      apiKeyConfigPath: door.apiKey ? `${ENVOY_DIR}/${API_KEY_CONFIG}` : undefined,
    }),
    "desired.json": `${JSON.stringify(desiredEndpoints(deployment, frontDoor), null, 2)}\n`,
    ...(frontDoor.virtualAddress ? { "keepalived/keepalived.conf": routerVrrpConfig(door, router)! } : {}),
  };
}

/** keepalived's config on one router host, with a virtual address; null without. */
export function routerVrrpConfig(door: DoorContext, router: RouterPlacement): string | null {
  const { frontDoor } = door;
  if (!frontDoor.virtualAddress) return null;
  return keepalivedConfig({
    id: door.id,
    routerName: router.host.name,
    ownAddress: router.host.address,
    peerAddresses: frontDoor.routers.filter((r) => r !== router).map((r) => r.host.address),
    virtualAddress: frontDoor.virtualAddress,
    priority: router.priority,
    adminPort: FRONT_DOOR_PORTS.envoyAdmin,
    interfaceFile: `${door.stateDir}/keepalived/interface.conf`,
  });
}

/** A decode host's routing sidecar: its unit, and the steps that apply it (draining the host's endpoints first) and remove it. */
function renderSidecar(door: DoorContext, sidecar: FrontDoorPlan["sidecars"][number]): RenderedSidecar {
  const { deployment, frontDoor, id } = door;
  const placement = deployment.placements.find((p) => p.host.name === sidecar.host)!;
  const unitName = sidecarUnitName(id);
  const unitPath = `${HOST_DEFAULTS.systemdUnitDir}/${unitName}`;
  const ports = Array.from({ length: sidecar.dataParallelSize }, (_, r) => sidecar.port + r);
  const firewall = sidecarFirewall(id, frontDoor, ports);
  const unitText = containerUnit(
    door,
    `rbln-serving ${id}: routing sidecar`,
    `rbln-serving-${id}-sidecar`,
    [
      ["--network", "host"],
      [frontDoor.images.sidecar],
      [`--port=${sidecar.port}`, `--model-server-port=${sidecar.modelServerPort}`, `--data-parallel-size=${sidecar.dataParallelSize}`],
      // Plain HTTP: Envoy and the EPP reach the ports over it, and only they (the guard below).
      ["--kv-connector=nixlv2", "--secure-proxy=false"],
    ],
    // Before every start, a reboot's too: its ports open to the router hosts and this host only.
    { before: [door.firewall, firewall.ruleset] },
  );
  const access = frontDoorAccess(deployment, placement.host, () => true)!;
  return {
    host: sidecar.host,
    unitName,
    unitText,
    applyScript: renderScript(`${HOST_SCRIPT_DIR}/sidecar-apply.sh`, `routing sidecar ${unitName} on ${sidecar.host}`, {
      host_name: sidecar.host,
      runtime: door.runtime,
      images: [frontDoor.images.sidecar],
      unit: unitName,
      unit_path: unitPath,
      unit_text: unitText,
      ports: ports.map(String),
      firewall: door.firewall,
      ready_timeout_s: HOST_DEFAULTS.frontDoor.sidecarReadyTimeoutSeconds,
      ...frontDoorSettings(access),
      front_door_endpoint: access.endpoints.join(" "),
      front_door_renew_s: access.renewSeconds,
    }),
    removeScript: renderScript(`${HOST_SCRIPT_DIR}/sidecar-remove.sh`, `remove ${unitName} from ${sidecar.host}`, {
      host_name: sidecar.host,
      unit: unitName,
      unit_path: unitPath,
      firewall: door.firewall,
      firewall_removal: firewall.removal,
    }),
    timeouts: timeoutsOf(sidecarStepWaits(deployment, hostCacheLayout(deployment.settings), placement.host, access.endpoints.length)),
  };
}

/**
 * Each host's key to the front door on one router host: one per host with endpoints behind it,
 * accepted only from that host's address and only for its own endpoints, so root on one host cannot
 * drain another's. The tag names the host; it never contains the one shared key's tag of before
 * (`rbln-serving-front-door <id>`), whose revoke checks that no line with it is left.
 */
export function drainAccess(door: DoorContext, options: FrontDoorOptions, router: Host): RenderedDrainAccess[] {
  const { deployment, frontDoor, id, stateDir } = door;
  const hosts = deployment.placements.map((p) => p.host).filter((h) => frontDoor.endpoints.some((e) => e.host === h.name));
  return hosts.map((host) => {
    const access = {
      host_name: router.name,
      state_dir: stateDir,
      authorized_keys: options.authorizedKeysFile ?? HOST_DEFAULTS.copy.authorizedKeys,
      tag: `rbln-serving-front-door-drain ${id} ${host.name}`,
      drain_host: host.name,
    };
    return {
      host: host.name,
      accessScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-access.sh`, `${host.name}'s key to the front door on ${router.name}`, {
        ...access,
        // As sshd sees it connect: the host's steps bind their SSH to it (frontDoorAccess).
        from_address: host.address,
        agent_path: door.agent.path,
      }),
      revokeScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-revoke.sh`, `remove ${host.name}'s front door key from ${router.name}`, access),
    };
  });
}

/** One router host's steps: each host's drain key in and out, and the front door's units and files applied and removed. */
function routerScripts(door: DoorContext, options: FrontDoorOptions, router: RouterPlacement): RenderedRouterHost {
  const { frontDoor, id, stateDir } = door;
  const { host } = router;
  const units = routerUnits(door, router);
  const files = routerFiles(door, router);
  const failover = failsOver(door);
  const allUnits = [...units.names, ...(units.keepalived ? [units.keepalived.name] : [])];
  return {
    host,
    url: httpUrl(router.address, frontDoor.port),
    access: drainAccess(door, options, host),
    applyScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-apply.sh`, `front door ${id} on ${host.name}: EPP, Envoy and the endpoints agent`, {
      host_name: host.name,
      state_dir: stateDir,
      runtime: door.runtime,
      images: [frontDoor.images.endpointPicker, frontDoor.images.proxy],
      agent_path: door.agent.path,
      agent_text: door.agent.text,
      epp_config: files["epp/epp.yaml"],
      envoy_config: files["envoy/envoy.yaml"],
      api_key: String(door.apiKey),
      api_key_config: `${stateDir}/envoy/${API_KEY_CONFIG}`,
      envoy_uid: HOST_DEFAULTS.frontDoor.envoyUid,
      desired_json: files["desired.json"],
      unit_dir: HOST_DEFAULTS.systemdUnitDir,
      units: units.names,
      epp_unit: units.epp,
      proxy_unit: units.proxy,
      agent_unit: units.agent,
      // The front door listens there (or everywhere: then on loopback too).
      probe_address: ["0.0.0.0", "::"].includes(router.listenAddress) ? (router.listenAddress === "::" ? "::1" : "127.0.0.1") : router.listenAddress,
      front_door_port: frontDoor.port,
      epp_metrics_port: door.ports.eppMetrics,
      ready_timeout_s: HOST_DEFAULTS.frontDoor.readyTimeoutSeconds,
      settle_s: HOST_DEFAULTS.frontDoor.settleSeconds,
      ...failoverSettings(door, router, failover ? host.name : "", units.keepalived, files["keepalived/keepalived.conf"] ?? ""),
    }),
    removeScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-remove.sh`, `remove front door ${id} from ${host.name}`, {
      host_name: host.name,
      state_dir: stateDir,
      unit_dir: HOST_DEFAULTS.systemdUnitDir,
      units: allUnits,
    }),
    files: {
      ...files,
      ...(door.apiKey ? { [`envoy/${API_KEY_CONFIG}`]: apiKeyFilterConfig(secretPlaceholder("apiKey")) } : {}),
      ...Object.fromEntries(
        [
          ...units.names.map((name, i) => [name, [units.epp, units.proxy, units.agent][i]!]),
          ...(units.keepalived ? [[units.keepalived.name, units.keepalived.text]] : []),
        ].map(([name, text]) => [`systemd/${name}`, text]),
      ),
    },
    apiKeyConfig: door.apiKey ? `${stateDir}/envoy/${API_KEY_CONFIG}` : null,
    timeouts: { apply: timeoutsOf(frontDoorApplyWaits(host, failover ? failoverWaits(door) : null)), access: timeoutsOf(commandStepWaits(host)) },
  };
}

/** How long a stopping EPP of several router hosts gets: its in-flight streams finish (v0.10.0's gracefulStop), as long as a stopping rank lets its own. */
const eppStopSeconds = (door: DoorContext) => door.deployment.shutdownTimeoutSeconds;

/** What a router host's apply step waits for beyond one router host's (front-door-roll.sh): the hand-over of the address, Envoy's drain, the EPP's longer stop. */
export function failoverWaits(door: DoorContext) {
  return {
    takeoverSeconds: HOST_DEFAULTS.frontDoor.failover.takeoverSeconds,
    envoyDrainSeconds: door.deployment.shutdownTimeoutSeconds,
    eppStopSeconds: eppStopSeconds(door),
    keepalived: door.frontDoor.virtualAddress !== null,
  };
}

/** The apply step's settings for a front door of several router hosts (front-door-roll.sh); empty ones with one router host. */
export function failoverSettings(
  door: DoorContext,
  router: RouterPlacement,
  tlsName: string,
  keepalived: { name: string; text: string } | null,
  keepalivedConfig: string,
) {
  const failover = HOST_DEFAULTS.frontDoor.failover;
  return {
    tls_name: tlsName,
    keepalived: failover.keepalived,
    keepalived_unit_name: keepalived?.name ?? "",
    keepalived_unit: keepalived?.text ?? "",
    keepalived_config: keepalivedConfig,
    own_address: router.host.address,
    virtual_address: door.frontDoor.virtualAddress ?? "",
    admin_port: FRONT_DOOR_PORTS.envoyAdmin,
    epp_grpc_port: door.ports.eppGrpc,
    // A planned restart lets Envoy's in-flight requests run as long as a stopping rank lets its own.
    drain_timeout_s: failoverWaits(door).envoyDrainSeconds,
    takeover_s: failover.takeoverSeconds,
  };
}

/** The first router host's steps that make the stack's TLS certificates for a front door of several router hosts: one per router host, so each gets its own key only. */
export function renderTls(door: DoorContext): RenderedFrontDoor["tls"] {
  const { frontDoor, id, stateDir } = door;
  if (!failsOver(door)) return null;
  const host = frontDoor.routers[0]!.host;
  const issuer = `${stateDir}/tls-issuer`;
  return {
    host,
    steps: frontDoor.routers.map(({ host: { name } }) => ({
      router: name,
      script: renderScript(`${HOST_SCRIPT_DIR}/front-door-tls.sh`, `the front door's TLS certificate for ${name}, on ${host.name}`, {
        host_name: host.name,
        state_dir: stateDir,
        id,
        routers: [name],
        days: HOST_DEFAULTS.frontDoor.failover.tlsDays,
      }),
      // The CA goes with the last certificate.
      removeScript: `#!/usr/bin/env bash\n# rbln-serving: remove ${name}'s front door certificate from ${host.name}\nrm -f ${issuer}/host-${name}.*\ncompgen -G '${issuer}/host-*' >/dev/null || rm -rf ${issuer}\n`,
    })),
    timeouts: timeoutsOf(tlsStepWaits(host, frontDoor.routers.length)),
  };
}

/** The front door of a hosts deployment with router hosts: each router host's steps and files, the TLS step, the sidecars' steps. */
export function renderFrontDoor(deployment: Deployment, options: FrontDoorOptions): RenderedFrontDoor {
  const door = doorContext(deployment, options);
  const { frontDoor } = door;
  return {
    routers: frontDoor.routers.map((router) => routerScripts(door, options, router)),
    tls: renderTls(door),
    urls: frontDoorAddresses(frontDoor).map((address) => httpUrl(address, frontDoor.port)),
    sidecars: frontDoor.sidecars.map((sidecar) => renderSidecar(door, sidecar)),
    scrapeTargets: frontDoor.routers.map((router) => ({
      targets: [hostPort(router.address, door.ports.eppMetrics)],
      // No rank: the dashboard's and the alerts' rank panels leave it out.
      labels: { host: router.host.name, role: "endpoint-picker", rank: "", model: modelLabel(deployment), strategy: deployment.plan.strategy },
    })),
  };
}
