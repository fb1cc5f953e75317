import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { z } from "zod";
import { parseStackSettings, type StackSettings } from "../core/config/stackConfig";
import { checkSecretPairings, SECRET_KEYS, secretEnvironment, type SecretKey } from "../core/config/secrets";
import type { Deployment } from "../core/plan/deployment";
import { messagesAt } from "../core/plan/messages";
import { planStack, type StackPlan } from "../core/plan/stack";
import { RecipeCatalog } from "../core/recipe/catalog";
import type { ScrapeTarget } from "../core/monitoring/targets";
import { clientCommand } from "../core/render/client";
import type { RenderedHosts, RenderedKubernetes } from "../core/render/deployment";
import { modelInstance, type RenderedStack, renderStack } from "../core/render/stack";
import type { HostRenderOptions } from "../core/render/hosts/bundle";
import type { HostCopyOptions } from "../core/render/hosts/copies";
import { checkInstanceName } from "../core/render/hosts/names";
import { reportedDigest } from "../core/render/compileCache";
import { reportedWord } from "../core/stepReport";
import { CompileHost } from "./hosts/compileHost";
import { NpuHost, type RankUnit } from "./hosts/npuHost";
import { NpuWorkloads, type RoleDeployment } from "./kubernetes/npuWorkloads";
import { FrontDoor } from "./router/frontDoor";
import { LlmdRouter } from "./router/llmdRouter";
import { ModelRouting } from "./router/modelRouting";

export type ServingSecrets = Partial<Record<SecretKey, pulumi.Input<string>>>;

/** A compile key the stack runs. */
export interface CompileKeyOutput {
  /** The compile key: what a compiled cache is compiled for (docs/caches.md). */
  key: string;
  /** The roles that serve from its cache. */
  roles: string[];
  /** The registry digest of its compiled cache; absent without a registry, or while no pull or push has reported it. */
  digest?: string;
}

export interface ModelServingArgs {
  /** The same keys as the `rbln-serving:` stack config; validated before anything is registered. */
  settings: z.input<typeof StackSettings>;
  /** Secret inputs: `sshPrivateKey` (hosts), `pipPassword`, `hfToken`, `apiKey`. */
  secrets?: ServingSecrets;
  /** Recipes to pick the model from; the package's own by default. */
  catalog?: RecipeCatalog;
  /** Timings of the host steps (poll interval, restart delay, start limit): defaults suit real servers. */
  hostOptions?: HostRenderOptions;
  /** Where the copy grants go on a source host (root's authorized_keys) and how long one left behind lasts. */
  copyOptions?: Omit<HostCopyOptions, "deploymentId">;
}

/** The commit a seed's weights step reports for the served model: its stdout's `revision <model> <commit>` line. */
export function reportedRevision(stdout: string | undefined, model: string): string | null {
  return reportedWord(stdout, `revision ${model} `, /^[0-9a-f]{40}$/);
}

/** One model deployment of the stack, as the `models` output lists it. */
export interface ModelOutput {
  /** models[].name; absent for a stack without models. */
  name?: string;
  /** The names clients may send in the request's model field for it. */
  servedNames: string[];
  /** Model, strategy, target and every axis value. */
  selection: Record<string, string>;
  /** The commit it serves: the pinned revision, or on hosts the one the first download resolved. */
  modelRevision: string | null;
}

/** Validates settings and secrets together, every model of the stack; throws a ConfigError before any resource exists. */
export function planServingStack(args: ModelServingArgs): StackPlan {
  const stack = planStack(parseStackSettings(args.settings as Record<string, unknown>), args.catalog ?? RecipeCatalog.load());
  for (const deployment of stack.models) checkSecretPairings(deployment.settings, (key) => args.secrets?.[key] !== undefined);
  return stack;
}

/** planServingStack for a stack of one model (no `models`, or one entry): its deployment. */
export function planServing(args: ModelServingArgs): Deployment {
  const { models } = planServingStack(args);
  if (models.length !== 1) throw new Error(`planServing plans a stack of one model, not ${models.length}: use planServingStack`);
  return models[0]!;
}

/** What a platform's resources give the component's outputs. */
interface PlatformOutputs {
  endpoints: pulumi.Output<string[]>;
  units: pulumi.Output<RankUnit[]>;
  modelRevision: pulumi.Output<string | null>;
  deployments: pulumi.Output<RoleDeployment[]>;
  /** Per compile key, the stdout of the step that compiled or pulled it: its registry digest report. */
  keyReports: Map<string, pulumi.Output<string>>;
}

