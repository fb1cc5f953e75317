// Type-only imports: the core builds plain data; these types make a misspelled field a compile error.
import type { Unwrap } from "@pulumi/pulumi";
import type { types } from "@pulumi/kubernetes";

/** `@pulumi/kubernetes`'s input types with the Pulumi wrappers taken off: plain, checked Kubernetes objects. */
export type Namespace = Unwrap<types.input.core.v1.Namespace>;
export type ServiceAccount = Unwrap<types.input.core.v1.ServiceAccount>;
export type Secret = Unwrap<types.input.core.v1.Secret>;
export type PersistentVolumeClaim = Unwrap<types.input.core.v1.PersistentVolumeClaim>;
export type ConfigMap = Unwrap<types.input.core.v1.ConfigMap>;
export type Service = Unwrap<types.input.core.v1.Service>;
export type Deployment = Unwrap<types.input.apps.v1.Deployment>;
export type PodSpec = Unwrap<types.input.core.v1.PodSpec>;
export type Container = Unwrap<types.input.core.v1.Container>;
export type Probe = Unwrap<types.input.core.v1.Probe>;
export type NetworkPolicy = Unwrap<types.input.networking.v1.NetworkPolicy>;
export type NetworkPolicyPeer = Unwrap<types.input.networking.v1.NetworkPolicyPeer>;
export type PodDisruptionBudget = Unwrap<types.input.policy.v1.PodDisruptionBudget>;
/** What KEDA passes to the HPA it owns (a ScaledObject's `advanced.horizontalPodAutoscalerConfig.behavior`). */
export type HorizontalPodAutoscalerBehavior = Unwrap<types.input.autoscaling.v2.HorizontalPodAutoscalerBehavior>;
export type Job = Unwrap<types.input.batch.v1.Job>;

/** Every object carries its name: what `render` names files by and the components name resources by. */
export type Named<T> = T & { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> } };

/** Any rendered object, as `render` writes it. */
export type KubeObject = Named<{ apiVersion: string; kind: string }>;
