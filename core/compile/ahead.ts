import type { CompileSettings } from "../config/schema";
import type { SecretKey } from "../config/secrets";
import { ConfigError } from "../errors";
import { targetSoc } from "../plan/compileKey";
import type { Deployment } from "../plan/types";
import { COMPILE_ONLY_SINCE, supportsCompileOnly } from "./compileOnly";

/**
 * Compile ahead, off the NPUs (issue 22). With `compile.host` (hosts) or `compile.enabled`
 * (Kubernetes), every compile key of the plan is compiled before any NPU unit or pod of that key
 * changes: on a CPU server, or in a Job with no NPU request, in vllm-rbln's compile-only mode. With
 * `compile.registry`, a key the registry has is pulled instead, and a key compiled here is pushed.
 */
export interface CompileKeyPlan {
  key: string;
  /** The roles that run with it (one per key on the aggregated strategies). */
  roles: string[];
  /** The NPU it is compiled for (RBLN's NPU name). */
  targetSoc: string;
}

export interface CompileAheadPlan {
  /** `host`: compile.host compiles; `job`: a Kubernetes Job per key; `off`: the first wave compiles on its NPUs, as without compile ahead. */
  mode: "off" | "host" | "job";
  keys: CompileKeyPlan[];
  registry: NonNullable<CompileSettings["registry"]> | null;
}

/** The plan's compile keys, each once, with the roles that run it. */
export function compileKeys(deployment: Deployment): CompileKeyPlan[] {
  const { plan } = deployment;
  const byKey = new Map<string, CompileKeyPlan>();
  for (const role of plan.roles) {
    const entry = byKey.get(role.compileKey) ?? { key: role.compileKey, roles: [], targetSoc: targetSoc(plan, role) };
    entry.roles.push(role.role);
    byKey.set(role.compileKey, entry);
  }
  return [...byKey.values()];
}

/** What compile ahead does for a validated deployment. */
export function planCompileAhead(deployment: Deployment): CompileAheadPlan {
  const { settings, plan } = deployment;
  const { compile } = settings;
  const wanted = settings.platform === "hosts" ? (compile.host ? "host" : "off") : compile.enabled ? "job" : "off";
  const mode = wanted !== "off" && supportsCompileOnly(plan.packages) ? wanted : "off";
  return { mode, keys: compileKeys(deployment), registry: compile.registry ?? null };
}

/** Where compile settings do nothing or fall back, for the plan's and the stack's `warnings`. */
export function compileWarnings(deployment: Deployment): string[] {
  const { settings, plan } = deployment;
  const { compile } = settings;
  const warnings: string[] = [];
  const onHosts = settings.platform === "hosts";
  if (!onHosts && compile.host) warnings.push("compile.host: does nothing with platform: kubernetes (set compile.enabled: true for a compile Job)");
  if (onHosts) {
    const kubernetesOnly = (["enabled", "nodeSelector", "resources"] as const).filter((key) => JSON.stringify(compile[key]) !== JSON.stringify({ enabled: false, nodeSelector: {}, resources: {} }[key]));
    for (const key of kubernetesOnly) warnings.push(`compile.${key}: does nothing with platform: hosts (set compile.host for a compile server)`);
  }
  const wanted = onHosts ? compile.host !== undefined : compile.enabled;
  if (wanted && !supportsCompileOnly(plan.packages)) {
    const version = plan.packages.find((p) => p.name === "vllm-rbln")?.version ?? "none";
    warnings.push(`compile ahead: vllm-rbln ${version} has no compile-only mode (it arrived in ${COMPILE_ONLY_SINCE}); the first wave compiles on its NPUs, as without compile ahead`);
  }
  if (compile.registry && !wanted) {
    warnings.push(`compile.registry: without ${onHosts ? "compile.host" : "compile.enabled"} this stack only pulls: a key the registry has is loaded, a key it lacks is compiled by the first wave on its NPUs and not pushed`);
  }
  return warnings;
}

/** The deployment with the compile-ahead warnings in its plan's warnings; a serving rank set to compile only is refused. */
export function withCompileAhead(deployment: Deployment): Deployment {
  for (const [role, env] of Object.entries(deployment.settings.extraEnv)) {
    if (Object.keys(env).some((name) => name === "VLLM_RBLN_COMPILE_ONLY")) {
      throw new ConfigError(`extraEnv.${role}.VLLM_RBLN_COMPILE_ONLY`, "a serving rank in compile-only mode compiles and never serves; compile ahead sets it only where it compiles (compile.host, compile.enabled)");
    }
  }
  const warnings = compileWarnings(deployment);
  return warnings.length === 0 ? deployment : { ...deployment, plan: { ...deployment.plan, warnings: [...deployment.plan.warnings, ...warnings] } };
}

/** The registry's password goes with its user: like pip's, checked with the secrets before anything is registered. */
export function checkRegistrySecret(deployment: Deployment, has: (key: SecretKey) => boolean): void {
  const registry = deployment.settings.compile.registry;
  if (registry?.username !== undefined && !has("registryPassword")) {
    throw new ConfigError("registryPassword", "required when compile.registry.username is set; set it with: pulumi config set --secret registryPassword");
  }
  if (has("registryPassword") && registry?.username === undefined) {
    throw new ConfigError("compile.registry.username", "required when the registryPassword secret is set (the registry's user name)");
  }
}