/**
 * The hosts platform: the front door first (the unit steps take their ranks out of it before a
 * restart), the compile host, then the NPU hosts wave by wave, each wave's units after the previous
 * wave's serve.
 */
function hostResources(
  name: string,
  hosts: RenderedHosts,
  deployment: Deployment,
  secrets: ServingSecrets,
  child: pulumi.ComponentResourceOptions,
  stackDoors?: FrontDoor[],
): PlatformOutputs {
  const { waves, copies, weightsHosts, compileHost, pulls, frontDoor } = hosts;
  const { settings, plan } = deployment;
  const sshPrivateKey = secrets.sshPrivateKey!;
  const keyReports = new Map<string, pulumi.Output<string>>();
  // A stack of models has one front door for all (stackDoors); a stack of one model, its model's.
  const doors = stackDoors ?? frontDoorResources(name, frontDoor, sshPrivateKey, secrets.apiKey, child);
  const byHost = new Map<string, NpuHost | CompileHost>();
  let previousWave: (NpuHost | CompileHost)[] = [];
  if (compileHost) {
    const host = compileHost.placement.host.name;
    const compiler = new CompileHost(`${name}-${host}`, { rendered: compileHost, sshPrivateKey, secrets, downloads: weightsHosts.includes(host) }, child);
    byHost.set(host, compiler);
    // Every key is compiled (or pulled) before the first wave's units change: they wait for it.
    previousWave = [compiler];
    for (const [i, step] of compileHost.steps.entries()) keyReports.set(step.key, compiler.unitCommands[i]!.stdout);
  }
  for (const wave of waves) {
    // A wave's units start changing only after the previous wave's serve.
    const afterUnits = previousWave.flatMap((h) => h.unitCommands);
    previousWave = wave.map((bundle) => {
      const host = bundle.placement.host.name;
      const peerCopies = copies
        .filter((c) => c.dest.host.name === host)
        .map((copy) => {
          const source = byHost.get(copy.source.host.name)!;
          return { rendered: copy, sourceName: `${name}-${copy.source.host.name}`, after: copy.kind === "weights" ? [source.weights!] : source.unitCommands };
        });
      const hostPulls = pulls.filter((p) => p.host === host).map((p) => p.step);
      // This host's key on every router host, in their order (front-door.sh reads them so).
      const accessKeys = doors.map((d) => d.accessKeys.get(host)).filter((key) => key !== undefined);
      const behindDoor =
        accessKeys.length > 0
          ? { accessKeys, after: doors.flatMap((d) => d.readyFor.get(host)!), sidecar: frontDoor!.sidecars.find((s) => s.host === host) }
          : undefined;
      const npuHost = new NpuHost(
        `${name}-${host}`,
        {
          rendered: bundle,
          sshPrivateKey,
          secrets,
          afterUnits,
          downloads: weightsHosts.includes(host),
          copies: peerCopies,
          pulls: hostPulls,
          frontDoor: behindDoor,
        },
        child,
      );
      for (const [i, pull] of hostPulls.entries()) keyReports.set(pull.key, npuHost.pullCommands[i]!.stdout);
      byHost.set(host, npuHost);
      return npuHost;
    });
  }
  const all = [...byHost.values()];
  const seedWeights = byHost.get(weightsHosts[0]!)!.weights!;
  const units = pulumi.all(all.flatMap((h) => (h instanceof NpuHost ? [h.units] : []))).apply((each) => each.flat());
  return {
    // One front door for every replica and role; without one, each replica's rank 0.
    endpoints: frontDoor ? pulumi.output(frontDoor.urls) : units.apply((list) => list.filter((u) => u.rank === 0).map((u) => u.url)),
    units,
    modelRevision:
      settings.revision !== undefined ? pulumi.output(settings.revision) : seedWeights.stdout.apply((stdout) => reportedRevision(stdout, plan.model)),
    deployments: pulumi.output([]),
    keyReports,
  };
}

/**
 * The front door's router hosts, one component each, in the stack's order: each applies only after
 * the one before it (a change rolls), the first makes the stack's TLS certificates when there are
 * several, and the others read theirs from it.
 */
