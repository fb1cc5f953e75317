import * as pulumi from "@pulumi/pulumi";
import { apiKeyFilterConfig } from "../../core/render/hosts/frontDoor/envoy";
import type { RenderedFrontDoor, RenderedRouterHost } from "../../core/render/hosts/frontDoor/frontDoor";
import { hostSteps } from "../hosts/steps";

export interface FrontDoorArgs {
  /** One router host of the front door, rendered by the core (`renderFrontDoor`). */
  rendered: RenderedRouterHost;
  sshPrivateKey: pulumi.Input<string>;
  /** The `apiKey` secret, when set: Envoy's API key filter config is made of it on the apply step's stdin. */
  apiKey?: pulumi.Input<string>;
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
 * and each host's key to take its own ranks out of it with before a restart.
 */
export class FrontDoor extends pulumi.ComponentResource {
  /** This router host's Envoy. */
  readonly url: pulumi.Output<string>;
  /** Each host's key to this router host's drain and rejoin of its own endpoints, by host name: a secret, for that host's steps' stdin. */
  readonly accessKeys: ReadonlyMap<string, pulumi.Output<string>>;
  /** What a host's steps wait for before they drain: this front door runs, and that host's key works. */
  readonly readyFor: ReadonlyMap<string, pulumi.Resource[]>;
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
        { additionalSecretOutputs: ["stdout"], customTimeouts: args.tls!.timeouts },
      );
      this.tlsBundles[tls.router] = pulumi.secret(step.stdout);
      this.tlsSteps[tls.router] = step;
    }
    const apply = steps.step(
      "apply",
      { create: rendered.applyScript, delete: rendered.removeScript },
      { logging: "stdoutAndStderr", ...applyStdin(rendered, this.tlsBundles[rendered.host.name] ?? args.tlsBundle, args.apiKey) },
      {
        customTimeouts: rendered.timeouts.apply,
        dependsOn: [...(args.after ?? []), ...(this.tlsSteps[rendered.host.name] ? [this.tlsSteps[rendered.host.name]!] : [])],
      },
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
    this.applied = apply;
    this.registerOutputs({ url: this.url });
  }
}

/**
 * The apply step's stdin, a secret, in the order front-door-apply.sh reads it: this host's TLS lines
 * (several router hosts), then Envoy's API key filter config (apiKey). The key reaches the router host
 * this way only, as the filter's config file: no script or bootstrap holds it.
 */
function applyStdin(rendered: RenderedRouterHost, tlsBundle: pulumi.Input<string> | undefined, apiKey: pulumi.Input<string> | undefined) {
  if (!tlsBundle && !rendered.apiKeyConfig) return {};
  const tls = pulumi.output(tlsBundle ?? "").apply((text) => (text ? `${text.trimEnd()}\n` : ""));
  const filter = rendered.apiKeyConfig ? pulumi.output(apiKey!).apply(apiKeyFilterConfig) : pulumi.output("");
  return { stdin: pulumi.secret(pulumi.all([tls, filter]).apply(([lines, config]) => `${lines}${config}`)) };
}
