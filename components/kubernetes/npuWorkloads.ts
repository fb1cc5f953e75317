import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { MonitoringObjects } from "../../core/render/kubernetes/monitoring";
import type { KubernetesWorkloads } from "../../core/render/kubernetes/workloads";
import type { RenderedScaler } from "../../core/render/kubernetes/scaledObjects";
import { REGISTRY_PASSWORD_KEY } from "../../core/render/kubernetes/compileJob";
import { renamedFrom } from "../renamed";

export interface NpuWorkloadsArgs {
  /** The objects, rendered by the core (`renderKubernetesWorkloads`). */
  workloads: KubernetesWorkloads;
  /** Secret environment (`HF_TOKEN`, `VLLM_API_KEY`) for the Secret the pods reference. */
  secretEnv: Record<string, pulumi.Input<string>>;
  /** The compiled-cache registry's password, for the compile Jobs' Secret. */
  registryPassword?: pulumi.Input<string>;
  /** PodMonitors, PrometheusRule and dashboard ConfigMap (`monitoringObjects`), when monitoring is on. */
  monitoring?: MonitoringObjects | null;
  /** KEDA ScaledObjects of the roles that scale (`renderScalers`); none with fixed replicas. */
  scalers?: readonly RenderedScaler[];
  /** The namespace the stack's models share (created once by ModelServing); unset, these workloads create theirs. */
  namespace?: k8s.core.v1.Namespace;
}

/** One vLLM rank of a pod: its port and the NPUs it takes. */
export interface RankPlacement {
  /** The rank's index in its role (vLLM's data-parallel or pipeline rank). */
  rank: number;
  /** The port the rank serves on in the pod. */
  port: number;
  /** The indexes of the node's NPUs the rank takes (RBLN_DEVICES). */
  devices: number[];
}

export interface RoleDeployment {
  /** The role: main, prefill or decode. */
  role: string;
  /** The Deployment's name. */
  deployment: string;
  /** The Deployment's namespace (kubernetes.namespace). */
  namespace: string;
  /** The replicas the Deployment sets; with autoscaling, KEDA's minReplicas (KEDA sets the count). */
  replicas: number;
  /** The vLLM ranks each pod runs, with their ports and NPUs. */
  ranks: RankPlacement[];
}

/**
 * By role, the Job that fills that role's compile-cache volume, with its script and the registry
 * password's Secret: after `after` (the weights among them: a compile loads the model), before the
 * role's Deployment (which then loads).
 */
function compileJobResources(
  name: string,
  workloads: KubernetesWorkloads,
  registryPassword: pulumi.Input<string> | undefined,
  parent: pulumi.Resource,
  namespace: k8s.core.v1.Namespace,
  after: pulumi.Resource[],
): Map<string, k8s.batch.v1.Job> {
  const registrySecret =
    workloads.registrySecret && registryPassword !== undefined
      ? new k8s.core.v1.Secret(
          `${name}-registry`,
          {
            ...workloads.registrySecret,
            stringData: pulumi.secret(pulumi.output(registryPassword).apply((password) => ({ [REGISTRY_PASSWORD_KEY]: password }))),
          },
          { parent, dependsOn: [namespace] },
        )
      : undefined;
  const compileJobs = new Map<string, k8s.batch.v1.Job>();
  for (const compile of workloads.compileJobs) {
    const script = new k8s.core.v1.ConfigMap(`${name}-${compile.role}-compile-script`, compile.configMap, {
      parent,
      retainOnDelete: true,
      dependsOn: [namespace],
    });
    const timeout = `${Math.ceil(compile.timeoutSeconds / 60)}m`;
    compileJobs.set(
      compile.role,
      new k8s.batch.v1.Job(`${name}-${compile.role}-compile`, compile.job, {
        parent,
        dependsOn: [script, ...after, ...(registrySecret ? [registrySecret] : [])],
        customTimeouts: { create: timeout, update: timeout },
      }),
    );
  }
  return compileJobs;
}

function monitoringResources(name: string, monitoring: MonitoringObjects, parent: pulumi.Resource, namespace: k8s.core.v1.Namespace): void {
  const inNamespace = { parent, dependsOn: [namespace] };
  for (const { id, object } of monitoring.podMonitors) new k8s.apiextensions.CustomResource(`${name}-${id}-monitor`, object, inNamespace);
  new k8s.apiextensions.CustomResource(`${name}-alerts`, monitoring.prometheusRule, inNamespace);
  // In the monitoring namespace, where the Grafana sidecar looks; that namespace belongs to the monitoring stack.
  if (monitoring.dashboard) new k8s.core.v1.ConfigMap(`${name}-dashboard`, monitoring.dashboard, { parent });
}

