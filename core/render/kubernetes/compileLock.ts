import { healthCheck, renderLeaseLock, type LeaseLockSettings } from "../../cache/leaseLock";

/** The file name of the compile lock in a role's launch ConfigMap. */
export const COMPILE_LOCK_FILE = "compile-lock.sh";

/**
 * One compiler per compile key on a role's shared compile-cache volume. The pod that takes the
 * lease compiles and holds it, with a heartbeat, until its ranks answer (vllm-rbln saves the
 * compiled graphs once warm-up succeeds); the others wait for its marker, then start and load. A
 * compiler that dies stops its heartbeat and is taken over after the lease.
 */
export function compileLock(
  compileKey: string,
  compileCacheRoot: string,
  ports: readonly number[],
  launchDir: string,
  timing: Pick<LeaseLockSettings, "leaseSeconds" | "heartbeatSeconds" | "pollSeconds" | "waitLimitSeconds"> = {},
): { file: string; text: string; command: string[] } {
  return {
    file: COMPILE_LOCK_FILE,
    text: renderLeaseLock({ lockRoot: `${compileCacheRoot}/rbln-serving-locks`, lockName: `compile-${compileKey}`, ...timing }),
    command: ["bash", `${launchDir}/${COMPILE_LOCK_FILE}`, "run", "--ready", healthCheck("127.0.0.1", ports), "--", "bash", `${launchDir}/launch.sh`],
  };
}
