import { createHash } from "node:crypto";
import { commandWords } from "./argv";
import { changedItems, rankSettings, shownRankSettings, shownValue } from "./diff";
import { note, type PlanMessage, warning } from "./messages";
import type { LaunchPlan, PlanChange, RankPlan, RolePlan } from "./types";

/**
 * Settings of a rank that never change what RBLN compiles, each with its reason. Everything else a
 * rank carries (every other flag, every other variable, the model and the package versions) is
 * keyed: an unknown setting is assumed to recompile, since a wrong "does not recompile" costs
 * hours on the next start while a wrong "recompiles" costs a line of warning.
 *
 * Sources: RBLN's "Compile Cache" page (docs.rbln.ai, vllm_support/features/compile-cache) keys the
 * vLLM configuration (max_model_len, block_size, max_num_seqs, max_num_batched_tokens, ...) and the
 * RBLN options except use_custom_sampler, enable_sub_block_cache and sub_block_size; vLLM's own
 * compile-hash factors (ModelConfig/CacheConfig.compute_hash) ignore the tokenizer revision, the
 * seed, the served name and the prefix-caching hash algorithm; the rest configures the API server,
 * addresses or events, which are not part of the engine configuration at all.
 */
export const UNKEYED_FLAGS: Readonly<Record<string, string>> = {
  "--rbln-use-custom-sampler": "RBLN: sampler graphs are compiled separately and not cached",
  "--no-rbln-use-custom-sampler": "RBLN: sampler graphs are compiled separately and not cached",
  "--rbln-enable-sub-block-cache": "RBLN: sub-block prefix caching does not affect compilation",
  "--no-rbln-enable-sub-block-cache": "RBLN: sub-block prefix caching does not affect compilation",
  "--rbln-sub-block-size": "RBLN: sub-block prefix caching does not affect compilation",
  "--prefix-caching-hash-algo": "how prefix blocks are hashed on the CPU (vLLM leaves it out of its compile hash)",
  "--tokenizer-revision": "the tokenizer runs on the CPU (vLLM leaves it out of its compile hash)",
  "--seed": "sampling seed (vLLM leaves it out of its compile hash)",
  "--served-model-name": "the API's model name",
  "--reasoning-parser": "API server output parsing",
  "--tool-call-parser": "API server output parsing",
  "--enable-auto-tool-choice": "API server output parsing",
  "--chat-template": "API server prompt formatting",
  "--max-log-len": "logging",
  "--disable-log-requests": "logging",
  "--enable-log-requests": "logging",
  "--disable-log-stats": "logging",
  "--uvicorn-log-level": "logging",
  "--port": "network address",
  "--host": "network address",
  "--api-key": "API authentication",
  "--data-parallel-address": "network address",
  "--data-parallel-rpc-port": "network address",
  "--kv-events-config": "KV-cache event publishing to the router",
  "--safetensors-load-strategy": "how weight files are read",
  "--shutdown-timeout": "how long a stopping server lets in-flight requests finish",
};

export const UNKEYED_ENV: Readonly<Record<string, string>> = {
  VLLM_RBLN_SUB_BLOCK_CACHE: "RBLN: sub-block prefix caching does not affect compilation",
  VLLM_ENGINE_READY_TIMEOUT_S: "a startup timeout",
  VLLM_NIXL_SIDE_CHANNEL_HOST: "network address",
  VLLM_NIXL_SIDE_CHANNEL_PORT: "network address",
  VLLM_LOGGING_LEVEL: "logging",
  VLLM_API_KEY: "API authentication",
  VLLM_CACHE_ROOT: "where the cache lives, not what it holds",
  PYTHONHASHSEED: "CPU-side hashing",
  HF_HOME: "where the weights live",
  HF_TOKEN: "hub authentication",
  HF_HUB_OFFLINE: "whether the hub is reached",
};

