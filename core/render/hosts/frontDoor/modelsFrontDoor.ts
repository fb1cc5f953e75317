// The one front door of a stack of models on hosts (issue 30): on each router host one Envoy that
// routes by the body's model (modelRoutes.ts), and per model the EPP, endpoints agent, desired
// endpoints and drain keys a front door of that model alone has, in that model's folder and on its
// own ports (core/plan/ports.ts modelEppSlots, by the model's name). The Envoy's unit and folder are named after the stack's
// deployment id; each model's after its own (the model entry's name is in it).
import { httpUrl } from "../../../address";
import { durationSeconds } from "../../../config/defaults";
import { frontDoorAddresses } from "../../../plan/frontDoor";
import { FRONT_DOOR_PORTS, modelEppSlots } from "../../../plan/ports";
import type { Deployment, RouterPlacement } from "../../../plan/types";
import { secretPlaceholder } from "../../../config/secrets";
import { renderScript } from "../../../template";
import { HOST_DEFAULTS } from "../defaults";
import { HOST_SCRIPT_DIR } from "../scripts";
import { commandStepWaits, frontDoorApplyWaits, timeoutsOf } from "../stepTimeouts";
import { apiKeyFilterConfig, type ModelsEnvoy, modelsEnvoy } from "./envoy";
import {
  API_KEY_CONFIG,
  type DoorContext,
  doorContext,
  drainAccess,
  ENVOY_DIR,
  failoverSettings,
  failoverWaits,
  failsOver,
  type FrontDoorOptions,
  peerEpp,
  type RenderedFrontDoor,
  type RenderedRouterHost,
  renderTls,
  routerFiles,
  routerUnits,
  routerVrrpConfig,
} from "./frontDoor";
import { eppClusterName, type ModelDoor } from "./modelRoutes";

/** A model of the stack, for its part of the front door: its deployment and its deployment id (which names its EPP, agent and folder). */
export interface FrontDoorModel {
  deployment: Deployment;
  id: string;
}

/** Envoy's routes (RDS) and the EPPs' clusters (CDS), in its folder: files of their own, so a model added or removed changes no bootstrap. */
const ROUTES_FILE = "routes.yaml";
const CLUSTERS_FILE = "clusters.yaml";
/** With several router hosts: the routes of the listener the peers reach this host's EPPs at. */
const PEER_ROUTES_FILE = "peer-routes.yaml";
/** The router host's files Envoy reloads when they change, without a restart. */
export const ENVOY_DISCOVERY_FILES: readonly string[] = [ROUTES_FILE, CLUSTERS_FILE, PEER_ROUTES_FILE].map((file) => `envoy/${file}`);

/** The stack's Envoy on one router host: every model's served names, each routed to its model's EPP. */
function stackEnvoy(stack: DoorContext, doors: readonly DoorContext[], router: RouterPlacement): ModelsEnvoy {
  const { deployment, frontDoor } = stack;
  const models: ModelDoor[] = doors.map((door) => ({
    name: door.deployment.entry.name!,
    servedNames: door.deployment.entry.servedNames,
    eppCluster: eppClusterName(door.deployment.entry.name!),
    eppGrpcPort: door.ports.eppGrpc,
    eppHealthPort: door.ports.eppHealth,
  }));
  const peers = frontDoor.routers.filter((r) => r !== router);
  return modelsEnvoy({
    listenAddress: router.listenAddress,
    port: frontDoor.port,
    adminPort: FRONT_DOOR_PORTS.envoyAdmin,
    requestTimeoutSeconds: durationSeconds(deployment.settings.router.requestTimeout),
    apiKeyConfigPath: stack.apiKey ? `${ENVOY_DIR}/${API_KEY_CONFIG}` : undefined,
    models,
    routesPath: `${ENVOY_DIR}/${ROUTES_FILE}`,
    clustersPath: `${ENVOY_DIR}/${CLUSTERS_FILE}`,
    failover: failsOver(stack)
      ? { self: peerEpp(router), peers: peers.map(peerEpp), tlsDir: `${ENVOY_DIR}/tls`, peerRoutesPath: `${ENVOY_DIR}/${PEER_ROUTES_FILE}` }
      : undefined,
  });
}

