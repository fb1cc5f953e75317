import * as pulumi from "@pulumi/pulumi";
import { apiKeyFilterConfig } from "../../core/render/hosts/frontDoor/envoy";
import type { RenderedFrontDoor } from "../../core/render/hosts/frontDoor/frontDoor";
import { hostSteps } from "../hosts/steps";

export interface FrontDoorArgs {
  /** The front door, rendered by the core (`renderFrontDoor`). */
  rendered: RenderedFrontDoor;
  sshPrivateKey: pulumi.Input<string>;
  /** The `apiKey` secret, when set: Envoy's API key filter config is made of it on the apply step's stdin. */
  apiKey?: pulumi.Input<string>;
}

/**
 * The llm-d router's front door on a router host: the endpoint picker (file discovery) and Envoy as
 * containers, the agent that keeps the picker's endpoints file, and each host's key to take its own
 * ranks out of it with before a restart. One URL for every replica and role.
 */
export class FrontDoor extends pulumi.ComponentResource {
  readonly url: pulumi.Output<string>;
  /** Each host's key to the front door's drain and rejoin of its own endpoints, by host name: a secret, for that host's steps' stdin. */
  readonly accessKeys: ReadonlyMap<string, pulumi.Output<string>>;
  /** What a host's steps wait for before they drain: the front door runs, and that host's key works. */
  readonly readyFor: ReadonlyMap<string, pulumi.Resource[]>;

  constructor(name: string, args: FrontDoorArgs, opts?: pulumi.ComponentResourceOptions) {
    super("rbln-serving:index:FrontDoor", name, {}, opts);
    const { rendered } = args;
    const steps = hostSteps(this, name, rendered.host, args.sshPrivateKey);
    // The key reaches the router host on stdin only, as the filter's config file: no script or bootstrap holds it.
    const apiKeyFilter = rendered.apiKeyConfig ? { stdin: pulumi.secret(pulumi.output(args.apiKey!).apply(apiKeyFilterConfig)) } : {};
    const apply = steps.step(
      "apply",
      { create: rendered.applyScript, delete: rendered.removeScript },
      { logging: "stdoutAndStderr", ...apiKeyFilter },
      { customTimeouts: rendered.timeouts.apply },
    );
    const keys = new Map<string, pulumi.Output<string>>();
    const ready = new Map<string, pulumi.Resource[]>();
    for (const access of rendered.access) {
      // Its stdout is the host's private key: a secret output, never logged.
      const step = steps.step(
        `access-${access.host}`,
        { create: access.accessScript, delete: access.revokeScript },
        { logging: "none" },
        { additionalSecretOutputs: ["stdout"], customTimeouts: rendered.timeouts.access },
      );
      keys.set(access.host, pulumi.secret(step.stdout));
      ready.set(access.host, [apply, step]);
    }
    this.url = pulumi.output(rendered.url);
    this.accessKeys = keys;
    this.readyFor = ready;
    this.registerOutputs({ url: this.url });
  }
}
