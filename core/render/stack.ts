// The one render of a stack: each model's deployment rendered on its own, named after its entry, and
// what the models share (on Kubernetes, the namespace). A stack without models renders its one model
// under the instance's own name, exactly as before models.
import { modelEppSlots } from "../plan/ports";
import type { StackPlan } from "../plan/stack";
import type { Deployment } from "../plan/types";
import { frontDoorOptions, type RenderedDeployment, type RenderOptions, renderDeployment } from "./deployment";
import type { RenderedFrontDoor } from "./hosts/frontDoor/frontDoor";
import { renderModelsFrontDoor } from "./hosts/frontDoor/modelsFrontDoor";
import { deploymentId } from "./hosts/names";
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
  /**
   * Hosts with models: the one front door (each router host's Envoy, and every model's EPP and agent
   * there); each model's own render keeps its sidecars, urls and scrape targets, and no router host.
   * Null otherwise (a stack of one model's is its model's).
   */
  frontDoor: RenderedFrontDoor | null;
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
  const several = plan.settings.models !== undefined;
  const slots = modelEppSlots(plan.models.map((m) => m.entry.name ?? ""));
  const models = plan.models.map((deployment, i) =>
    renderDeployment(deployment, { ...options, instance: modelInstance(options.instance, deployment), ...(several ? { eppSlot: slots[i]! } : {}) }),
  );
  if (!several) return { plan, models, namespace: null, dashboard: null, routing: null, frontDoor: null };
  if (plan.settings.platform === "hosts") return hostsStack(plan, models, options);
  return { ...kubernetesStack(models, options.instance), plan, routing: kubernetesModelRouting(plan, options.instance), frontDoor: null };
}

/** Hosts with models: the one front door, its router hosts taken out of each model's render. */
function hostsStack(plan: StackPlan, models: RenderedDeployment[], options: RenderOptions): RenderedStack {
  const frontDoor = renderModelsFrontDoor(
    models.map((m) => ({ deployment: m.deployment, id: m.hosts!.id })),
    frontDoorOptions(options, deploymentId(options.stack, options.instance)),
  );
  const own = models.map((m) => (m.hosts?.frontDoor ? { ...m, hosts: { ...m.hosts, frontDoor: { ...m.hosts.frontDoor, routers: [] } } } : m));
  return { plan, models: own, namespace: null, dashboard: null, routing: null, frontDoor };
}

/** Kubernetes with models: the shared namespace and dashboard, taken out of each model's render. */
function kubernetesStack(models: RenderedDeployment[], instance: string): Pick<RenderedStack, "models" | "namespace" | "dashboard"> {
  // Every model's monitoring renders the same dashboard: the stack has it once, under the instance's name.
  const dashboard = models[0]!.kubernetes!.monitoring?.dashboard;
  const shared = models.map((m) => {
    const { monitoring } = m.kubernetes!;
    return monitoring ? { ...m, kubernetes: { ...m.kubernetes!, monitoring: { ...monitoring, dashboard: null } } } : m;
  });
  return {
    models: shared,
    namespace: sharedNamespace(models),
    dashboard: dashboard
      ? {
          ...dashboard,
          metadata: {
            ...dashboard.metadata,
            name: `${instance}-dashboard`,
            labels: { ...dashboard.metadata.labels, "app.kubernetes.io/instance": instance },
          },
        }
      : null,
  };
}
