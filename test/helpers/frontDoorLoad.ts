import { parse as parseYaml } from "yaml";
import { validateEndpointsFile } from "./eppConfig";

/**
 * Steady request load through a front door, and samples of what its endpoints file lists, for tests
 * that change a running deployment and must lose no request. Both record plain data (times in epoch
 * milliseconds, fractional) that a test asserts on and `npm run bench` can report from.
 *
 * Targets are refused unless they are on loopback (127.0.0.0/8, ::1, localhost) or on a test network
 * (198.18.0.0/15, where test/helpers/hostNetwork.ts puts fake hosts that have networks of their own,
 * routed nowhere else): the fake hosts live there, and load goes nowhere else. Every loop is bounded
 * in count and time and stops by itself.
 */

/** One request: when it started and ended, its status (null: no response), and why it failed. */
export interface RequestRecord {
  worker: number;
  startedAt: number;
  endedAt: number;
  status: number | null;
  /** Absent when the request succeeded. */
  error?: string;
}

export interface LoadOptions {
  /** Requests in flight at once, each worker sending its next when the last one ended. */
  concurrency: number;
  /** Default /v1/completions. */
  path?: string;
  /** A JSON body (an object is serialised); default a short completion request. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Bounds (defaults 100,000 requests, 600 s, a request 120 s). */
  maxRequests?: number;
  maxSeconds?: number;
  requestTimeoutMs?: number;
}

export interface LoadReport {
  records: RequestRecord[];
  total: number;
  failed: number;
  failures: RequestRecord[];
  /** Why the load ended: stop(), or the bound it reached. */
  stoppedBy: "stop" | "maxRequests" | "maxSeconds";
}

export interface Load {
  /** What has been recorded so far (the same array stop() returns). */
  records: RequestRecord[];
  /** How many requests have had their answer's status and headers so far (a stream's, while its body still comes). */
  readonly answered: number;
  /** Ends the load once every request in flight has ended. */
  stop(): Promise<LoadReport>;
}

const DEFAULT_BODY = { model: "stand-in", prompt: "Hello", max_tokens: 4 };
/** A failed request is retried after this pause, so a refused port does not become a busy loop. */
const PAUSE_AFTER_FAILURE_MS = 10;

export function now(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * A moment a fake host's `date` gave (epoch ms, the kernel's realtime clock, which the hosts share
 * with this machine) on now()'s clock. now() counts from this process's start on the monotonic
 * clock, which drifts from the realtime clock: by 100 ms and more over a long test file, enough to
 * date a request in flight at a fault as sent after it.
 */
export function fromHostClock(epochMs: number): number {
  return epochMs + (now() - Date.now());
}

/** Refuses a URL whose host is not on loopback or a test network (198.18.0.0/15, hostNetwork.ts). */
export function assertLoopback(url: string): void {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  if (!(host === "localhost" || host === "::1" || /^(127\.\d{1,3}|198\.1[89])\.\d{1,3}\.\d{1,3}$/.test(host))) {
    throw new Error(`${url}: load and probes go to loopback addresses only`);
  }
}

/** Why an error from fetch failed, in a word or two (ECONNREFUSED, ECONNRESET, timeout, ...). */
function reason(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  if (cause?.code) return cause.code;
  if ((error as Error)?.name === "TimeoutError") return "timeout";
  return cause?.message ?? (error as Error)?.message ?? String(error);
}

/**
 * What is wrong with a 2xx answer's body, or undefined: a server-sent event stream must end with
 * `data: [DONE]`, a JSON body must parse, and no choice may have finish_reason "abort" (what vLLM
 * answers for a request its shutdown cut short).
 */
