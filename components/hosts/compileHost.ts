import type * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import type { RenderedCompileHost } from "../../core/render/hosts/compileHost";
import { compileKeyStep, hostSteps, setupSteps } from "./steps";

export interface CompileHostArgs {
  rendered: RenderedCompileHost;
  sshPrivateKey: pulumi.Input<string>;
  secrets: { pipPassword?: pulumi.Input<string>; hfToken?: pulumi.Input<string>; registryPassword?: pulumi.Input<string> };
  /** It downloads the weights (the seed), unless the shared cache's lease lets another host do it. */
  downloads: boolean;
}

/**
 * The compile host (compile.host): a CPU server that installs the pinned packages and downloads the
 * weights as an NPU host would, then makes every compile key's cache present before any NPU unit of
 * that key changes: pulled from the registry, or compiled in vllm-rbln's compile-only mode (and pushed).
 * The NPU hosts copy the weights and compiled caches from it as from a peer.
 */
export class CompileHost extends pulumi.ComponentResource {
  readonly weights: command.remote.Command | undefined;
  /** One step per compile key: what the first wave's copies (or, with cache.shared, its units) wait for. */
  readonly unitCommands: command.remote.Command[];

  constructor(name: string, args: CompileHostArgs, opts?: pulumi.ComponentResourceOptions) {
    super("rbln-serving:index:CompileHost", name, {}, opts);
    const { rendered } = args;
    const steps = hostSteps(this, name, rendered.placement.host, args.sshPrivateKey);
    const { install, weights } = setupSteps(steps, rendered, args.secrets, args.downloads);
    this.weights = weights;
    this.unitCommands = rendered.steps.map((compile) =>
      compileKeyStep(steps, `compile-${compile.key}`, compile, args.secrets.registryPassword, [install, ...(weights ? [weights] : [])]),
    );
    this.registerOutputs({});
  }
}
