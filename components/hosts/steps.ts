import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import type { Host } from "../../core/config/schema";
import type { RenderedHost } from "../../core/render/hosts/bundle";
import type { RenderedCompileStep } from "../../core/render/hosts/compileHost";
import { HOST_DEFAULTS } from "../../core/render/hosts/defaults";
import { renderPipConfig } from "../../core/render/hosts/pip";
import { remoteCommand } from "../../core/render/hosts/scripts";
import type { StepTimeouts } from "../../core/render/hosts/stepTimeouts";

/** How the engine reaches a host: the deployer's key; a rebooting host refuses connections for a while, so keep dialing. */
export function hostConnection(host: Host, sshPrivateKey: pulumi.Input<string>): command.types.input.remote.ConnectionArgs {
  const privateKey = pulumi.secret(sshPrivateKey);
  const retries = HOST_DEFAULTS.ssh;
  return {
    host: host.address,
    port: host.port,
    user: host.user,
    privateKey,
    // Without it the provider accepts any server key; the config refuses that unless insecureSkipHostKeyCheck.
    ...(host.hostKey ? { hostKey: host.hostKey } : {}),
    // The bastion takes the same key.
    ...(host.proxy
      ? {
          proxy: {
            host: host.proxy.address,
            port: host.proxy.port,
            user: host.proxy.user,
            privateKey,
            ...(host.proxy.hostKey ? { hostKey: host.proxy.hostKey } : {}),
            ...retries,
          },
        }
      : {}),
    ...retries,
  };
}

/**
 * The steps that hand a credential to a tool (pip, huggingface_hub, skopeo) log all the same: their
 * scripts mask every secret they hold in what the tools print (core/render/scripts/progress.sh), so
 * the hours of an install, a download or a compile show their progress (docs/progress.md).
 */
const MASKED_LOGGING = "stdoutAndStderr";

/** Joins optional secret inputs into one stdin text; secret when any part is. */
export function stdinOf(parts: readonly (pulumi.Input<string> | undefined)[], build: (values: (string | undefined)[]) => string): pulumi.Output<string> {
  return pulumi.all(parts.map((p) => pulumi.output(p))).apply(build);
}

/** The registry password on a step's stdin, one line (empty without); a secret whenever it is set. */
export function registryStdin(password: pulumi.Input<string> | undefined): pulumi.Input<string> {
  return password === undefined ? "\n" : pulumi.secret(pulumi.output(password).apply((p) => `${p}\n`));
}

/** A step's stdin with the variables whose values carry URL credentials appended (env-file lines); a secret when there are any. */
export function withCredentialEnv(stdin: pulumi.Input<string>, credentials: string): pulumi.Input<string> {
  return credentials === "" ? stdin : pulumi.secret(pulumi.output(stdin).apply((text) => `${text}${credentials}`));
}

/** A step's script, and the one that undoes it when the step is deleted. */
export type StepScripts = string | { create: string; delete: string };
/** What a step sets besides its connection and scripts. */
export type StepArgs = Omit<Partial<command.remote.CommandArgs>, "connection" | "create" | "delete">;

/** A step's resource options: its Pulumi timeouts are required, the sum of what its scripts wait for (core/render/hosts/stepTimeouts.ts). */
export type StepOptions = pulumi.CustomResourceOptions & { customTimeouts: StepTimeouts };

/** Makes a host resource's steps: a step named after the resource and the host it runs on. */
export interface HostSteps {
  /** `<name>-<suffix>` on the resource's own host. */
  step(suffix: string, scripts: StepScripts, args: StepArgs, options: StepOptions): command.remote.Command;
  /** A step on another host (a copy's grant on its source), under its full name. */
  on(target: Host, fullName: string, scripts: StepScripts, args: StepArgs, options: StepOptions): command.remote.Command;
}

/**
 * The one way a host resource (an NPU host, the compile host, the front door) makes its steps: each
 * a `command.remote.Command` child of it, over SSH with the deployer's key, its scripts run under
 * bash as root (with `sudo -n` for another user), stdin left for secrets.
 */
export function hostSteps(parent: pulumi.Resource, name: string, host: Host, sshPrivateKey: pulumi.Input<string>): HostSteps {
  const connection = hostConnection(host, sshPrivateKey);
  const on: HostSteps["on"] = (target, fullName, scripts, args, options) => {
    const asRoot = target.user === "root";
    const { create, delete: remove } = typeof scripts === "string" ? { create: scripts, delete: undefined } : scripts;
    return new command.remote.Command(
      fullName,
      {
        connection: target === host ? connection : hostConnection(target, sshPrivateKey),
        create: remoteCommand(create, asRoot),
        ...(remove === undefined ? {} : { delete: remoteCommand(remove, asRoot) }),
        addPreviousOutputInEnv: false,
        ...args,
      },
      { parent, ...options },
    );
  };
  return { on, step: (suffix, scripts, args, options) => on(host, `${name}-${suffix}`, scripts, args, options) };
}

/**
 * What a host that installs the pinned packages does first: preflight (reads only), then the install
 * and, on a host that downloads, the weights, in parallel. The pip password and the hub token go on
 * stdin, never on a command line.
 */
export function setupSteps(
  steps: HostSteps,
  rendered: Pick<RenderedHost, "preflightScript" | "installScript" | "weightsScript" | "pipIndexes" | "timeouts">,
  secrets: { pipPassword?: pulumi.Input<string>; hfToken?: pulumi.Input<string> },
  downloads: boolean,
): { preflight: command.remote.Command; install: command.remote.Command; weights: command.remote.Command | undefined } {
  const { pipPassword, hfToken } = secrets;
  const preflight = steps.step("preflight", rendered.preflightScript, { logging: MASKED_LOGGING }, { customTimeouts: rendered.timeouts.preflight });
  const pipConfig = stdinOf([pipPassword], ([password]) => renderPipConfig(rendered.pipIndexes, password ?? null));
  const install = steps.step(
    "install",
    rendered.installScript,
    { stdin: pipConfig, logging: MASKED_LOGGING },
    { dependsOn: [preflight], customTimeouts: rendered.timeouts.install },
  );
  const weights = downloads
    ? steps.step(
        "weights",
        rendered.weightsScript,
        {
          stdin: stdinOf([hfToken, pipPassword], ([token, password]) => `${token ?? ""}\n${renderPipConfig(rendered.pipIndexes, password ?? null)}`),
          logging: MASKED_LOGGING,
        },
        { dependsOn: [preflight], customTimeouts: rendered.timeouts.weights },
      )
    : undefined;
  return { preflight, install, weights };
}

/** One compile key's step (a compile, or a pull from the registry): skopeo gets the registry password on stdin. */
export function compileKeyStep(
  steps: HostSteps,
  suffix: string,
  compile: RenderedCompileStep,
  registryPassword: pulumi.Input<string> | undefined,
  dependsOn: pulumi.Resource[],
): command.remote.Command {
  return steps.step(
    suffix,
    compile.script,
    // The registry password's line, then the role's variables that carry URL credentials.
    { stdin: withCredentialEnv(registryStdin(registryPassword), compile.credentialEnvText), logging: MASKED_LOGGING },
    { dependsOn, customTimeouts: compile.timeouts },
  );
}
