import type * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { SECRET_ENV, secretEnvironment, type SecretKey } from "../../core/config/secrets";
import { renderSecretEnv, type RenderedHost } from "../../core/render/hosts/bundle";
import type { RenderedCopy } from "../../core/render/hosts/copies";
import type { RenderedCompileStep } from "../../core/render/hosts/compileHost";
import type { RenderedSidecar } from "../../core/render/hosts/frontDoor/frontDoor";
import { renamedFrom } from "../renamed";
import { compileKeyStep, hostSteps, setupSteps, stdinOf, withCredentialEnv, type HostSteps } from "./steps";

export interface HostSecrets {
  pipPassword?: pulumi.Input<string>;
  hfToken?: pulumi.Input<string>;
  apiKey?: pulumi.Input<string>;
  registryPassword?: pulumi.Input<string>;
}

export interface NpuHostArgs {
  /** Everything this host runs, rendered by the core (`renderHost`). */
  rendered: RenderedHost;
  sshPrivateKey: pulumi.Input<string>;
  secrets: HostSecrets;
  /** The unit steps of the previous rollout wave: this host's units change only after those serve. */
  afterUnits?: pulumi.Resource[];
  /** The seed downloads from the hub; every other host copies (`copies`). */
  downloads: boolean;
  /** What this host copies from peers, each after the peer's steps that produce it. */
  copies?: PeerCopy[];
  /** Behind the front door: its key for the unit steps' drains, what they wait for, and this host's routing sidecar. */
  frontDoor?: { accessKeys: pulumi.Input<string>[]; after: pulumi.Resource[]; sidecar?: RenderedSidecar };
  /** Compiled caches this host pulls from the registry before its units (a registry and no compile host). */
  pulls?: RenderedCompileStep[];
}

export interface PeerCopy {
  rendered: RenderedCopy;
  /** Resource name of the source's NpuHost: its grant and revoke steps are named after it. */
  sourceName: string;
  /** The source's steps that finish what is copied: its download, or its unit steps (compiled and serving). */
  after: pulumi.Resource[];
}

/** One rank's systemd unit on a host. */
export interface RankUnit {
  /** The systemd unit's name. */
  unit: string;
  /** The host's name (hosts[].name). */
  host: string;
  /** The role: main, prefill or decode. */
  role: string;
  /** The rank's index in its role. */
  rank: number;
  /** Where the rank serves its API: http://<address>:<port>. */
  url: string;
}

/**
 * Each copy: a one-time grant on the source (its stdout, the private key, is secret and never
 * logged), the copy here with that key on stdin, then the grant's removal.
 */
function peerCopySteps(steps: HostSteps, hostName: string, copies: readonly PeerCopy[], preflight: pulumi.Resource): command.remote.Command[] {
  return copies.map(({ rendered: copy, sourceName, after }) => {
    const source = copy.source.host;
    const kind = copy.kind === "weights" ? "" : "compile-";
    const allow = steps.on(
      source,
      `${sourceName}-allow-${kind}${hostName}`,
      { create: copy.allowScript, delete: copy.revokeScript },
      { logging: "none" },
      { dependsOn: after, additionalSecretOutputs: ["stdout"], customTimeouts: copy.timeouts.allow },
    );
    const copied = steps.step(
      `copy-${kind}${source.name}`,
      copy.copyScript,
      { stdin: pulumi.secret(allow.stdout), logging: "stdoutAndStderr" },
      { dependsOn: [preflight, allow], customTimeouts: copy.timeouts.copy },
    );
    steps.on(
      source,
      `${sourceName}-revoke-${kind}${hostName}`,
      copy.revokeScript,
      { logging: "stdoutAndStderr" },
      { dependsOn: [copied], customTimeouts: copy.timeouts.revoke },
    );
    return copied;
  });
}

/**
 * One RBLN NPU server over SSH: preflight, then the pinned install and the weights (the seed
 * downloads them from the hub, every other host copies them from the seed) in parallel, the compiled
 * cache copied from a host of an earlier wave, then one systemd unit per rank, each step waiting until its rank serves (and rolling
 * its unit back if it does not), after the previous rollout wave's units serve.
 */
