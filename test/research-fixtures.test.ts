import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import vllmRbln from "./fixtures/vllm-rbln-0.12.0.json";
import keda from "./fixtures/keda.json";
import vllmMetrics from "./fixtures/vllm-metrics-v0.30.0.json";
import keda220 from "./fixtures/keda-v2.20.json";
import multiModel from "./fixtures/llm-d-router-v0.10.0/multi-model.json";
import eppHa from "./fixtures/llm-d-router-v0.10.0/epp-ha.json";
import eppFlags from "./fixtures/llm-d-router-v0.10.0/epp-flags.json";
import chartFacts from "./fixtures/llm-d-router-gateway-v0.10.0.json";
import payloadProcessor from "./fixtures/payload-processor/v0.1.0-rc.1.json";
import gatewayApi from "./fixtures/gateway-api-v1.5.1/httproute.json";
import envoyFailover from "./fixtures/envoy-v1.37.11/failover.json";
import frontDoorExposure from "./fixtures/front-door-trust/exposure.json";
import envoy13711 from "./fixtures/envoy-v1.37.11/facts.json";
import llmdEnvoyAndGuide from "./fixtures/llm-d-router-v0.10.0/envoy-and-guide.json";
import { DEFAULT_IMAGES } from "../core/plan/frontDoor";
import pulumiPythonSdk from "./fixtures/pulumi-v3.248.0/python-sdk.json";
import { checkResearchFixture, type ResearchFixture } from "./helpers/researchFixtures";
import { autoscalingSeries } from "./helpers/keda";
import { seriesNames } from "./helpers/promql";

const ROOT = join(__dirname, "..");
const FIXTURES = {
  "vllm-rbln-0.12.0.json": vllmRbln,
  "keda.json": keda,
  "keda-v2.20.json": keda220,
  "llm-d-router-v0.10.0/multi-model.json": multiModel,
  "llm-d-router-v0.10.0/epp-ha.json": eppHa,
  "payload-processor/v0.1.0-rc.1.json": payloadProcessor,
  "gateway-api-v1.5.1/httproute.json": gatewayApi,
  "envoy-v1.37.11/failover.json": envoyFailover,
  "front-door-trust/exposure.json": frontDoorExposure,
  "envoy-v1.37.11/facts.json": envoy13711,
  "pulumi-v3.248.0/python-sdk.json": pulumiPythonSdk,
};
const fixtures = FIXTURES as unknown as Record<keyof typeof FIXTURES, ResearchFixture>;
const copy = (fixture: ResearchFixture): ResearchFixture => JSON.parse(JSON.stringify(fixture));
/** An entry the test reads or breaks on purpose: the test fails here, naming it, if the fixture lost it. */
function entry<T>(table: Record<string, T>, id: string): T {
  const found = table[id];
  if (found === undefined) throw new Error(`the fixture has no ${id}`);
  return found;
}

