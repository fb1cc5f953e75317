import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { stringify } from "yaml";
import { describe, expect, it } from "vitest";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { ModelServing } from "../components";
import { reportedRevision } from "../components/modelServing";
import { reportedDigest } from "../core/render/compileCache";
import { readStackFile } from "../core/config/stackFile";
import { runProgram } from "../program";
import { stackDeployment } from "../cli/commands";
import { renderStackFiles } from "./helpers/render";
import { shippedCatalog } from "./helpers/recipes";
import { isSecretAt, ofType, runUnderMocks, outputValue, type Registration } from "./helpers/pulumiHarness";

const SECRETS = { sshPrivateKey: "MARKER-SSH-KEY-0001", pipPassword: "MARKER-PIP-PW-0002", hfToken: "MARKER-HF-TOKEN-0003", apiKey: "MARKER-API-KEY-0004" };

const byName = (registrations: readonly Registration[], name: string) => {
  const found = registrations.find((r) => r.name === name);
  if (!found) throw new Error(`no resource ${name}; have ${registrations.map((r) => r.name).join(", ")}`);
  return found;
};

describe("the program on platform hosts", async () => {
  const { registrations, error, result } = await runUnderMocks(runProgram, readStackFile("dev").raw, SECRETS);

  it("exports each rank's unit, host and URL, the endpoint and the curl", async () => {
    const outputs = result as ReturnType<typeof runProgram>;
    expect(await outputValue(outputs.units)).toEqual([
      { unit: "rbln-serving-test.main-0.service", host: "npu-dev-0", role: "main", rank: 0, url: "http://10.20.0.11:8000" },
    ]);
    expect(await outputValue(outputs.endpoints)).toEqual(["http://10.20.0.11:8000"]);
    expect(await outputValue(outputs.curl)).toContain("http://10.20.0.11:8000/v1/chat/completions");
  });

  it("runs without error", () => expect(error).toBeUndefined());

  it("registers the components and one command per step and rank, named by host, role and rank", () => {
    expect(
      registrations
        .filter((r) => !r.custom)
        .map((r) => `${r.type} ${r.name}`)
        .sort(),
    ).toEqual(["rbln-serving:index:ModelServing rbln-serving", "rbln-serving:index:NpuHost rbln-serving-npu-dev-0"].sort());
    expect(
      ofType(registrations, "command:remote:Command")
        .map((r) => r.name)
        .sort(),
    ).toEqual(["rbln-serving-npu-dev-0-preflight", "rbln-serving-npu-dev-0-install", "rbln-serving-npu-dev-0-weights", "rbln-serving-npu-dev-0-main-0"].sort());
  });

  it("wires the steps in order: preflight, then install and weights, then the units", () => {
    const urn = (suffix: string) => byName(registrations, `rbln-serving-npu-dev-0-${suffix}`).urn;
    expect(byName(registrations, "rbln-serving-npu-dev-0-install").dependencies).toEqual([urn("preflight")]);
    expect(byName(registrations, "rbln-serving-npu-dev-0-weights").dependencies).toEqual([urn("preflight")]);
    expect(byName(registrations, "rbln-serving-npu-dev-0-main-0").dependencies.sort()).toEqual([urn("install"), urn("weights")].sort());
  });

  it("connects to the stack's host, with the key as a secret and retries for a rebooting host", () => {
    const unit = byName(registrations, "rbln-serving-npu-dev-0-main-0");
    expect(unit.inputs.connection).toMatchObject({ host: "10.20.0.11", port: 22, user: "root", privateKey: SECRETS.sshPrivateKey, dialErrorLimit: 60 });
    expect(unit.inputs.connection.hostKey).toBe((readStackFile("dev").raw.hosts as { hostKey: string }[])[0]!.hostKey);
    expect(isSecretAt(unit.wireInputs, ["connection", "privateKey"])).toBe(true);
    expect(unit.inputs.delete).toContain("systemctl disable --now");
    expect(unit.deleteBeforeReplace).toBe(true);
  });

  it("carries the rendered unit text in the command string, so preview shows the changed line", () => {
    const unit = byName(registrations, "rbln-serving-npu-dev-0-main-0");
    expect(unit.inputs.create).toContain(
      "ExecStart=/opt/rbln-serving/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0/bin/vllm serve MiniMaxAI/MiniMax-M2.7 \\\n    --block-size 4096 \\",
    );
    expect(unit.inputs.create).toContain("VLLM_ENGINE_READY_TIMEOUT_S='9600'");
  });

  it("runs the scripts `render` writes for the same stack: the same unit, env file and venv names", () => {
    const { deployment, secrets } = stackDeployment({}, shippedCatalog, "dev");
    // Under the mock runtime the stack is called "test".
    const files = renderStackFiles(deployment, secrets, "test");
    expect(Object.keys(files).filter((f) => /\/(systemd|env)\//.test(f))).toEqual([
      "hosts/npu-dev-0/systemd/rbln-serving-test.main-0.service",
      "hosts/npu-dev-0/env/test.main-0.env",
    ]);
    for (const [step, file] of [
      ["main-0", "unit-main-0.sh"],
      ["install", "install.sh"],
      ["weights", "weights.sh"],
    ]) {
      expect(byName(registrations, `rbln-serving-npu-dev-0-${step}`).inputs.create).toContain(files[`hosts/npu-dev-0/${file}`]);
    }
  });

  it("sends secrets only on stdin, as secrets", () => {
    expect(isSecretAt(byName(registrations, "rbln-serving-npu-dev-0-install").wireInputs, ["stdin"])).toBe(true);
    expect(isSecretAt(byName(registrations, "rbln-serving-npu-dev-0-weights").wireInputs, ["stdin"])).toBe(true);
    expect(isSecretAt(byName(registrations, "rbln-serving-npu-dev-0-main-0").wireInputs, ["stdin"])).toBe(true);
    expect(byName(registrations, "rbln-serving-npu-dev-0-main-0").inputs.stdin).toBe(`HF_TOKEN='${SECRETS.hfToken}'\nVLLM_API_KEY='${SECRETS.apiKey}'\n`);
    expect(byName(registrations, "rbln-serving-npu-dev-0-install").inputs.stdin).toContain(
      `https://rbln-portal-user:${SECRETS.pipPassword}@pypi.rbln.ai/simple`,
    );
  });
});

