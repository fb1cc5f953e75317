import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { httpUrl } from "../../core/address";
import { LLM_D_CHART_REPOSITORY } from "../../core/render/kubernetes/chartValues";
import { renamedFrom } from "../renamed";

export interface LlmdRouterArgs {
  release: string;
  chart: string;
  version: string;
  namespace: pulumi.Input<string>;
  /** Chart values in the llm-d-router-gateway layout (`routerChartValues`). */
  values: Record<string, unknown>;
  /** The Gateway the chart's HTTPRoute attaches to; its address is the endpoint. */
  gateway?: { name: string; namespace?: string };
  /** A PodDisruptionBudget over the chart's EPP pods (`KubernetesWorkloads.eppDisruptionBudget`): the chart renders none. */
  disruptionBudget?: PodDisruptionBudgetArgs;
}

type PodDisruptionBudgetArgs = ConstructorParameters<typeof k8s.policy.v1.PodDisruptionBudget>[1];

/**
 * The llm-d router for prefill/decode disaggregation: the gateway chart (InferencePool, endpoint
 * picker) from its OCI registry. helm.v4.Chart renders every object as its own resource, so
 * preview shows per-object diffs.
 */
export class LlmdRouter extends pulumi.ComponentResource {
  readonly endpoint: pulumi.Output<string | undefined>;

  constructor(name: string, args: LlmdRouterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("rbln-serving:index:LlmdRouter", name, {}, renamedFrom("rbln-serving:router:LlmdRouter", opts));
    const chart = new k8s.helm.v4.Chart(
      `${name}-chart`,
      { chart: `${LLM_D_CHART_REPOSITORY}/${args.chart}`, version: args.version, name: args.release, namespace: args.namespace, values: args.values },
      { parent: this },
    );
    if (args.disruptionBudget) new k8s.policy.v1.PodDisruptionBudget(`${name}-epp-disruption-budget`, args.disruptionBudget, { parent: this });
    if (args.gateway) {
      const gatewayNamespace = args.gateway.namespace ?? args.namespace;
      // Read, not managed: the Gateway belongs to the cluster's gateway installation. Naming
      // `status` among the args makes the read return it.
      const gateway = new k8s.apiextensions.CustomResource(
        `${name}-gateway`,
        { apiVersion: "gateway.networking.k8s.io/v1", kind: "Gateway", status: undefined },
        { id: pulumi.interpolate`${gatewayNamespace}/${args.gateway.name}`, parent: this, dependsOn: [chart] },
      );
      const status = (gateway as unknown as { status: pulumi.Output<{ addresses?: { value: string }[] } | undefined> }).status;
      this.endpoint = status.apply((s) => {
        const address = s?.addresses?.[0]?.value;
        return address ? httpUrl(address) : undefined;
      });
    } else {
      this.endpoint = pulumi.output(undefined);
    }
    this.registerOutputs({ endpoint: this.endpoint });
  }
}
