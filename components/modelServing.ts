import * as pulumi from "@pulumi/pulumi";
import type { z } from "zod";
import { parseStackSettings, type StackSettings } from "../core/config/stackConfig";
import { checkSecretPairings, SECRET_KEYS, secretEnvironment, type SecretKey } from "../core/config/secrets";
import { planDeployment, type Deployment } from "../core/plan/deployment";
import { messagesAt } from "../core/plan/messages";
import { RecipeCatalog } from "../core/recipe/catalog";
import type { ScrapeTarget } from "../core/monitoring/targets";
import { clientCommand } from "../core/render/client";
import { renderDeployment, type RenderedHosts, type RenderedKubernetes } from "../core/render/deployment";
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

/** Validates settings and secrets together; throws a ConfigError before any resource exists. */
export function planServing(args: ModelServingArgs): Deployment {
  const deployment = planDeployment(parseStackSettings(args.settings as Record<string, unknown>), args.catalog ?? RecipeCatalog.load());
  checkSecretPairings(deployment.settings, (key) => args.secrets?.[key] !== undefined);
  return deployment;
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
): PlatformOutputs {
  const { waves, copies, weightsHosts, compileHost, pulls, frontDoor } = hosts;
  const { settings, plan } = deployment;
  const sshPrivateKey = secrets.sshPrivateKey!;
  const keyReports = new Map<string, pulumi.Output<string>>();
  const doors = frontDoorResources(name, frontDoor, sshPrivateKey, secrets.apiKey, child);
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
  frontDoor: RenderedHosts["frontDoor"],
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

/** The Kubernetes platform: the workloads and, for the strategies with a router, the llm-d router. */
function kubernetesResources(
  name: string,
  kubernetes: RenderedKubernetes,
  deployment: Deployment,
  secrets: ServingSecrets,
  child: pulumi.ComponentResourceOptions,
): PlatformOutputs {
  const { workloads, scalers, monitoring, routerValues } = kubernetes;
  const { settings, plan } = deployment;
  const present = SECRET_KEYS.filter((key) => secrets[key] !== undefined);
  const npu = new NpuWorkloads(
    `${name}-workloads`,
    { workloads, secretEnv: secretEnvironment(present, (key) => secrets[key]!), monitoring, scalers, registryPassword: secrets.registryPassword },
    child,
  );
  const router =
    plan.router && routerValues
      ? new LlmdRouter(
          `${name}-router`,
          {
            release: plan.router.release,
            chart: plan.router.chart,
            version: plan.router.version,
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

  constructor(name: string, args: ModelServingArgs, opts?: pulumi.ComponentResourceOptions) {
    checkInstanceName(name);
    const deployment = planServing(args);
    super("rbln-serving:index:ModelServing", name, {}, opts);
    const { plan } = deployment;
    // A library caller may pass plain strings: every secret is a secret from here on, whatever came in.
    const secrets: ServingSecrets = Object.fromEntries(
      Object.entries(args.secrets ?? {})
        .filter(([, value]) => value !== undefined)
        .map(([key, value]) => [key, pulumi.secret(value)]),
    );
    const present = SECRET_KEYS.filter((key) => secrets[key] !== undefined);
    const rendered = renderDeployment(deployment, {
      stack: pulumi.getStack(),
      instance: name,
      secrets: present,
      hostOptions: args.hostOptions,
      copyOptions: args.copyOptions,
    });
    const platform = rendered.hosts
      ? hostResources(name, rendered.hosts, deployment, secrets, { parent: this })
      : kubernetesResources(name, rendered.kubernetes!, deployment, secrets, { parent: this });

    this.endpoints = platform.endpoints;
    this.units = platform.units;
    this.modelRevision = platform.modelRevision;
    this.deployments = platform.deployments;
    this.curl = platform.endpoints.apply((list) => clientCommand(plan.client, list[0] ?? "http://<endpoint>", secrets.apiKey !== undefined));
    this.selection = { model: plan.model, strategy: plan.strategy, target: plan.target, ...plan.selection };
    this.warnings = messagesAt(plan.messages, "warning");
    this.notes = messagesAt(plan.messages, "note");
    this.scrapeTargets = rendered.hosts?.scrapeTargets ?? [];
    this.compileKeys = pulumi.all(
      deployment.compile.keys.map((k) =>
        (platform.keyReports.get(k.key) ?? pulumi.output("")).apply((stdout) => {
          const digest = reportedDigest(stdout, k.key);
          return { key: k.key, roles: k.roles, ...(digest ? { digest } : {}) };
        }),
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
    });
  }
}
