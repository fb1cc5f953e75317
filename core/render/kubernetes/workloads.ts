import { secretEnvironment, splitCredentialEnv, type SecretKey } from "../../config/secrets";
import { weightsJob } from "./weights";
import { ConfigError } from "../../errors";
import type { Deployment, RouterIntent } from "../../plan/types";
import { KUBERNETES_DEFAULTS } from "./defaults";
import type * as k8s from "./objects";
import { containerSecurity, podAccount, podSecurity } from "./pod";
import { renderRoleWorkload, type RoleWorkload } from "./role";
import { compileJob, type CompileJob } from "./compileJob";
import { eppPodLabels } from "./chartValues";
import { podDisruptionBudget } from "./policies";

export type { KubeObject } from "./objects";
export type { RoleWorkload } from "./role";

export interface KubernetesNames {
  instance: string;
  namespace: string;
}

export interface KubernetesWorkloads {
  namespace: k8s.Named<k8s.Namespace>;
  /** The pods' identity: no API token mounted, since nothing in them talks to the API server. */
  serviceAccount: k8s.Named<k8s.ServiceAccount>;
  /** The stack's Secret (stringData filled by the component): the secrets' variables, and the extraEnv variables whose values carry URL credentials. */
  secret: k8s.Named<k8s.Secret> | null;
  /** Those extraEnv variables' values by their key in the Secret (`<role>.<NAME>`), for the component; `render` writes placeholders. */
  credentialEnv: Record<string, string>;
  /** Volumes by a stable id (`weights`, `<role>-compile-cache`). */
  volumes: { id: string; object: k8s.Named<k8s.PersistentVolumeClaim> }[];
  /** Fills the weights volume once per model and revision; the Deployments start after it. */
  weightsJob: ReturnType<typeof weightsJob>;
  /** How long the weights Job may take. */
  weightsJobTimeoutSeconds: number;
  roles: RoleWorkload[];
  /** Per compile key, its compile (or pull) Job; the role's Deployment waits for it. Empty without compile.enabled and a registry. */
  compileJobs: CompileJob[];
  /** The registry password's Secret (stringData filled by the component), with a registry user. */
  registrySecret: k8s.Named<k8s.Secret> | null;
  router: RouterIntent | null;
  /** The EPP Service the ranks' `<EPP_HOST>` resolves to. */
  eppHost: string | null;
  /** With the router: a PodDisruptionBudget over the chart's EPP pods (the chart renders none), so a node drain leaves one of the two. */
  eppDisruptionBudget: k8s.Named<k8s.PodDisruptionBudget> | null;
}

export function secretName(names: KubernetesNames): string {
  return `${names.instance}-secrets`;
}

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/;

/** The Pod Security level the namespace enforces: what every pod in it meets, the router chart's included. */
function podSecurityLevel(deployment: Deployment, router: RouterIntent | null): "restricted" | "baseline" {
  // The chart's endpoint picker sets no security context, so it meets only `baseline`.
  return deployment.settings.kubernetes.securityContext.runAsNonRoot && router === null ? "restricted" : "baseline";
}

/** A claim replicas on several nodes share: one download and one compilation serve them all. */
function claim(
  name: string,
  namespace: string,
  labels: Record<string, string>,
  size: string,
  storageClass: string | undefined,
): k8s.Named<k8s.PersistentVolumeClaim> {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace, labels },
    spec: {
      accessModes: ["ReadWriteMany"],
      resources: { requests: { storage: size } },
      ...(storageClass ? { storageClassName: storageClass } : {}),
    },
  };
}

/** An Opaque Secret the component fills (its stringData), so the rendered object holds no secret. */
function opaqueSecret(name: string, namespace: string, labels: Record<string, string>): k8s.Named<k8s.Secret> {
  return { apiVersion: "v1", kind: "Secret", metadata: { name, namespace, labels }, type: "Opaque", stringData: {} };
}

function namespaceObject(name: string, level: "restricted" | "baseline"): k8s.Named<k8s.Namespace> {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name,
      labels: {
        "app.kubernetes.io/managed-by": "pulumi",
        "pod-security.kubernetes.io/enforce": level,
        // Say where the namespace falls short of `restricted`, without refusing its pods.
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
      },
    },
  };
}

/** Kubernetes refuses object names over 63 characters: the instance name that makes one is refused first. */
function refuseLongNames(instance: string, objects: readonly k8s.KubeObject[]): void {
  for (const object of objects) {
    if (object.metadata.name.length > 63) {
      throw new ConfigError("name", `"${instance}" makes the ${object.kind} name "${object.metadata.name}" longer than 63 characters; use a shorter name`);
    }
  }
}

/** A PodDisruptionBudget over the chart's EPP pods (the chart renders none): a node drain leaves one of the two. */
function eppBudget(names: KubernetesNames, baseLabels: Record<string, string>, release: string): k8s.Named<k8s.PodDisruptionBudget> {
  return podDisruptionBudget(
    `${names.instance}-epp`,
    names.namespace,
    { ...baseLabels, "app.kubernetes.io/component": "endpoint-picker" },
    eppPodLabels(release),
    1,
  );
}

