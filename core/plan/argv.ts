import { flagIdentity } from "../config/vllmArgv";
import type { Flag, RankPlan } from "./types";

/** The launcher words of a rank's argv (`vllm serve <model>`): everything before its flags. */
export function commandWords(argv: readonly string[], flags: readonly Flag[]): string[] {
  const flagWords = flags.reduce((n, f) => n + 1 + f.values.length, 0);
  return argv.slice(0, argv.length - flagWords);
}

/**
 * The rank with `extra` flags on top of its own: a flag that sets an option it sets (its `--no-`
 * form too) replaces it where it stands, a new one goes last; argv follows.
 */
export function withFlags(rank: RankPlan, extra: readonly Flag[]): RankPlan {
  if (extra.length === 0) return rank;
  const same = (a: Flag, b: Flag) => flagIdentity(a.name) === flagIdentity(b.name);
  const flags = rank.flags.map((f) => extra.find((e) => same(e, f)) ?? f);
  flags.push(...extra.filter((e) => !rank.flags.some((f) => same(f, e))));
  return { ...rank, flags, argv: [...commandWords(rank.argv, rank.flags), ...flags.flatMap((f) => [f.name, ...f.values])] };
}

/** `<POD_IP>`, `<EPP_HOST>`: values the recipe leaves for the platform to fill in. */
export const PLACEHOLDER = /<([A-Z][A-Z0-9_]*)>/g;

/** vLLM's own default for VLLM_ENGINE_READY_TIMEOUT_S is 600 s, far below a cold compile; assume the recipe's 9600. */
const FALLBACK_READY_TIMEOUT_S = 9600;

/** How long a rank may take to become ready: the recipe's VLLM_ENGINE_READY_TIMEOUT_S. */
export function engineReadyTimeoutSeconds(env: Readonly<Record<string, string>>): number {
  const value = Number(env.VLLM_ENGINE_READY_TIMEOUT_S);
  return Number.isFinite(value) && value > 0 ? value : FALLBACK_READY_TIMEOUT_S;
}
