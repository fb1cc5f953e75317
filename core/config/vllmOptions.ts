// vLLM's flags and environment variables as the stack config sees them: the ones that define the
// topology or that the package sets itself (extraArgs and extraEnv may not touch them), the names
// bash keeps, and the schemas of extraArgs and extraEnv.
import { z } from "zod";
import { OFFLINE_ENV } from "./defaults";
import { roleName } from "./fields";

/**
 * Flags and variables that define the topology; `extraArgs`/`extraEnv` may not touch them. The
 * list follows vLLM's own parser (vllm/engine/arg_utils.py, vllm/entrypoints/cli/serve.py):
 * parallelism, ranks, addresses, ports, connectors, and `--config`, which reads any flag from a file.
 * Each is a long name of vllmFlags.generated.ts; extraArgs reach them under any spelling (vllmArgv.ts).
 */
export const TOPOLOGY_FLAGS = [
  "--data-parallel-rank",
  "--data-parallel-size",
  "--data-parallel-size-local",
  "--data-parallel-address",
  "--data-parallel-rpc-port",
  "--data-parallel-start-rank",
  "--data-parallel-backend",
  "--data-parallel-hybrid-lb",
  "--data-parallel-external-lb",
  "--data-parallel-multi-port-external-lb",
  "--pipeline-parallel-size",
  "--tensor-parallel-size",
  "--decode-context-parallel-size",
  "--prefill-context-parallel-size",
  "--distributed-executor-backend",
  "--enable-expert-parallel",
  "--api-server-count",
  "--headless",
  "--nnodes",
  "--node-rank",
  "--port",
  "--host",
  "--uds",
  "--kv-transfer-config",
  "--kv-events-config",
  "--api-key",
  "--config",
] as const;

export const TOPOLOGY_ENVS = [
  "RBLN_VISIBLE_DEVICES",
  "RBLN_DEVICES",
  "VLLM_NIXL_SIDE_CHANNEL_HOST",
  "VLLM_NIXL_SIDE_CHANNEL_PORT",
  "VLLM_API_KEY",
  "HF_TOKEN",
] as const;

/**
 * The variables the package itself sets for vLLM on either platform (hosts: the env file;
 * Kubernetes: the container's env), each with what it is for. extraEnv may not set them: on hosts
 * the package's value would win, on Kubernetes the stack's, and `plan` could show neither.
 */
export const PACKAGE_ENV: Readonly<Record<string, string>> = {
  HF_HOME: "the weights cache",
  VLLM_CACHE_ROOT: "the compiled graphs",
  RBLN_OFFLOAD_DIR: "the offload folder",
  ...Object.fromEntries(Object.keys(OFFLINE_ENV).map((name) => [name, "the ranks load the cached weights and never reach the hub"])),
  HOME: "a writable scratch folder on Kubernetes",
  POD_IP: "the pod's address on Kubernetes",
};

/**
 * Names bash keeps read-only or gives a meaning of its own (assignments fail, are ignored, or run
 * code, as BASH_ENV does): the unit step reads env files with bash, after the unit has restarted.
 */
const BASH_SPECIAL_NAMES = new Set([
  "UID",
  "EUID",
  "PPID",
  "SHELLOPTS",
  "BASHOPTS",
  "GROUPS",
  "FUNCNAME",
  "HISTCMD",
  "RANDOM",
  "SRANDOM",
  "SECONDS",
  "LINENO",
  "EPOCHSECONDS",
  "EPOCHREALTIME",
  "DIRSTACK",
  "PIPESTATUS",
  "OPTIND",
  "OPTARG",
  "OPTERR",
  "IFS",
  "PS4",
  "CDPATH",
  "GLOBIGNORE",
  "ENV",
  "POSIXLY_CORRECT",
  "SHELL",
  "_",
]);
export const isBashSpecial = (name: string) => BASH_SPECIAL_NAMES.has(name) || name.startsWith("BASH_") || name === "BASH";

/** What an environment value may hold so every platform can carry it: no control characters but newline and tab. */
export function isPortableEnvValue(value: string): boolean {
  return !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(value);
}

export const extraArgs = z.record(
  roleName,
  z.array(
    z
      .string()
      .max(4096)
      .refine((word) => !word.includes("\0"), "a word without NUL bytes"),
  ),
);
export const extraEnv = z.record(
  roleName,
  z.record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name"),
    z.string().max(65536).refine(isPortableEnvValue, "a value without control characters other than newline and tab"),
  ),
);
