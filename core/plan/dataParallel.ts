import type { RolePlan } from "./types";

/**
 * Which roles run a data-parallel group of several processes (issue 28). vLLM's data-parallel ranks
 * launched one by one (`--data-parallel-rank R`, one `--data-parallel-address` and RPC port) step
 * together: when one dies its peers hang in the group's collectives and nothing re-forms the group
 * (test/fixtures/vllm-0.30.0/shutdown.json, dp.rankDeath), so the group is one unit of failure. A
 * rank that holds every engine of its group in one process (`--data-parallel-size` without a rank,
 * as aggregated-data-expert-parallel's `main`) is a group of one process: vLLM ends it whole.
 */
export function isDataParallelGroup(role: Pick<RolePlan, "ranks">): boolean {
  return role.ranks.length > 1 && role.ranks.every((rank) => rank.flags.some((f) => f.name === "--data-parallel-rank"));
}
