import { execFile, spawn, spawnSync } from "node:child_process";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { note } from "../core/plan/messages";
import { Namespace, PersistentVolumeClaim, Secret, Service, ConfigMap, ServiceAccount } from "kubernetes-models/v1";
import { Deployment as DeploymentModel } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodMonitor, PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { Job } from "kubernetes-models/batch/v1";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { bindRank } from "../core/plan/bind";
import { planDeployment } from "../core/plan/deployment";
import { routerChartValues } from "../core/render/kubernetes/chartValues";
import { renderStackFiles } from "./helpers/render";
import { renderKubernetesWorkloads, type KubeObject } from "../core/render/kubernetes/workloads";
import type * as k8s from "../core/render/kubernetes/objects";
import { shippedCatalog } from "./helpers/recipes";
import chartFacts from "./fixtures/llm-d-router-gateway-v0.10.0.json";
import { chartKeyProblems } from "./helpers/routerChart";

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  Namespace,
  PersistentVolumeClaim,
  Secret,
  Service,
  ConfigMap,
  Deployment: DeploymentModel,
  NetworkPolicy,
  PodMonitor,
  PrometheusRule,
  ServiceAccount,
  PodDisruptionBudget,
  Job,
  ScaledObject,
};

function kubernetesDeployment(overrides: Record<string, unknown> = {}) {
  return planDeployment(parseStackSettings({ ...readStackFile("prod").raw, ...overrides }), shippedCatalog);
}

const variants = [
  kubernetesDeployment(),
  kubernetesDeployment({ preset: undefined, axes: { lmcache: "cpu", spec_decode: "suffix", prefix_caching: "on" }, target: "Latency", decodeReplicas: 3 }),
  kubernetes({ strategy: "aggregated-data-expert-parallel", target: "Latency", replicas: 2 }),
  kubernetes({ strategy: "aggregated-pipeline-parallel", target: "Throughput", axes: { lmcache: "rds" } }),
  kubernetesDeployment({ autoscaling: { enabled: true, maxReplicas: 4 } }),
];

function kubernetes(overrides: Record<string, unknown>) {
  const { preset: _, ...raw } = readStackFile("prod").raw;
  return planDeployment(parseStackSettings({ ...raw, ...overrides }), shippedCatalog);
}