describe("research fixtures are well-formed", () => {
  for (const [name, fixture] of Object.entries(fixtures)) {
    it(`${name}: every fact has a known source, every source says where it was read`, () => {
      expect(checkResearchFixture(fixture, ROOT)).toEqual([]);
    });
  }

  it("a confirmed fact cites a source at the pinned version of its component", () => {
    const broken = copy(fixtures["keda.json"]);
    entry(broken.facts, "metrics.keda").sources = ["llmd-keda-readme"]; // an llm-d file, not KEDA v2.19.0
    expect(checkResearchFixture(broken)).toContain("facts.metrics.keda: confirmed for keda v2.19.0, but no source is at v2.19.0");
  });

  it("refuses a fact without sources, an unknown source, a bad commit, an unsourced value and an uncited source", () => {
    const broken = copy(fixtures["vllm-rbln-0.12.0.json"]);
    entry(broken.facts, "shutdown.flag").sources = [];
    entry(broken.facts, "cache.logLines").sources = ["no-such-source"];
    entry(broken.sources, "vllm-rbln-mega_cache").commit = "main";
    entry(broken.facts, "compileOnly.serveExit").value = 0;
    entry(broken.facts, "compileOnly.socNameCr13").note = "";
    broken.sources.unused = { kind: "web", url: "https://example.org/" };
    const problems = checkResearchFixture(broken);
    expect(problems).toEqual(
      expect.arrayContaining([
        "facts.shutdown.flag.sources: a fact needs at least one source",
        'facts.cache.logLines.sources: "no-such-source" is not in sources',
        'sources.vllm-rbln-mega_cache.commit: "main" is not a hex commit id',
        "facts.compileOnly.serveExit.value: an unconfirmed fact has no value (null)",
        "facts.compileOnly.socNameCr13.note: a closest fact must say what was read instead of the pinned version",
        "sources.unused: cited by no fact",
      ]),
    );
  });

  it("refuses a git source without a commit or tag, a web source without https, a local file that does not exist", () => {
    const broken = copy(fixtures["keda.json"]);
    const types = entry(broken.sources, "keda-types");
    delete types.commit;
    delete types.ref;
    entry(broken.sources, "k8s-deployment-replicas-doc").url = "http://kubernetes.io/";
    entry(broken.sources, "vllm-metrics-fixture").path = "test/fixtures/gone.json";
    expect(checkResearchFixture(broken, ROOT)).toEqual(
      expect.arrayContaining([
        "sources.keda-types: needs a commit or a tag/branch (ref)",
        "sources.k8s-deployment-replicas-doc.url: needs an https URL",
        "sources.vllm-metrics-fixture.path: test/fixtures/gone.json does not exist in this repository",
      ]),
    );
  });
});

