import * as command from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { renderPipConfig, renderSecretEnv, type RenderedHost } from "../../core/render/hosts/bundle";
import { remoteCommand } from "../../core/render/hosts/scripts";

export interface HostSecrets {
  pipPassword?: pulumi.Input<string>;
  hfToken?: pulumi.Input<string>;
  apiKey?: pulumi.Input<string>;
}

export interface NpuHostArgs {
  /** Everything this host runs, rendered by the core (`renderHost`). */
  rendered: RenderedHost;
  sshPrivateKey: pulumi.Input<string>;
  secrets: HostSecrets;
}

export interface RankUnit {
  unit: string;
  host: string;
  role: string;
  rank: number;
  url: string;
}

const STEP_TIMEOUTS = { install: "2h", weights: "8h", unit: "10m" };

/** Joins optional secret inputs into one stdin text; secret when any part is. */
function stdinOf(parts: readonly (pulumi.Input<string> | undefined)[], build: (values: (string | undefined)[]) => string): pulumi.Output<string> {
  return pulumi.all(parts.map((p) => pulumi.output(p))).apply(build);
}

/**
 * One RBLN NPU server over SSH: preflight, then the pinned install and the weights download in
 * parallel, then one systemd unit per rank, each step waiting until its rank serves.
 */
export class NpuHost extends pulumi.ComponentResource {
  readonly units: pulumi.Output<RankUnit[]>;
  readonly unitCommands: command.remote.Command[];

  constructor(name: string, args: NpuHostArgs, opts?: pulumi.ComponentResourceOptions) {
    // Args carry the SSH key and secrets: keep them out of the component's recorded inputs.
    super("rbln-serving:hosts:NpuHost", name, {}, opts);
    const { rendered } = args;
    const host = rendered.placement.host;
    const asRoot = host.user === "root";
    const privateKey = pulumi.secret(args.sshPrivateKey);
    // A rebooting host refuses connections for a while: keep dialing.
    const retries = { dialErrorLimit: 60, perDialTimeout: 30 };
    const connection = {
      host: host.address,
      port: host.port,
      user: host.user,
      privateKey,
      // Without it the provider accepts any server key; the config refuses that unless insecureSkipHostKeyCheck.
      ...(host.hostKey ? { hostKey: host.hostKey } : {}),
      // The bastion takes the same key.
      ...(host.proxy ? { proxy: { host: host.proxy.address, port: host.proxy.port, user: host.proxy.user, privateKey, ...(host.proxy.hostKey ? { hostKey: host.proxy.hostKey } : {}), ...retries } } : {}),
      ...retries,
    };
    const step = (suffix: string, script: string, extra: Partial<command.remote.CommandArgs>, options: pulumi.CustomResourceOptions = {}) =>
      new command.remote.Command(
        `${name}-${suffix}`,
        { connection, create: remoteCommand(script, asRoot), addPreviousOutputInEnv: false, ...extra },
        { parent: this, ...options },
      );

    const preflight = step("preflight", rendered.preflightScript, { logging: "stdoutAndStderr" });
    const pipConfig = stdinOf([args.secrets.pipPassword], ([password]) => renderPipConfig(rendered.pipIndexes, password ?? null));
    // pip and huggingface_hub print index URLs and progress; logs stay off where credentials are in play.
    const withCredentials = args.secrets.pipPassword !== undefined ? "none" : "stdoutAndStderr";
    const install = step("install", rendered.installScript, { stdin: pipConfig, logging: withCredentials }, { dependsOn: [preflight], customTimeouts: { create: STEP_TIMEOUTS.install, update: STEP_TIMEOUTS.install } });
    const weights = step(
      "weights",
      rendered.weightsScript,
      {
        stdin: stdinOf([args.secrets.hfToken, args.secrets.pipPassword], ([token, password]) => `${token ?? ""}\n${renderPipConfig(rendered.pipIndexes, password ?? null)}`),
        logging: args.secrets.hfToken !== undefined || args.secrets.pipPassword !== undefined ? "none" : "stdoutAndStderr",
      },
      { dependsOn: [preflight], customTimeouts: { create: STEP_TIMEOUTS.weights, update: STEP_TIMEOUTS.weights } },
    );

    const secretEnv = stdinOf([args.secrets.hfToken, args.secrets.apiKey], ([hfToken, apiKey]) => renderSecretEnv({ HF_TOKEN: hfToken, VLLM_API_KEY: apiKey }));
    // Each unit step waits until its rank serves: as long as the engine's own ready timeout, and then some.
    const readyTimeout = `${Math.ceil(rendered.readyTimeoutSeconds / 60) + 10}m`;
    this.unitCommands = rendered.ranks.map((rank) =>
      step(
        `${rank.role}-${rank.rank}`,
        rank.applyScript,
        { delete: remoteCommand(rank.removeScript, asRoot), stdin: secretEnv, logging: "stdoutAndStderr" },
        // Old and new share the unit name and port: remove the old one first.
        { dependsOn: [install, weights], deleteBeforeReplace: true, customTimeouts: { create: readyTimeout, update: readyTimeout, delete: STEP_TIMEOUTS.unit } },
      ),
    );

    this.units = pulumi.output(rendered.ranks.map((r) => ({ unit: r.unitName, host: host.name, role: r.role, rank: r.rank, url: r.url })));
    this.registerOutputs({ units: this.units });
  }
}