describe("the program publishes where ranks listen", () => {
  it("a listenAddress other than the SSH address is in every endpoint, unit URL, curl and scrape target; all interfaces publish the SSH address", async () => {
    const hosts = [
      { name: "npu-a", address: "192.168.0.11", listenAddress: "10.0.0.11", hostKey: EXAMPLE_HOST_KEY },
      { name: "npu-b", address: "192.168.0.12", listenAddress: "0.0.0.0", hostKey: EXAMPLE_HOST_KEY },
    ];
    const { result, error } = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, replicas: 2, hosts }, SECRETS);
    expect(error).toBeUndefined();
    const outputs = result as ReturnType<typeof runProgram>;
    expect(await outputValue(outputs.endpoints)).toEqual(["http://10.0.0.11:8000", "http://192.168.0.12:8000"]);
    expect((await outputValue(outputs.units)).map((u) => u.url)).toEqual(["http://10.0.0.11:8000", "http://192.168.0.12:8000"]);
    expect(await outputValue(outputs.curl)).toContain("http://10.0.0.11:8000/");
    expect(outputs.scrapeTargets.map((t) => t.targets[0])).toEqual(["10.0.0.11:8000", "192.168.0.12:8000"]);
  });
});

describe("the program on platform kubernetes", async () => {
  const { registrations, error, result } = await runUnderMocks(runProgram, readStackFile("prod").raw, { hfToken: SECRETS.hfToken, apiKey: SECRETS.apiKey });

  it("exports the gateway endpoint and a curl for the recipe's request that reads the API key from the environment", async () => {
    const outputs = result as ReturnType<typeof runProgram>;
    expect(await outputValue(outputs.endpoints)).toEqual(["http://10.0.0.100"]);
    const curl = await outputValue(outputs.curl);
    expect(curl).toMatch(/^curl -H "Authorization: Bearer \$VLLM_API_KEY" http:\/\/10\.0\.0\.100\/v1\/chat\/completions/);
    expect(curl).not.toContain(SECRETS.apiKey);
    expect(outputs.selection).toMatchObject({ strategy: "prefill-decode-disaggregated", target: "Throughput", spec_decode: "eagle3" });
    // The recipe's router settings that do nothing are facts: notes, not warnings.
    expect(outputs.warnings).toEqual([]);
    expect(outputs.notes).toHaveLength(3);
  });

  it("runs without error", () => expect(error).toBeUndefined());

  it("registers workloads, caches that outlive destroy, the router chart and a read of the gateway", () => {
    expect(registrations.map((r) => `${r.type} ${r.name}`).sort()).toEqual(
      [
        "rbln-serving:index:ModelServing rbln-serving",
        "rbln-serving:index:NpuWorkloads rbln-serving-workloads",
        "kubernetes:core/v1:Namespace rbln-serving-workloads-namespace",
        "kubernetes:core/v1:Secret rbln-serving-workloads-secrets",
        "kubernetes:core/v1:ServiceAccount rbln-serving-workloads-service-account",
        "kubernetes:core/v1:PersistentVolumeClaim rbln-serving-workloads-weights",
        "kubernetes:core/v1:PersistentVolumeClaim rbln-serving-workloads-prefill-compile-cache",
        "kubernetes:core/v1:PersistentVolumeClaim rbln-serving-workloads-decode-compile-cache",
        "kubernetes:batch/v1:Job rbln-serving-workloads-weights-download",
        "kubernetes:core/v1:ConfigMap rbln-serving-workloads-prefill-launch",
        "kubernetes:apps/v1:Deployment rbln-serving-workloads-prefill",
        "kubernetes:core/v1:ConfigMap rbln-serving-workloads-decode-launch",
        "kubernetes:apps/v1:Deployment rbln-serving-workloads-decode",
        "kubernetes:policy/v1:PodDisruptionBudget rbln-serving-workloads-prefill-disruption-budget",
        "kubernetes:policy/v1:PodDisruptionBudget rbln-serving-workloads-decode-disruption-budget",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy rbln-serving-workloads-prefill-network-policy",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy rbln-serving-workloads-decode-network-policy",
        "kubernetes:monitoring.coreos.com/v1:PodMonitor rbln-serving-workloads-vllm-monitor",
        "kubernetes:monitoring.coreos.com/v1:PodMonitor rbln-serving-workloads-epp-monitor",
        "kubernetes:monitoring.coreos.com/v1:PrometheusRule rbln-serving-workloads-alerts",
        "kubernetes:core/v1:ConfigMap rbln-serving-workloads-dashboard",
        "rbln-serving:index:LlmdRouter rbln-serving-router",
        "kubernetes:helm.sh/v4:Chart rbln-serving-router-chart",
        "kubernetes:policy/v1:PodDisruptionBudget rbln-serving-router-epp-disruption-budget",
        "kubernetes:gateway.networking.k8s.io/v1:Gateway rbln-serving-router-gateway",
      ].sort(),
    );
    for (const r of ofType(registrations, "kubernetes:core/v1:PersistentVolumeClaim")) expect(r.retainOnDelete, r.name).toBe(true);
    // One Job downloads; the Deployments start after it, so no pod ever downloads.
    const job = byName(registrations, "rbln-serving-workloads-weights-download");
    for (const r of ofType(registrations, "kubernetes:apps/v1:Deployment")) expect(r.dependencies, r.name).toContain(job.urn);
    // Launch ConfigMaps outlive their revision, so `kubectl rollout undo` finds the previous one.
    for (const r of ofType(registrations, "kubernetes:core/v1:ConfigMap").filter((c) => c.name.endsWith("-launch")))
      expect(r.retainOnDelete, r.name).toBe(true);
    expect(byName(registrations, "rbln-serving-router-gateway").read).toBe(true);
  });

  it("installs the llm-d gateway chart v0.10.0 from its OCI registry with the generated values", () => {
    const chart = byName(registrations, "rbln-serving-router-chart");
    expect(chart.inputs).toMatchObject({
      chart: "oci://ghcr.io/llm-d/charts/llm-d-router-gateway",
      version: "v0.10.0",
      name: "router",
      namespace: "llm-serving",
    });
    expect(chart.inputs.values.router.modelServers.matchLabels).toEqual({ "llm-d.ai/guide": "pd-disaggregation" });
  });

  it("keeps the secrets in the Secret, marked secret", () => {
    const secret = byName(registrations, "rbln-serving-workloads-secrets");
    expect(secret.inputs.stringData).toEqual({ HF_TOKEN: SECRETS.hfToken, VLLM_API_KEY: SECRETS.apiKey });
    expect(isSecretAt(secret.wireInputs, ["stringData"])).toBe(true);
  });
});