/**
 * The vLLM roles of one model on NPU nodes: per role a launch ConfigMap, a Deployment, a
 * PodDisruptionBudget, a NetworkPolicy, (for the aggregated strategies) a Service and (with
 * autoscaling) a KEDA ScaledObject; the weights and compile caches on volumes that outlive it.
 */
export class NpuWorkloads extends pulumi.ComponentResource {
  readonly deployments: pulumi.Output<RoleDeployment[]>;
  readonly serviceEndpoints: pulumi.Output<string[]>;

  constructor(name: string, args: NpuWorkloadsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("rbln-serving:index:NpuWorkloads", name, {}, renamedFrom("rbln-serving:kubernetes:NpuWorkloads", opts));
    const { workloads } = args;
    const child = { parent: this };
    // The namespace and the caches stay when the serving resources go: deleting them would drop hours of compiled graphs.
    const keep = { ...child, retainOnDelete: true };
    const namespace = args.namespace ?? new k8s.core.v1.Namespace(`${name}-namespace`, workloads.namespace, keep);
    const inNamespace = { ...child, dependsOn: [namespace] };
    const serviceAccount = new k8s.core.v1.ServiceAccount(`${name}-service-account`, workloads.serviceAccount, inNamespace);
    const secret = workloads.secret
      ? new k8s.core.v1.Secret(
          `${name}-secrets`,
          { ...workloads.secret, stringData: pulumi.secret({ ...args.secretEnv, ...workloads.credentialEnv }) },
          inNamespace,
        )
      : undefined;
    const volumes = workloads.volumes.map(
      (volume) => new k8s.core.v1.PersistentVolumeClaim(`${name}-${volume.id}`, volume.object, { ...keep, dependsOn: [namespace] }),
    );
    const weightsTimeout = `${Math.ceil(workloads.weightsJobTimeoutSeconds / 60)}m`;
    // Named in Kubernetes after the models and revisions: a new pair is a new Job (a Job's spec cannot change).
    const weightsJob = new k8s.batch.v1.Job(`${name}-weights-download`, workloads.weightsJob, {
      ...child,
      dependsOn: [serviceAccount, ...volumes, ...(secret ? [secret] : [])],
      customTimeouts: { create: weightsTimeout, update: weightsTimeout },
    });
    const compileJobs = compileJobResources(name, workloads, args.registryPassword, this, namespace, [serviceAccount, weightsJob, ...volumes]);
    const roleResources = workloads.roles.map((role) => {
      // Kept when replaced, so `kubectl rollout undo` finds the previous revision's launch script.
      const configMap = new k8s.core.v1.ConfigMap(`${name}-${role.role}-launch`, role.configMap, { ...keep, dependsOn: [namespace] });
      const rolloutTimeout = `${Math.ceil(role.rolloutTimeoutSeconds / 60)}m`;
      const scaler = args.scalers?.find((s) => s.role === role.role);
      // Before the Deployment: a change of compile key reaches the scaler's queries before the pods roll,
      // so KEDA holds the count while the new key compiles.
      const scaledObject = scaler ? new k8s.apiextensions.CustomResource(`${name}-${role.role}-scaler`, scaler.object, inNamespace) : undefined;
      const deployment = new k8s.apps.v1.Deployment(`${name}-${role.role}`, role.deployment, {
        ...child,
        dependsOn: [
          configMap,
          serviceAccount,
          weightsJob,
          ...volumes,
          ...(secret ? [secret] : []),
          ...(scaledObject ? [scaledObject] : []),
          ...(compileJobs.has(role.role) ? [compileJobs.get(role.role)!] : []),
        ],
        // Compilation on a cold cache takes hours per wave: wait for the rollout as long as the startup budget allows.
        customTimeouts: { create: rolloutTimeout, update: rolloutTimeout },
      });
      new k8s.policy.v1.PodDisruptionBudget(`${name}-${role.role}-disruption-budget`, role.podDisruptionBudget, inNamespace);
      new k8s.networking.v1.NetworkPolicy(`${name}-${role.role}-network-policy`, role.networkPolicy, inNamespace);
      const service = role.service ? new k8s.core.v1.Service(`${name}-${role.role}`, role.service, inNamespace) : undefined;
      return { role, deployment, service };
    });
    if (args.monitoring) monitoringResources(name, args.monitoring, this, namespace);
    this.deployments = pulumi.output(
      workloads.roles.map((r) => ({
        role: r.role,
        deployment: r.deployment.metadata.name,
        namespace: workloads.namespace.metadata.name,
        replicas: r.replicas,
        ranks: r.ranks,
      })),
    );
    this.serviceEndpoints = pulumi.all(
      roleResources
        .filter((r) => r.service)
        .map(({ role, service }) => pulumi.interpolate`http://${service!.metadata.name}.${service!.metadata.namespace}.svc.cluster.local:${role.ports[0]}`),
    );
    this.registerOutputs({ deployments: this.deployments, serviceEndpoints: this.serviceEndpoints });
  }
}