describe("rendered Kubernetes objects", () => {
  it("every object validates against the Kubernetes API schema", () => {
    let count = 0;
    for (const deployment of variants) {
      for (const [file, text] of Object.entries(renderStackFiles(deployment, ["hfToken", "apiKey"], "dev"))) {
        if (!file.startsWith("kubernetes/")) continue;
        // Plain YAML a reader (or `kubectl apply -f`) takes as it is: no anchors for shared objects.
        expect(text, file).not.toMatch(/: [&*]a\d+$/m);
        const object = parseYaml(text) as KubeObject;
        const Model = MODELS[object.kind];
        expect(Model, `${file}: ${object.kind}`).toBeDefined();
        expect(() => new Model!(object).validate(), file).not.toThrow();
        count++;
      }
    }
    expect(count).toBeGreaterThan(20);
  });

  it("types the objects, so a misspelled field does not compile (checked by tsc)", () => {
    const container: k8s.Container = {
      name: "vllm",
      // @ts-expect-error `imagee` is not a Container field; tsc fails on an unused expect-error if the types stop catching it.
      imagee: "x",
    };
    const probe: k8s.Probe = {
      // @ts-expect-error a misspelled nested field
      httpGet: { path: "/health", prot: 8000 },
    };
    expect([container, probe]).toHaveLength(2);
  });

  it("puts the secrets only in the Secret, as references elsewhere", () => {
    const files = renderStackFiles(variants[0]!, ["hfToken", "apiKey"], "dev");
    expect(parseYaml(files["kubernetes/secret.yaml"]!).stringData).toEqual({ HF_TOKEN: "<secret:hfToken>", VLLM_API_KEY: "<secret:apiKey>" });
    const decode = parseYaml(files["kubernetes/decode-deployment.yaml"]!);
    expect(decode.spec.template.spec.containers[0].env).toContainEqual({
      name: "HF_TOKEN",
      valueFrom: { secretKeyRef: { name: "rbln-serving-secrets", key: "HF_TOKEN" } },
    });
    for (const [file, text] of Object.entries(files)) if (file !== "kubernetes/secret.yaml") expect(text, file).not.toContain("<secret:");
  });

  it("lets the picker reach every decode rank through the sidecar, and only live prefill ports", () => {
    const workloads = renderKubernetesWorkloads(variants[0]!, { instance: "rbln-serving", namespace: "llm-serving" }, []);
    const [prefill, decode] = workloads.roles.map((r) => r.deployment as any);
    const prefillPod = prefill.spec.template;
    const decodePod = decode.spec.template;
    expect(prefillPod.metadata.labels).toMatchObject({ "llm-d.ai/guide": "pd-disaggregation", "llm-d.ai/role": "prefill" });
    expect(prefillPod.metadata.annotations).toEqual({ "llm-d.ai/active-ports": "8000" });
    // Only the wait for the weights Job's markers: prefill listens on a pool port, with no sidecar.
    expect(prefillPod.spec.initContainers.map((c: { name: string }) => c.name)).toEqual(["wait-for-weights"]);
    expect(prefillPod.spec.containers[0].ports.map((p: any) => p.containerPort)).toEqual([8000]);
    expect(decodePod.metadata.labels).toMatchObject({ "llm-d.ai/guide": "pd-disaggregation", "llm-d.ai/role": "decode" });
    expect(decodePod.metadata.annotations).toEqual({ "llm-d.ai/active-ports": "8000,8001,8002,8003" });
    const [, sidecar] = decodePod.spec.initContainers;
    expect(sidecar).toMatchObject({
      name: "routing-proxy",
      image: "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
      restartPolicy: "Always",
      args: ["--port=8000", "--model-server-port=8200", "--data-parallel-size=4", "--kv-connector=nixlv2", "--secure-proxy=false"],
    });
    expect(sidecar.ports.map((p: any) => p.containerPort)).toEqual([8000, 8001, 8002, 8003]);
    const vllm = decodePod.spec.containers[0];
    expect(vllm.ports.map((p: any) => p.containerPort)).toEqual([8200, 8201, 8202, 8203]);
    expect(vllm.resources.limits).toMatchObject({ "rebellions.ai/npu": "4" });
    for (const deployment of [prefill, decode]) {
      expect(deployment.spec.strategy).toEqual({ type: "Recreate" });
      const container = deployment.spec.template.spec.containers[0];
      const startupBudget = container.startupProbe.periodSeconds * container.startupProbe.failureThreshold;
      expect(startupBudget).toBeGreaterThanOrEqual(9600);
      expect(deployment.spec.progressDeadlineSeconds).toBeGreaterThan(startupBudget);
      expect(deployment.spec.template.spec.volumes).toContainEqual({ name: "dshm", emptyDir: { medium: "Memory", sizeLimit: "16Gi" } });
    }
    // One port and no API key: plain HTTP probes (vLLM's key never guards /health).
    const prefillVllm = prefillPod.spec.containers[0];
    expect(prefillVllm.livenessProbe).toMatchObject({ httpGet: { path: "/health", port: 8000 } });
    expect(prefillVllm.readinessProbe).toMatchObject({ httpGet: { path: "/v1/models", port: 8000 } });
    // Four ports: one exec probe over all of them, its timeout covering each port's in turn.
    for (const [probe, path] of [
      [vllm.readinessProbe, "/v1/models"],
      [vllm.livenessProbe, "/health"],
      [vllm.startupProbe, "/health"],
    ] as const) {
      const [, , , host, perPort, ports, probePaths] = probe.exec.command;
      expect([host, ports, probePaths]).toEqual(["127.0.0.1", "8200,8201,8202,8203", path]);
      expect(probe.timeoutSeconds).toBeGreaterThan(Number(perPort) * 4);
    }
    const pool = routerChartValues(workloads.router!, "prefill-decode-disaggregated", variants[0]!.settings) as any;
    expect(pool.router.modelServers.targetPorts).toEqual([8000, 8001, 8002, 8003].map((number) => ({ number })));
    expect(
      Object.entries(pool.router.modelServers.matchLabels).every(([k, v]) => decodePod.metadata.labels[k] === v && prefillPod.metadata.labels[k] === v),
    ).toBe(true);
  });

  it("lets only the gateway, the endpoint picker and the peer role reach the vLLM pods", () => {
    const workloads = renderKubernetesWorkloads(variants[0]!, { instance: "rbln-serving", namespace: "llm-serving" }, []);
    const [prefill, decode] = workloads.roles.map((r) => r.networkPolicy as any);
    expect(decode.spec.podSelector).toEqual({ matchLabels: { "app.kubernetes.io/instance": "rbln-serving", "app.kubernetes.io/component": "decode" } });
    expect(decode.spec.ingress).toEqual([
      { from: [{ podSelector: { matchLabels: { "app.kubernetes.io/instance": "rbln-serving" } } }] },
      {
        from: [
          { podSelector: { matchLabels: { "llm-d-router-gateway": "router-epp" } } },
          { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "gateway-system" } } },
        ],
        ports: [8000, 8001, 8002, 8003, 8200, 8201, 8202, 8203].map((port) => ({ protocol: "TCP", port })),
      },
      // monitoring.enabled in the prod stack: the monitoring namespace, on the role's own rank ports (not the sidecar's).
      {
        from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
        ports: [8200, 8201, 8202, 8203].map((port) => ({ protocol: "TCP", port })),
      },
    ]);
    expect(prefill.spec.ingress[1].ports).toEqual([{ protocol: "TCP", port: 8000 }]);
  });

  it("gives every served role of the aggregated strategies a policy: the Service's clients and monitoring, on the rank ports", () => {
    const ns = (name: string) => ({ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": name } } });
    const policy = (overrides: Record<string, unknown>) =>
      renderKubernetesWorkloads(
        kubernetes({ strategy: "aggregated-pipeline-parallel", target: "Throughput", monitoring: { enabled: false }, ...overrides }),
        { instance: "x", namespace: "llm-serving" },
        [],
      ).roles[0]!.networkPolicy as any;
    const ports = [{ protocol: "TCP", port: 8000 }];
    expect(policy({}).spec.ingress).toEqual([{ from: [ns("gateway-system"), ns("llm-serving")], ports }]);
    const k8s = { ...(readStackFile("prod").raw.kubernetes as object) };
    expect(policy({ kubernetes: { ...k8s, gateway: undefined } }).spec.ingress).toEqual([{ from: [ns("llm-serving")], ports }]);
    expect(policy({ kubernetes: { ...k8s, clients: { namespaces: ["apps"], podLabels: { app: "chat" } } } }).spec.ingress).toEqual([
      { from: [{ ...ns("apps"), podSelector: { matchLabels: { app: "chat" } } }], ports },
    ]);
    expect(policy({ monitoring: { enabled: true, namespace: "observability" } }).spec.ingress[1]).toEqual({ from: [ns("observability")], ports });
    const disaggregated = renderKubernetesWorkloads(kubernetesDeployment({ monitoring: { enabled: true } }), { instance: "x", namespace: "n" }, []).roles[1]!
      .networkPolicy as any;
    expect(disaggregated.spec.ingress[2]).toEqual({ from: [ns("monitoring")], ports: [8200, 8201, 8202, 8203].map((port) => ({ protocol: "TCP", port })) });
  });

  it("rolls more than one replica in waves of maxUnavailable pods (maxSurge 0), one replica by Recreate; each role on its own", () => {
    const roles = (overrides: Record<string, unknown>) =>
      Object.fromEntries(renderKubernetesWorkloads(kubernetesDeployment(overrides), { instance: "x", namespace: "n" }, []).roles.map((r) => [r.role, r]));
    const { prefill, decode } = roles({ prefillReplicas: 1, decodeReplicas: 8 });
    expect((prefill!.deployment.spec as any).strategy).toEqual({ type: "Recreate" });
    // 25% of 8 is 2; an integer, since Kubernetes would round a percentage down (to 0 below 4 replicas).
    expect((decode!.deployment.spec as any).strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: 2 } });
    expect([prefill!.podDisruptionBudget.spec, decode!.podDisruptionBudget.spec]).toEqual([
      { maxUnavailable: 1, selector: { matchLabels: { "app.kubernetes.io/instance": "x", "app.kubernetes.io/component": "prefill" } } },
      { maxUnavailable: 2, selector: { matchLabels: { "app.kubernetes.io/instance": "x", "app.kubernetes.io/component": "decode" } } },
    ]);
    const three = roles({ prefillReplicas: 3, decodeReplicas: 2, rollout: { maxUnavailable: "50%" } });
    expect([three.prefill!.maxUnavailable, three.decode!.maxUnavailable]).toEqual([2, 1]);
    expect((three.prefill!.deployment.spec as any).strategy.rollingUpdate.maxUnavailable).toBe(2);
    // Pulumi waits through every wave: the timeout grows with the waves, not with replicas.
    expect(roles({ decodeReplicas: 8 }).decode!.rolloutTimeoutSeconds).toBeGreaterThan(4 * 9600);
    expect(roles({ decodeReplicas: 8, rollout: { maxUnavailable: "100%" } }).decode!.rolloutTimeoutSeconds).toBeLessThan(2 * 9600);
  });

  it("drains a stopping pod: vLLM serves through a preStop sleep, then gets SIGTERM and drains for --shutdown-timeout, all within the grace period; the routing sidecar outlives it", () => {
    for (const shutdownTimeoutSeconds of [undefined, 90]) {
      const deployment = kubernetesDeployment({ rollout: { shutdownTimeoutSeconds } });
      for (const role of renderKubernetesWorkloads(deployment, { instance: "x", namespace: "n" }, []).roles) {
        const pod = role.deployment.spec!.template!.spec! as any;
        const vllm = pod.containers.find((c: any) => c.name === "vllm");
        // An exec of the image's sleep: no shell needed, and every Kubernetes version runs it.
        expect(vllm.lifecycle, role.role).toEqual({ preStop: { exec: { command: ["sleep", "15"] } } });
        const shutdown = Number(/--shutdown-timeout (\d+)/.exec(role.launchScript)![1]);
        expect(shutdown, role.role).toBe(shutdownTimeoutSeconds ?? 3600);
        expect(pod.terminationGracePeriodSeconds, role.role).toBe(15 + shutdown + 30);
        // A wave waits for the old pods' drain before the new ones get the NPUs.
        expect(role.deployment.spec!.progressDeadlineSeconds, role.role).toBeGreaterThan(pod.terminationGracePeriodSeconds + 9600);
        // A native sidecar (an init container that restarts always) gets SIGTERM only after vLLM has exited.
        const sidecar = (pod.initContainers ?? []).find((c: any) => c.name === "routing-proxy");
        if (role.role === "decode") expect([sidecar.restartPolicy, sidecar.lifecycle]).toEqual(["Always", undefined]);
        else expect(sidecar).toBeUndefined();
      }
    }
  });

  it("passes SIGTERM to every rank of a pod and lives until each has drained (real bash, the decode pod's 4 ranks)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "drain-"));
    // A stand-in vllm that drains for a second on SIGTERM (once, as vLLM ignores a second signal).
    fs.writeFileSync(
      path.join(dir, "vllm"),
      `#!/usr/bin/env bash\nfor a in "$@"; do [ "$prev" = --port ] && port=$a; prev=$a; done\ntrap 'if [ -z "$draining" ]; then draining=1; sleep 1; echo "$port" >> "$OUT/drained"; exit 0; fi' TERM\necho "$port" >> "$OUT/up"\nwhile :; do sleep 0.1; done\n`,
      { mode: 0o755 },
    );
    const decode = renderKubernetesWorkloads(variants[0]!, { instance: "rbln-serving", namespace: "llm-serving" }, []).roles.find((r) => r.role === "decode")!;
    const pod = spawn("bash", ["-c", decode.launchScript], { env: { PATH: `${dir}:${process.env.PATH}`, POD_IP: "10.9.8.7", OUT: dir }, stdio: "ignore" });
    const read = (file: string) => (fs.existsSync(path.join(dir, file)) ? fs.readFileSync(path.join(dir, file), "utf8").trim().split("\n").sort() : []);
    for (let i = 0; i < 100 && read("up").length < 4; i++) await new Promise((r) => setTimeout(r, 100));
    expect(read("up")).toEqual(["8200", "8201", "8202", "8203"]);
    const exited = new Promise<void>((resolve) => pod.on("exit", () => resolve()));
    pod.kill("SIGTERM");
    await exited;
    // Every rank drained before the supervisor (the container's process) ended.
    expect(read("drained")).toEqual(["8200", "8201", "8202", "8203"]);
  });

  it("gives every container CPU and memory requests, sized for the model by default and per role by settings", () => {
    for (const deployment of variants) {
      for (const role of renderKubernetesWorkloads(deployment, { instance: "x", namespace: "n" }, []).roles) {
        const pod = role.deployment.spec.template.spec as any;
        for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
          expect(Object.keys(container.resources.requests), `${role.role} ${container.name}`).toEqual(expect.arrayContaining(["cpu", "memory"]));
          expect(container.resources.limits.memory, `${role.role} ${container.name}`).toBeDefined();
        }
      }
      const job = renderKubernetesWorkloads(deployment, { instance: "x", namespace: "n" }, []).weightsJob.spec!.template.spec!.containers[0]!;
      expect(Object.keys(job.resources!.requests!)).toEqual(["cpu", "memory"]);
    }
    const k8s = readStackFile("prod").raw.kubernetes as object;
    const decode = (resources: unknown) =>
      (
        renderKubernetesWorkloads(kubernetesDeployment({ kubernetes: { ...k8s, resources } }), { instance: "x", namespace: "n" }, []).roles[1]!.deployment.spec
          .template.spec as any
      ).containers[0].resources;
    expect(decode({})).toEqual({ requests: { cpu: "32", memory: "384Gi", "rebellions.ai/npu": "4" }, limits: { memory: "384Gi", "rebellions.ai/npu": "4" } });
    expect(decode({ decode: { requests: { memory: "512Gi" } }, prefill: { requests: { cpu: "8" } } })).toEqual({
      requests: { cpu: "32", memory: "512Gi", "rebellions.ai/npu": "4" },
      limits: { memory: "512Gi", "rebellions.ai/npu": "4" },
    });
    expect(decode({ decode: { limits: { memory: "256Gi", cpu: "48" } } }).requests).toMatchObject({ cpu: "32", memory: "256Gi" });
    expect(() => kubernetesDeployment({ kubernetes: { ...k8s, resources: { main: { requests: { cpu: "8" } } } } })).toThrow(
      /^kubernetes\.resources\.main: strategy "prefill-decode-disaggregated" has no role "main"/,
    );
    expect(() =>
      parseStackSettings({ ...readStackFile("prod").raw, kubernetes: { ...k8s, resources: { decode: { requests: { cpu: "64" }, limits: { cpu: "32" } } } } }),
    ).toThrow(/^kubernetes\.resources\.decode\.requests\.cpu: more than limits\.cpu \(32\)/);
  });

  it("runs every container as non-root with nothing to escalate to, and labels the namespace with the level the pods meet", () => {
    for (const deployment of variants) {
      const workloads = renderKubernetesWorkloads(deployment, { instance: "x", namespace: "n" }, []);
      for (const role of workloads.roles) {
        const pod = role.deployment.spec.template.spec as any;
        expect(pod).toMatchObject({
          serviceAccountName: "x-vllm",
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001, seccompProfile: { type: "RuntimeDefault" } },
        });
        for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
          expect(container.securityContext).toMatchObject({
            runAsNonRoot: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ["ALL"] },
            seccompProfile: { type: "RuntimeDefault" },
            readOnlyRootFilesystem: true,
          });
        }
        // With a read-only root: home and temporary files on a scratch volume.
        expect(pod.containers[0].volumeMounts).toContainEqual({ name: "scratch", mountPath: "/tmp" });
      }
      expect(workloads.serviceAccount.automountServiceAccountToken).toBe(false);
      // The router chart's endpoint picker runs in the namespace without a security context: baseline only.
      expect(workloads.namespace.metadata.labels!["pod-security.kubernetes.io/enforce"]).toBe(workloads.router ? "baseline" : "restricted");
    }
    const k8s = readStackFile("prod").raw.kubernetes as object;
    const root = renderKubernetesWorkloads(
      kubernetes({ strategy: "aggregated-pipeline-parallel", target: "Throughput", kubernetes: { ...k8s, securityContext: { runAsNonRoot: false } } }),
      { instance: "x", namespace: "n" },
      [],
    );
    expect((root.roles[0]!.deployment.spec.template.spec as any).containers[0].securityContext).toMatchObject({
      runAsNonRoot: false,
      runAsUser: 0,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(root.namespace.metadata.labels!["pod-security.kubernetes.io/enforce"]).toBe("baseline");
    const groups = renderKubernetesWorkloads(
      kubernetesDeployment({ kubernetes: { ...k8s, securityContext: { supplementalGroups: [993] } } }),
      { instance: "x", namespace: "n" },
      [],
    );
    expect((groups.roles[0]!.deployment.spec.template.spec as any).securityContext.supplementalGroups).toEqual([993]);
    expect(() => parseStackSettings({ ...readStackFile("prod").raw, kubernetes: { ...k8s, securityContext: { runAsUser: 0 } } })).toThrow(
      /^kubernetes\.securityContext\.runAsUser: 0 is root/,
    );
  });

  it("places one pod of a role per node unless told otherwise, with the placement settings", () => {
    const k8s = readStackFile("prod").raw.kubernetes as object;
    const pod = (extra: Record<string, unknown>) =>
      renderKubernetesWorkloads(kubernetesDeployment({ kubernetes: { ...k8s, ...extra } }), { instance: "x", namespace: "n" }, []).roles[1]!.deployment.spec
        .template.spec as any;
    expect(pod({}).affinity).toEqual({
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          {
            labelSelector: { matchLabels: { "app.kubernetes.io/instance": "x", "app.kubernetes.io/component": "decode" } },
            topologyKey: "kubernetes.io/hostname",
          },
        ],
      },
    });
    const tolerations = [{ key: "rebellions.ai/npu", operator: "Exists", effect: "NoSchedule" }];
    const placed = pod({
      tolerations,
      affinity: {},
      priorityClassName: "llm-serving",
      imagePullSecrets: ["rbln-registry"],
      topologySpreadConstraints: [
        { maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: { a: "b" } } },
      ],
    });
    expect(placed).toMatchObject({ tolerations, affinity: {}, priorityClassName: "llm-serving", imagePullSecrets: [{ name: "rbln-registry" }] });
    expect(placed.topologySpreadConstraints).toHaveLength(1);
  });

  it("probes with the API key only where vLLM asks for it: readiness on /v1/models", () => {
    const prefill = (renderKubernetesWorkloads(variants[0]!, { instance: "x", namespace: "n" }, ["apiKey"]).roles[0]!.deployment.spec.template.spec as any)
      .containers[0];
    expect(prefill.livenessProbe.httpGet).toEqual({ path: "/health", port: 8000 });
    expect(prefill.startupProbe.httpGet).toEqual({ path: "/health", port: 8000 });
    expect(prefill.readinessProbe.exec.command.slice(3)).toEqual(["127.0.0.1", "5", "8000", "/v1/models"]);
  });

  it("the exec probe passes only when every port answers 200, sending the API key", async () => {
    const servers = await Promise.all(
      [200, 200, 503].map(
        (status) =>
          new Promise<http.Server>((resolve) => {
            const server = http.createServer((request, response) => response.writeHead(request.headers.authorization === "Bearer k3y" ? status : 401).end());
            server.listen(0, "127.0.0.1", () => resolve(server));
          }),
      ),
    );
    const ports = servers.map((server) => (server.address() as AddressInfo).port);
    const decode = (renderKubernetesWorkloads(variants[0]!, { instance: "x", namespace: "n" }, ["apiKey"]).roles[1]!.deployment.spec.template.spec as any)
      .containers[0];
    const [python, flag, text, host, perPort, , paths] = decode.readinessProbe.exec.command as string[];
    const run = (probePorts: number[], key: string) =>
      new Promise<number>((resolve) =>
        execFile(python!, [flag!, text!, host!, perPort!, probePorts.join(","), paths!], { env: { PATH: process.env.PATH, VLLM_API_KEY: key } }, (error) =>
          resolve(error ? Number(error.code) : 0),
        ),
      );
    try {
      expect(await run(ports.slice(0, 2), "k3y")).toBe(0);
      expect(await run(ports, "k3y")).not.toBe(0);
      expect(await run(ports.slice(0, 2), "wrong")).not.toBe(0);
    } finally {
      for (const server of servers) server.close();
    }
  });

  it("refuses an instance name that cannot prefix Kubernetes names", () => {
    expect(() => renderKubernetesWorkloads(variants[0]!, { instance: "Bad_Name", namespace: "n" }, [])).toThrow(
      /^name: "Bad_Name" cannot prefix Kubernetes object names/,
    );
    const long = "a".repeat(40);
    expect(() => renderKubernetesWorkloads(variants[0]!, { instance: long, namespace: "n" }, [])).toThrow(
      /^name: "a{40}" makes the ConfigMap name "a{40}-prefill-launch-[0-9a-f]{10}" longer than 63 characters/,
    );
  });

  it("scales roles separately: replicas for aggregated, prefillReplicas and decodeReplicas for xPyD", () => {
    const [prefill, decode] = renderKubernetesWorkloads(variants[1]!, { instance: "x", namespace: "n" }, []).roles;
    expect([prefill!.replicas, decode!.replicas]).toEqual([1, 3]);
    expect(renderKubernetesWorkloads(variants[2]!, { instance: "x", namespace: "n" }, []).roles.map((r) => (r.deployment as any).spec.replicas)).toEqual([2]);
  });

  it("launch scripts start exactly the plan's commands under real bash, POD_IP bound at run time", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "launch-"));
    // A stand-in vllm: records its argv and env (NUL-separated), then the last decode rank exits 3.
    fs.writeFileSync(
      path.join(dir, "vllm"),
      `#!/usr/bin/env bash\nport=none\nfor a in "$@"; do [ "$prev" = --port ] && port=$a; prev=$a; done\nprintf '%s\\0' "$@" > "$OUT/$port.argv"\nenv -0 > "$OUT/$port.env"\n[ "$port" = 8203 ] && { sleep 1; exit 3; }\n[ "$port" = 8000 ] && exit 0\nexec sleep 30\n`,
      { mode: 0o755 },
    );
    const deployment = variants[0]!;
    const workloads = renderKubernetesWorkloads(deployment, { instance: "rbln-serving", namespace: "llm-serving" }, []);
    for (const role of workloads.roles) {
      const out = fs.mkdtempSync(path.join(dir, `${role.role}-`));
      const result = spawnSync("bash", ["-c", role.launchScript], {
        env: { PATH: `${dir}:${process.env.PATH}`, POD_IP: "10.9.8.7", OUT: out },
        encoding: "utf8",
        timeout: 60_000,
      });
      const plan = deployment.plan.roles.find((r) => r.role === role.role)!;
      expect(result.status, result.stderr).toBe(role.role === "decode" ? 3 : 0);
      for (const rank of plan.ranks) {
        const bound = bindRank(rank, { POD_IP: "10.9.8.7", EPP_HOST: workloads.eppHost! }, "kubernetes");
        const argv = fs
          .readFileSync(path.join(out, `${rank.ports[0]}.argv`), "utf8")
          .split("\0")
          .slice(0, -1);
        expect(["vllm", ...argv]).toEqual(bound.argv);
        const env = Object.fromEntries(
          fs
            .readFileSync(path.join(out, `${rank.ports[0]}.env`), "utf8")
            .split("\0")
            .filter(Boolean)
            .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
        );
        expect(env).toMatchObject(bound.env);
      }
    }
  });
});

