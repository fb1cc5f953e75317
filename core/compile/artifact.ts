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
  const line = (stdout ?? "").split("\n").reverse().find((l) => l.startsWith(`compiled ${key} `));
  const digest = line?.split(" ")[2];
  return digest && /^sha256:[0-9a-f]{64}$/.test(digest) ? digest : null;
}
