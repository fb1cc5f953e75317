/**
 * The variables a compile-only run adds to a rank's own: the mode; the vLLM-native (torch.compile)
 * model path, the only one compile-only works on (it raises ValueError otherwise); the NPU to compile
 * for under both the current and the legacy name (which one 0.12.0 reads was not confirmed), since
 * with no NPU mounted vllm-rbln cannot detect it; and the compile cache on (compile-only refuses
 * VLLM_DISABLE_COMPILE_CACHE=1). None of them is a vLLM variable, so none is in the mega-cache's
 * signature (vLLM's compile_factors); VLLM_RBLN_USE_VLLM_MODEL selects the path MiniMax-M2 only has.
 */
export function compileOnlyEnv(targetSoc: string): Record<string, string> {
  return {
    VLLM_RBLN_COMPILE_ONLY: "1",
    VLLM_RBLN_USE_VLLM_MODEL: "1",
    RBLN_FORCE_NPU_NAME: targetSoc,
    RBLN_TARGET_SOC: targetSoc,
    VLLM_DISABLE_COMPILE_CACHE: "0",
  };
}

/** The log lines of vllm-rbln's mega cache that tell a load from a compile (cache.logLines). */
export const CACHE_LOG = {
  /** Printed before warm-up when a bundle is found; a miss prints nothing. */
  hit: "Loaded rbln mega-cache bundle from ",
  /** Printed after every warm-up that succeeded, hit or not: the bundle is on disk, complete. */
  saved: "Saved rbln mega-cache bundle to ",
  /** Each graph the backend runs in warm-up: after it with no hit before, the rank is compiling. */
  warmUp: "rbln_backend [warm-up]",
} as const;
