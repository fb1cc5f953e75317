import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { KubeObject, KubernetesWorkloads } from "../../core/render/kubernetes/workloads";
import { renamedFrom } from "../renamed";

export interface NpuWorkloadsArgs {
  /** The objects, rendered by the core (`renderKubernetesWorkloads`). */
  workloads: KubernetesWorkloads;
  /** Secret environment (`HF_TOKEN`, `VLLM_API_KEY`) for the Secret the pods reference. */
  secretEnv: Record<string, pulumi.Input<string>>;
}

export interface RoleDeployment {
  role: string;
  deployment: string;
  namespace: string;
  replicas: number;
  /** The vLLM ranks each pod runs, with their ports and NPUs. */
  ranks: { rank: number; port: number; devices: number[] }[];
}

/** Wraps a rendered object's fields as resource args; the object itself is the source of truth. */
function spec<T>(object: KubeObject): T {
  const { apiVersion: _, kind: __, ...rest } = object;
  return rest as T;
}

/**
 * The vLLM roles of one model on NPU nodes: per role a launch ConfigMap, a Deployment and (for the
 * aggregated strategies) a Service; the weights and compile caches on volumes that outlive it.
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
    const namespace = new k8s.core.v1.Namespace(`${name}-namespace`, spec(workloads.namespace), keep);
    const inNamespace = { ...child, dependsOn: [namespace] };
    const secret = workloads.secret
      ? new k8s.core.v1.Secret(`${name}-secrets`, { ...spec<k8s.core.v1.SecretArgs>(workloads.secret), stringData: pulumi.secret(args.secretEnv) }, inNamespace)
      : undefined;
    const volumes = workloads.volumes.map((volume) => new k8s.core.v1.PersistentVolumeClaim(`${name}-${volume.id}`, spec(volume.object), { ...keep, dependsOn: [namespace] }));
    const roleResources = workloads.roles.map((role) => {
      const configMap = new k8s.core.v1.ConfigMap(`${name}-${role.role}-launch`, spec(role.configMap), inNamespace);
      const deployment = new k8s.apps.v1.Deployment(`${name}-${role.role}`, spec(role.deployment), {
        ...child,
        dependsOn: [configMap, ...volumes, ...(secret ? [secret] : [])],
        // Compilation on a cold cache takes hours: wait for the rollout as long as the startup budget allows.
        customTimeouts: { create: `${Math.ceil(role.rolloutTimeoutSeconds / 60)}m`, update: `${Math.ceil(role.rolloutTimeoutSeconds / 60)}m` },
      });
      const service = role.service ? new k8s.core.v1.Service(`${name}-${role.role}`, spec(role.service), inNamespace) : undefined;
      return { role, deployment, service };
    });
    if (workloads.networkPolicy) new k8s.networking.v1.NetworkPolicy(`${name}-network-policy`, spec(workloads.networkPolicy), inNamespace);
    this.deployments = pulumi.output(
      workloads.roles.map((r) => ({ role: r.role, deployment: r.deployment.metadata.name, namespace: workloads.namespace.metadata.name, replicas: r.replicas, ranks: r.ranks })),
    );
    this.serviceEndpoints = pulumi.all(
      roleResources.filter((r) => r.service).map(({ role, service }) => pulumi.interpolate`http://${service!.metadata.name}.${service!.metadata.namespace}.svc.cluster.local:${role.ports[0]}`),
    );
    this.registerOutputs({ deployments: this.deployments, serviceEndpoints: this.serviceEndpoints });
  }
}
