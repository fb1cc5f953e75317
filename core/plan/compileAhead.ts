import { gte } from "@renovatebot/pep440";
import type { StackSettings } from "../config/stackConfig";
import { ConfigError } from "../errors";
import { targetSoc } from "./compileKey";
import { note, type PlanMessage, warning } from "./messages";
import type { CompileAheadPlan, CompileKeyPlan, LaunchPlan, PackagePlan } from "./types";

/**
 * vllm-rbln's compile-only mode, as read in RBLN-SW/vllm-rbln (test/fixtures/vllm-rbln-0.12.0.json:
 * compileOnly.*, cache.logLines): `VLLM_RBLN_COMPILE_ONLY=1` compiles every graph and writes it to
 * `$VLLM_CACHE_ROOT/rbln` with the runtime on a dummy device, so no NPU is needed. It arrived in
 * v0.10.5a0 (PR #618).
 */
export const COMPILE_ONLY_SINCE = "0.10.5a0";

/**
 * The variables compile-only needs that are in vllm-rbln's compile-env allow-list (RBLN_COMPILE_ENV,
 * hashed into the mega cache's config_signature: test/fixtures/vllm-rbln-cache-signature.json), so
 * every rank that loads a cache compiled ahead runs with them too: with another value it would look
 * for another bundle and compile on the NPUs. VLLM_RBLN_USE_VLLM_MODEL=1 is the vLLM-native model
 * path, the only one compile-only works on, and the one the recipe's `--model-impl vllm` names.
 */
export const COMPILE_AHEAD_SERVING_ENV: Readonly<Record<string, string>> = { VLLM_RBLN_USE_VLLM_MODEL: "1" };

/**
 * Whether the stack's ranks may load a cache compiled in compile-only mode: compiled ahead here (a
 * compile host, a compile Job), or pulled from a registry that compile steps push to.
 */
export function loadsCompiledAhead(settings: StackSettings, packages: readonly PackagePlan[]): boolean {
  const { compile } = settings;
  const wanted = settings.platform === "hosts" ? compile.host !== undefined : compile.enabled;
  return (wanted && supportsCompileOnly(packages)) || compile.registry !== undefined;
}

/** Whether the plan's vllm-rbln has compile-only mode. */
export function supportsCompileOnly(packages: readonly PackagePlan[]): boolean {
  const vllmRbln = packages.find((p) => p.name === "vllm-rbln");
  return vllmRbln !== undefined && gte(vllmRbln.version, COMPILE_ONLY_SINCE);
}

/** The plan's compile keys, each once, with the roles that run it. */
export function compileKeys(plan: LaunchPlan): CompileKeyPlan[] {
  const byKey = new Map<string, CompileKeyPlan>();
  for (const role of plan.roles) {
    const entry = byKey.get(role.compileKey) ?? { key: role.compileKey, roles: [], targetSoc: targetSoc(plan, role) };
    entry.roles.push(role.role);
    byKey.set(role.compileKey, entry);
  }
  return [...byKey.values()];
}

/** What compile ahead does for the stack's settings and launch plan. */
export function planCompileAhead(settings: StackSettings, plan: LaunchPlan): CompileAheadPlan {
  const { compile } = settings;
  const wanted = settings.platform === "hosts" ? (compile.host ? "host" : "off") : compile.enabled ? "job" : "off";
  const mode = wanted !== "off" && supportsCompileOnly(plan.packages) ? wanted : "off";
  return { mode, keys: compileKeys(plan), registry: compile.registry ?? null };
}

/**
 * Where compile settings do nothing or fall back (warnings: remove the setting, or get what was
 * asked), and a registry that only pulls (a note: a read-only stack's deliberate choice).
 */
export function compileMessages(settings: StackSettings, plan: LaunchPlan): PlanMessage[] {
  const { compile } = settings;
  const messages: PlanMessage[] = [];
  const onHosts = settings.platform === "hosts";
  if (!onHosts && compile.host) messages.push(warning("compile.host: does nothing with platform: kubernetes (set compile.enabled: true for a compile Job)"));
  if (onHosts) {
    const kubernetesOnly = (["enabled", "nodeSelector", "resources"] as const).filter(
      (key) => JSON.stringify(compile[key]) !== JSON.stringify({ enabled: false, nodeSelector: {}, resources: {} }[key]),
    );
    for (const key of kubernetesOnly) messages.push(warning(`compile.${key}: does nothing with platform: hosts (set compile.host for a compile server)`));
  }
  const wanted = onHosts ? compile.host !== undefined : compile.enabled;
  if (wanted && !supportsCompileOnly(plan.packages)) {
    const version = plan.packages.find((p) => p.name === "vllm-rbln")?.version ?? "none";
    messages.push(
      warning(
        `compile ahead: vllm-rbln ${version} has no compile-only mode (it arrived in ${COMPILE_ONLY_SINCE}); the first wave compiles on its NPUs, as without compile ahead; use vllm-rbln ${COMPILE_ONLY_SINCE} or newer${onHosts ? " (versions.vllmRbln)" : ""}, or drop ${onHosts ? "compile.host" : "compile.enabled"}`,
      ),
    );
  }
  if (compile.registry && !wanted) {
    messages.push(
      note(
        `compile.registry: without ${onHosts ? "compile.host" : "compile.enabled"} this stack only pulls: a key the registry has is loaded, a key it lacks is compiled by the first wave on its NPUs and not pushed`,
      ),
    );
  }
  return messages;
}

/** A serving rank set to compile only is refused: it would compile and never serve. */
export function refuseCompileOnlyServing(settings: StackSettings): void {
  for (const [role, env] of Object.entries(settings.extraEnv)) {
    if (Object.keys(env).some((name) => name === "VLLM_RBLN_COMPILE_ONLY")) {
      throw new ConfigError(
        `extraEnv.${role}.VLLM_RBLN_COMPILE_ONLY`,
        "a serving rank in compile-only mode compiles and never serves; compile ahead sets it only where it compiles (compile.host, compile.enabled)",
      );
    }
  }
}