export class NpuHost extends pulumi.ComponentResource {
  readonly units: pulumi.Output<RankUnit[]>;
  readonly unitCommands: command.remote.Command[];
  /** The hub download, on the seed host only. */
  readonly weights: command.remote.Command | undefined;
  /** This host's pulls of compiled caches, one per compile key it pulls. */
  readonly pullCommands: command.remote.Command[];

  constructor(name: string, args: NpuHostArgs, opts?: pulumi.ComponentResourceOptions) {
    // Args carry the SSH key and secrets: keep them out of the component's recorded inputs.
    super("rbln-serving:index:NpuHost", name, {}, renamedFrom("rbln-serving:hosts:NpuHost", opts));
    const { rendered } = args;
    const host = rendered.placement.host;
    const steps = hostSteps(this, name, host, args.sshPrivateKey);
    const { step } = steps;
    const { preflight, install, weights } = setupSteps(steps, rendered, args.secrets, args.downloads);
    this.weights = weights;

    const copies = peerCopySteps(steps, host.name, args.copies ?? [], preflight);

    // After the install, which creates the service user the pulled files belong to.
    this.pullCommands = (args.pulls ?? []).map((pull) => compileKeyStep(steps, `pull-compile-${pull.key}`, pull, args.secrets.registryPassword, [install]));

    // The variables SECRET_ENV names (HF_TOKEN, VLLM_API_KEY), from the secrets that carry them.
    const envKeys = Object.keys(SECRET_ENV) as (SecretKey & keyof HostSecrets)[];
    const secretEnv = stdinOf(
      envKeys.map((key) => args.secrets[key]),
      (values) => renderSecretEnv(secretEnvironment(envKeys, (key) => values[envKeys.indexOf(key)])),
    );
    // A step behind the front door reads its keys first (one per router host, each up to its last line), then the variables.
    const frontDoor = args.frontDoor;
    const keyThen = (rest: pulumi.Input<string>) =>
      pulumi.secret(
        pulumi.all([pulumi.all(frontDoor!.accessKeys), rest]).apply(([keys, text]) => `${keys.map((key) => `${key.trimEnd()}\n`).join("")}${text}`),
      );
    // The sidecar restarts every decode endpoint of the host: in the host's rollout wave, after the previous wave's units.
    const sidecar = frontDoor?.sidecar
      ? [
          step(
            "sidecar",
            { create: frontDoor.sidecar.applyScript, delete: frontDoor.sidecar.removeScript },
            { stdin: keyThen(""), logging: "stdoutAndStderr" },
            { dependsOn: [preflight, ...frontDoor.after, ...(args.afterUnits ?? [])], customTimeouts: frontDoor.sidecar.timeouts },
          ),
        ]
      : [];
    // Each data-parallel group's restart unit, before its ranks' units name it (OnFailure=).
    const groups = new Map(
      rendered.groups.map((group) => [
        group.role,
        step(
          `${group.role}-group`,
          { create: group.applyScript, delete: group.removeScript },
          { logging: "stdoutAndStderr" },
          { dependsOn: [install], customTimeouts: group.timeouts },
        ),
      ]),
    );
    this.unitCommands = rendered.ranks.map((rank) =>
      step(
        `${rank.role}-${rank.rank}`,
        { create: rank.applyScript, delete: rank.removeScript },
        // The secrets' variables, then those whose values carry URL credentials: never in the script.
        { stdin: withCredentialEnv(rank.behindFrontDoor ? keyThen(secretEnv) : secretEnv, rank.credentialEnvText), logging: "stdoutAndStderr" },
        // Old and new share the unit name and port: remove the old one first.
        {
          dependsOn: [
            install,
            ...(weights ? [weights] : []),
            ...copies,
            ...this.pullCommands,
            ...(args.afterUnits ?? []),
            ...(rank.behindFrontDoor ? [...frontDoor!.after, ...sidecar] : []),
            ...(groups.has(rank.role) ? [groups.get(rank.role)!] : []),
          ],
          deleteBeforeReplace: true,
          customTimeouts: rank.timeouts,
        },
      ),
    );

    this.units = pulumi.output(rendered.ranks.map((r) => ({ unit: r.unitName, host: host.name, role: r.role, rank: r.rank, url: r.url })));
    this.registerOutputs({ units: this.units });
  }
}
