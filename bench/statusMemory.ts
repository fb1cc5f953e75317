import { spawn } from "node:child_process";
import { MAX_BODY_BYTES, probeRanks } from "../cli/status";
import { startFakeVllm, writeBody, type FakeVllm } from "../test/helpers/fakeVllm";

/**
 * `npm run --silent bench:status-memory`: the peak memory (max RSS) of a process that runs
 * `status` against one rank on loopback that answers a huge or endless body, next to the same
 * process against a rank with vLLM's ordinary bodies. Each case runs in a fresh process so one
 * case's peak is not billed to the next; the rank runs in this one, writing its bodies as it goes.
 */
const HUGE_BYTES = 1.1e9;
const MODEL = "MiniMaxAI/MiniMax-M2.7";
const METRIC_LINE = 'vllm:num_requests_running{model_name="m",engine="0"} 0\n';

interface Case {
  name: string;
  /** The path that answers the big body, and the body; the others answer vLLM's ordinary ones. */
  path?: "/metrics" | "/v1/models";
  body?: Parameters<typeof writeBody>[1];
}

/** A body of as many whole fillers as fit in the cap, so that it ends well-formed. */
function withinCap(body: { prefix?: string; filler: string; suffix?: string }) {
  const ends = (body.prefix ?? "").length + (body.suffix ?? "").length;
  return { ...body, bytes: ends + body.filler.length * Math.floor((MAX_BODY_BYTES - ends) / body.filler.length) };
}

const CASES: Case[] = [
  { name: "ordinary bodies" },
  { name: "1.1 GB /metrics", path: "/metrics", body: { filler: METRIC_LINE, bytes: HUGE_BYTES } },
  { name: "1.1 GB /v1/models", path: "/v1/models", body: { prefix: '{"data":[{"id":"', filler: "a", suffix: '"}]}', bytes: HUGE_BYTES } },
  { name: "endless /metrics", path: "/metrics", body: { filler: METRIC_LINE } },
  // The most a body within the cap costs: as many samples, or model entries, as fit.
  { name: "4 MiB of 'a 1' lines", path: "/metrics", body: withinCap({ filler: "a 1\n" }) },
  { name: "4 MiB of kept samples", path: "/metrics", body: withinCap({ filler: "vllm:num_requests_running 1\n" }) },
  { name: "4 MiB of models", path: "/v1/models", body: withinCap({ prefix: '{"data":[', filler: '{"id":"m"},', suffix: '{"id":"m"}]}' }) },
];

/** A fake vLLM rank that answers the case's path with its body. */
function startRank({ path, body }: Case): Promise<FakeVllm> {
  return startFakeVllm({ model: MODEL, answers: path && body ? { [path]: (response) => writeBody(response, body) } : {} });
}

/** The child: probes the rank once and prints its problem and its own peak RSS. */
async function probe(url: string) {
  const [status] = await probeRanks([{ url, labels: {} }], MODEL, 0.1);
  process.stdout.write(`${JSON.stringify({ problem: status!.problem, maxRssMb: process.resourceUsage().maxRSS / 1024 })}\n`);
  process.exit(0);
}

function measure(url: string): Promise<{ problem: string | null; maxRssMb: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", __filename, "--probe", url], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("close", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`probe exited ${code}`))));
  });
}

async function main() {
  const probeAt = process.argv.indexOf("--probe");
  if (probeAt >= 0) return probe(process.argv[probeAt + 1]!);
  console.log("case                  peak RSS of status  problem reported");
  for (const c of CASES) {
    const rank = await startRank(c);
    const { problem, maxRssMb } = await measure(rank.url);
    await rank.close();
    console.log(`${c.name.padEnd(20)}  ${`${maxRssMb.toFixed(0)} MB`.padStart(18)}  ${(problem ?? "none").slice(0, 100)}`);
  }
  process.exit(0);
}

void main();
