import { PROBE_SCRIPT } from "../probe";
import { renderScript } from "../template";
import { COMPILE_ARTIFACT } from "./artifact";
import { CACHE_LOG } from "./compileOnly";

/** What the host step and the Job share: vllm-rbln's "saved" line, the registry, the artifact's media types. */
function cacheSettings(registry: { repository: string; username?: string } | null) {
  return {
    saved_line: CACHE_LOG.saved,
    repository: registry?.repository ?? "",
    registry_user: registry?.username ?? "",
    artifact_type: COMPILE_ARTIFACT.artifactType,
    config_type: COMPILE_ARTIFACT.configType,
    layer_type: COMPILE_ARTIFACT.layerType,
  };
}

export interface CompileStepInput {
  hostName: string;
  key: string;
  roles: readonly string[];
  /** HF_HOME and VLLM_CACHE_ROOT are under it: the same path as on the NPU hosts (the cache key may depend on it). */
  cacheRoot: string;
  serviceUser: string;
  /** The key's completion marker, which the NPU unit steps also read. */
  marker: string;
  /** false on an NPU host without a compile host: pull if the registry has the key, else leave it to the first start. */
  compileHere: boolean;
  /** The transient unit the compile-only run goes in. */
  unit: string;
  /** The rank's exact command line, with the venv's vllm. */
  command: readonly string[];
  /** The rank's environment with the compile-only variables, in env-file syntax. */
  envText: string;
  port: number;
  /** Where the compile-only server answers, if it serves. */
  probeHost: string;
  timeoutSeconds: number;
  intervalSeconds: number;
  registry: { repository: string; username?: string } | null;
}

/** The step that makes one compile key's cache present: here already, pulled, or compiled off the NPUs (and pushed). stdin: the registry password line. */
export function compileStepScript(p: CompileStepInput): string {
  const what = p.compileHere ? "compile ahead" : "pull the compiled cache of";
  return renderScript("core/compile/scripts/compile-key.sh", `${what} key ${p.key} (${p.roles.join(", ")}) on ${p.hostName}`, {
    host_name: p.hostName,
    key: p.key,
    roles: p.roles,
    cache_root: p.cacheRoot,
    service_user: p.serviceUser,
    marker: p.marker,
    compile_here: p.compileHere ? "yes" : "no",
    unit: p.unit,
    command: p.command,
    env_text: p.envText,
    port: p.port,
    probe_host: p.probeHost,
    probe_py: PROBE_SCRIPT,
    timeout_s: p.timeoutSeconds,
    interval_s: p.intervalSeconds,
    ...cacheSettings(p.registry),
  });
}

export interface CompileJobInput {
  key: string;
  roles: readonly string[];
  marker: string;
  compileHere: boolean;
  /** The role's launch script in the pod. */
  launch: string;
  ports: readonly number[];
  timeoutSeconds: number;
  intervalSeconds: number;
  registry: { repository: string; username?: string } | null;
}

/** The Kubernetes compile Job's script: the same order as on a compile host, in a pod (no systemd, no root). */
export function compileJobScript(p: CompileJobInput): string {
  return renderScript("core/compile/scripts/compile-job.sh", `${p.compileHere ? "compile ahead" : "pull the compiled cache of"} key ${p.key} (${p.roles.join(", ")}) in a pod without NPUs`, {
    host_name: "job",
    key: p.key,
    roles: p.roles,
    service_user: "",
    marker: p.marker,
    compile_here: p.compileHere ? "yes" : "no",
    launch: p.launch,
    ports: p.ports.join(","),
    probe_py: PROBE_SCRIPT,
    timeout_s: p.timeoutSeconds,
    interval_s: p.intervalSeconds,
    ...cacheSettings(p.registry),
  });
}
