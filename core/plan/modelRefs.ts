// The models a launch plan loads (ModelRef): the served model and its speculative-decoding drafts,
// and the revision they are pinned to. (A stack's several model deployments are core/plan/stack.ts.)
import { commandWords, withFlags } from "./argv";
import type { LaunchPlan, ModelRef, RankPlan, RolePlan } from "./types";

/** vLLM's flags that pin the model's files and the tokenizer's to one commit. */
export const REVISION_FLAGS = ["--revision", "--tokenizer-revision"] as const;

/** The served model of a rank: the word after `serve`. */
function servedModel(rank: RankPlan): string {
  return commandWords(rank.argv, rank.flags).at(-1)!;
}

/** The draft model a rank's `--speculative-config` names (eagle3), if any; suffix decoding has none. */
export function draftModelOf(rank: RankPlan): string | null {
  // `--speculative-config.model <id>` (FlexibleArgumentParser's one key) names it as well as the whole JSON.
  const key = rank.flags.find((f) => f.name === "--speculative-config.model")?.values[0];
  if (key !== undefined) return key.length > 0 ? key : null;
  const config = rank.flags.find((f) => f.name === "--speculative-config")?.values[0];
  if (config === undefined) return null;
  try {
    const parsed: unknown = JSON.parse(config);
    const model = (parsed as { model?: unknown }).model;
    return typeof model === "string" && model.length > 0 ? model : null;
  } catch {
    return null;
  }
}

/** Every model the plan's ranks load, served model first, each with the roles that name it. */
export function modelsOf(roles: readonly RolePlan[], revision: string | null): ModelRef[] {
  const models: ModelRef[] = [];
  const add = (id: string, use: ModelRef["use"], role: string) => {
    const known = models.find((m) => m.id === id && m.use === use);
    if (!known) models.push({ id, use, revision: use === "model" ? revision : null, roles: [role] });
    else if (!known.roles.includes(role)) known.roles.push(role);
  };
  for (const role of roles) for (const rank of role.ranks) add(servedModel(rank), "model", role.role);
  for (const role of roles)
    for (const rank of role.ranks) {
      const draft = draftModelOf(rank);
      if (draft) add(draft, "draft", role.role);
    }
  return models;
}

/** The plan pinned to `revision`: vLLM gets `--revision` and `--tokenizer-revision`, the models list records it. */
export function withRevision(plan: LaunchPlan, revision: string | undefined): LaunchPlan {
  if (revision === undefined) return plan;
  const pinned = REVISION_FLAGS.map((name) => ({ name, values: [revision] }));
  const roles = plan.roles.map((role) => ({ ...role, ranks: role.ranks.map((rank) => withFlags(rank, pinned)) }));
  return { ...plan, roles, revision, models: modelsOf(roles, revision) };
}
