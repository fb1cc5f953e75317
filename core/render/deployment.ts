import type { SecretKey } from "../config/secrets";
import { scrapeTargets, type ScrapeTarget } from "../monitoring/targets";
import type { CompileKeyPlan, Deployment, RouterIntent } from "../plan/types";
import { hostWaves } from "../rollout/hostWaves";
import { routerChartValues } from "./kubernetes/chartValues";
import { modelRouterValues, poolIntent } from "./kubernetes/modelRouting";
import { type FrontDoorOptions, renderFrontDoor, type RenderedFrontDoor } from "./hosts/frontDoor/frontDoor";
import { renderScalers, type RenderedScaler } from "./kubernetes/scaledObjects";
import { renderHost, type HostRenderOptions, type RenderedHost } from "./hosts/bundle";
import { renderCompileHost, renderCompileStep, type RenderedCompileHost, type RenderedCompileStep } from "./hosts/compileHost";
import { copySources, firstHostsOfKeys, renderCopy, weightsHosts, type HostCopyOptions, type RenderedCopy } from "./hosts/copies";
import { deploymentId } from "./hosts/names";
import { monitoringObjects, routerMonitoringValues, type MonitoringObjects } from "./kubernetes/monitoring";
import { renderKubernetesWorkloads, type KubernetesWorkloads } from "./kubernetes/workloads";

/**
 * The one render of a deployment: everything a platform needs, computed once. The components wrap
 * it in resources and the `render` command writes it out, so the program and the CLI can never
 * render a stack two ways.
 */
export interface RenderOptions {
  /** The Pulumi stack: with the instance, it names what the deployment writes on shared hosts. */
  stack: string;
  /** The ModelServing instance's name. */
  instance: string;
  /** The secrets that are set: what the rendered files and objects refer to (never their values). */
  secrets: readonly SecretKey[];
  /** Timings of the host steps; the defaults suit real servers (tests shorten them). */
  hostOptions?: HostRenderOptions;
  /** Where the copy grants go on a source host and how long one left behind lasts. */
  copyOptions?: Omit<HostCopyOptions, "deploymentId">;
  /** A model of a stack of models: its EPP's slot on the router host (modelEppSlots), which gives its ports. */
  eppSlot?: number;
}

/** What the front door's render on hosts takes from the render's options, for deployment id `id`. */
export function frontDoorOptions(options: RenderOptions, id: string): FrontDoorOptions {
  return {
    id,
    runtimePath: options.hostOptions?.containerRuntime,
    firewallPath: options.hostOptions?.firewall,
    apiKey: options.secrets.includes("apiKey"),
    authorizedKeysFile: options.copyOptions?.authorizedKeysFile,
    ...(options.eppSlot === undefined ? {} : { eppSlot: options.eppSlot }),
  };
}

/** Platform hosts: the host bundles by rollout wave and the copies between them. */
export interface RenderedHosts {
  /** Names this deployment's units, env files and venvs on hosts other deployments may share. */
  id: string;
  /** Every host's bundle, wave by wave: wave k+1's units change only after wave k's serve. */
  waves: RenderedHost[][];
  /** The hosts that run the weights step: the seed, or every host with cache.shared (its lease lets one download). */
  weightsHosts: string[];
  /** Copies between hosts (weights from the seed, compiled caches from an earlier wave), sources before the hosts that copy from them. */
  copies: RenderedCopy[];
  /** Every rank's metrics endpoint with its labels (Prometheus file_sd groups), and the front door's picker's. */
  scrapeTargets: ScrapeTarget[];
  /** With router hosts: the llm-d router's front door, on each, and the decode hosts' sidecars. */
  frontDoor: RenderedFrontDoor | null;
  /** compile.host: the CPU server that compiles every key before the first wave (the weights' seed, the first copies' source); null without. */
  compileHost: RenderedCompileHost | null;
  /** With a registry and no compile host: each key's pull on the first NPU host that runs it, before its units. */
  pulls: { host: string; step: RenderedCompileStep }[];
}