describe("the program reads config as the offline commands do", () => {
  const dev = readStackFile("dev").raw;
  /** What `plan --stack` makes of these keys over dev's, and the selection or refusal of the program on them. */
  async function both(keys: Record<string, unknown>) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stacks-"));
    const config = Object.fromEntries(Object.entries({ ...dev, ...keys }).map(([key, value]) => [`rbln-serving:${key}`, value]));
    fs.writeFileSync(path.join(dir, "Pulumi.t.yaml"), stringify({ config }));
    let offline: unknown;
    try {
      const { plan } = stackDeployment({}, shippedCatalog, "t", dir).deployment;
      offline = { model: plan.model, strategy: plan.strategy, target: plan.target, ...plan.selection };
    } catch (error) {
      offline = `rbln-serving:${(error as Error).message}`;
    }
    const { result, error } = await runUnderMocks(runProgram, { ...dev, ...keys }, SECRETS);
    return { offline, program: error === undefined ? (result as ReturnType<typeof runProgram>).selection : (error as Error).message };
  }

  it("takes axes given as JSON text, as Pulumi hands structured config to programs", async () => {
    const { offline, program } = await both({ axes: '{"spec_decode": "eagle3"}' });
    expect(program).toMatchObject({ spec_decode: "eagle3" });
    expect(offline).toEqual(program);
  });

  it("refuses axes that are no map, and a __proto__ key, in both", async () => {
    for (const keys of [{ axes: 5 }, { axes: "[]" }, JSON.parse('{"__proto__": {"replicas": 2}}'), { rollout: '{"maxUnavailable": "200%"}' }]) {
      const { offline, program } = await both(keys);
      expect(program, JSON.stringify(keys)).toMatch(/^rbln-serving:(axes|__proto__|rollout\.maxUnavailable): .*(\(got (5|\[\]|"200%")\)|prototype\))$/);
      expect(offline).toEqual(program);
    }
  });

  it("refuses a secret set in plain text, and a plain key set as a secret", async () => {
    const plain = await runUnderMocks(runProgram, { ...dev, hfToken: "hf_plain" }, { sshPrivateKey: SECRETS.sshPrivateKey, pipPassword: SECRETS.pipPassword });
    expect((plain.error as Error).message).toBe("rbln-serving:hfToken: is stored in plain text; set it with: pulumi config set --secret hfToken");
    expect(plain.registrations).toEqual([]);
    const encrypted = await runUnderMocks(runProgram, dev, { ...SECRETS, strategy: "aggregated-data-expert-parallel" });
    expect((encrypted.error as Error).message).toMatch(
      /^rbln-serving:strategy: is encrypted, but only sshPrivateKey, hfToken, pipPassword, apiKey, registryPassword are read as secrets/,
    );
  });
});