/** One rank's keyed settings as `item → value` (`--flag` or `env NAME`), sorted: order does not change a compile. */
export function keyedSettings(rank: RankPlan): Map<string, string> {
  const keyed = (item: string) => (item.startsWith("env ") ? !(item.slice(4) in UNKEYED_ENV) : !(item in UNKEYED_FLAGS));
  return new Map([...rankSettings(rank)].filter(([item]) => keyed(item)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The NPU a role's graphs are compiled for: the recipe's SKU of its node, which is also RBLN's NPU name (`RBLN-CR13`). */
export function targetSoc(plan: Pick<LaunchPlan, "nodes">, role: RolePlan): string {
  return plan.nodes[role.node]?.skus[0] ?? "";
}

/**
 * What a role's compiled cache depends on: every package version, the target NPU, the model and its
 * pinned revision (`--revision`, in the command words), each rank's keyed settings and, on
 * Kubernetes, the image (pinned by digest with a registry), which fixes the installed versions.
 */
function keyMaterial(plan: Pick<LaunchPlan, "packages" | "nodes">, role: RolePlan, image: string | null) {
  return {
    packages: plan.packages.map((p) => `${p.name}==${p.version}`).sort(),
    targetSoc: targetSoc(plan, role),
    ...(image === null ? {} : { image }),
    ranks: role.ranks.map((rank) => ({ command: commandWords(rank.argv, rank.flags), settings: [...keyedSettings(rank)] })),
  };
}

/** A role's compile key: 16 hex digits of SHA-256 over its key material. */
export function compileKey(plan: Pick<LaunchPlan, "packages" | "nodes">, role: RolePlan, image: string | null = null): string {
  return createHash("sha256")
    .update(JSON.stringify(keyMaterial(plan, role, image)))
    .digest("hex")
    .slice(0, 16);
}

/** The plan with every role's compileKey computed from its final settings (and the Kubernetes image, where one runs it). */
export function withCompileKeys(plan: LaunchPlan, image: string | null = null): LaunchPlan {
  return { ...plan, roles: plan.roles.map((role) => ({ ...role, compileKey: compileKey(plan, role, image) })) };
}

/** Whether a role recompiles between two plans, and the settings that make it or that change without it. */
export interface RoleRecompile {
  role: string;
  recompile: boolean;
  before: string;
  after: string;
  /** Changed keyed settings, values as the diff shows them, e.g. `--max-num-seqs "1" -> "4"`, `rebel-compiler "0.12.0" -> "0.12.1"`. */
  causes: string[];
  /** Changed settings outside the key, e.g. `--reasoning-parser`, `env VLLM_RBLN_SUB_BLOCK_CACHE`. */
  unkeyed: string[];
}

/** A value (as shownValue writes it) short enough for one line, or none: a JSON config is named, not printed. */
function shown(value: string | undefined): string {
  return value && value.length <= 40 ? ` ${value}` : "";
}

function describe(item: string, before: string | undefined, after: string | undefined): string {
  if (before === undefined) return `${item}${shown(after)} added`;
  if (after === undefined) return `${item}${shown(before)} removed`;
  // Equal as shown: the change is inside masked credentials.
  return shown(before) && shown(after) && before !== after ? `${item}${shown(before)} ->${shown(after)}` : `${item} changed`;
}

/** Per role present in both plans: does its compile key change, and why (or what changed without it). */
export function compareCompileKeys(a: LaunchPlan, b: LaunchPlan): RoleRecompile[] {
  const packages = (p: LaunchPlan) => new Map(p.packages.map((pkg) => [pkg.name, shownValue(pkg.version)]));
  const [packagesA, packagesB] = [packages(a), packages(b)];
  const packageChanges = changedItems(packagesA, packagesB).map((name) => describe(name, packagesA.get(name), packagesB.get(name)));
  return a.roles.flatMap((before) => {
    const after = b.roles.find((r) => r.role === before.role);
    if (!after) return [];
    const causes = new Set(packageChanges);
    const unkeyed = new Set<string>();
    for (let i = 0; i < Math.max(before.ranks.length, after.ranks.length); i++) {
      const [rankA, rankB] = [before.ranks[i], after.ranks[i]];
      const [keyedA, keyedB] = [rankA ? keyedSettings(rankA) : new Map<string, string>(), rankB ? keyedSettings(rankB) : new Map<string, string>()];
      const [shownA, shownB] = [shownRankSettings(rankA), shownRankSettings(rankB)];
      for (const item of changedItems(keyedA, keyedB)) causes.add(describe(item, shownA.get(item), shownB.get(item)));
      for (const item of changedItems(rankSettings(rankA), rankSettings(rankB))) if (!keyedA.has(item) && !keyedB.has(item)) unkeyed.add(item);
    }
    // As the plans computed them: the Kubernetes image is in the key but not in the plan.
    const [beforeKey, afterKey] = [before.compileKey, after.compileKey];
    return [{ role: before.role, recompile: beforeKey !== afterKey, before: beforeKey, after: afterKey, causes: [...causes], unkeyed: [...unkeyed] }];
  });
}

/**
 * One line per role that changes: a warning that it recompiles (`recompiles decode: --max-num-seqs
 * "1" -> "4" (hours on first start)`: hours of a compile to weigh before the change), or a note
 * that it does not.
 */
export function recompileLines(roles: readonly RoleRecompile[]): PlanMessage[] {
  return roles.flatMap((r) => {
    if (r.recompile) return [warning(`recompiles ${r.role}: ${r.causes.join(", ") || "its compile key changes"} (hours on first start)`)];
    if (r.unkeyed.length > 0)
      return [note(`does not recompile ${r.role}: ${r.unkeyed.join(", ")} ${r.unkeyed.length === 1 ? "is" : "are"} not part of the compile key`)];
    return [];
  });
}

/** The JSON diff's entries: one per role, `recompile: true|false`. */
export function compileKeyChanges(roles: readonly RoleRecompile[]): PlanChange[] {
  return roles.map((r) => ({
    scope: r.role,
    kind: r.recompile ? "changed" : "unchanged",
    item: "compileKey",
    before: r.before,
    after: r.after,
    recompile: r.recompile,
  }));
}
