// The one front door of a stack of models on hosts (issue 30): on each router host one Envoy that
// routes by the body's model (modelRoutes.ts), and per model the EPP, endpoints agent, desired
// endpoints and drain keys a front door of that model alone has, in that model's folder and on its
// own ports (core/plan/ports.ts modelEppPorts). The Envoy's unit and folder are named after the stack's
// deployment id; each model's after its own (the model entry's name is in it).
import { httpUrl } from "../../../address";
import { durationSeconds } from "../../../config/defaults";
import { frontDoorAddresses } from "../../../plan/frontDoor";
import { FRONT_DOOR_PORTS } from "../../../plan/ports";
import type { Deployment, RouterPlacement } from "../../../plan/types";
import { secretPlaceholder } from "../../../config/secrets";
import { renderScript } from "../../../template";
import { HOST_DEFAULTS } from "../defaults";
import { HOST_SCRIPT_DIR } from "../scripts";
import { commandStepWaits, frontDoorApplyWaits, timeoutsOf } from "../stepTimeouts";
import { apiKeyFilterConfig, envoyBootstrap } from "./envoy";
import {
  API_KEY_CONFIG,
  type DoorContext,
  doorContext,
  drainAccess,
  ENVOY_DIR,
  type FrontDoorOptions,
  type RenderedFrontDoor,
  type RenderedRouterHost,
  routerFiles,
  routerUnits,
} from "./frontDoor";
import { eppClusterName, type ModelDoor } from "./modelRoutes";

/** A model of the stack, for its part of the front door: its deployment and its deployment id (which names its EPP, agent and folder). */
export interface FrontDoorModel {
  deployment: Deployment;
  id: string;
}

/** The stack's Envoy on one router host: every model's served names, each routed to its model's EPP. */
function modelsEnvoy(stack: DoorContext, doors: readonly DoorContext[], router: RouterPlacement): string {
  const { deployment, frontDoor } = stack;
  const models: ModelDoor[] = doors.map((door) => ({
    name: door.deployment.entry.name!,
    servedNames: door.deployment.entry.servedNames,
    eppCluster: eppClusterName(door.deployment.entry.name!),
    eppGrpcPort: door.ports.eppGrpc,
  }));
  return envoyBootstrap({
    listenAddress: router.listenAddress,
    port: frontDoor.port,
    adminPort: FRONT_DOOR_PORTS.envoyAdmin,
    eppGrpcPort: models[0]!.eppGrpcPort,
    requestTimeoutSeconds: durationSeconds(deployment.settings.router.requestTimeout),
    apiKeyConfigPath: stack.apiKey ? `${ENVOY_DIR}/${API_KEY_CONFIG}` : undefined,
    models,
  });
}

/** What one router host holds for the stack's front door, by path: Envoy's under the stack's folder, each model's under models/<name>/, the units under systemd/. */
function modelsRouterFiles(stack: DoorContext, doors: readonly DoorContext[], router: RouterPlacement, envoy: string) {
  const files: Record<string, string> = { "envoy/envoy.yaml": envoy };
  if (stack.apiKey) files[`envoy/${API_KEY_CONFIG}`] = apiKeyFilterConfig(secretPlaceholder("apiKey"));
  const proxy = routerUnits(stack, router);
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

/** One router host's steps for the stack: every host's drain key (each into its model's folder), and the one apply and remove. */
function modelsRouterScripts(stack: DoorContext, doors: readonly DoorContext[], options: FrontDoorOptions, router: RouterPlacement): RenderedRouterHost {
  const { frontDoor, id, stateDir } = stack;
  const { host } = router;
  const proxy = routerUnits(stack, router);
  const units = doors.map((door) => routerUnits(door, router));
  const files = doors.map((door) => routerFiles(door, router));
  const envoy = modelsEnvoy(stack, doors, router);
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
        envoy_config: envoy,
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
      },
    ),
    removeScript: renderScript(`${HOST_SCRIPT_DIR}/front-door-models-remove.sh`, `remove front door ${id} from ${host.name}`, {
      host_name: host.name,
      state_dirs: [stateDir, ...doors.map((d) => d.stateDir)],
      unit_dir: HOST_DEFAULTS.systemdUnitDir,
      units: [...units.flatMap((u) => [u.names[0]!, u.names[2]!]), proxy.names[1]!],
    }),
    files: modelsRouterFiles(stack, doors, router, envoy),
    apiKeyConfig: stack.apiKey ? `${stateDir}/envoy/${API_KEY_CONFIG}` : null,
    timeouts: {
      apply: timeoutsOf(frontDoorApplyWaits(host, null, { models: doors.length, images: images.length })),
      access: timeoutsOf(commandStepWaits(host)),
    },
  };
}

/**
 * The front door of a stack of models on hosts: each router host's steps (one Envoy, each model's
 * EPP and agent). `options.id` is the stack's deployment id; each model's sidecars and scrape targets
 * stay with its own render (renderFrontDoor with its modelIndex).
 */
export function renderModelsFrontDoor(models: readonly FrontDoorModel[], options: FrontDoorOptions): RenderedFrontDoor {
  const doors = models.map(({ deployment, id }, modelIndex) => doorContext(deployment, { ...options, id, modelIndex }));
  const stack = doorContext(models[0]!.deployment, options);
  const { routers } = stack.frontDoor;
  // Refused at config time (router.hosts with models): the failover cluster is one EPP's and its peers'.
  if (routers.length > 1) throw new Error("a front door of several router hosts does not carry several models");
  return {
    routers: routers.map((router) => modelsRouterScripts(stack, doors, options, router)),
    tls: null,
    urls: frontDoorAddresses(stack.frontDoor).map((address) => httpUrl(address, stack.frontDoor.port)),
    sidecars: [],
    scrapeTargets: [],
  };
}
