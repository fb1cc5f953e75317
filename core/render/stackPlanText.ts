// `plan --stack`: the launch plan in the stack's platform. On hosts, the servers, their addresses,
// the ports, units and URLs, the front door and the compile host, and each rank's command with its
// placeholders bound as the unit runs it; on Kubernetes, the Deployments and their bounds under
// KEDA, the compile Jobs and the registry, the router chart, and each rank's command in its pod.
import type { FrontDoorPlan, LaunchPlan } from "../plan/types";
import type { RenderedDeployment, RenderedHosts, RenderedKubernetes } from "./deployment";
import { firstHostsOfKeys } from "./hosts/copies";
import { launchParts, POD_IP_VARIABLE } from "./kubernetes/launch";
import { messageLines, selectionLines, table } from "./planText";
import { type CommandParts, shellCommandLines } from "./shellCommand";
import { maskUrlCredentials } from "../errors";

const server = (p: { name: string; address: string }) => `${p.name} (${p.address})`;

/** Where clients send requests, and the front door's parts: what `endpoints` will hold after `pulumi up`. */
function hostsEndpointLines(hosts: RenderedHosts, deployment: FrontDoorPlan | null, replicas: number): string[] {
  const door = hosts.frontDoor;
  if (!door || !deployment) {
    const firsts = hosts.waves.flat().flatMap((h) => h.ranks.filter((r) => r.rank === 0).map((r) => r.url));
    return [`endpoints   ${firsts.join("  ")} (${replicas > 1 ? "each replica's rank 0; no front door without router.host" : "rank 0"})`];
  }
  const routers = deployment.routers.map((r) => `${server(r.host)}${r.sharedWith ? `, shared with the NPU host ${r.sharedWith}` : ""}`);
  const where =
    deployment.routers.length === 1
      ? `the front door on ${routers[0]}`
      : `the front door on ${routers.join(" and ")}${deployment.virtualAddress ? ", its virtual address held by one whose Envoy is ready" : ": clients retry on another"}`;
  return [
    `${door.urls.length > 1 ? "endpoints  " : "endpoint   "} ${door.urls.join("  ")}: ${where}`,
    `front door  ${deployment.runtime}: endpoint picker ${deployment.images.endpointPicker}, Envoy ${deployment.images.proxy}; ${deployment.endpoints.length} endpoints behind it`,
    ...deployment.sidecars.map(
      (s) =>
        `sidecar     ${s.host}: ${deployment.images.sidecar}, ports ${s.port}-${s.port + s.dataParallelSize - 1} to the decode ranks on ${s.modelServerPort}-${s.modelServerPort + s.dataParallelSize - 1}`,
    ),
  ];
}

/** Who downloads the weights, who compiles each key, and what the registry does. */
function hostsCacheLines(rendered: RenderedDeployment, hosts: RenderedHosts): string[] {
  const { deployment } = rendered;
  const { compile, settings } = deployment;
  const placements = hosts.waves.map((wave) => wave.map((h) => h.placement));
  const copiedWeights = hosts.copies.filter((c) => c.kind === "weights").map((c) => c.dest.host.name);
  const weights = `weights     ${hosts.weightsHosts.join(", ")} download${hosts.weightsHosts.length === 1 ? "s" : " (one at a time, through the shared cache's lease)"} ${deployment.plan.models.map((m) => m.id).join(", ")} from the hub${copiedWeights.length > 0 ? `; ${copiedWeights.join(", ")} ${copiedWeights.length === 1 ? "copies" : "copy"} them` : ""}`;
  const registry = compile.registry
    ? `; registry ${compile.registry.repository} (${compile.mode === "off" ? "pull only" : "pull, and push what it compiles"})`
    : "";
  if (hosts.compileHost) {
    const keys = hosts.compileHost.steps.map((s) => `${s.key} (${s.roles.join(", ")})`).join(", ");
    return [weights, `compile     on ${server(hosts.compileHost.placement.host)}, off the NPUs, before any unit changes: ${keys}${registry}`];
  }
  const firsts = firstHostsOfKeys(deployment, placements).map(({ key, placement }) => `${key} on ${placement.host.name}`);
  const how = settings.cache.shared ? "the first unit of a key compiles into the shared cache, the others wait and load" : "the others copy its cache";
  const pulls = compile.registry ? "pulled from the registry when it has the key, else compiled" : "compiled";
  return [weights, `compile     each key ${pulls} on the NPUs of its first host (${firsts.join(", ")}); ${how}${registry}`];
}

/** One row per rank of each host: where it runs, its NPUs, URL and unit. */
function hostsTable(hosts: RenderedHosts, plan: LaunchPlan): string {
  const rows = [["HOST", "ADDRESS", "REPLICA", "ROLE", "RANK", "NPUS", "URL", "UNIT"]];
  for (const host of hosts.waves.flat()) {
    const { placement } = host;
    for (const rank of host.ranks) {
      const devices = plan.roles.find((r) => r.role === rank.role)?.ranks.find((k) => k.rank === rank.rank)?.devices ?? [];
      rows.push([
        placement.host.name,
        placement.host.address,
        String(placement.replica),
        rank.role,
        String(rank.rank),
        devices.join(","),
        rank.url,
        rank.unitName,
      ]);
    }
  }
  return table(rows);
}