describe("router chart values", () => {
  const intent = variants[0]!.plan.router!;
  const settings = parseStackSettings({
    ...readStackFile("prod").raw,
    kubernetes: { image: "registry.example.com/vllm-rbln:0.12.0", provider: "istio", gateway: { name: "gw", namespace: "gw-ns" } },
    router: { pickerResources: { requests: { cpu: "2", memory: "4Gi" }, limits: { memory: "8Gi" } } },
  });
  const values = routerChartValues(intent, "prefill-decode-disaggregated", settings) as any;

  it("uses only keys the v0.10.0 chart reads, and every key it requires", () => {
    expect(chartKeyProblems(values)).toEqual([]);
    // The check itself: a key the chart does not read, and a required one missing.
    expect(chartKeyProblems({ ...values, router: { ...values.router, modelServers: { type: "vllm" } }, extra: 1 })).toEqual([
      "extra: not read by the chart",
      "router.modelServers.matchLabels: required by the chart",
    ]);
    expect(JSON.stringify(values)).not.toMatch(/endpoint_picker|ext_proc_port|scheduling_profiles|failure_mode|match_labels|target_ports|"ref"/);
    expect(values.httpRoute).toEqual({ create: true, inferenceGatewayName: "gw", inferenceGatewayNamespace: "gw-ns", requestTimeout: "1h" });
    expect(values.router.epp.resources).toEqual({ requests: { cpu: "2", memory: "4Gi" }, limits: { memory: "8Gi" } });
    expect([`${chartFacts.chart.replace(/\/[^/]+$/, "")}/${intent.chart}`, intent.version]).toEqual([chartFacts.chart, chartFacts.version]);
  });

  it("sets the HTTPRoute's request timeout (one hour by default, not the chart's 300s) and the picker's resources only when asked", () => {
    expect(chartFacts.keys).toHaveProperty(["httpRoute.requestTimeout"]);
    expect(chartFacts.defaults["httpRoute.requestTimeout"]).toBe("300s");
    const render = (router: Record<string, unknown>) =>
      routerChartValues(intent, "prefill-decode-disaggregated", parseStackSettings({ ...readStackFile("prod").raw, router })) as any;
    expect(render({}).httpRoute.requestTimeout).toBe("1h");
    expect(render({ requestTimeout: "90m" }).httpRoute.requestTimeout).toBe("90m");
    expect(render({}).router.epp).not.toHaveProperty("resources");
    expect(() => parseStackSettings({ ...readStackFile("prod").raw, router: { requestTimeout: "1 hour" } })).toThrow(
      /^router\.requestTimeout: a Gateway API duration/,
    );
  });

  it("runs two endpoint pickers, which the chart makes active-passive with leader election, under a PodDisruptionBudget the chart does not render", () => {
    expect(values.router.epp.replicas).toBe(2);
    expect(chartFacts.defaults["router.epp.replicas"]).toBe(1);
    expect(chartFacts.keys["router.epp.replicas"]).toContain("--ha-enable-leader-election");
    const files = renderStackFiles(variants[0]!, [], "dev");
    const budget = parseYaml(files["kubernetes/router-epp-pdb.yaml"]!);
    expect(() => new PodDisruptionBudget(budget).validate()).not.toThrow();
    // One of the two may go at a time: a node drain waits until the other serves.
    expect(budget.spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: { "llm-d-router-gateway": `${intent.release}-epp` } } });
    // The labels the chart's EPP pods carry, as the PodMonitor and the NetworkPolicies select them too.
    expect(parseYaml(files["kubernetes/podmonitor-epp.yaml"]!).spec.selector.matchLabels).toEqual(budget.spec.selector.matchLabels);
    expect(JSON.stringify(parseYaml(files["kubernetes/decode-networkpolicy.yaml"]!).spec.ingress)).toContain(JSON.stringify(budget.spec.selector.matchLabels));
    const aggregated = renderStackFiles(kubernetes({ strategy: "aggregated-data-expert-parallel", target: "Latency" }), [], "dev");
    expect(Object.keys(aggregated).filter((f) => f.includes("epp"))).toEqual([]);
  });

  it("holds an EndpointPickerConfig the v0.10.0 picker reads, with the recipe's plugins and weights", () => {
    const file = values.router.epp.pluginsConfigFile;
    const config = parseYaml(values.router.epp.pluginsCustomConfig[file]);
    expect(config.apiVersion).toBe(chartFacts.eppConfigApiVersion);
    expect(config.kind).toBe("EndpointPickerConfig");
    const defined = new Set(config.plugins.map((p: any) => p.name ?? p.type));
    for (const plugin of config.plugins) expect(chartFacts.pluginTypes, plugin.type).toContain(plugin.type);
    expect(config.schedulingProfiles.map((p: any) => p.name).sort()).toEqual(["decode", "prefill"]);
    for (const profile of config.schedulingProfiles) {
      for (const entry of profile.plugins) {
        expect(defined.has(entry.pluginRef), entry.pluginRef).toBe(true);
        expect(Object.keys(entry).every((k) => k === "pluginRef" || k === "weight")).toBe(true);
      }
      const recipe = intent.values.endpoint_picker.scheduling_profiles.find((p) => p.name === profile.name)!;
      expect(profile.plugins).toEqual(recipe.plugins.map((p) => ({ pluginRef: p.ref, ...(p.weight === undefined ? {} : { weight: p.weight }) })));
    }
    expect(config.plugins).toEqual(intent.values.endpoint_picker.plugins);
  });

  it("notes in the plan where the recipe's router settings do nothing: facts, not warnings, since no setting changes them", () => {
    expect(variants[0]!.plan.messages).toEqual([
      note(expect.stringMatching(/approx-prefix-cache-producer does not read \(only precise-prefix-cache-producer does\)/)),
      note(expect.stringMatching(/lruCapacityPerServer: 1024 is ignored while autoTune is on/)),
      note(expect.stringMatching(/^lmcache: rds offloads the KV cache to RBLN Direct Storage/)),
    ]);
    expect(kubernetes({ strategy: "aggregated-data-expert-parallel", target: "Latency" }).plan.messages).toEqual([]);
  });
});

