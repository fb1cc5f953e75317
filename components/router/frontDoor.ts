import * as pulumi from "@pulumi/pulumi";
import type { RenderedFrontDoor, RenderedRouterHost } from "../../core/render/hosts/frontDoor/frontDoor";
import { HOST_DEFAULTS } from "../../core/render/hosts/defaults";
import { hostSteps } from "../hosts/steps";

export interface FrontDoorArgs {
  /** One router host of the front door, rendered by the core (`renderFrontDoor`). */
  rendered: RenderedRouterHost;
  sshPrivateKey: pulumi.Input<string>;
  /** On the first of several router hosts: the steps that make the stack's TLS certificates, one per router host (`RenderedFrontDoor.tls`). */
  tls?: NonNullable<RenderedFrontDoor["tls"]>;
  /** With several router hosts: this host's certificate and key, from its step on the first router host (`tlsBundles`). */
  tlsBundle?: pulumi.Input<string>;
  /** The previous router host's apply (a change rolls one router host at a time), and this host's tls step on the first. */
  after?: pulumi.Resource[];
}

/**
 * The llm-d router's front door on one router host: the endpoint picker (file discovery) and Envoy as
 * containers, the agent that keeps the picker's endpoints file, keepalived with a virtual address,
 * and the key the stack's hosts take their ranks out of it with before a restart.
 */
export class FrontDoor extends pulumi.ComponentResource {
  /** This router host's Envoy. */
  readonly url: pulumi.Output<string>;
  /** The hosts' key to the front door's drain and rejoin: a secret, for the unit steps' stdin. */
  readonly accessKey: pulumi.Output<string>;
  /** The steps the hosts' unit steps wait for: the front door runs and their key works. */
  readonly ready: pulumi.Resource[];
  /** The step the next router host's apply waits for. */
  readonly applied: pulumi.Resource;
  /** On the first of several router hosts: each router host's certificate and key (secrets), by router host, for their apply steps. */
  readonly tlsBundles: Record<string, pulumi.Output<string>> = {};
  /** On the first of several router hosts: the steps that print them, which each apply step waits for. */
  readonly tlsSteps: Record<string, pulumi.Resource> = {};

  constructor(name: string, args: FrontDoorArgs, opts?: pulumi.ComponentResourceOptions) {
    super("rbln-serving:index:FrontDoor", name, {}, opts);
    const { rendered } = args;
    const steps = hostSteps(this, name, rendered.host, args.sshPrivateKey);
    // Their stdout holds a router host's key: a secret output, never logged.
    for (const tls of args.tls?.steps ?? []) {
      const step = steps.step(
        `tls-${tls.router}`,
        { create: tls.script, delete: tls.removeScript },
        { logging: "none" },
        { additionalSecretOutputs: ["stdout"] },
      );
      this.tlsBundles[tls.router] = pulumi.secret(step.stdout);
      this.tlsSteps[tls.router] = step;
    }
    const bundle = this.tlsBundles[rendered.host.name] ?? args.tlsBundle;
    const apply = steps.step(
      "apply",
      { create: rendered.applyScript, delete: rendered.removeScript },
      { logging: "stdoutAndStderr", ...(bundle ? { stdin: pulumi.secret(bundle) } : {}) },
      {
        customTimeouts: { create: HOST_DEFAULTS.steps.install, update: HOST_DEFAULTS.steps.install },
        dependsOn: [...(args.after ?? []), ...(this.tlsSteps[rendered.host.name] ? [this.tlsSteps[rendered.host.name]!] : [])],
      },
    );
    // Its stdout is the private key: a secret output, never logged.
    const access = steps.step(
      "access",
      { create: rendered.accessScript, delete: rendered.revokeScript },
      { logging: "none" },
      { additionalSecretOutputs: ["stdout"] },
    );
    this.url = pulumi.output(rendered.url);
    this.accessKey = pulumi.secret(access.stdout);
    this.ready = [apply, access];
    this.applied = apply;
    this.registerOutputs({ url: this.url });
  }
}
