import { createHash } from "node:crypto";
import { compileFlowSettings, compileOnlyEnv } from "../compileCache";
import { engineReadyTimeoutSeconds } from "../../plan/argv";
import { targetSoc } from "../../plan/compileKey";
import type { CompileAheadPlan, RolePlan } from "../../plan/types";
import { PROBE_SCRIPT } from "../../probe";
import { renderScript } from "../../template";
import { COMPILE_LOCK_FILE } from "./compileLock";
import { KUBERNETES_DEFAULTS } from "./defaults";
import type * as k8s from "./objects";
import { containerSecurity, mergeResources, podAccount, podSecurity } from "./pod";
import { ROLE_DIRS, roleEnvironment, roleVolumes, type RoleContext, type RoleWorkload } from "./role";
import { waitForWeights } from "./weights";

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
  return renderScript(
    "core/render/kubernetes/scripts/compile-job.sh",
    `${p.compileHere ? "compile ahead" : "pull the compiled cache of"} key ${p.key} (${p.roles.join(", ")}) in a pod without NPUs`,
    {
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
      ...compileFlowSettings(p.registry),
    },
  );
}

/** The compile Job of one role (its key, on its compile-cache volume) and the ConfigMap with its script. */
export interface CompileJob {
  role: string;
  key: string;
  configMap: k8s.Named<k8s.ConfigMap>;
  job: k8s.Named<k8s.Job>;
  /** How long it may take: a compile as long as a first start, and the weights' wait. */
  timeoutSeconds: number;
}

/** The key of the registry Secret's password. */
export const REGISTRY_PASSWORD_KEY = "password";
/** The variable the compile Job's script reads the registry password from (skopeo's login). */
export const REGISTRY_PASSWORD_ENV = "REGISTRY_PASSWORD";

/** The containers of a compile Job, by what each does (compile-flow.sh's phases); each runs the script with its phase. */
interface CompileContainers {
  /** Pulls the key from the registry, or finds it here (registry only). */
  pull?: k8s.Container;
  /** Compiles in compile-only mode, under the compile lock (compile.enabled): the model's own code runs here, without the registry password. */
  compile?: k8s.Container;
  /** Pushes what was compiled (registry and compile.enabled). */
  push?: k8s.Container;
}

/**
 * The Job's containers. Only the ones that talk to the registry get its password, and none of them
 * runs vLLM: with a registry and compile.enabled the pull and the compile are init containers, run
 * one after the other, and the push the Job's container, so the compile-only server (which runs the
 * model's remote code) never shares a container or a moment with the password.
 */
function compileContainers(context: RoleContext, role: RolePlan, ahead: CompileAheadPlan, registrySecret: string | null, scriptDir: string): CompileContainers {
  const { settings, plan } = context.deployment;
  const { paths } = KUBERNETES_DEFAULTS;
  const compileHere = ahead.mode === "job";
  const registry = ahead.registry !== null;
  const base = {
    image: settings.kubernetes.image!,
    resources: mergeResources(KUBERNETES_DEFAULTS.resources.compile, settings.compile.resources),
    securityContext: containerSecurity(settings.kubernetes.securityContext),
  };
  const run = (phase: string) => ["bash", `${scriptDir}/compile-job.sh`, compileHere && registry ? phase : "all"];
  const cacheMounts = [
    { name: "compile-script", mountPath: scriptDir, readOnly: true },
    { name: "compile-cache", mountPath: ROLE_DIRS.compileCache },
    { name: "scratch", mountPath: paths.scratchDir },
  ];
  // The registry's containers: the cache volume and the password; none of the stack's other secrets.
  const registryEnv = [
    ...roleEnvironment(context).filter((v) => v.name === "HOME" || v.name === "VLLM_CACHE_ROOT"),
    ...(registrySecret ? [{ name: REGISTRY_PASSWORD_ENV, valueFrom: { secretKeyRef: { name: registrySecret, key: REGISTRY_PASSWORD_KEY } } }] : []),
  ];
  const registryContainer = (name: string, phase: string): k8s.Container => ({
    name,
    ...base,
    command: run(phase),
    env: registryEnv,
    volumeMounts: cacheMounts,
  });
  const compile: k8s.Container = {
    name: "compile",
    ...base,
    // One compiler per key: the serving pods' lease of the same name, whose marker lets them start and load.
    command: ["bash", `${paths.launchDir}/${COMPILE_LOCK_FILE}`, "run", "--", ...run("compile")],
    // The serving pods' environment exactly (their cache is the one compiled here), and what compiling adds.
    env: [...roleEnvironment(context), ...Object.entries(compileOnlyEnv(targetSoc(plan, role))).map(([name, value]) => ({ name, value }))],
    volumeMounts: [
      { name: "launch", mountPath: paths.launchDir, readOnly: true },
      { name: "weights", mountPath: context.hfHome, readOnly: true },
      ...cacheMounts,
      { name: "offload", mountPath: ROLE_DIRS.offload },
    ],
  };
  return {
    ...(registry ? { pull: registryContainer("pull", "pull") } : {}),
    ...(compileHere ? { compile } : {}),
    ...(registry && compileHere ? { push: registryContainer("push", "push") } : {}),
  };
}

