// The one render of a stack: each model's deployment rendered on its own, named after its entry, and
// what the models share (on Kubernetes, the namespace). A stack without models renders its one model
// under the instance's own name, exactly as before models.
import { ConfigError } from "../errors";
import type { StackPlan } from "../plan/stack";
import type { Deployment } from "../plan/types";
import { type RenderedDeployment, type RenderOptions, renderDeployment } from "./deployment";
import { type KubernetesModelRouting, kubernetesModelRouting } from "./kubernetes/modelRouting";
import type * as k8s from "./kubernetes/objects";

export interface RenderedStack {
  plan: StackPlan;
  /** Each model's render, in the plan's order, under its own instance name (modelInstance). */
  models: RenderedDeployment[];
  /** Kubernetes with models: the one namespace every model's objects live in; null otherwise (the model's workloads carry it). */
  namespace: k8s.Named<k8s.Namespace> | null;
  /** Kubernetes with models and monitoring: the one dashboard, whose `model` variable picks a model; null otherwise (the model's monitoring carries it). */
  dashboard: k8s.Named<k8s.ConfigMap> | null;
  /** Kubernetes with models: the payload processor, each model's served names, the answers (core/render/kubernetes/modelRouting.ts). */
  routing: KubernetesModelRouting | null;
}

/** What a model's resources, objects and files on hosts are named after: the instance's name, and with models its entry's too. */
export function modelInstance(instance: string, deployment: Pick<Deployment, "entry">): string {
  return deployment.entry.name === null ? instance : `${instance}-${deployment.entry.name}`;
}

/** The namespace every model shares: each model's endpoint picker runs there, from the router chart, which meets only the `baseline` Pod Security level. */
function sharedNamespace(models: readonly RenderedDeployment[]): k8s.Named<k8s.Namespace> {
  const namespace = models[0]!.kubernetes!.workloads.namespace;
  return { ...namespace, metadata: { ...namespace.metadata, labels: { ...namespace.metadata.labels, "pod-security.kubernetes.io/enforce": "baseline" } } };
}

/** Renders every model of a validated stack for its platform. */
export function renderStack(plan: StackPlan, options: RenderOptions): RenderedStack {
  if (plan.settings.models !== undefined && plan.settings.platform === "hosts")
    throw new ConfigError(
      "models",
      "on platform hosts the front door does not route by model name yet (issue 30); use platform kubernetes, or a stack per model",
    );
  const models = plan.models.map((deployment) => renderDeployment(deployment, { ...options, instance: modelInstance(options.instance, deployment) }));
  if (plan.settings.models === undefined || plan.settings.platform !== "kubernetes") return { plan, models, namespace: null, dashboard: null, routing: null };
  // Every model's monitoring renders the same dashboard: the stack has it once, under the instance's name.
  const dashboard = models[0]!.kubernetes!.monitoring?.dashboard;
  const shared = models.map((m) => {
    const { monitoring } = m.kubernetes!;
    return monitoring ? { ...m, kubernetes: { ...m.kubernetes!, monitoring: { ...monitoring, dashboard: null } } } : m;
  });
  return {
    plan,
    models: shared,
    namespace: sharedNamespace(models),
    routing: kubernetesModelRouting(plan, options.instance),
    dashboard: dashboard
      ? {
          ...dashboard,
          metadata: {
            ...dashboard.metadata,
            name: `${options.instance}-dashboard`,
            labels: { ...dashboard.metadata.labels, "app.kubernetes.io/instance": options.instance },
          },
        }
      : null,
  };
}