export function bodyProblem(contentType: string, text: string): string | undefined {
  const payloads: string[] = [];
  if (contentType.includes("text/event-stream")) {
    const events = text
      .split(/\r?\n\r?\n/)
      .map((e) => e.trim())
      .filter((e) => e !== "");
    const data = events.map((e) => e.replace(/^data: ?/, ""));
    if (data[data.length - 1] !== "[DONE]") return "stream cut before [DONE]";
    payloads.push(...data.slice(0, -1));
  } else if (contentType.includes("json")) {
    payloads.push(text);
  }
  for (const payload of payloads) {
    let parsed: { choices?: { finish_reason?: string | null }[] };
    try {
      parsed = JSON.parse(payload);
    } catch {
      return `a body that is not JSON: ${JSON.stringify(payload.slice(0, 80))}`;
    }
    if (parsed.choices?.some((c) => c.finish_reason === "abort")) return 'finish_reason "abort"';
  }
  return undefined;
}

/** Sends requests to `url` + path from `concurrency` workers until stop() or a bound. */
export function startLoad(url: string, options: LoadOptions): Load {
  const target = new URL(options.path ?? "/v1/completions", url).toString();
  assertLoopback(target);
  const body = typeof options.body === "string" ? options.body : JSON.stringify(options.body ?? DEFAULT_BODY);
  const headers = { "content-type": "application/json", ...options.headers };
  const maxRequests = options.maxRequests ?? 100_000;
  const endBy = now() + (options.maxSeconds ?? 600) * 1000;
  const records: RequestRecord[] = [];
  let stopping = false;
  let stoppedBy: LoadReport["stoppedBy"] = "stop";
  let started = 0;
  let answered = 0;

  async function once(worker: number): Promise<RequestRecord> {
    const startedAt = now();
    let status: number | null = null;
    let error: string | undefined;
    try {
      const response = await fetch(target, { method: "POST", headers, body, signal: AbortSignal.timeout(options.requestTimeoutMs ?? 120_000) });
      status = response.status;
      answered++;
      const text = await response.text();
      if (status < 200 || status > 299) error = `status ${status}: ${text.slice(0, 80)}`;
      else error = bodyProblem(response.headers.get("content-type") ?? "", text);
    } catch (e) {
      error = reason(e);
    }
    return { worker, startedAt, endedAt: now(), status, ...(error === undefined ? {} : { error }) };
  }

  async function work(worker: number): Promise<void> {
    while (!stopping) {
      if (now() >= endBy) [stopping, stoppedBy] = [true, "maxSeconds"];
      if (stopping) return;
      // The bound is reached as the last request starts: no worker waits to notice it.
      if (++started >= maxRequests) [stopping, stoppedBy] = [true, "maxRequests"];
      const record = await once(worker);
      records.push(record);
      if (record.error !== undefined) await new Promise((r) => setTimeout(r, PAUSE_AFTER_FAILURE_MS));
    }
  }

  const workers = Array.from({ length: options.concurrency }, (_, i) => work(i));
  return {
    records,
    get answered() {
      return answered;
    },
    async stop() {
      stopping = true;
      await Promise.all(workers);
      const failures = records.filter((r) => r.error !== undefined);
      return { records, total: records.length, failed: failures.length, failures, stoppedBy };
    },
  };
}

/** An endpoint as the endpoints file lists it. */
/** A fault run's requests: how many, how many failed (and which), how many were in flight at the fault. */
export function requestsAroundFault(records: RequestRecord[], faultAt: number) {
  const failures = records.filter((r) => r.error !== undefined);
  return {
    requests: records.length,
    failed: failures.length,
    inFlightAtFault: records.filter((r) => r.startedAt < faultAt && r.endedAt > faultAt).length,
    failures,
    records,
  };
}

/** Seconds (to a tenth) from the fault to a moment; null for none. */
export const secondsAfterFault = (faultAt: number) => (at: number | null | undefined) =>
  at === undefined || at === null ? null : Math.round((at - faultAt) / 100) / 10;

export interface ListedEndpoint {
  name: string;
  address: string;
  port: string;
  labels: Record<string, string>;
}

