import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import type { RenderedCompileHost } from "../../core/render/hosts/compileHost";
import { HOST_DEFAULTS } from "../../core/render/hosts/defaults";
import { renderPipConfig } from "../../core/render/hosts/pip";
import { remoteCommand } from "../../core/render/hosts/scripts";
import { compileStepTimeout, hostConnection, registryStdin } from "./npuHost";

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
    const host = rendered.placement.host;
    const connection = hostConnection(host, args.sshPrivateKey);
    const step = (suffix: string, script: string, extra: Partial<command.remote.CommandArgs>, options: pulumi.CustomResourceOptions = {}) =>
      new command.remote.Command(`${name}-${suffix}`, { connection, create: remoteCommand(script, host.user === "root"), addPreviousOutputInEnv: false, ...extra }, { parent: this, ...options });
    const { pipPassword, hfToken, registryPassword } = args.secrets;
    const preflight = step("preflight", rendered.preflightScript, { logging: "stdoutAndStderr" });
    const pipConfig = pulumi.all([pipPassword]).apply(([password]) => renderPipConfig(rendered.pipIndexes, password ?? null));
    const install = step("install", rendered.installScript, { stdin: pipConfig, logging: pipPassword !== undefined ? "none" : "stdoutAndStderr" }, { dependsOn: [preflight], customTimeouts: { create: HOST_DEFAULTS.steps.install, update: HOST_DEFAULTS.steps.install } });
    this.weights = args.downloads
      ? step(
          "weights",
          rendered.weightsScript,
          {
            stdin: pulumi.all([hfToken, pipPassword]).apply(([token, password]) => `${token ?? ""}\n${renderPipConfig(rendered.pipIndexes, password ?? null)}`),
            logging: hfToken !== undefined || pipPassword !== undefined ? "none" : "stdoutAndStderr",
          },
          { dependsOn: [preflight], customTimeouts: { create: HOST_DEFAULTS.steps.weights, update: HOST_DEFAULTS.steps.weights } },
        )
      : undefined;
    this.unitCommands = rendered.steps.map((compile) =>
      step(
        `compile-${compile.key}`,
        compile.script,
        // skopeo gets the password on stdin; nothing prints it, but its errors are not ours to vouch for.
        { stdin: registryStdin(registryPassword), logging: registryPassword !== undefined ? "none" : "stdoutAndStderr" },
        { dependsOn: [install, ...(this.weights ? [this.weights] : [])], customTimeouts: { create: compileStepTimeout(compile), update: compileStepTimeout(compile) } },
      ),
    );
    this.registerOutputs({});
  }
}
