import * as pulumi from "@pulumi/pulumi";
import { ModelServing as ModelServingComponent, type ModelServingArgs as ComponentArgs } from "../components/modelServing";

// The argument types of the component as the provider schema sees it: Pulumi infers the schema from
// these TypeScript types and supports plain fields, interfaces, arrays, maps and pulumi.Inputs only
// (no zod types, classes, enums or unions). Settings are plain strings and numbers; the component
// validates them exactly as it validates the stack config.

export interface HostArgs {
  /** A DNS label naming the host in resource names. */
  name: string;
  /** Host name or IP address reached over SSH. */
  address: string;
  /** SSH user (default root; others run the scripts through sudo -n). */
  user?: string;
  /** SSH port (default 22). */
  port?: number;
}

export interface PipArgs {
  /** A package index mirror that replaces the recipe's indexes (air-gapped sites). */
  indexUrl?: string;
  extraIndexUrls?: string[];
  /** The index user; the password is the pipPassword secret. */
  username?: string;
}

export interface GatewayArgs {
  name: string;
  namespace?: string;
}

export interface KubernetesArgs {
  namespace?: string;
  /** The vllm-rbln image (required with platform kubernetes). */
  image?: string;
  npuResource?: string;
  nodeSelector?: { [label: string]: string };
  storageClass?: string;
  weightsVolumeSize?: string;
  compileCacheVolumeSize?: string;
  gateway?: GatewayArgs;
  /** The router chart's provider: none, istio or gke. */
  provider?: string;
}

export interface MonitoringArgs {
  enabled?: boolean;
  namespace?: string;
}

export interface RolloutArgs {
  /** Replicas down at once: a count such as "1" or a percentage such as "25%". */
  maxUnavailable?: string;
}

/** The keys of the rbln-serving stack config, plus the secrets as inputs. */
export interface ModelServingArgs {
  /** Model id of a shipped recipe (default MiniMaxAI/MiniMax-M2.7). */
  model?: string;
  /** Strategy slug, e.g. aggregated-pipeline-parallel. */
  strategy: string;
  /** Latency or Throughput, as the strategy offers. */
  target: string;
  /** "recommended" starts from the recipe's recommended axes. */
  preset?: string;
  /** Axis values, e.g. spec_decode: suffix; they override the preset. */
  axes?: { [axis: string]: string };
  /** Package version overrides: rebelCompiler, vllmRbln, arcticInference. */
  versions?: { [name: string]: string };
  /** hosts (systemd units over SSH, the default) or kubernetes. */
  platform?: string;
  replicas?: number;
  prefillReplicas?: number;
  decodeReplicas?: number;
  hosts?: HostArgs[];
  pip?: PipArgs;
  installRoot?: string;
  cacheRoot?: string;
  minFreeDiskGb?: number;
  minFreeDiskGbToRestart?: number;
  kubernetes?: KubernetesArgs;
  /** Extra vllm serve words per role. */
  extraArgs?: { [role: string]: string[] };
  /** Extra environment per role. */
  extraEnv?: { [role: string]: { [name: string]: string } };
  monitoring?: MonitoringArgs;
  rollout?: RolloutArgs;
  /** SSH private key (platform hosts). */
  sshPrivateKey?: pulumi.Input<string>;
  /** Package index password, with pip.username. */
  pipPassword?: pulumi.Input<string>;
  /** HF_TOKEN for the weights download and vLLM. */
  hfToken?: pulumi.Input<string>;
  /** VLLM_API_KEY: vLLM answers only requests with this key. */
  apiKey?: pulumi.Input<string>;
}

export interface RankUnitOutput {
  unit: string;
  host: string;
  role: string;
  rank: number;
  url: string;
}

export interface RankPlacement {
  rank: number;
  port: number;
  devices: number[];
}

export interface RoleDeploymentOutput {
  role: string;
  deployment: string;
  namespace: string;
  replicas: number;
  ranks: RankPlacement[];
}

/** The component's arguments from the provider's plain ones. */
export function componentArgs(args: ModelServingArgs): ComponentArgs {
  const { sshPrivateKey, pipPassword, hfToken, apiKey, rollout, ...settings } = args;
  const maxUnavailable = rollout?.maxUnavailable;
  const secrets = Object.fromEntries(Object.entries({ sshPrivateKey, pipPassword, hfToken, apiKey }).filter(([, value]) => value !== undefined));
  return {
    settings: {
      ...settings,
      // A count arrives as a string here ("2"); the stack config takes it as a number.
      ...(rollout ? { rollout: { ...rollout, ...(maxUnavailable !== undefined && /^[0-9]+$/.test(maxUnavailable) ? { maxUnavailable: Number(maxUnavailable) } : {}) } } : {}),
    } as ComponentArgs["settings"],
    secrets,
  };
}

// Typed as a plain ComponentResource constructor so the schema inference sees a direct component.
const ServingComponent: new (name: string, args: ComponentArgs, opts?: pulumi.ComponentResourceOptions) => pulumi.ComponentResource = ModelServingComponent;

/**
 * A model served on RBLN NPUs from its verified recipe, on SSH hosts (systemd units) or on
 * Kubernetes (Deployments and the llm-d router). The same resource as the TypeScript component, for
 * every Pulumi language.
 */
export class ModelServing extends ServingComponent {
  /** Every endpoint: each host's rank 0, the Service, or the Gateway's address. */
  declare readonly endpoints: pulumi.Output<string[]>;
  /** The recipe's example request against the first endpoint. */
  declare readonly curl: pulumi.Output<string>;
  /** Platform hosts: unit, host, role, rank and URL per rank. */
  declare readonly units: pulumi.Output<RankUnitOutput[]>;
  /** Platform kubernetes: per role the Deployment, replicas and each pod's ranks. */
  declare readonly deployments: pulumi.Output<RoleDeploymentOutput[]>;
  /** Model, strategy, target and every axis value. */
  declare readonly selection: { [key: string]: string };
  /** Where the recipe's own settings do nothing. */
  declare readonly warnings: string[];

  constructor(name: string, args: ModelServingArgs, opts?: pulumi.ComponentResourceOptions) {
    super(name, componentArgs(args), opts);
  }
}