describe("an invalid config", () => {
  it("ends the run with one line naming the key, before any resource is registered", async () => {
    const { registrations, error } = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, axes: { spec_decode: "mtp" } }, SECRETS);
    expect(registrations).toEqual([]);
    expect((error as Error).message).toMatch(/^rbln-serving:axes\.spec_decode: "mtp" is not verified for .*; verified values: "off", "eagle3", "suffix"$/);
  });

  it("refuses a host without its SSH host key, unless insecureSkipHostKeyCheck says so, which then warns", async () => {
    const raw = readStackFile("dev").raw;
    const hosts = (raw.hosts as Record<string, unknown>[]).map(({ hostKey: _, ...host }) => host);
    const refused = await runUnderMocks(runProgram, { ...raw, hosts }, SECRETS);
    expect(refused.registrations).toEqual([]);
    expect((refused.error as Error).message).toMatch(/^rbln-serving:hosts\[0\]\.hostKey: required: the server's public SSH host key, read with ssh-keyscan/);
    const insecure = await runUnderMocks(runProgram, { ...raw, hosts, insecureSkipHostKeyCheck: true }, SECRETS);
    expect(insecure.error).toBeUndefined();
    expect(byName(insecure.registrations, "rbln-serving-npu-dev-0-main-0").inputs.connection.hostKey).toBeUndefined();
    expect((insecure.result as ReturnType<typeof runProgram>).warnings).toContainEqual(
      expect.stringMatching(/^insecureSkipHostKeyCheck: true: SSH host keys are not checked/),
    );
  });

  it("reaches hosts through a bastion: the stack-wide sshProxy, or a host's own proxy, with the same key as a secret", async () => {
    const raw = readStackFile("dev").raw;
    const [host] = raw.hosts as Record<string, unknown>[];
    const bastion = { address: "bastion.example.com", user: "jump", hostKey: EXAMPLE_HOST_KEY };
    const viaStack = await runUnderMocks(runProgram, { ...raw, sshProxy: bastion }, SECRETS);
    const unit = byName(viaStack.registrations, "rbln-serving-npu-dev-0-main-0");
    expect(unit.inputs.connection.proxy).toEqual({
      host: "bastion.example.com",
      port: 22,
      user: "jump",
      privateKey: SECRETS.sshPrivateKey,
      hostKey: EXAMPLE_HOST_KEY,
      dialErrorLimit: 60,
      perDialTimeout: 30,
    });
    expect(isSecretAt(unit.wireInputs, ["connection", "proxy", "privateKey"])).toBe(true);
    const own = await runUnderMocks(
      runProgram,
      { ...raw, sshProxy: bastion, hosts: [{ ...host, proxy: { ...bastion, address: "10.20.0.1", port: 2200 } }] },
      SECRETS,
    );
    expect(byName(own.registrations, "rbln-serving-npu-dev-0-preflight").inputs.connection.proxy).toMatchObject({ host: "10.20.0.1", port: 2200 });
    const unchecked = await runUnderMocks(runProgram, { ...raw, sshProxy: { address: "bastion.example.com" } }, SECRETS);
    expect((unchecked.error as Error).message).toMatch(/^rbln-serving:sshProxy\.hostKey: required/);
  });

  it("warns about keys under another namespace, naming them, in the stack's warnings", async () => {
    const { result, error } = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, "rbln_serving:target": "Throughput" }, SECRETS);
    expect(error).toBeUndefined();
    expect((result as ReturnType<typeof runProgram>).warnings).toContain(
      'rbln_serving:target: not read: the project reads keys under "rbln-serving:" only; did you mean rbln-serving:target?',
    );
  });

  it("refuses platform hosts without the SSH key", async () => {
    const { registrations, error } = await runUnderMocks(runProgram, readStackFile("dev").raw, { pipPassword: "x" });
    expect(registrations).toEqual([]);
    expect((error as Error).message).toMatch(/^rbln-serving:sshPrivateKey: required with platform: hosts/);
  });
});

