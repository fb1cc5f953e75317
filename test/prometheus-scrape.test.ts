import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { planDeployment } from "../core/plan/deployment";
import { renderStackFiles } from "./helpers/render";
import { startFakeVllm, type FakeVllm } from "./helpers/fakeVllm";
import { shippedCatalog } from "./helpers/recipes";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";

const MODEL = "MiniMaxAI/MiniMax-M2.7";
const cleanup: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, deadlineMs = 30000): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe("a real Prometheus pointed at the rendered files", () => {
  it("scrapes every rank of a hosts stack with its labels and loads the alert rules", async () => {
    // Three hosts of a pipeline-parallel stack, each its own loopback address, each rank on the plan's port 8000.
    const base = `127.${50 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 250)}`;
    const names = ["npu-a", "npu-b", "npu-c"];
    const deployment = planDeployment(
      parseStackSettings({
        strategy: "aggregated-pipeline-parallel",
        target: "Throughput",
        replicas: 3,
        hosts: names.map((name, i) => ({ name, address: `${base}.${i + 1}`, hostKey: EXAMPLE_HOST_KEY })),
      }),
      shippedCatalog,
    );
    const ranks: FakeVllm[] = [];
    for (let i = 0; i < names.length; i++) ranks.push(await startFakeVllm({ host: `${base}.${i + 1}`, port: 8000, model: MODEL, engines: 2, running: i }));
    cleanup.push(() => Promise.all(ranks.map((r) => r.close())).then(() => undefined));

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "prometheus-"));
    const files = renderStackFiles(deployment, [], "dev");
    fs.writeFileSync(path.join(dir, "targets.json"), files["prometheus/targets.json"]!);
    fs.writeFileSync(path.join(dir, "rbln-serving-rules.yaml"), files["prometheus/rbln-serving-rules.yaml"]!);
    // docs/observability.md's prometheus.yml lines, with a short interval for the test.
    fs.writeFileSync(
      path.join(dir, "prometheus.yml"),
      [
        "global: { scrape_interval: 1s, evaluation_interval: 1s }",
        "rule_files: [rbln-serving-rules.yaml]",
        "scrape_configs:",
        "  - job_name: rbln-serving",
        "    metrics_path: /metrics",
        "    file_sd_configs:",
        "      - files: [targets.json]",
        "",
      ].join("\n"),
    );
    const port = await freePort();
    const prometheus: ChildProcess = spawn(
      "prometheus",
      [`--config.file=${path.join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${path.join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`],
      { stdio: "ignore" },
    );
    cleanup.push(() => {
      prometheus.kill();
    });
    const api = async (query: string) => (await (await fetch(`http://127.0.0.1:${port}/api/v1/${query}`)).json()) as any;

    const up = await until("every target up", async () => {
      const result = (await api(`query?query=${encodeURIComponent("up")}`)).data.result;
      return result.length === names.length && result.every((r: any) => r.value[1] === "1") ? result : undefined;
    });
    expect(up.map((r: any) => r.metric).sort((a: any, b: any) => a.host.localeCompare(b.host))).toEqual(
      names.map((host, i) => ({
        __name__: "up",
        job: "rbln-serving",
        instance: `${base}.${i + 1}:8000`,
        host,
        role: "main",
        rank: "0",
        model: MODEL,
        strategy: "aggregated-pipeline-parallel",
      })),
    );
    const running = (await api(`query?query=${encodeURIComponent("sum by (host, role, rank) (vllm:num_requests_running)")}`)).data.result;
    expect(running.map((r: any) => [r.metric.host, r.value[1]]).sort()).toEqual([
      ["npu-a", "0"],
      ["npu-b", "1"],
      ["npu-c", "2"],
    ]);
    const rules = await until("the rules evaluated", async () => {
      const groups = (await api("rules")).data.groups;
      return groups[0]?.rules.every((r: any) => r.health !== "unknown") ? groups : undefined;
    });
    expect(rules[0].rules.map((r: any) => [r.name, r.health])).toEqual([
      ["RblnServingRankDown", "ok"],
      ["RblnServingFrontDoorDown", "ok"],
      ["RblnServingQueueGrowing", "ok"],
      ["RblnServingKvCacheNearlyFull", "ok"],
      ["RblnServingTtftHigh", "ok"],
      ["RblnServingPreemptions", "ok"],
    ]);
  }, 60000);
});
