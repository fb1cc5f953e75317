import * as pulumi from "@pulumi/pulumi";
import type { RenderedFrontDoor } from "../../core/render/hosts/frontDoor/frontDoor";
import { hostSteps } from "../hosts/steps";

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
    const steps = hostSteps(this, name, rendered.host, args.sshPrivateKey);
    const apply = steps.step(
      "apply",
      { create: rendered.applyScript, delete: rendered.removeScript },
      { logging: "stdoutAndStderr" },
      { customTimeouts: rendered.timeouts.apply },
    );
    // Its stdout is the private key: a secret output, never logged.
    const access = steps.step(
      "access",
      { create: rendered.accessScript, delete: rendered.revokeScript },
      { logging: "none" },
      { additionalSecretOutputs: ["stdout"], customTimeouts: rendered.timeouts.access },
    );
    this.url = pulumi.output(rendered.url);
    this.accessKey = pulumi.secret(access.stdout);
    this.ready = [apply, access];
    this.registerOutputs({ url: this.url });
  }
}