describe("replicas", () => {
  it("on hosts: one NpuHost per node of every copy, provisioned side by side, units changed one wave after another; the seed downloads, the others copy", async () => {
    const hosts = [0, 1, 2].map((i) => ({ name: `npu-${i}`, address: `10.0.1.${i + 1}`, hostKey: EXAMPLE_HOST_KEY }));
    const { registrations, result, error } = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, replicas: 3, hosts }, SECRETS);
    expect(error).toBeUndefined();
    expect(
      ofType(registrations, "rbln-serving:index:NpuHost")
        .map((r) => r.name)
        .sort(),
    ).toEqual(["rbln-serving-npu-0", "rbln-serving-npu-1", "rbln-serving-npu-2"]);
    const short = (urn: string) => urn.split("::").pop()!.replace("rbln-serving-", "");
    const dependencies = Object.fromEntries(ofType(registrations, "command:remote:Command").map((r) => [short(r.urn), r.dependencies.map(short).sort()]));
    // Preflight and install of every host run side by side; only the seed (npu-0) downloads from the hub.
    // Each other host copies the weights from it: grant on the seed after its download, copy, revoke.
    // With 25% of 3 replicas, one replica's units change at a time, each wave after the previous one
    // serves, and each later wave first copies the compiled cache from the previous wave's host.
    const copy = (i: number, from: number, kind: string, after: string[]) => ({
      [`npu-${from}-allow-${kind}npu-${i}`]: after,
      [`npu-${i}-copy-${kind}npu-${from}`]: [`npu-${from}-allow-${kind}npu-${i}`, `npu-${i}-preflight`],
      [`npu-${from}-revoke-${kind}npu-${i}`]: [`npu-${i}-copy-${kind}npu-${from}`],
    });
    expect(dependencies).toEqual({
      ...Object.fromEntries(
        hosts.flatMap(({ name }) => [
          [`${name}-preflight`, []],
          [`${name}-install`, [`${name}-preflight`]],
        ]),
      ),
      "npu-0-weights": ["npu-0-preflight"],
      ...copy(1, 0, "", ["npu-0-weights"]),
      ...copy(2, 0, "", ["npu-0-weights"]),
      ...copy(1, 0, "compile-", ["npu-0-main-0"]),
      ...copy(2, 1, "compile-", ["npu-1-main-0"]),
      "npu-0-main-0": ["npu-0-install", "npu-0-weights"],
      "npu-1-main-0": ["npu-0-main-0", "npu-1-copy-compile-npu-0", "npu-1-copy-npu-0", "npu-1-install"],
      "npu-2-main-0": ["npu-1-main-0", "npu-2-copy-compile-npu-1", "npu-2-copy-npu-0", "npu-2-install"],
    });
    expect(await outputValue((result as ReturnType<typeof runProgram>).endpoints)).toEqual([
      "http://10.0.1.1:8000",
      "http://10.0.1.2:8000",
      "http://10.0.1.3:8000",
    ]);
  });

  it("on hosts: a grant's private key is a secret output, never logged, and reaches only its copy's stdin; the copy verifies the seed's host key", async () => {
    const hosts = [0, 1].map((i) => ({ name: `npu-${i}`, address: `10.0.1.${i + 1}`, hostKey: EXAMPLE_HOST_KEY }));
    const { registrations } = await runUnderMocks(
      runProgram,
      { ...readStackFile("dev").raw, replicas: 2, hosts, rollout: { maxUnavailable: "100%" } },
      SECRETS,
    );
    const grant = registrations.find((r) => r.name === "rbln-serving-npu-0-allow-npu-1")!;
    expect(grant.inputs.logging).toBe("none");
    expect(grant.inputs.connection.host).toBe("10.0.1.1");
    expect(grant.inputs.delete).toContain("remove npu-1's copy access from npu-0");
    const copy = registrations.find((r) => r.name === "rbln-serving-npu-1-copy-npu-0")!;
    expect(isSecretAt(copy.wireInputs, ["stdin"])).toBe(true);
    expect(copy.inputs.connection.host).toBe("10.0.1.2");
    expect(copy.inputs.create).toContain(`source_host_key='${EXAMPLE_HOST_KEY}'`);
    expect(registrations.filter((r) => r.name.endsWith("-weights")).map((r) => r.name)).toEqual(["rbln-serving-npu-0-weights"]);
  });

  it("on hosts: modelRevision is the pinned revision, or the commit the seed's download reports", async () => {
    const pinned = "0123456789abcdef0123456789abcdef01234567";
    const { registrations, result } = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, revision: pinned }, SECRETS);
    expect(await outputValue((result as ReturnType<typeof runProgram>).modelRevision)).toBe(pinned);
    expect(registrations.find((r) => r.name === "rbln-serving-npu-dev-0-weights")!.inputs.create).toContain(`revisions=(${pinned})`);
    expect(
      reportedRevision(`weights npu-0: done\nrevision MiniMaxAI/MiniMax-M2.7 ${pinned}\nrevision some/draft ${"f".repeat(40)}`, "MiniMaxAI/MiniMax-M2.7"),
    ).toBe(pinned);
    expect(reportedRevision("weights npu-0: done", "MiniMaxAI/MiniMax-M2.7")).toBeNull();
  });

  it("reads a step's report, a revision or a compile key's digest, with one helper: the last line of its own prefix, a valid word or none", () => {
    const digest = (n: string) => `sha256:${n.repeat(64)}`;
    const compileOut = `compiled abc ${digest("1")}\ncompiled ab ${digest("2")}\ncompiled abc ${digest("3")}\ncompile npu-0 abc: done`;
    expect(reportedDigest(compileOut, "abc")).toBe(digest("3"));
    expect(reportedDigest(compileOut, "ab")).toBe(digest("2"));
    expect(reportedDigest("compiled abc local", "abc")).toBeNull();
    expect(reportedDigest(undefined, "abc")).toBeNull();
    const revisionOut = `revision m/a ${"a".repeat(40)}\nrevision m/a ${"b".repeat(40)} trailing\nrevision m/ab ${"c".repeat(40)}`;
    expect(reportedRevision(revisionOut, "m/a")).toBe("b".repeat(40));
    expect(reportedRevision(`revision m/a ${"A".repeat(40)}`, "m/a")).toBeNull();
  });

  it("on hosts: refuses copying from a host whose host key is unknown, unless insecureSkipHostKeyCheck is set", async () => {
    const hosts = [0, 1].map((i) => ({ name: `npu-${i}`, address: `10.0.1.${i + 1}` }));
    const refused = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, replicas: 2, hosts }, SECRETS);
    // Every host's key is required (the deployer checks it, and the copies check the source's).
    expect((refused.error as Error).message).toMatch(/^rbln-serving:hosts\[0\]\.hostKey: required: the server's public SSH host key/);
    expect(refused.registrations).toEqual([]);
    const insecure = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, replicas: 2, hosts, insecureSkipHostKeyCheck: true }, SECRETS);
    expect(insecure.error).toBeUndefined();
    expect(insecure.registrations.find((r) => r.name === "rbln-serving-npu-1-copy-npu-0")!.inputs.create).toContain("source_host_key=''");
  });

  it("on hosts with rollout.maxUnavailable 100%: the first host's units change first, then every other replica's at once; only the copies link hosts", async () => {
    const hosts = [0, 1, 2].map((i) => ({ name: `npu-${i}`, address: `10.0.1.${i + 1}`, hostKey: EXAMPLE_HOST_KEY }));
    const { registrations, error } = await runUnderMocks(
      runProgram,
      { ...readStackFile("dev").raw, replicas: 3, hosts, rollout: { maxUnavailable: "100%" } },
      SECRETS,
    );
    expect(error).toBeUndefined();
    const hostOf = (urn: string) => urn.split("::").pop()!.split("-")[3];
    const commands = ofType(registrations, "command:remote:Command");
    expect(commands.length).toBeGreaterThan(0);
    for (const r of commands.filter((c) => !/-(allow|copy|revoke)-/.test(c.name))) {
      for (const dependency of r.dependencies) if (!/-copy-(compile-)?npu-0$/.test(dependency)) expect(hostOf(dependency)).toBe(hostOf(r.urn));
    }
    // npu-1 and npu-2 copy npu-0's compiled cache once its unit serves, so their units change together after it.
    const unitDeps = (host: string) => commands.find((c) => c.name === `rbln-serving-npu-${host}-main-0`)!.dependencies.map((d) => d.split("::").pop());
    expect(unitDeps("1")).toContain("rbln-serving-npu-1-copy-compile-npu-0");
    expect(unitDeps("2")).toContain("rbln-serving-npu-2-copy-compile-npu-0");
    expect(commands.find((c) => c.name === "rbln-serving-npu-0-allow-compile-npu-1")!.dependencies.map((d) => d.split("::").pop())).toEqual([
      "rbln-serving-npu-0-main-0",
    ]);
    expect(
      commands
        .filter((c) => c.name.includes("copy-compile"))
        .map((c) => c.name)
        .sort(),
    ).toEqual(["rbln-serving-npu-1-copy-compile-npu-0", "rbln-serving-npu-2-copy-compile-npu-0"]);
  });

  it("on hosts, prefill/decode: each decode server's sidecar changes in its rollout wave, and its data-parallel group's restart unit before its ranks", async () => {
    const edge = readStackFile("edge").raw;
    const hosts = [...(edge.hosts as object[]), { name: "npu-edge-2", address: "10.30.0.13", hostKey: EXAMPLE_HOST_KEY }];
    const { registrations, error } = await runUnderMocks(runProgram, { ...edge, hosts, decodeReplicas: 2 }, SECRETS);
    expect(error).toBeUndefined();
    const deps = (name: string) =>
      registrations
        .find((r) => r.name === `rbln-serving-${name}`)!
        .dependencies.map((d) => d.split("::").pop()!.replace("rbln-serving-", ""))
        .sort();
    const decode = (host: number) => [0, 1, 2, 3].map((r) => `npu-edge-${host}-decode-${r}`);
    // The second decode server's sidecar restarts only once the first wave's units serve, as its units do.
    expect(deps("npu-edge-2-sidecar")).toEqual(expect.arrayContaining(["npu-edge-0-prefill-0", ...decode(1)]));
    expect(deps("npu-edge-1-sidecar")).not.toEqual(expect.arrayContaining(["npu-edge-0-prefill-0"]));
    for (const host of [1, 2]) {
      expect(deps(`npu-edge-${host}-decode-group`)).toEqual([`npu-edge-${host}-install`]);
      for (const rank of decode(host)) expect(deps(rank)).toEqual(expect.arrayContaining([`npu-edge-${host}-decode-group`, `npu-edge-${host}-sidecar`]));
    }
    // Prefill is one process per server: no group.
    expect(registrations.some((r) => r.name.endsWith("prefill-group"))).toBe(false);
  });

  it("refuses a host list that does not match nodes × replicas, saying how many are needed", async () => {
    const { error } = await runUnderMocks(runProgram, { ...readStackFile("dev").raw, replicas: 2 }, SECRETS);
    expect((error as Error).message).toBe(
      'rbln-serving:hosts: 1 given; strategy "aggregated-data-expert-parallel" with replicas: 2 needs exactly 2 (1 per replica)',
    );
  });

  it("on Kubernetes: xPyD scales prefill and decode separately behind the one pool", async () => {
    const { registrations } = await runUnderMocks(runProgram, { ...readStackFile("prod").raw, prefillReplicas: 3, decodeReplicas: 2 }, {});
    const replicas = Object.fromEntries(ofType(registrations, "kubernetes:apps/v1:Deployment").map((r) => [r.name, r.inputs.spec.replicas]));
    expect(replicas).toEqual({ "rbln-serving-workloads-prefill": 3, "rbln-serving-workloads-decode": 2 });
    expect(ofType(registrations, "kubernetes:helm.sh/v4:Chart")).toHaveLength(1);
  });
});

