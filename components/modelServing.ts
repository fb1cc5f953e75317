import * as pulumi from "@pulumi/pulumi";
import type { z } from "zod";
import { SECRET_KEYS, StackSettings, parseStackSettings, secretEnvironment, type SecretKey } from "../core/config/stackConfig";
import { ConfigError } from "../core/errors";
import { planDeployment, type Deployment } from "../core/plan/deployment";
import { RecipeCatalog } from "../core/recipe/catalog";
import { clientCommand } from "../core/render/client";
import { renderHost } from "../core/render/hosts/bundle";
import { renderKubernetesWorkloads } from "../core/render/kubernetes/workloads";
import { routerChartValues } from "../core/router/chartValues";
import { NpuHost, type RankUnit } from "./hosts/npuHost";
import { NpuWorkloads, type RoleDeployment } from "./kubernetes/npuWorkloads";
import { LlmdRouter } from "./router/llmdRouter";

export type ServingSecrets = Partial<Record<SecretKey, pulumi.Input<string>>>;

export interface ModelServingArgs {
  /** The same keys as the `rbln-serving:` stack config; validated before anything is registered. */
  settings: z.input<typeof StackSettings>;
  /** Secret inputs: `sshPrivateKey` (hosts), `pipPassword`, `hfToken`, `apiKey`. */
  secrets?: ServingSecrets;
  /** Recipes to pick the model from; the package's own by default. */
  catalog?: RecipeCatalog;
}

/** Validates settings and secrets together; throws a ConfigError before any resource exists. */
export function planServing(args: ModelServingArgs): Deployment {
  const settings = parseStackSettings(args.settings as Record<string, unknown>);
  const deployment = planDeployment(settings, args.catalog ?? RecipeCatalog.load());
  const has = (key: SecretKey) => args.secrets?.[key] !== undefined;
  if (settings.platform === "hosts" && !has("sshPrivateKey")) {
    throw new ConfigError("sshPrivateKey", "required with platform: hosts; set it with: pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519");
  }
  if (settings.platform === "hosts" && settings.pip.username !== undefined && !has("pipPassword")) {
    throw new ConfigError("pipPassword", "required when pip.username is set; set it with: pulumi config set --secret pipPassword");
  }
  if (settings.platform === "hosts" && has("pipPassword") && settings.pip.username === undefined) {
    throw new ConfigError("pip.username", "required when the pipPassword secret is set (the package index's user name)");
  }
  return deployment;
}

/**
 * A model served on RBLN NPUs from its recipe: the launch plan of the chosen strategy, target and
 * axes, deployed to SSH hosts (systemd units) or to Kubernetes (Deployments and the llm-d router).
 */
export class ModelServing extends pulumi.ComponentResource {
  readonly endpoints: pulumi.Output<string[]>;
  readonly curl: pulumi.Output<string>;
  readonly units: pulumi.Output<RankUnit[]>;
  readonly deployments: pulumi.Output<RoleDeployment[]>;
  readonly selection: Record<string, string>;
  readonly warnings: string[];

  constructor(name: string, args: ModelServingArgs, opts?: pulumi.ComponentResourceOptions) {
    const deployment = planServing(args);
    super("rbln-serving:index:ModelServing", name, {}, opts);
    const { plan, settings } = deployment;
    // A library caller may pass plain strings: every secret is a secret from here on, whatever came in.
    const secrets: ServingSecrets = Object.fromEntries(Object.entries(args.secrets ?? {}).filter(([, value]) => value !== undefined).map(([key, value]) => [key, pulumi.secret(value)]));
    const child = { parent: this };

    let endpoints: pulumi.Output<string[]>;
    if (settings.platform === "hosts") {
      const hosts = deployment.placements.map((placement) => {
        const rendered = renderHost(deployment, placement);
        return new NpuHost(`${name}-${placement.host.name}`, { rendered, sshPrivateKey: secrets.sshPrivateKey!, secrets }, child);
      });
      this.units = pulumi.all(hosts.map((h) => h.units)).apply((all) => all.flat());
      this.deployments = pulumi.output([]);
      endpoints = this.units.apply((units) => units.filter((u) => u.rank === 0).map((u) => u.url));
    } else {
      const present = SECRET_KEYS.filter((key) => secrets[key] !== undefined);
      const workloads = renderKubernetesWorkloads(deployment, { instance: name, namespace: settings.kubernetes.namespace }, present);
      const secretEnv = secretEnvironment(present, (key) => secrets[key]!);
      const npu = new NpuWorkloads(`${name}-workloads`, { workloads, secretEnv }, child);
      this.units = pulumi.output([]);
      this.deployments = npu.deployments;
      if (workloads.router) {
        const router = new LlmdRouter(
          `${name}-router`,
          {
            release: workloads.router.release,
            chart: workloads.router.chart,
            version: workloads.router.version,
            namespace: settings.kubernetes.namespace,
            values: routerChartValues(workloads.router, plan.strategy, settings.kubernetes),
            gateway: settings.kubernetes.gateway,
          },
          // Not after the workloads: their rollout can take hours of compilation, and the pool may exist first.
          child,
        );
        endpoints = router.endpoint.apply((e) => (e ? [e] : []));
      } else {
        endpoints = npu.serviceEndpoints;
      }
    }
    this.endpoints = endpoints;
    this.curl = endpoints.apply((list) => clientCommand(plan.client, list[0] ?? "http://<endpoint>", secrets.apiKey !== undefined));
    this.selection = { model: plan.model, strategy: plan.strategy, target: plan.target, ...plan.selection };
    this.warnings = plan.warnings;
    this.registerOutputs({ endpoints: this.endpoints, curl: this.curl, units: this.units, deployments: this.deployments, selection: this.selection, warnings: this.warnings });
  }
}
