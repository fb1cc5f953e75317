import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { KubernetesModelRouting } from "../../core/render/kubernetes/modelRouting";

export interface ModelRoutingArgs {
  /** The rendered routing of a Kubernetes stack of models (`kubernetesModelRouting`). */
  routing: KubernetesModelRouting;
  /** The resource name of each model's served-names ConfigMap, in the order of `routing.servedNames`: named after its model. */
  servedNamesResources: readonly string[];
  /** The stack's namespace, which the answers live in. */
  namespace: pulumi.Resource;
}

/**
 * Routing by model name on Kubernetes: the payload processor's chart (in the Gateway's namespace,
 * hooked into the Gateway), each model's served names where it reads them, and the stack's answers
 * (`GET /v1/models`, 404 for a model no route serves) behind a catch-all HTTPRoute.
 */
export class ModelRouting extends pulumi.ComponentResource {
  constructor(name: string, args: ModelRoutingArgs, opts?: pulumi.ComponentResourceOptions) {
    super("rbln-serving:index:ModelRouting", name, {}, opts);
    const { routing } = args;
    const child = { parent: this };
    const { payloadProcessor: ipp } = routing;
    new k8s.helm.v4.Chart(
      `${name}-payload-processor`,
      { chart: `${ipp.repository}/${ipp.chart}`, version: ipp.version, name: ipp.release, namespace: ipp.namespace, values: ipp.values },
      child,
    );
    for (const [i, configMap] of routing.servedNames.entries()) new k8s.core.v1.ConfigMap(args.servedNamesResources[i]!, configMap, child);
    const { answers } = routing;
    const inNamespace = { ...child, dependsOn: [args.namespace] };
    const config = new k8s.core.v1.ConfigMap(`${name}-answers-config`, answers.configMap, inNamespace);
    new k8s.apps.v1.Deployment(`${name}-answers`, answers.deployment, { ...child, dependsOn: [config] });
    new k8s.core.v1.Service(`${name}-answers`, answers.service, inNamespace);
    new k8s.apiextensions.CustomResource(`${name}-answers-route`, answers.httpRoute, inNamespace);
    this.registerOutputs({});
  }
}
