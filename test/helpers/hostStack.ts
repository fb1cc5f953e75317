import { ModelServing, type ModelServingArgs } from "../../components/modelServing";
import { DEFAULT_INSTANCE } from "../../core/render/hosts/names";
import { FakeEngine } from "./engine";
import type { TestHost } from "./hostNamespace";
import { runUnderMocks, type Registration } from "./pulumiHarness";

/**
 * What the tests that run the program's commands on fake hosts share: a hosts stack of
 * aggregated-data-expert-parallel with one fake host per replica, the program registered under
 * mocks, and an engine that runs each command on the host it names.
 */
export function fakeHostsSettings(hosts: readonly TestHost[], roots: { installRoot: string; cacheRoot: string }, more: Record<string, unknown> = {}) {
  return {
    strategy: "aggregated-data-expert-parallel",
    target: "Latency",
    replicas: hosts.length,
    hosts: hosts.map((h, i) => hostEntry(h, i)),
    ...roots,
    // The fake hosts share this machine's disk: the unit steps' disk check is tested in unit-apply.test.ts.
    minFreeDiskGbToRestart: 0,
    ...more,
  };
}

/** Fake host `index` as an entry of `hosts`, named npu-<index>: its ranks listen on its own address, or with `allInterfaces` on all (listenAddress unset). */
export function hostEntry(host: TestHost, index: number, { allInterfaces = false } = {}) {
  return {
    name: `npu-${index}`,
    address: host.address,
    port: host.port,
    ...(allInterfaces ? {} : { listenAddress: host.address }),
    hostKey: host.hostPublicKey,
  };
}

type ServingOptions = Pick<ModelServingArgs, "hostOptions" | "copyOptions" | "secrets" | "catalog"> & { instance?: string };

/** ModelServing (the program's instance, unless `instance` names another) for `settings` under mocks, and what it registered; the SSH key is unused, each fake host takes its own client key. */
export async function servingUnderMocks(
  settings: ModelServingArgs["settings"],
  { secrets, instance = DEFAULT_INSTANCE, ...options }: ServingOptions = {},
): Promise<{ registrations: Registration[]; serving: ModelServing }> {
  const { registrations, result, error } = await runUnderMocks(
    () =>
      new ModelServing(instance, {
        settings,
        secrets: { sshPrivateKey: "unused: the engine stand-in uses each host's own client key", ...secrets },
        ...options,
      }),
  );
  if (error) throw error;
  return { registrations, serving: result as ModelServing };
}

/** The commands ModelServing registers for `settings` (servingUnderMocks). */
export async function registerServing(settings: ModelServingArgs["settings"], options: ServingOptions = {}): Promise<Registration[]> {
  return (await servingUnderMocks(settings, options)).registrations;
}

/** An engine that runs each command over SSH on the fake host it connects to; preflight is taken as done (no NPUs here). */
export function fakeHostsEngine(hosts: readonly TestHost[]): FakeEngine {
  return new FakeEngine(
    (connection, command, stdin) => hosts.find((h) => h.address === connection.host && h.port === connection.port)!.run(command, stdin),
    (name) => name.endsWith("-preflight"),
  );
}