describe("the facts agree with each other and with this repository", () => {
  it("keda.json is pinned to the KEDA release @kubernetes-models/keda packages", () => {
    expect(keda.pinned.keda).toBe(keda.facts["keda.version"].value.version);
    expect(keda.facts["npm.package"].value.kedaVersion["2.0.0"]).toContain(keda.pinned.keda);
  });

  it("@kubernetes-models/keda is an exact devDependency, as the facts say, because it imports and validates on Node 20 whatever its engines say", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const node20 = keda.facts["npm.node20"].value;
    expect(node20.imports && node20.validatesSample).toBe(node20.addedAsDevDependency);
    expect(pkg.devDependencies?.["@kubernetes-models/keda"]).toBe(node20.addedAsDevDependency ? keda.pinned["@kubernetes-models/keda"] : undefined);
  });

  it("vllm:num_requests_waiting and vllm:num_requests_running are gauges of our vLLM fixture, with the labels vLLM exports", () => {
    const fact = keda.facts["vllm.queueSeries"].value as unknown as Record<string, { type: string; labels: string[] }>;
    for (const name of ["vllm:num_requests_waiting", "vllm:num_requests_running"]) {
      const family = vllmMetrics.metrics.find((m) => m.name === name);
      expect(family, name).toBeDefined();
      expect(family!.type).toBe(entry(fact, name).type);
      expect([...vllmMetrics.labels, ...((family as { labels?: string[] }).labels ?? [])]).toEqual(entry(fact, name).labels);
    }
  });

  it("every series llm-d's KEDA guides query is exported by the EPP at llm-d-router v0.10.0 or by vLLM", () => {
    const known = autoscalingSeries();
    const queries = [
      ...keda.facts["llmd.kedaEpp.queue"].value.triggers.map((t) => t.query),
      keda.facts["llmd.kedaEpp.saturation"].value.trigger.query,
      keda.facts["llmd.kedaEpp.legacy"].value.runningQuery,
      keda.facts["llmd.kedaEpp.legacy"].value.queueQuery,
      keda.facts["llmd.tokenAware.prefill"].value.query,
      keda.facts["llmd.tokenAware.decode"].value.query,
    ];
    const selected = queries.flatMap(seriesNames);
    expect(selected.length).toBeGreaterThanOrEqual(queries.length);
    expect(selected.filter((name) => !known.has(name))).toEqual([]);
  });

  it("the EPP series that need the flowControl feature gate are the ones the guide's router values turn on", () => {
    const gated = keda.facts["epp.series"].value.filter((s) => s.needs === "featureGates: [flowControl]").map((s) => s.name);
    expect(gated.sort()).toEqual(["llm_d_epp_flow_control_pool_saturation", "llm_d_epp_flow_control_queue_size"]);
    expect(keda.facts["llmd.kedaEpp.featureGate"].value.featureGates).toEqual(["flowControl"]);
  });

  it("the header the payload processor sets is the one the router chart's HTTPRoute matches, and the chart fixture lists the key", () => {
    const header = payloadProcessor.facts["plugin.base-model-to-header"].value.header;
    expect(header).toBe("X-Gateway-Base-Model-Name");
    expect(multiModel.facts["httpRoute.baseModel"].value.header).toBe(header);
    expect(Object.keys(chartFacts.keys)).toEqual(
      expect.arrayContaining(["httpRoute.create", "httpRoute.baseModel", "httpRoute.headerMatches", "router.epp.replicas"]),
    );
  });

  it("the EPP HA facts agree with the flag fixture, and PR #2228 probes the service name the file-mode EPP answers", () => {
    const flag = (name: string) => eppFlags.flags.find((f) => f.flag === name)?.default;
    expect(eppHa.facts.ports.value).toMatchObject({
      "--grpc-port": flag("--grpc-port"),
      "--grpc-health-port": flag("--grpc-health-port"),
      "--metrics-port": flag("--metrics-port"),
    });
    const probed = eppHa.facts["pr2228.envoyCluster"].value.health_checks[0]?.grpc_health_check.service_name;
    expect(probed).toBeTypeOf("string");
    expect(eppHa.facts["health.answers"].value.forEnvoyGrpcHealthCheck.service_name).toBe(probed);
    expect(Object.keys(eppHa.facts["health.answers"].value.serviceNames)).toContain(probed);
  });

  it("KEDA v2.20 keeps v2.19's pollingInterval and cooldownPeriod defaults, so omitting them where v2.20 warns changes nothing", () => {
    const v219 = keda.facts["scaledObject.specFields"].value;
    const v220 = keda220.facts.defaults.value;
    expect([v220.pollingInterval, v220.cooldownPeriod]).toEqual([v219.pollingInterval.default, v219.cooldownPeriod.default]);
    expect(keda220.facts.renderRule.value["minReplicaCount>=1"].omit).toEqual(["pollingInterval", "cooldownPeriod"]);
  });

  it("the compile-only facts name both NPU variables, and the RBLN-CR13 name", () => {
    const npu = vllmRbln.facts["compileOnly.targetNpuEnv"].value;
    expect([npu.current, npu.legacy]).toEqual(["RBLN_FORCE_NPU_NAME", "RBLN_TARGET_SOC"]);
    expect(vllmRbln.facts["compileOnly.socNameCr13"].value).toBe("RBLN-CR13");
    expect(vllmRbln.facts["cache.logLines"].value.megaCacheMiss).toBeNull();
  });
});

describe("the images the front door runs by default are the ones the fixtures read", () => {
  it("Envoy: the newest 1.37 release the fixture names, pinned by digest when the fixture has one (it has none: docs/upstream-facts.md)", () => {
    const facts = fixtures["envoy-v1.37.11/facts.json"].facts;
    const newest = entry(facts, "release.newest").value as { version: string };
    const tag = entry(facts, "image.tag").value as string;
    const digest = entry(facts, "image.digest").value as string | null;
    expect(tag).toBe(`docker.io/envoyproxy/envoy:distroless-${newest.version}`);
    expect(DEFAULT_IMAGES.proxy).toBe(digest ? `${tag}@${digest}` : tag);
  });

  it("the endpoint picker: llm-d-router v0.10.0's, as its guide names it", () => {
    expect(DEFAULT_IMAGES.endpointPicker).toBe(llmdEnvoyAndGuide.images.epp);
  });
});
