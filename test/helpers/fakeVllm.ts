import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export interface FakeVllmOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  model: string;
  /** Data-parallel engines in the process; vLLM labels every series with `engine`. */
  engines?: number;
  running?: number;
  waiting?: number;
  kvUsage?: number;
  /** Generation tokens per second of wall time, spread over the engines. */
  tokensPerSecond?: number;
  ttftSeconds?: number[];
  /** Like `--api-key`: /v1 paths answer 401 without it; /health and /metrics stay open. */
  apiKey?: string;
  /** What a misbehaving rank answers on these paths instead of vLLM's answer. */
  answers?: Record<string, (response: http.ServerResponse) => void>;
}

export interface FakeVllm {
  url: string;
  /** The paths asked, in order. */
  requests: string[];
  close(): Promise<void>;
}

/** vLLM's TTFT buckets (vllm/v1/metrics/loggers.py). */
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];

/**
 * A stand-in for one vLLM rank on loopback: /health, /v1/models and /metrics in the Prometheus
 * text format, written by prom-client with vLLM's names and labels (counters with _total,
 * histograms with _bucket/_sum/_count).
 */
export async function startFakeVllm(options: FakeVllmOptions): Promise<FakeVllm> {
  const engines = options.engines ?? 1;
  const registry = new Registry();
  const labelNames = ["model_name", "engine"] as const;
  const perEngine = (i: number) => ({ model_name: options.model, engine: String(i) });
  const running = new Gauge({ name: "vllm:num_requests_running", help: "Number of requests in model execution batches.", labelNames, registers: [registry] });
  const waiting = new Gauge({ name: "vllm:num_requests_waiting", help: "Number of requests waiting to be processed.", labelNames, registers: [registry] });
  const kv = new Gauge({ name: "vllm:kv_cache_usage_perc", help: "KV-cache usage. 1 means 100 percent usage.", labelNames, registers: [registry] });
  const generated = new Counter({ name: "vllm:generation_tokens_total", help: "Number of generation tokens processed.", labelNames, registers: [registry] });
  const prompt = new Counter({ name: "vllm:prompt_tokens_total", help: "Number of prefill tokens processed.", labelNames, registers: [registry] });
  const ttft = new Histogram({
    name: "vllm:time_to_first_token_seconds",
    help: "Histogram of time to first token in seconds.",
    labelNames,
    buckets: TTFT_BUCKETS,
    registers: [registry],
  });
  for (let i = 0; i < engines; i++) {
    running.set(perEngine(i), i === 0 ? (options.running ?? 0) : 0);
    waiting.set(perEngine(i), i === 0 ? (options.waiting ?? 0) : 0);
    kv.set(perEngine(i), options.kvUsage ?? 0);
    prompt.inc(perEngine(i), 1000);
    generated.inc(perEngine(i), 0);
    ttft.zero(perEngine(i));
  }
  for (const seconds of options.ttftSeconds ?? []) ttft.observe(perEngine(0), seconds);
  const started = performance.now();
  let counted = 0;
  const requests: string[] = [];

  const server = http.createServer(async (request, response) => {
    const path = request.url ?? "/";
    requests.push(path);
    const answer = options.answers?.[path];
    if (answer) return answer(response);
    if (path.startsWith("/v1") && options.apiKey && request.headers.authorization !== `Bearer ${options.apiKey}`) {
      response.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ error: "Unauthorized" }));
      return;
    }
    if (path === "/health") {
      response.writeHead(200).end();
    } else if (path === "/v1/models") {
      response
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ object: "list", data: [{ id: options.model, object: "model", owned_by: "vllm" }] }));
    } else if (path === "/metrics") {
      const due = ((performance.now() - started) / 1000) * (options.tokensPerSecond ?? 0);
      for (let i = 0; i < engines; i++) generated.inc(perEngine(i), (due - counted) / engines);
      counted = due;
      response.writeHead(200, { "content-type": registry.contentType }).end(await registry.metrics());
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve);
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address}:${port}`,
    requests,
    // A misbehaving rank's endless answers would keep close() waiting.
    close: () => new Promise((resolve) => server.close(() => resolve()).closeAllConnections()),
  };
}

/**
 * Answers 200 with `prefix`, `filler` repeated up to `bytes` in all (forever without it, as fast as
 * the reader takes it), then `suffix`: a misbehaving rank's huge or endless body, written as it
 * goes so the writer's memory stays small. Stops when the reader hangs up.
 */
export function writeBody(response: http.ServerResponse, body: { prefix?: string; filler: string; suffix?: string; bytes?: number }): void {
  const { prefix = "", filler, suffix = "", bytes } = body;
  const block = Buffer.from(filler.repeat(Math.ceil((1024 * 1024) / filler.length)));
  let left = bytes === undefined ? Infinity : bytes - Buffer.byteLength(prefix) - Buffer.byteLength(suffix);
  response.writeHead(200, bytes === undefined ? {} : { "content-length": String(bytes) });
  response.write(prefix);
  response.on("close", () => (left = 0));
  const pump = () => {
    while (left > 0) {
      const piece = left >= block.length ? block : block.subarray(0, left);
      left -= piece.length;
      if (!response.write(piece)) return void response.once("drain", pump);
    }
    if (!response.destroyed) response.end(suffix);
  };
  pump();
}

/**
 * A config that the product accepts but a rank refuses at start: a --rbln-* flag (passed with a warning,
 * since vllm-rbln 0.12.0 is not confirmed to have the group) on a stand-in that models the vllm-rbln
 * snapshot without it. Every other unknown flag the product refuses at plan time.
 */
export const FLAG_REFUSED_AT_START = {
  arg: "--rbln-use-custom-kernel",
  env: { FAKE_VLLM_RBLN_AT: "87b95ee5" },
  /** The last line of the rank's refusal, as the step quotes it. */
  refusal: "unrecognized arguments: --rbln-use-custom-kernel",
} as const;