export interface Sample {
  at: number;
  /** What the file listed (empty when it could not be read). */
  listed: ListedEndpoint[];
  /** What the v0.10.0 file-discovery plugin would refuse in it (test/helpers/eppConfig.ts). */
  problems: string[];
  readError?: string;
  /** Listed endpoints that did not serve, with why. */
  notServing: { endpoint: ListedEndpoint; reason: string }[];
}

export interface SamplerOptions {
  /** Milliseconds between the start of one sample and the next. */
  every: number;
  /** The endpoints file's text, wherever it is (e.g. `cat` over SSH on the router's fake host). */
  read: () => Promise<string>;
  /** Undefined when the endpoint serves, else why not; by default probeModels. */
  probe?: (endpoint: ListedEndpoint) => Promise<string | undefined>;
  /** Bounds (defaults 10,000 samples, 600 s). */
  maxSamples?: number;
  maxSeconds?: number;
}

export interface SampleReport {
  samples: Sample[];
  /** Samples in which a listed endpoint did not serve, or the file could not be read or was refused. */
  bad: Sample[];
}

export interface Sampler {
  samples: Sample[];
  stop(): Promise<SampleReport>;
}

/** The entries of an endpoints file that have an address and a port, as listed (the plugin's rules aside). */
export function listedEndpoints(text: string): ListedEndpoint[] {
  const document = parseYaml(text, { version: "1.1" }) as { endpoints?: unknown } | null;
  const entries = Array.isArray(document?.endpoints) ? (document.endpoints as Record<string, unknown>[]) : [];
  return entries
    .filter((e) => e !== null && typeof e === "object")
    .map((e) => ({
      name: String(e.name ?? ""),
      address: String(e.address ?? ""),
      port: String(e.port ?? ""),
      labels: (e.labels ?? {}) as Record<string, string>,
    }));
}

/** GET /v1/models on the endpoint: what vLLM answers (through a sidecar too, which forwards it) once it serves. */
export function probeModels(headers: Record<string, string> = {}, timeoutMs = 2000): (endpoint: ListedEndpoint) => Promise<string | undefined> {
  return async ({ address, port }) => {
    const url = `http://${address}:${Number(port)}/v1/models`;
    try {
      assertLoopback(url);
    } catch {
      return `not probed: ${address} is not a loopback address`;
    }
    try {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
      await response.arrayBuffer();
      return response.ok ? undefined : `status ${response.status}`;
    } catch (e) {
      return reason(e);
    }
  };
}

/** Every `every` ms reads the endpoints file and probes each endpoint it lists, until stop() or a bound. */
export function startSampler(options: SamplerOptions): Sampler {
  const probe = options.probe ?? probeModels();
  const maxSamples = options.maxSamples ?? 10_000;
  const endBy = now() + (options.maxSeconds ?? 600) * 1000;
  const samples: Sample[] = [];
  let stopping = false;

  async function sample(): Promise<Sample> {
    const at = now();
    let text: string;
    try {
      text = await options.read();
    } catch (e) {
      return { at, listed: [], problems: [], readError: String((e as Error)?.message ?? e), notServing: [] };
    }
    const problems = validateEndpointsFile(text);
    let listed: ListedEndpoint[] = [];
    try {
      listed = listedEndpoints(text);
    } catch {
      // Not YAML at all: `problems` says so, and nothing is listed.
    }
    const results = await Promise.all(listed.map(async (endpoint) => ({ endpoint, reason: await probe(endpoint) })));
    const notServing = results.filter((r): r is { endpoint: ListedEndpoint; reason: string } => r.reason !== undefined);
    return { at, listed, problems, notServing };
  }

  const loop = (async () => {
    while (!stopping && samples.length < maxSamples && now() < endBy) {
      const started = now();
      samples.push(await sample());
      const wait = options.every - (now() - started);
      if (wait > 0 && !stopping) await new Promise((r) => setTimeout(r, wait));
    }
  })();

  return {
    samples,
    async stop() {
      stopping = true;
      await loop;
      const bad = samples.filter((s) => s.readError !== undefined || s.problems.length > 0 || s.notServing.length > 0);
      return { samples, bad };
    },
  };
}
