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
 * Variables the package's caches, offline mode and compile ahead rely on being left as the package
 * leaves them (test/fixtures/vllm-0.30.0/env.json says what each does), each with what it would
 * break. extraEnv may not set them. XDG_CACHE_HOME is not here: it moves only the defaults of
 * HF_HOME and VLLM_CACHE_ROOT, which the package sets, and VLLM_ASSETS_CACHE, which serving a
 * model offline does not read.
 */
export const CACHE_ENV: Readonly<Record<string, string>> = {
  HF_HUB_CACHE: "it moves the hub cache off $HF_HOME/hub, where the package downloads the weights, so the offline ranks would find none",
  HUGGINGFACE_HUB_CACHE: "the legacy name of HF_HUB_CACHE: it moves the hub cache off $HF_HOME/hub, so the offline ranks would find no weights",
  TRANSFORMERS_CACHE: "it moves transformers' cache off the hub cache the package fills, so the offline ranks would find no weights",
  TRANSFORMERS_OFFLINE: "huggingface_hub reads it in place of HF_HUB_OFFLINE, which the package sets: serving runs offline",
  VLLM_DISABLE_COMPILE_CACHE: "it turns the compiled cache off, so every start would compile for hours and no cache is saved",
  VLLM_RBLN_ENABLE_WARM_UP:
    "off, vllm-rbln skips its compile and warm-up and saves no compiled cache, which compile ahead and the unit step read to tell a load from a compile",
  VLLM_RBLN_COMPILE_MODEL:
    "off, vllm-rbln skips its compile and warm-up and saves no compiled cache, which compile ahead and the unit step read to tell a load from a compile",
  VLLM_RBLN_USE_VLLM_MODEL:
    "compile ahead sets it (1) where it compiles and on every rank that loads what it compiled, and vllm-rbln keys the compiled cache on it: a rank with another value looks for another cache",
  RBLN_FORCE_NPU_NAME: "the NPU a cache is compiled for comes from the recipe's SKU (compile ahead sets it where it compiles)",
  RBLN_TARGET_SOC: "the NPU a cache is compiled for comes from the recipe's SKU (compile ahead sets it where it compiles)",
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
