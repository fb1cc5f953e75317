import type * as pulumi from "@pulumi/pulumi";
import { StackSettings } from "../core/config/stackConfig";
import { SECRET_KEYS } from "../core/config/secrets";
import { fromPackageValue, settingsShape } from "../core/config/settingsShape";
import type { RankUnit } from "../components/hosts/npuHost";
import type { RoleDeployment } from "../components/kubernetes/npuWorkloads";
import {
  type CompileKeyOutput,
  type ModelOutput,
  ModelServing as ModelServingComponent,
  type ModelServingArgs as ComponentArgs,
} from "../components/modelServing";
import type { RankLabels, ScrapeTarget } from "../core/monitoring/targets";
import type { ModelServingArgs } from "./settingsArgs.generated";

// The component's arguments as the package schema sees them: Pulumi's analyzer infers the schema from
// plain TypeScript types only, generated from the stack config's schema into settingsArgs.generated.ts
// (`npm run generate`). The component validates them exactly as it validates the stack config.
export * from "./settingsArgs.generated";

// The outputs' types are the TypeScript component's, under the names the package schema has
// always given them.
export type { CompileKeyOutput } from "../components/modelServing";
export type { RankPlacement } from "../components/kubernetes/npuWorkloads";
export interface RankUnitOutput extends RankUnit {}
export interface RoleDeploymentOutput extends RoleDeployment {}
// The analyzer has no null: an unresolved revision is an absent one.
export interface ModelDeploymentOutput extends Omit<ModelOutput, "modelRevision" | "name" | "servedNames" | "selection"> {
  /** models[].name; absent for a stack without models. */
  name?: string;
  /** The names clients may send in the request's model field for it. */
  servedNames: string[];
  /** Model, strategy, target and every axis value. */
  selection: { [key: string]: string };
  /** The commit it serves: the pinned revision, or on hosts the one the first download resolved. */
  modelRevision?: string;
}
export interface ScrapeLabelsOutput extends RankLabels {}
// Omit<> would lose the other keys' types: the analyzer reads a property from its declaration.
export interface ScrapeTargetOutput extends ScrapeTarget {
  /** The labels its series carry. */
  labels: ScrapeLabelsOutput;
}

const SETTINGS = settingsShape(StackSettings);

/** The component's arguments from the package's: the secrets apart, and the settings in the stack config's terms. */
export function componentArgs(args: ModelServingArgs): ComponentArgs {
  const isSecret = (key: string) => (SECRET_KEYS as readonly string[]).includes(key);
  const secrets = Object.fromEntries(Object.entries(args).filter(([key, value]) => isSecret(key) && value !== undefined));
  const settings = Object.fromEntries(Object.entries(args).filter(([key]) => !isSecret(key)));
  return { settings: fromPackageValue(SETTINGS, settings) as ComponentArgs["settings"], secrets };
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
  /** The commit every host serves: the pinned revision, or the one the seed's download resolved (none yet on Kubernetes without a pin). */
  declare readonly modelRevision: pulumi.Output<string | undefined>;
  /** Model, strategy, target and every axis value. */
  declare readonly selection: { [key: string]: string };
  /** What the stack should change: a risk, a setting that does nothing, a change the steps will refuse. */
  declare readonly warnings: string[];
  /** Facts about what the stack does: the recipe's settings that do nothing, the platform's limits, choices the stack made. */
  declare readonly notes: string[];
  /** Platform hosts: every rank's metrics endpoint with its labels, as Prometheus file_sd groups. */
  declare readonly scrapeTargets: ScrapeTargetOutput[];
  /** The compile keys the stack runs, with their roles and the registry digest of each compiled cache (retention keeps these). */
  declare readonly compileKeys: pulumi.Output<CompileKeyOutput[]>;
  /** Each model deployment: its name, served names, selection and revision (selection and modelRevision are the first model's). */
  declare readonly models: pulumi.Output<ModelDeploymentOutput[]>;

  constructor(name: string, args: ModelServingArgs, opts?: pulumi.ComponentResourceOptions) {
    super(name, componentArgs(args), opts);
  }
}
