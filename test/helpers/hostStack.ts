import { ModelServing, type ModelServingArgs } from "../../components/modelServing";
import { parseStackSettings } from "../../core/config/stackConfig";
import { planDeployment } from "../../core/plan/deployment";
import { DEFAULT_INSTANCE } from "../../core/render/hosts/names";
import { FakeEngine } from "./engine";
import type { TestHost } from "./hostNamespace";
import { runUnderMocks, type Registration } from "./pulumiHarness";
import { shippedCatalog } from "./recipes";

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

type ServingOptions = Pick<ModelServingArgs, "hostOptions" | "copyOptions" | "secrets"> & { instance?: string };

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

/** Every flag the plan's ranks pass, for the stand-in vllm to accept. */
export function planFlags(settings: ModelServingArgs["settings"], extra: readonly string[] = []): Set<string> {
  const flags = new Set(["--host", ...extra]);
  for (const rank of planDeployment(parseStackSettings(settings as Record<string, unknown>), shippedCatalog).plan.roles.flatMap((r) => r.ranks))
    for (const flag of rank.flags) flags.add(flag.name);
  return flags;
}

/** An engine that runs each command over SSH on the fake host it connects to; preflight is taken as done (no NPUs here). */
export function fakeHostsEngine(hosts: readonly TestHost[]): FakeEngine {
  return new FakeEngine(
    (connection, command, stdin) => hosts.find((h) => h.address === connection.host && h.port === connection.port)!.run(command, stdin),
    (name) => name.endsWith("-preflight"),
  );
}