function frontDoorResources(
  name: string,
  frontDoor: RenderedHosts["frontDoor"] | RenderedStack["frontDoor"],
  sshPrivateKey: pulumi.Input<string>,
  apiKey: pulumi.Input<string> | undefined,
  child: pulumi.ComponentResourceOptions,
): FrontDoor[] {
  const doors: FrontDoor[] = [];
  for (const [i, router] of (frontDoor?.routers ?? []).entries()) {
    const first = doors[0];
    const previous = doors[i - 1];
    doors.push(
      new FrontDoor(
        `${name}-${router.host.name}-front-door`,
        {
          rendered: router,
          sshPrivateKey,
          apiKey,
          ...(i === 0 && frontDoor!.tls ? { tls: frontDoor!.tls } : {}),
          ...(first?.tlsBundles[router.host.name] ? { tlsBundle: first.tlsBundles[router.host.name] } : {}),
          ...(previous ? { after: [previous.applied, ...(first?.tlsSteps[router.host.name] ? [first.tlsSteps[router.host.name]!] : [])] } : {}),
        },
        child,
      ),
    );
  }
  return doors;
}

/** The Kubernetes platform: the workloads and, for the strategies with a router, the llm-d router; in the stack's shared namespace, if given. */
function kubernetesResources(
  name: string,
  kubernetes: RenderedKubernetes,
  deployment: Deployment,
  secrets: ServingSecrets,
  child: pulumi.ComponentResourceOptions,
  namespace?: k8s.core.v1.Namespace,
): PlatformOutputs {
  const { workloads, scalers, monitoring, routerValues, router: intent } = kubernetes;
  const { settings } = deployment;
  const present = SECRET_KEYS.filter((key) => secrets[key] !== undefined);
  const npu = new NpuWorkloads(
    `${name}-workloads`,
    { workloads, secretEnv: secretEnvironment(present, (key) => secrets[key]!), monitoring, scalers, registryPassword: secrets.registryPassword, namespace },
    child,
  );
  const router =
    intent && routerValues
      ? new LlmdRouter(
          `${name}-router`,
          {
            release: intent.release,
            chart: intent.chart,
            version: intent.version,
            namespace: settings.kubernetes.namespace,
            values: routerValues,
            gateway: settings.kubernetes.gateway,
            ...(workloads.eppDisruptionBudget ? { disruptionBudget: workloads.eppDisruptionBudget } : {}),
          },
          // Not after the workloads: their rollout can take hours of compilation, and the pool may exist first.
          child,
        )
      : undefined;
  return {
    endpoints: router ? router.endpoint.apply((e) => (e ? [e] : [])) : npu.serviceEndpoints,
    units: pulumi.output([]),
    modelRevision: pulumi.output(settings.revision ?? null),
    deployments: npu.deployments,
    keyReports: new Map(),
  };
}

/** What a plan serves: model, strategy, target and every axis value. */
function selectionOf(plan: Deployment["plan"]): Record<string, string> {
  return { model: plan.model, strategy: plan.strategy, target: plan.target, ...plan.selection };
}

/** The `models` output: each model's name, served names, selection and revision. */
function modelOutputs(stack: StackPlan, platforms: readonly PlatformOutputs[]): pulumi.Output<ModelOutput[]> {
  return pulumi.all(
    stack.models.map((deployment, i) =>
      platforms[i]!.modelRevision.apply((modelRevision) => ({
        ...(deployment.entry.name === null ? {} : { name: deployment.entry.name }),
        servedNames: deployment.entry.servedNames,
        selection: selectionOf(deployment.plan),
        modelRevision,
      })),
    ),
  );
}

/**
 * A model served on RBLN NPUs from its recipe: the launch plan of the chosen strategy, target and
 * axes, deployed to SSH hosts (systemd units) or to Kubernetes (Deployments and the llm-d router).
 */
export class ModelServing extends pulumi.ComponentResource {
  readonly endpoints: pulumi.Output<string[]>;
  readonly curl: pulumi.Output<string>;
  readonly units: pulumi.Output<RankUnit[]>;
  /** The commit every host serves: the pinned revision, or the one the seed's download resolved. */
  readonly modelRevision: pulumi.Output<string | null>;
  readonly deployments: pulumi.Output<RoleDeployment[]>;
  readonly selection: Record<string, string>;
  /** What the stack should change: a risk, a setting that does nothing, a change the steps will refuse. */
  readonly warnings: string[];
  /** Facts about what the stack does: the recipe's settings that do nothing, the platform's limits, choices the stack made. */
  readonly notes: string[];
  /** Every rank's metrics endpoint with its labels (hosts; empty on Kubernetes): Prometheus `file_sd` groups. */
  readonly scrapeTargets: ScrapeTarget[];
  /** The compile keys this stack runs, each with its roles and the registry digest of its compiled cache: what retention must keep. */
  readonly compileKeys: pulumi.Output<CompileKeyOutput[]>;
  /** Each model deployment: its name, served names, selection and revision (`selection` and `modelRevision` are the first model's). */
  readonly models: pulumi.Output<ModelOutput[]>;