/** What one router host holds for the stack's front door, by path: Envoy's under the stack's folder, each model's under models/<name>/, the units under systemd/. */
function modelsRouterFiles(stack: DoorContext, doors: readonly DoorContext[], router: RouterPlacement, envoy: ModelsEnvoy) {
  const files: Record<string, string> = {
    "envoy/envoy.yaml": envoy.bootstrap,
    [`envoy/${ROUTES_FILE}`]: envoy.routes,
    [`envoy/${CLUSTERS_FILE}`]: envoy.clusters,
    ...(envoy.peerRoutes ? { [`envoy/${PEER_ROUTES_FILE}`]: envoy.peerRoutes } : {}),
  };
  const proxy = routerUnits(stack, router);
  const vrrpConfig = routerVrrpConfig(stack, router);
  if (proxy.keepalived && vrrpConfig)
    Object.assign(files, { "keepalived/keepalived.conf": vrrpConfig, [`systemd/${proxy.keepalived.name}`]: proxy.keepalived.text });
  if (stack.apiKey) files[`envoy/${API_KEY_CONFIG}`] = apiKeyFilterConfig(secretPlaceholder("apiKey"));
  files[`systemd/${proxy.names[1]!}`] = proxy.proxy;
  for (const door of doors) {
    const own = routerFiles(door, router);
    const units = routerUnits(door, router);
    const folder = `models/${door.deployment.entry.name}`;
    files[`${folder}/epp/epp.yaml`] = own["epp/epp.yaml"];
    files[`${folder}/desired.json`] = own["desired.json"];
    files[`systemd/${units.names[0]!}`] = units.epp;
    files[`systemd/${units.names[2]!}`] = units.agent;
  }
  return files;
}

/** The apply step's settings of a front door of several router hosts (front-door-roll.sh), as one model's has them but for its one EPP's port. */
function modelsFailoverSettings(stack: DoorContext, router: RouterPlacement, tlsName: string, vrrp: ReturnType<typeof routerUnits>["keepalived"]) {
  const { epp_grpc_port: _, ...settings } = failoverSettings(stack, router, tlsName, vrrp, routerVrrpConfig(stack, router) ?? "");
  return settings;
}

/** How long a model taken out of the stack keeps its EPP for its requests in flight: as long as a stopping rank of the stack lets its own. */
const removedModelDrainSeconds = (doors: readonly DoorContext[]) => Math.max(...doors.map((d) => d.deployment.shutdownTimeoutSeconds));