/** Each distinct command once, headed by the rank and the servers that run it. */
function commandBlocks(commands: { label: string; where: string; parts: CommandParts; variables?: Record<string, string> }[]): string[] {
  const groups = new Map<string, { label: string; where: string[] }>();
  for (const c of commands) {
    // A URL credential in a flag (extraArgs) is masked as `plan` masks it; those in env are not in the parts.
    const text = maskUrlCredentials(shellCommandLines(c.parts, c.variables).join("\n"));
    const key = `${c.label}\n${text}`;
    const group = groups.get(key) ?? { label: c.label, where: [] };
    group.where.push(c.where);
    groups.set(key, group);
  }
  return [...groups].flatMap(([key, group]) => ["", `# ${group.label} on ${group.where.join(", ")}`, key.slice(key.indexOf("\n") + 1)]);
}

function hostsText(rendered: RenderedDeployment, hosts: RenderedHosts): string[] {
  const { deployment } = rendered;
  const commands = hosts.waves
    .flat()
    .flatMap((host) => host.ranks.map((rank) => ({ label: `${rank.role} rank ${rank.rank}`, where: host.placement.host.name, parts: rank.launch })));
  return [
    `platform    hosts, deployment id ${hosts.id}`,
    ...hostsEndpointLines(hosts, deployment.frontDoor, deployment.settings.replicas),
    ...hostsCacheLines(rendered, hosts),
    "",
    hostsTable(hosts, deployment.plan),
    ...commandBlocks(commands),
  ];
}

/** Per role its Deployment and replicas: fixed, or the ScaledObject's bounds. */
function kubernetesTable(kubernetes: RenderedKubernetes): string {
  const rows = [["ROLE", "DEPLOYMENT", "REPLICAS", "RANK", "NPUS", "PORT"]];
  for (const role of kubernetes.workloads.roles) {
    const scaler = kubernetes.scalers.find((s) => s.role === role.role);
    const replicas =
      role.scaling && scaler ? `${role.scaling.minReplicas}-${role.scaling.maxReplicas} (ScaledObject ${scaler.scaledObject})` : `${role.replicas}`;
    for (const rank of role.ranks)
      rows.push([role.role, role.deployment.metadata.name, replicas, String(rank.rank), rank.devices.join(","), String(rank.port)]);
  }
  return table(rows);
}

function kubernetesText(rendered: RenderedDeployment, kubernetes: RenderedKubernetes): string[] {
  const { deployment } = rendered;
  const { settings } = deployment;
  const { workloads } = kubernetes;
  const gateway = settings.kubernetes.gateway;
  const services = workloads.roles.flatMap((r) =>
    r.service ? [`http://${r.service.metadata.name}.${r.service.metadata.namespace}.svc.cluster.local:${r.ports[0]}`] : [],
  );
  const endpoint = gateway ? `the address of the Gateway ${gateway.namespace}/${gateway.name}, once the router's HTTPRoute is attached` : services.join("  ");
  const router = workloads.router;
  const compile =
    workloads.compileJobs.length > 0
      ? `Job ${workloads.compileJobs.map((j) => `${j.job.metadata.name} (${j.role}, key ${j.key})`).join(", Job ")}; ${deployment.compile.mode === "job" ? "it compiles off the NPUs" : "it only pulls"}, and the role's Deployment waits for it`
      : "each role's first pod compiles on its NPUs under the role's compile lock; the others load its cache (compile.enabled: false)";
  const commands = workloads.roles.flatMap((role) =>
    deployment.plan.roles
      .find((r) => r.role === role.role)!
      .ranks.map((rank) => ({
        label: `${role.role} rank ${rank.rank}`,
        where: `each pod of ${role.deployment.metadata.name} (POD_IP: the pod's IP, from the downward API)`,
        parts: launchParts(rank, workloads.eppHost),
        variables: POD_IP_VARIABLE,
      })),
  );
  return [
    `platform    kubernetes, namespace ${workloads.namespace.metadata.name}, image ${settings.kubernetes.image ?? "(kubernetes.image unset)"}`,
    `endpoint    ${endpoint}`,
    ...(router
      ? [
          `router      ${router.chart} ${router.version} (release ${router.release}), pool ports ${router.values.inference_pool.target_ports.join(",")}; endpoint picker ${workloads.eppHost}`,
        ]
      : []),
    `weights     Job ${workloads.weightsJob.metadata?.name} fills the claim ${workloads.volumes.find((v) => v.id === "weights")?.object.metadata.name}`,
    `compile     ${compile}`,
    `registry    ${deployment.compile.registry ? deployment.compile.registry.repository : "none (compile.registry unset)"}`,
    `autoscaling ${deployment.autoscaling ? `KEDA, from ${deployment.autoscaling.prometheusAddress}` : "off: fixed replicas"}`,
    "",
    kubernetesTable(kubernetes),
    ...commandBlocks(commands),
  ];
}

/** The plan of a stack as its platform runs it; the messages last. */
export function renderStackPlanText(rendered: RenderedDeployment): string {
  const { plan } = rendered.deployment;
  const body = rendered.hosts ? hostsText(rendered, rendered.hosts) : kubernetesText(rendered, rendered.kubernetes!);
  return `${[...selectionLines(plan), "", ...body, ...messageLines(plan.messages)].join("\n")}\n`;
}