describe("the Dockerfile", () => {
  it("ends as the non-root user the pods run as by default", () => {
    const dockerfile = fs.readFileSync(path.resolve(__dirname, "../Dockerfile"), "utf8");
    const { runAsUser, runAsGroup } = parseStackSettings(readStackFile("prod").raw).kubernetes.securityContext;
    expect(
      dockerfile
        .trimEnd()
        .split("\n")
        .filter((line) => line.startsWith("USER "))
        .at(-1),
    ).toBe(`USER ${runAsUser}:${runAsGroup}`);
    expect(dockerfile).toContain(`useradd --uid ${runAsUser} --gid ${runAsGroup}`);
  });

  it("pins exactly the recipe's packages, every one of them", () => {
    const dockerfile = fs.readFileSync(path.resolve(__dirname, "../Dockerfile"), "utf8");
    const recipe = shippedCatalog.get("MiniMaxAI/MiniMax-M2.7");
    for (const install of recipe.installs) {
      const arg = `${install.package.toUpperCase().replace(/-/g, "_")}_VERSION`;
      expect(dockerfile).toContain(`ARG ${arg}=${install.version}\n`);
      expect(dockerfile).toContain(`"${install.package}${install.extras.length ? `[${install.extras.join(",")}]` : ""}==\${${arg}}"`);
      expect(dockerfile).toContain(install.import);
    }
  });
});

describe("the Kubernetes startup probe", () => {
  it("waits for the engine's ready timeout plus an hour (another pod's compile of the same key, then the load)", () => {
    const deployment = planDeployment(parseStackSettings(readStackFile("prod").raw), shippedCatalog);
    const workloads = renderKubernetesWorkloads(deployment, { instance: "t", namespace: "t" }, []);
    for (const role of workloads.roles) {
      const container = (role.deployment as any).spec.template.spec.containers[0];
      const ready = Number(deployment.plan.roles.find((r) => r.role === role.role)!.ranks[0]!.env.VLLM_ENGINE_READY_TIMEOUT_S);
      expect(container.startupProbe.periodSeconds * container.startupProbe.failureThreshold, role.role).toBeGreaterThanOrEqual(ready + 3600);
    }
  });
});
