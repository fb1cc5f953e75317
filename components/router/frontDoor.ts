import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import type { RenderedFrontDoor } from "../../core/render/hosts/frontDoor/frontDoor";
import { remoteCommand } from "../../core/render/hosts/scripts";
import { HOST_DEFAULTS } from "../../core/render/hosts/defaults";
import { hostConnection } from "../hosts/npuHost";

export interface FrontDoorArgs {
  /** The front door, rendered by the core (`renderFrontDoor`). */
  rendered: RenderedFrontDoor;
  sshPrivateKey: pulumi.Input<string>;
}

/**
 * The llm-d router's front door on a router host: the endpoint picker (file discovery) and Envoy as
 * containers, the agent that keeps the picker's endpoints file, and the key the stack's hosts take
 * their ranks out of it with before a restart. One URL for every replica and role.
 */
export class FrontDoor extends pulumi.ComponentResource {
  readonly url: pulumi.Output<string>;
  /** The hosts' key to the front door's drain and rejoin: a secret, for the unit steps' stdin. */
  readonly accessKey: pulumi.Output<string>;
  /** The steps the hosts' unit steps wait for: the front door runs and their key works. */
  readonly ready: pulumi.Resource[];

  constructor(name: string, args: FrontDoorArgs, opts?: pulumi.ComponentResourceOptions) {
    super("rbln-serving:index:FrontDoor", name, {}, opts);
    const { rendered } = args;
    const host = rendered.host;
    const asRoot = host.user === "root";
    const connection = hostConnection(host, args.sshPrivateKey);
    const apply = new command.remote.Command(
      `${name}-apply`,
      { connection, create: remoteCommand(rendered.applyScript, asRoot), delete: remoteCommand(rendered.removeScript, asRoot), addPreviousOutputInEnv: false, logging: "stdoutAndStderr" },
      { parent: this, customTimeouts: { create: HOST_DEFAULTS.steps.install, update: HOST_DEFAULTS.steps.install } },
    );
    // Its stdout is the private key: a secret output, never logged.
    const access = new command.remote.Command(
      `${name}-access`,
      { connection, create: remoteCommand(rendered.accessScript, asRoot), delete: remoteCommand(rendered.revokeScript, asRoot), addPreviousOutputInEnv: false, logging: "none" },
      { parent: this, additionalSecretOutputs: ["stdout"] },
    );
    this.url = pulumi.output(rendered.url);
    this.accessKey = pulumi.secret(access.stdout);
    this.ready = [apply, access];
    this.registerOutputs({ url: this.url });
  }
}