/** One router host's steps for the stack: every host's drain key (each into its model's folder), and the one apply and remove. */
function modelsRouterScripts(stack: DoorContext, doors: readonly DoorContext[], options: FrontDoorOptions, router: RouterPlacement): RenderedRouterHost {
  const { frontDoor, id, stateDir } = stack;
  const { host } = router;
  const proxy = routerUnits(stack, router);
  const units = doors.map((door) => routerUnits(door, router));
  const files = doors.map((door) => routerFiles(door, router));
  const envoy = stackEnvoy(stack, doors, router);
  const failover = failsOver(stack);
  const vrrp = proxy.keepalived;
  const images = [...new Set([...doors.map((d) => d.frontDoor.images.endpointPicker), frontDoor.images.proxy])];
  const probe = ["0.0.0.0", "::"].includes(router.listenAddress) ? (router.listenAddress === "::" ? "::1" : "127.0.0.1") : router.listenAddress;
  return {
    host,
    url: httpUrl(router.address, frontDoor.port),
    access: doors.flatMap((door) => drainAccess(door, options, host)),
    applyScript: renderScript(
      `${HOST_SCRIPT_DIR}/front-door-models-apply.sh`,
      `front door ${id} on ${host.name}: Envoy, and each model's EPP and endpoints agent`,
      {
        host_name: host.name,
        state_dir: stateDir,
        runtime: stack.runtime,
        images,
        agent_path: stack.agent.path,
        agent_text: stack.agent.text,
        envoy_config: envoy.bootstrap,
        envoy_routes: envoy.routes,
        envoy_clusters: envoy.clusters,
        envoy_peer_routes: envoy.peerRoutes ?? "",
        cds_clusters: envoy.clusterNames,
        removed_model_drain_s: removedModelDrainSeconds(doors),
        // With several router hosts: Envoy takes traffic once it sees every model's EPP on this host healthy.
        local_epps: doors.map((d) => `${eppClusterName(d.deployment.entry.name!)}::127.0.0.1:${d.ports.eppGrpc}`),
        api_key: String(stack.apiKey),
        api_key_config: `${stateDir}/envoy/${API_KEY_CONFIG}`,
        envoy_uid: HOST_DEFAULTS.frontDoor.envoyUid,
        unit_dir: HOST_DEFAULTS.systemdUnitDir,
        proxy_unit_name: proxy.names[1]!,
        proxy_unit: proxy.proxy,
        model_dirs: doors.map((d) => d.stateDir),
        epp_configs: files.map((f) => f["epp/epp.yaml"]),
        desired_jsons: files.map((f) => f["desired.json"]),
        epp_unit_names: units.map((u) => u.names[0]!),
        epp_units: units.map((u) => u.epp),
        agent_unit_names: units.map((u) => u.names[2]!),
        agent_units: units.map((u) => u.agent),
        epp_metrics_ports: doors.map((d) => String(d.ports.eppMetrics)),
        probe_address: probe,
        front_door_port: frontDoor.port,
        ready_timeout_s: HOST_DEFAULTS.frontDoor.readyTimeoutSeconds,
        settle_s: HOST_DEFAULTS.frontDoor.settleSeconds,
        ...modelsFailoverSettings(stack, router, failover ? host.name : "", vrrp),
      },
    ),
    removeScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-models-remove.sh`, `remove front door ${id} from ${host.name}`, {
      host_name: host.name,
      state_dirs: [stateDir, ...doors.map((d) => d.stateDir)],
      unit_dir: HOST_DEFAULTS.systemdUnitDir,
      units: [...units.flatMap((u) => [u.names[0]!, u.names[2]!]), proxy.names[1]!, ...(vrrp ? [vrrp.name] : [])],
    }),
    files: modelsRouterFiles(stack, doors, router, envoy),
    apiKeyConfig: stack.apiKey ? `${stateDir}/envoy/${API_KEY_CONFIG}` : null,
    timeouts: {
      apply: timeoutsOf(
        frontDoorApplyWaits(host, failover ? failoverWaits(stack) : null, {
          models: doors.length,
          images: images.length,
          removedModelDrainSeconds: removedModelDrainSeconds(doors),
        }),
      ),
      access: timeoutsOf(commandStepWaits(host)),
    },
  };
}

/**
 * The front door of a stack of models on hosts: each router host's steps (one Envoy, each model's
 * EPP and agent). `options.id` is the stack's deployment id; each model's sidecars and scrape targets
 * stay with its own render (renderFrontDoor with its eppSlot).
 */
export function renderModelsFrontDoor(models: readonly FrontDoorModel[], options: FrontDoorOptions): RenderedFrontDoor {
  const slots = modelEppSlots(models.map((m) => m.deployment.entry.name!));
  const doors = models.map(({ deployment, id }, i) => doorContext(deployment, { ...options, id, eppSlot: slots[i]! }));
  const stack = doorContext(models[0]!.deployment, options);
  return {
    routers: stack.frontDoor.routers.map((router) => modelsRouterScripts(stack, doors, options, router)),
    tls: renderTls(stack),
    urls: frontDoorAddresses(stack.frontDoor).map((address) => httpUrl(address, stack.frontDoor.port)),
    sidecars: [],
    scrapeTargets: [],
  };
}
