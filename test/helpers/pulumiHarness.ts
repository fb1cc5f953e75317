import * as pulumi from "@pulumi/pulumi";
import * as runtimeSettings from "@pulumi/pulumi/runtime/settings";

// Internal to the SDK (not in its typings), but the exact signal: resolves when every queued
// registration RPC is done.
const { waitForRPCs } = runtimeSettings as unknown as { waitForRPCs: () => Promise<void> };

/** One resource registration as the engine would see it, with the options tests care about. */
export interface Registration {
  type: string;
  name: string;
  urn: string;
  parent: string;
  custom: boolean;
  /** Inputs with secrets unwrapped. */
  inputs: Record<string, any>;
  /** Inputs as sent to the engine: secret values wrapped in Pulumi's secret signature. */
  wireInputs: Record<string, any>;
  dependencies: string[];
  deleteBeforeReplace: boolean;
  /** Input properties whose change replaces the resource (the replaceOnChanges option). */
  replaceOnChanges: string[];
  retainOnDelete: boolean;
  protect: boolean;
  read: boolean;
  /** The types of the resource's alias specs (an old type token it used to have). */
  aliasTypes: string[];
  /** Its Pulumi timeouts (the customTimeouts option) as set, Pulumi durations ("10m"); "" where unset. */
  customTimeouts: { create: string; update: string; delete: string };
}

export const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";

/**
 * A command's `stdout` under mocks: a reference the engine stand-in (test/helpers/engine.ts) replaces
 * with what that command really printed when another command takes it as input.
 */
export const stdoutRef = (name: string) => `<<stdout of ${name}>>`;
export const STDOUT_REF = /<<stdout of ([^>]+)>>/g;

/** Mock provider state: inputs back, plus the computed fields the components read. */
function mockState(args: pulumi.runtime.MockResourceArgs): Record<string, any> {
  if (args.type === "command:remote:Command") return { ...args.inputs, stdout: stdoutRef(args.name), stderr: "" };
  if (args.type.includes("gateway.networking.k8s.io") && args.id) return { status: { addresses: [{ type: "IPAddress", value: "10.0.0.100" }] } };
  if (args.type.startsWith("kubernetes:")) return { ...args.inputs, metadata: { ...args.inputs.metadata, name: args.inputs.metadata?.name ?? args.name } };
  return args.inputs;
}

/**
 * Runs `program` under Pulumi's mock runtime with the given `rbln-serving:` config, capturing every
 * registration; returns once the runtime's RPC queue has drained.
 */
export async function runUnderMocks(
  program: () => unknown,
  config: Record<string, unknown> = {},
  secrets: Record<string, string> = {},
): Promise<{ registrations: Registration[]; result: unknown; error?: unknown }> {
  const registrations: Registration[] = [];
  await pulumi.runtime.setMocks(
    {
      newResource: (args) => ({ id: args.custom === false ? undefined : `${args.name}-id`, state: mockState(args) }),
      call: (args) => args.inputs,
    },
    "rbln-serving",
    "test",
    false,
  );
  const monitor = pulumi.runtime.getMonitor() as any;
  for (const method of ["registerResource", "readResource"] as const) {
    const original = monitor[method].bind(monitor);
    monitor[method] = (req: any, callback: any) => {
      const wireInputs = (method === "registerResource" ? req.getObject() : req.getProperties())?.toJavaScript() ?? {};
      let inputs: Record<string, any> | undefined;
      const record: Registration = {
        type: req.getType(),
        name: req.getName(),
        urn: monitor.newUrn(req.getParent(), req.getType(), req.getName()),
        parent: req.getParent(),
        custom: method === "readResource" || req.getCustom(),
        // Unwrapped on first use: large runs (the benchmark) keep one copy of the inputs.
        get inputs() {
          inputs ??= unwrapSecrets(wireInputs) as Record<string, any>;
          return inputs;
        },
        wireInputs,
        dependencies: method === "registerResource" ? req.getDependenciesList() : [],
        deleteBeforeReplace: method === "registerResource" ? req.getDeletebeforereplace() : false,
        replaceOnChanges: method === "registerResource" ? req.getReplaceonchangesList() : [],
        retainOnDelete: method === "registerResource" ? req.getRetainondelete() : false,
        protect: method === "registerResource" ? req.getProtect() : false,
        read: method === "readResource",
        aliasTypes:
          method === "registerResource" ? req.getAliasesList().flatMap((alias: any) => (alias.getSpec()?.getType() ? [alias.getSpec().getType()] : [])) : [],
        customTimeouts: {
          create: (method === "registerResource" && req.getCustomtimeouts()?.getCreate()) || "",
          update: (method === "registerResource" && req.getCustomtimeouts()?.getUpdate()) || "",
          delete: (method === "registerResource" && req.getCustomtimeouts()?.getDelete()) || "",
        },
      };
      registrations.push(record);
      return original(req, callback);
    };
  }
  const all: Record<string, string> = {};
  // A key with its own namespace (`other:key`) goes in as it is.
  for (const [key, value] of Object.entries(config))
    all[key.includes(":") ? key : `rbln-serving:${key}`] = typeof value === "string" ? value : JSON.stringify(value);
  for (const [key, value] of Object.entries(secrets)) all[`rbln-serving:${key}`] = value;
  pulumi.runtime.setAllConfig(
    all,
    Object.keys(secrets).map((k) => `rbln-serving:${k}`),
  );

  let result: unknown;
  let error: unknown;
  try {
    result = program();
  } catch (e) {
    error = e;
  }
  await waitForRPCs();
  return { registrations, result, error };
}

/** The customTimeouts of a registration, without the empty ones. */
function unwrapSecrets(value: any): any {
  if (Array.isArray(value)) return value.map(unwrapSecrets);
  if (value !== null && typeof value === "object") {
    if (value["4dabf18193072939515e22adb298388d"] === SECRET_SIG) return unwrapSecrets(value.value);
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unwrapSecrets(v)]));
  }
  return value;
}

/** True when `path` of the wire inputs is wrapped as a secret (or sits inside a secret). */
export function isSecretAt(wire: any, path: readonly string[]): boolean {
  let node = wire;
  for (const key of path) {
    if (node?.["4dabf18193072939515e22adb298388d"] === SECRET_SIG) return true;
    node = node?.[key];
  }
  return node?.["4dabf18193072939515e22adb298388d"] === SECRET_SIG;
}

export const ofType = (registrations: readonly Registration[], type: string) => registrations.filter((r) => r.type === type);

/** The value of an output (in a non-preview mock run every output resolves). */
export function outputValue<T>(output: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => output.apply(resolve));
}