export function renderKubernetesWorkloads(deployment: Deployment, names: KubernetesNames, secrets: readonly SecretKey[]): KubernetesWorkloads {
  const { compile } = deployment;
  if (!DNS_LABEL.test(names.instance)) {
    throw new ConfigError("name", `"${names.instance}" cannot prefix Kubernetes object names: use 1-40 lower-case letters, digits or '-'`);
  }
  const { plan, settings } = deployment;
  const k8sSettings = settings.kubernetes;
  const { paths, budgets } = KUBERNETES_DEFAULTS;
  const ns = names.namespace;
  const baseLabels = { "app.kubernetes.io/name": "rbln-serving", "app.kubernetes.io/instance": names.instance, "app.kubernetes.io/managed-by": "pulumi" };
  const router = plan.router;
  const eppHost = router ? `${router.release}-epp.${ns}.svc.cluster.local` : null;
  const secretEnv = Object.keys(secretEnvironment(secrets, () => true));
  const serviceAccount: k8s.Named<k8s.ServiceAccount> = {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: `${names.instance}-vllm`, namespace: ns, labels: baseLabels },
    automountServiceAccountToken: false,
  };
  const newClaim = (name: string, labels: Record<string, string>, size: string) => claim(name, ns, labels, size, k8sSettings.storageClass);
  const weights = newClaim(`${names.instance}-weights`, baseLabels, k8sSettings.weightsVolumeSize);
  const hfHome = `${paths.dataRoot}/huggingface`;
  const imagePullSecrets = k8sSettings.imagePullSecrets.length > 0 ? { imagePullSecrets: k8sSettings.imagePullSecrets.map((name) => ({ name })) } : {};
  const secretRef = (name: string, key = name) => ({ name, valueFrom: { secretKeyRef: { name: secretName(names), key } } });
  // A variable whose value carries URL credentials goes in the Secret, under its role, never in a ConfigMap.
  const credentialsOf = (role: (typeof plan.roles)[number]) => Object.entries(splitCredentialEnv(role.ranks[0]!.env).credentials);
  const credentialEnv = Object.fromEntries(plan.roles.flatMap((role) => credentialsOf(role).map(([name, value]) => [`${role.role}.${name}`, value])));
  // One download per model and revision, before any pod starts; the pods never reach the hub.
  const weightsDownload = weightsJob({
    instance: names.instance,
    namespace: ns,
    labels: baseLabels,
    image: k8sSettings.image!,
    models: plan.models,
    hfHome,
    weightsClaim: weights.metadata.name,
    env: secretEnv.filter((name) => name === "HF_TOKEN").map((name) => secretRef(name)),
    pod: { ...podAccount(serviceAccount.metadata.name, imagePullSecrets), securityContext: podSecurity(k8sSettings.securityContext) },
    securityContext: containerSecurity(k8sSettings.securityContext),
    activeDeadlineSeconds: budgets.weightsJobDeadlineSeconds,
  });
  const contexts = plan.roles.map((role) => ({
    role,
    context: {
      deployment,
      instance: names.instance,
      namespace: ns,
      baseLabels,
      router,
      eppHost,
      serviceAccountName: serviceAccount.metadata.name,
      weightsClaim: weights.metadata.name,
      hfHome,
      imagePullSecrets,
      secretEnv: [...secretEnv.map((name) => secretRef(name)), ...credentialsOf(role).map(([name]) => secretRef(name, `${role.role}.${name}`))],
      apiKey: secrets.includes("apiKey"),
      claim: newClaim,
    },
  }));
  const roles = contexts.map(({ context, role }) => renderRoleWorkload(context, role));
  const registrySecret = compile.registry?.username !== undefined ? opaqueSecret(`${names.instance}-registry`, ns, baseLabels) : null;
  // One Job per role and key: each role has its own compile-cache volume.
  const compileJobs =
    compile.mode === "job" || compile.registry
      ? contexts.map(({ context, role }, i) => compileJob(context, role, roles[i]!, compile, registrySecret?.metadata.name ?? null))
      : [];
  const volumes = [{ id: "weights", object: weights }, ...roles.map((role) => ({ id: `${role.role}-compile-cache`, object: role.compileCache }))];
  const eppDisruptionBudget = router ? eppBudget(names, baseLabels, router.release) : null;

  refuseLongNames(names.instance, [
    serviceAccount,
    weightsDownload,
    ...compileJobs.flatMap((c) => [c.job, c.configMap]),
    ...volumes.map((v) => v.object),
    ...roles.flatMap((r) => [r.configMap, r.deployment, r.podDisruptionBudget, r.networkPolicy, ...(r.service ? [r.service] : [])]),
    ...(eppDisruptionBudget ? [eppDisruptionBudget] : []),
  ]);

  return {
    namespace: namespaceObject(ns, podSecurityLevel(deployment, router)),
    serviceAccount,
    secret: secretEnv.length > 0 || Object.keys(credentialEnv).length > 0 ? opaqueSecret(secretName(names), ns, baseLabels) : null,
    credentialEnv,
    volumes,
    weightsJob: weightsDownload,
    weightsJobTimeoutSeconds: budgets.weightsJobDeadlineSeconds,
    roles,
    compileJobs,
    registrySecret,
    router,
    eppHost,
    eppDisruptionBudget,
  };
}