  constructor(name: string, args: ModelServingArgs, opts?: pulumi.ComponentResourceOptions) {
    checkInstanceName(name);
    const stack = planServingStack(args);
    super("rbln-serving:index:ModelServing", name, {}, opts);
    // A library caller may pass plain strings: every secret is a secret from here on, whatever came in.
    const secrets: ServingSecrets = Object.fromEntries(
      Object.entries(args.secrets ?? {})
        .filter(([, value]) => value !== undefined)
        .map(([key, value]) => [key, pulumi.secret(value)]),
    );
    const present = SECRET_KEYS.filter((key) => secrets[key] !== undefined);
    const rendered = renderStack(stack, {
      stack: pulumi.getStack(),
      instance: name,
      secrets: present,
      hostOptions: args.hostOptions,
      copyOptions: args.copyOptions,
    });
    const child = { parent: this };
    // Kept when the stack goes, as a stack of one model keeps its own: the caches live in it.
    const namespace = rendered.namespace ? new k8s.core.v1.Namespace(`${name}-namespace`, rendered.namespace, { ...child, retainOnDelete: true }) : undefined;
    if (rendered.dashboard) new k8s.core.v1.ConfigMap(`${name}-dashboard`, rendered.dashboard, child);
    if (rendered.routing)
      new ModelRouting(
        `${name}-routing`,
        { routing: rendered.routing, servedNamesResources: stack.models.map((m) => `${modelInstance(name, m)}-served-names`), namespace: namespace! },
        child,
      );
    // Hosts with models: one front door's steps per router host, which every model's hosts drain through.
    const doors = rendered.frontDoor ? frontDoorResources(name, rendered.frontDoor, secrets.sshPrivateKey!, secrets.apiKey, child) : undefined;
    const platforms = rendered.models.map((model) => {
      const modelName = modelInstance(name, model.deployment);
      return model.hosts
        ? hostResources(modelName, model.hosts, model.deployment, secrets, child, doors)
        : kubernetesResources(modelName, model.kubernetes!, model.deployment, secrets, child, namespace);
    });
    const first = stack.models[0]!.plan;
    const every = <T>(pick: (p: PlatformOutputs) => pulumi.Output<T[]>) => pulumi.all(platforms.map(pick)).apply((lists) => lists.flat());

    // Several models share one front door: its endpoint once.
    this.endpoints = every((p) => p.endpoints).apply((list) => [...new Set(list)]);
    this.units = every((p) => p.units);
    this.modelRevision = platforms[0]!.modelRevision;
    this.deployments = every((p) => p.deployments);
    this.curl = this.endpoints.apply((list) => clientCommand(first.client, list[0] ?? "http://<endpoint>", secrets.apiKey !== undefined));
    this.selection = selectionOf(first);
    this.warnings = messagesAt(stack.messages, "warning");
    this.notes = messagesAt(stack.messages, "note");
    this.scrapeTargets = rendered.models.flatMap((m) => m.hosts?.scrapeTargets ?? []);
    this.models = modelOutputs(stack, platforms);
    this.compileKeys = pulumi.all(
      stack.models.flatMap((deployment, i) =>
        deployment.compile.keys.map((k) =>
          (platforms[i]!.keyReports.get(k.key) ?? pulumi.output("")).apply((stdout) => {
            const digest = reportedDigest(stdout, k.key);
            return { key: k.key, roles: k.roles, ...(digest ? { digest } : {}) };
          }),
        ),
      ),
    );
    this.registerOutputs({
      compileKeys: this.compileKeys,
      endpoints: this.endpoints,
      curl: this.curl,
      units: this.units,
      modelRevision: this.modelRevision,
      deployments: this.deployments,
      selection: this.selection,
      warnings: this.warnings,
      notes: this.notes,
      scrapeTargets: this.scrapeTargets,
      models: this.models,
    });
  }
}
