import { stringify } from "yaml";
import { credentialPlaceholder, secretEnvironment, secretPlaceholder } from "../config/secrets";
import { alertRules } from "../monitoring/rules";
import type { RenderedDeployment } from "./deployment";
import type { RenderedStack } from "./stack";
import { hostFiles } from "./hosts/files";
import type { RenderedFrontDoor } from "./hosts/frontDoor/frontDoor";
import { renderPipConfig } from "./hosts/pip";
import type { KubeObject } from "./kubernetes/objects";

/** YAML without folded lines or anchors, so scripts, JSON values and shared objects read as they are. */
export function toYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0, aliasDuplicateObjects: false });
}

/** The alert rules file: the same for every stack, so written once (the config fuzzer renders thousands). */
let alertRulesFile: string | undefined;

/** The front door's files: each router host's steps and files (each host's key steps among them), the TLS steps on the first, the decode hosts' sidecars. */
function frontDoorFiles(frontDoor: RenderedFrontDoor): Record<string, string> {
  const files: Record<string, string> = {};
  for (const routerHost of frontDoor.routers) {
    const router = `hosts/${routerHost.host.name}/front-door`;
    for (const access of routerHost.access) {
      files[`${router}/access-${access.host}.sh`] = access.accessScript;
      files[`${router}/revoke-${access.host}.sh`] = access.revokeScript;
    }
    files[`${router}/apply.sh`] = routerHost.applyScript;
    files[`${router}/remove.sh`] = routerHost.removeScript;
    for (const [file, content] of Object.entries(routerHost.files)) files[`${router}/${file}`] = content;
  }
  for (const step of frontDoor.tls?.steps ?? []) files[`hosts/${frontDoor.tls!.host.name}/front-door/tls-${step.router}.sh`] = step.script;
  for (const sidecar of frontDoor.sidecars) {
    files[`hosts/${sidecar.host}/sidecar.sh`] = sidecar.applyScript;
    files[`hosts/${sidecar.host}/remove-sidecar.sh`] = sidecar.removeScript;
    files[`hosts/${sidecar.host}/systemd/${sidecar.unitName}`] = sidecar.unitText;
  }
  return files;
}

