import { createHash } from "node:crypto";

/**
 * What compile ahead's steps share on both platforms (the compile host's step and pulls on hosts,
 * the compile Job on Kubernetes): vllm-rbln's compile-only variables and bundle folder, the registry
 * artifact's layout, and the settings of the flow both steps run (core/render/scripts/compile-flow.sh).
 */
import { reportedWord } from "../stepReport";

/**
 * The variables a compile-only run adds to a rank's own: the mode; the NPU to compile for under both
 * the current and the legacy name (which one 0.12.0 reads was not confirmed), since with no NPU
 * mounted vllm-rbln cannot detect it; and the compile cache on (compile-only refuses
 * VLLM_DISABLE_COMPILE_CACHE=1). None of them is in vllm-rbln's compile-env allow-list, so none
 * changes the bundle's signature. The one compile-only needs that is on the list,
 * VLLM_RBLN_USE_VLLM_MODEL=1, every rank that loads a cache compiled ahead has already
 * (COMPILE_AHEAD_SERVING_ENV, set by the plan): the compile sees the ranks' value, not one of its own.
 */
export function compileOnlyEnv(targetSoc: string): Record<string, string> {
  return {
    VLLM_RBLN_COMPILE_ONLY: "1",
    RBLN_FORCE_NPU_NAME: targetSoc,
    RBLN_TARGET_SOC: targetSoc,
    VLLM_DISABLE_COMPILE_CACHE: "0",
  };
}

/**
 * Where vllm-rbln keeps one model's mega-cache bundles under its cache folder (`VLLM_CACHE_ROOT/rbln`;
 * bundle.path in test/fixtures/vllm-rbln-0.12.0.json): `<safe(model)>-<sha1(model)[:8]>`, with a
 * folder per signature and rank below, each holding `mega_cache.bin`. The unit step tells a load
 * from a compile by these files, never by the log lines that extraEnv can silence.
 */
export function megaCacheModelDir(cacheDir: string, model: string): string {
  const raw = model || "unknown";
  const safe = raw.replace(/[^A-Za-z0-9._-]/g, "_").replace(/^_+|_+$/g, "") || "unknown";
  return `${cacheDir}/${safe}-${createHash("sha1").update(raw).digest("hex").slice(0, 8)}`;
}

/**
 * The compiled cache of one compile key as an OCI artifact (OCI image-spec 1.1 artifact guidance):
 * an `artifactType` of our own, a config of our own media type, and one uncompressed tar layer
 * (compiled graphs barely compress, and gzip would cost more time than the bytes it saves). Tagged
 * by the compile key, pulled by digest.
 */
export const COMPILE_ARTIFACT = {
  artifactType: "application/vnd.rbln-serving.compile-cache.v1",
  configType: "application/vnd.rbln-serving.compile-cache.config.v1+json",
  layerType: "application/vnd.rbln-serving.compile-cache.layer.v1.tar",
} as const;

/** The step's last stdout line: `compiled <key> <digest>`, `local` (no registry) or `none` (pull-only, not in the registry). */
export function reportedDigest(stdout: string | undefined, key: string): string | null {
  return reportedWord(stdout, `compiled ${key} `, /^sha256:[0-9a-f]{64}$/);
}

/** What the host step and the Job share: the registry and the artifact's media types. */
export function compileFlowSettings(registry: { repository: string; username?: string } | null) {
  return {
    repository: registry?.repository ?? "",
    registry_user: registry?.username ?? "",
    artifact_type: COMPILE_ARTIFACT.artifactType,
    config_type: COMPILE_ARTIFACT.configType,
    layer_type: COMPILE_ARTIFACT.layerType,
  };
}