describe("ModelServing as a library", () => {
  it("is built by another program with its own inputs, no stack config involved", async () => {
    const { registrations, error, result } = await runUnderMocks(
      () =>
        new ModelServing("team-a", {
          settings: {
            strategy: "aggregated-pipeline-parallel",
            target: "Throughput",
            axes: { lmcache: "cpu" },
            hosts: [{ name: "box-1", address: "192.168.10.5", user: "ubuntu", port: 2222, hostKey: EXAMPLE_HOST_KEY }],
          },
          secrets: { sshPrivateKey: pulumi.secret("library-key") },
        }),
      {},
      {},
    );
    expect(error).toBeUndefined();
    expect(
      ofType(registrations, "command:remote:Command")
        .map((r) => r.name)
        .sort(),
    ).toEqual(["team-a-box-1-install", "team-a-box-1-main-0", "team-a-box-1-preflight", "team-a-box-1-weights"]);
    const unit = byName(registrations, "team-a-box-1-main-0");
    expect(unit.inputs.connection).toMatchObject({ host: "192.168.10.5", port: 2222, user: "ubuntu" });
    // Not root: the scripts run through sudo.
    expect(unit.inputs.create.startsWith("sudo -n bash -c")).toBe(true);
    expect(await outputValue((result as InstanceType<typeof ModelServing>).endpoints)).toEqual(["http://192.168.10.5:8000"]);
  });

  it("refuses an instance name with a control character before registering anything, on either platform, naming it escaped on one line", async () => {
    const hosts = [{ name: "box-1", address: "192.168.10.5", hostKey: EXAMPLE_HOST_KEY }];
    const settings = [
      { strategy: "aggregated-pipeline-parallel", target: "Throughput", hosts },
      {
        strategy: "prefill-decode-disaggregated",
        target: "Throughput",
        platform: "kubernetes" as const,
        kubernetes: { image: "registry.example.com/vllm-rbln:0.12.0" },
      },
    ];
    // A newline and a key line: in a grant's tag it would have been a key line of its own in root's authorized_keys.
    for (const name of ["team\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostile attacker", "esc\u001b[31m", "del\u007f"]) {
      for (const platform of settings) {
        const { registrations, error } = await runUnderMocks(() => new ModelServing(name, { settings: platform, secrets: { sshPrivateKey: "k" } }), {}, {});
        expect(registrations).toEqual([]);
        expect((error as Error).message).toBe(
          `name: ${JSON.stringify(name).replace("\u007f", "\\u007f")} holds a control character; an instance name may hold printable characters only`,
        );
        expect((error as Error).message).not.toMatch(/[\n\u001b\u007f]/);
      }
    }
  });
});