/**
 * A Job per compile key (compile.enabled): the role's launch script in compile-only mode in a pod
 * that asks for no NPU (compile.nodeSelector, compile.resources), on the role's compile-cache
 * volume under its compile lock, so the role's pods find the cache and load. With a registry it
 * pulls a key the registry has and pushes one it compiled, each from a container of its own; with a
 * registry and no compile.enabled it only pulls, outside the lock, so a key the registry lacks is
 * compiled by the pods as before.
 */
export function compileJob(context: RoleContext, role: RolePlan, workload: RoleWorkload, ahead: CompileAheadPlan, registrySecret: string | null): CompileJob {
  const { deployment, instance, namespace } = context;
  const { settings, plan } = deployment;
  const { paths } = KUBERNETES_DEFAULTS;
  const cacheRoot = ROLE_DIRS.compileCache;
  const scriptDir = "/etc/rbln-serving-compile";
  const timeoutSeconds = engineReadyTimeoutSeconds(role.ranks[0]!.env) + KUBERNETES_DEFAULTS.budgets.startMarginSeconds;
  const script = compileJobScript({
    key: role.compileKey,
    roles: [role.role],
    marker: `${cacheRoot}/rbln-serving-complete/compile-${role.compileKey}`,
    compileHere: ahead.mode === "job",
    launch: `${paths.launchDir}/launch.sh`,
    ports: workload.ports,
    timeoutSeconds: engineReadyTimeoutSeconds(role.ranks[0]!.env),
    intervalSeconds: KUBERNETES_DEFAULTS.compileJobPollSeconds,
    registry: ahead.registry,
  });
  const labels = { ...context.baseLabels, "app.kubernetes.io/component": `${role.role}-compile` };
  const digest = createHash("sha256").update(script).digest("hex").slice(0, 10);
  const configMap: k8s.Named<k8s.ConfigMap> = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${instance}-${role.role}-compile-${digest}`, namespace, labels },
    data: { "compile-job.sh": script },
  };
  const { pull, compile, push } = compileContainers(context, role, ahead, registrySecret, scriptDir);
  // The last phase is the Job's container (its log's last line names the digest); those before it run first, in order.
  const phases = [pull, compile, push].filter((c): c is k8s.Container => c !== undefined);
  const security = settings.kubernetes.securityContext;
  const job: k8s.Named<k8s.Job> = {
    apiVersion: "batch/v1",
    kind: "Job",
    // Named after the key and the script: a new key is a new Job (a Job's spec cannot change).
    metadata: { name: `${instance}-compile-${role.role}-${role.compileKey.slice(0, 10)}`, namespace, labels },
    spec: {
      backoffLimit: KUBERNETES_DEFAULTS.compileJobBackoffLimit,
      activeDeadlineSeconds: timeoutSeconds,
      template: {
        metadata: { labels },
        spec: {
          ...podAccount(context.serviceAccountName, context.imagePullSecrets),
          restartPolicy: "Never",
          ...(Object.keys(settings.compile.nodeSelector).length > 0 ? { nodeSelector: settings.compile.nodeSelector } : {}),
          securityContext: podSecurity(security),
          initContainers: [waitForWeights(settings.kubernetes.image!, context.hfHome, plan.models, containerSecurity(security)), ...phases.slice(0, -1)],
          containers: phases.slice(-1),
          volumes: [
            ...roleVolumes(context, workload.configMap.metadata.name, workload.compileCache.metadata.name),
            { name: "compile-script", configMap: { name: configMap.metadata.name, defaultMode: 0o555 } },
          ],
        },
      },
    },
  };
  return { role: role.role, key: role.compileKey, configMap, job, timeoutSeconds };
}
