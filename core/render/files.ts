import { stringify } from "yaml";
import { secretEnvironment, secretPlaceholder, type SecretKey } from "../config/stackConfig";
import type { Deployment } from "../plan/deployment";
import { routerChartValues } from "../router/chartValues";
import { hostWaves } from "../rollout/hostWaves";
import { renderHost } from "./hosts/bundle";
import { copySources, renderCopy, weightsHosts } from "./hosts/copies";
import { hostFiles } from "./hosts/files";
import { DEFAULT_INSTANCE, deploymentId } from "./hosts/names";
import { renderKubernetesWorkloads, type KubeObject } from "./kubernetes/workloads";
import { monitoringObjects, routerMonitoringValues } from "../monitoring/kubernetes";
import { alertRules } from "../monitoring/rules";
import { scrapeTargets } from "../monitoring/targets";

/** YAML without folded lines or anchors, so scripts, JSON values and shared objects read as they are. */
export function toYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0, aliasDuplicateObjects: false });
}

/** The alert rules file: the same for every stack, so written once (the config fuzzer renders thousands). */
let alertRulesFile: string | undefined;

/** Every file `render` writes for a stack, by path under the output folder: the program's instance on that stack. */
export function renderFiles(deployment: Deployment, secrets: readonly SecretKey[], stack: string): Record<string, string> {
  const files: Record<string, string> = {};
  const id = deploymentId(stack, DEFAULT_INSTANCE);
  const waves = hostWaves(deployment);
  const downloading = weightsHosts(deployment, waves);
  for (const placement of deployment.placements) {
    for (const [name, content] of Object.entries(hostFiles(renderHost(deployment, placement, id), secrets, downloading.includes(placement)))) {
      files[`hosts/${placement.host.name}/${name}`] = content;
    }
  }
  // Copies between hosts: the grant and revoke run on the source, the copy on the destination.
  for (const copy of copySources(deployment, waves).map((c) => renderCopy(deployment, c, { deploymentId: id }))) {
    const [source, dest, kind] = [copy.source.host.name, copy.dest.host.name, copy.kind];
    files[`hosts/${source}/allow-${kind}-${dest}.sh`] = copy.allowScript;
    files[`hosts/${source}/revoke-${kind}-${dest}.sh`] = copy.revokeScript;
    files[`hosts/${dest}/copy-${kind}-from-${source}.sh`] = copy.copyScript;
  }
  if (deployment.settings.platform === "hosts") {
    files["prometheus/targets.json"] = `${JSON.stringify(scrapeTargets(deployment), null, 2)}\n`;
    files["prometheus/rbln-serving-rules.yaml"] = alertRulesFile ??= toYaml(alertRules());
  }
  if (deployment.settings.platform === "kubernetes") {
    const workloads = renderKubernetesWorkloads(deployment, { instance: DEFAULT_INSTANCE, namespace: deployment.settings.kubernetes.namespace }, secrets);
    const write = (object: KubeObject, name: string) => (files[`kubernetes/${name}.yaml`] = toYaml(object));
    write(workloads.namespace, "namespace");
    write(workloads.serviceAccount, "serviceaccount");
    if (workloads.secret) {
      const secret: typeof workloads.secret = { ...workloads.secret, stringData: secretEnvironment(secrets, secretPlaceholder) };
      write(secret, "secret");
    }
    for (const volume of workloads.volumes) write(volume.object, `pvc-${volume.id}`);
    write(workloads.weightsJob, "job-weights");
    for (const role of workloads.roles) {
      write(role.configMap, `${role.role}-configmap`);
      write(role.deployment, `${role.role}-deployment`);
      if (role.service) write(role.service, `${role.role}-service`);
      write(role.podDisruptionBudget, `${role.role}-pdb`);
      write(role.networkPolicy, `${role.role}-networkpolicy`);
    }
    const monitoring = monitoringObjects(deployment, workloads, DEFAULT_INSTANCE);
    if (monitoring) {
      for (const { id, object } of monitoring.podMonitors) write(object, `podmonitor-${id}`);
      write(monitoring.prometheusRule, "prometheusrule");
      write(monitoring.dashboard, "dashboard-configmap");
    }
    if (workloads.router) {
      files["router/values.yaml"] = toYaml(routerMonitoringValues(deployment, routerChartValues(workloads.router, deployment.plan.strategy, deployment.settings)));
    }
  }
  return files;
}