describe("kubernetes outputs", () => {
  it("list each role's Deployment with the ranks, ports and NPUs of its pods", async () => {
    const { result } = await runUnderMocks(runProgram, readStackFile("prod").raw, {});
    const deployments = await outputValue((result as ReturnType<typeof runProgram>).deployments);
    expect(deployments).toEqual([
      { role: "prefill", deployment: "rbln-serving-prefill", namespace: "llm-serving", replicas: 1, ranks: [{ rank: 0, port: 8000, devices: [0, 1, 2, 3] }] },
      {
        role: "decode",
        deployment: "rbln-serving-decode",
        namespace: "llm-serving",
        replicas: 1,
        ranks: [0, 1, 2, 3].map((rank) => ({ rank, port: 8200 + rank, devices: [rank] })),
      },
    ]);
  });
});

describe("the stack's outputs (index.ts)", () => {
  it("are every output the program returns, so pulumi stack output reads each", async () => {
    const program = await runUnderMocks(runProgram, readStackFile("dev").raw, SECRETS);
    // Read, not imported: importing index.ts runs the program again, outside any mock run.
    const exported = [...fs.readFileSync(path.join(__dirname, "..", "index.ts"), "utf8").matchAll(/^export const (\w+) = outputs\.(\w+);$/gm)];
    expect(exported.every(([, name, output]) => name === output)).toBe(true);
    expect(exported.map(([, name]) => name).sort()).toEqual(Object.keys(program.result as object).sort());
  });
});
