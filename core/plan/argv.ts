import type { Flag } from "./types";

/** The launcher words of a rank's argv (`vllm serve <model>`): everything before its flags. */
export function commandWords(argv: readonly string[], flags: readonly Flag[]): string[] {
  const flagWords = flags.reduce((n, f) => n + 1 + f.values.length, 0);
  return argv.slice(0, argv.length - flagWords);
}

/** `<POD_IP>`, `<EPP_HOST>`: values the recipe leaves for the platform to fill in. */
export const PLACEHOLDER = /<([A-Z][A-Z0-9_]*)>/g;

/** vLLM's own default for VLLM_ENGINE_READY_TIMEOUT_S is 600 s, far below a cold compile; assume the recipe's 9600. */
const FALLBACK_READY_TIMEOUT_S = 9600;

/** How long a rank may take to become ready: the recipe's VLLM_ENGINE_READY_TIMEOUT_S. */
export function engineReadyTimeoutSeconds(env: Readonly<Record<string, string>>): number {
  const value = Number(env["VLLM_ENGINE_READY_TIMEOUT_S"]);
  return Number.isFinite(value) && value > 0 ? value : FALLBACK_READY_TIMEOUT_S;
}