/** Platform Kubernetes: the workloads, their scalers, the monitoring objects and the router chart's values. */
export interface RenderedKubernetes {
  workloads: KubernetesWorkloads;
  /** A KEDA ScaledObject per served role with autoscaling on; empty with fixed replicas. */
  scalers: RenderedScaler[];
  monitoring: MonitoringObjects | null;
  /** llm-d-router-gateway values for strategies with a router, and for every model of a stack of several; null without one. */
  routerValues: Record<string, unknown> | null;
  /** The router release those values are for (core/render/kubernetes/modelRouting.ts poolIntent); null without one. */
  router: RouterIntent | null;
}

export interface RenderedDeployment {
  /** The plan it renders, compile ahead's (`deployment.compile`) included. */
  deployment: Deployment;
  /** The secrets that are set, which the rendered texts refer to. */
  secrets: readonly SecretKey[];
  hosts: RenderedHosts | null;
  kubernetes: RenderedKubernetes | null;
}

function renderHosts(deployment: Deployment, options: RenderOptions): RenderedHosts {
  const { compile } = deployment;
  const id = deploymentId(options.stack, options.instance);
  const placementWaves = hostWaves(deployment);
  const copyOptions = { ...options.copyOptions, deploymentId: id };
  const frontDoor = deployment.frontDoor ? renderFrontDoor(deployment, frontDoorOptions(options, id)) : null;
  const compileHost = compile.mode === "host" ? renderCompileHost(deployment, id, options.hostOptions) : null;
  const compiler = compileHost?.placement;
  const keyPlan = (key: string) => compile.keys.find((k) => k.key === key) as CompileKeyPlan;
  return {
    id,
    waves: placementWaves.map((wave) => wave.map((placement) => renderHost(deployment, placement, id, options.hostOptions))),
    // The seed downloads from the hub and the others copy from it; with cache.shared every host's
    // weights step takes the download's lease and nothing is copied.
    weightsHosts: weightsHosts(deployment, placementWaves, compiler).map((p) => p.host.name),
    copies: copySources(deployment, placementWaves, compiler).map((copy) => renderCopy(deployment, copy, copyOptions)),
    scrapeTargets: [...scrapeTargets(deployment), ...(frontDoor?.scrapeTargets ?? [])],
    frontDoor,
    compileHost,
    pulls:
      compile.registry && !compileHost
        ? firstHostsOfKeys(deployment, placementWaves).map(({ key, placement }) => ({
            host: placement.host.name,
            step: renderCompileStep(deployment, placement, id, keyPlan(key), compile.registry, false, options.hostOptions),
          }))
        : [],
  };
}

function renderKubernetes(deployment: Deployment, options: RenderOptions): RenderedKubernetes {
  const { settings, plan } = deployment;
  const rendered = renderKubernetesWorkloads(deployment, { instance: options.instance, namespace: settings.kubernetes.namespace }, options.secrets);
  // A model of several routes through a pool of its own, whatever its strategy; one model, through its recipe's router if any.
  const router = poolIntent(deployment);
  const workloads = { ...rendered, router };
  const values =
    router && (deployment.entry.name === null ? routerChartValues(router, plan.strategy, settings) : modelRouterValues(deployment, router, options.instance));
  const scalers = renderScalers(deployment, workloads);
  return {
    workloads,
    scalers,
    monitoring: monitoringObjects(deployment, workloads, options.instance, scalers),
    routerValues: values ? routerMonitoringValues(deployment, values) : null,
    router,
  };
}

/** Renders a validated deployment for its platform. */
export function renderDeployment(deployment: Deployment, options: RenderOptions): RenderedDeployment {
  const onHosts = deployment.settings.platform === "hosts";
  return {
    deployment,
    secrets: options.secrets,
    hosts: onHosts ? renderHosts(deployment, options) : null,
    kubernetes: onHosts ? null : renderKubernetes(deployment, options),
  };
}