/** Every file `render` writes for a rendered deployment, by path under the output folder: the texts its resources carry, secrets as placeholders. */
export function renderFiles(rendered: RenderedDeployment): Record<string, string> {
  const files: Record<string, string> = {};
  const { secrets } = rendered;
  if (rendered.hosts) {
    const { waves, weightsHosts, copies, scrapeTargets } = rendered.hosts;
    for (const host of waves.flat()) {
      const name = host.placement.host.name;
      for (const [file, content] of Object.entries(hostFiles(host, secrets, weightsHosts.includes(name)))) files[`hosts/${name}/${file}`] = content;
    }
    // Copies between hosts: the grant and revoke run on the source, the copy on the destination.
    for (const copy of copies) {
      const [source, dest, kind] = [copy.source.host.name, copy.dest.host.name, copy.kind];
      files[`hosts/${source}/allow-${kind}-${dest}.sh`] = copy.allowScript;
      files[`hosts/${source}/revoke-${kind}-${dest}.sh`] = copy.revokeScript;
      files[`hosts/${dest}/copy-${kind}-from-${source}.sh`] = copy.copyScript;
    }
    if (rendered.hosts.frontDoor) Object.assign(files, frontDoorFiles(rendered.hosts.frontDoor));
    const { compileHost, pulls } = rendered.hosts;
    if (compileHost) {
      const name = compileHost.placement.host.name;
      files[`hosts/${name}/preflight.sh`] = compileHost.preflightScript;
      files[`hosts/${name}/install.sh`] = compileHost.installScript;
      if (weightsHosts.includes(name)) files[`hosts/${name}/weights.sh`] = compileHost.weightsScript;
      files[`hosts/${name}/pip.conf`] = renderPipConfig(compileHost.pipIndexes, secrets.includes("pipPassword") ? secretPlaceholder("pipPassword") : null);
      for (const step of compileHost.steps) files[`hosts/${name}/compile-${step.key}.sh`] = step.script;
    }
    for (const { host, step } of pulls) files[`hosts/${host}/pull-compile-${step.key}.sh`] = step.script;
    files["prometheus/targets.json"] = `${JSON.stringify(scrapeTargets, null, 2)}\n`;
    files["prometheus/rbln-serving-rules.yaml"] = alertRulesFile ??= toYaml(alertRules());
  }
  if (rendered.kubernetes) {
    const { workloads, scalers, monitoring, routerValues } = rendered.kubernetes;
    const write = (object: KubeObject, name: string) => (files[`kubernetes/${name}.yaml`] = toYaml(object));
    write(workloads.namespace, "namespace");
    write(workloads.serviceAccount, "serviceaccount");
    if (workloads.secret) {
      const credentials = Object.fromEntries(Object.keys(workloads.credentialEnv).map((key) => [key, credentialPlaceholder(key)]));
      const secret: typeof workloads.secret = { ...workloads.secret, stringData: { ...secretEnvironment(secrets, secretPlaceholder), ...credentials } };
      write(secret, "secret");
    }
    for (const volume of workloads.volumes) write(volume.object, `pvc-${volume.id}`);
    write(workloads.weightsJob, "job-weights");
    if (workloads.registrySecret) {
      const secret: typeof workloads.registrySecret = { ...workloads.registrySecret, stringData: { password: secretPlaceholder("registryPassword") } };
      write(secret, "secret-registry");
    }
    for (const compile of workloads.compileJobs) {
      write(compile.configMap, `${compile.role}-compile-configmap`);
      write(compile.job, `job-compile-${compile.key}`);
    }
    for (const role of workloads.roles) {
      write(role.configMap, `${role.role}-configmap`);
      write(role.deployment, `${role.role}-deployment`);
      if (role.service) write(role.service, `${role.role}-service`);
      write(role.podDisruptionBudget, `${role.role}-pdb`);
      write(role.networkPolicy, `${role.role}-networkpolicy`);
    }
    for (const scaler of scalers) write(scaler.object, `${scaler.role}-scaledobject`);
    if (monitoring) {
      for (const { id, object } of monitoring.podMonitors) write(object, `podmonitor-${id}`);
      write(monitoring.prometheusRule, "prometheusrule");
      if (monitoring.dashboard) write(monitoring.dashboard, "dashboard-configmap");
    }
    if (routerValues) files["router/values.yaml"] = toYaml(routerValues);
    if (workloads.eppDisruptionBudget) write(workloads.eppDisruptionBudget, "router-epp-pdb");
  }
  return files;
}

/**
 * Every file `render` writes for a stack: a stack without models as its one model's files; with
 * models, each model's under `models/<name>/`, and once at the top what they share (the namespace,
 * the alert rules, every model's scrape targets in one file).
 */
export function renderStackFiles(rendered: RenderedStack): Record<string, string> {
  if (rendered.namespace === null && rendered.plan.settings.models === undefined) return renderFiles(rendered.models[0]!);
  const files: Record<string, string> = {};
  const shared = new Set(["kubernetes/namespace.yaml", "prometheus/targets.json", "prometheus/rbln-serving-rules.yaml"]);
  for (const model of rendered.models)
    for (const [file, content] of Object.entries(renderFiles(model)))
      if (shared.has(file)) files[file] ??= content;
      else files[`models/${model.deployment.entry.name}/${file}`] = content;
  if (rendered.namespace) files["kubernetes/namespace.yaml"] = toYaml(rendered.namespace);
  if (rendered.dashboard) files["kubernetes/dashboard-configmap.yaml"] = toYaml(rendered.dashboard);
  if (rendered.routing) {
    const { payloadProcessor, servedNames, answers } = rendered.routing;
    files["payload-processor/values.yaml"] = toYaml(payloadProcessor.values);
    for (const configMap of servedNames) files[`payload-processor/${configMap.metadata.name}.yaml`] = toYaml(configMap);
    for (const [kind, object] of Object.entries(answers)) files[`kubernetes/answers-${kind.toLowerCase()}.yaml`] = toYaml(object);
  }
  // Hosts: the one front door, at the top (each model's sidecars are under its folder).
  if (rendered.frontDoor) Object.assign(files, frontDoorFiles(rendered.frontDoor));
  const targets = rendered.models.flatMap((m) => m.hosts?.scrapeTargets ?? []);
  if (targets.length > 0) files["prometheus/targets.json"] = `${JSON.stringify(targets, null, 2)}\n`;
  return files;
}
