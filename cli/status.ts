import * as fs from "node:fs";
import { z } from "zod";
import { ConfigError, formatPath, issueMessage } from "../core/errors";
import { histogramQuantile, meanOf, parseExposition, sumOf } from "../core/monitoring/exposition";
import { scrapeTargets, type RankLabels } from "../core/monitoring/targets";
import { hostPort, httpUrl } from "../core/address";
import { frontDoorAddresses } from "../core/plan/frontDoor";
import { FRONT_DOOR_PORTS, modelEppPorts, modelEppSlots } from "../core/plan/ports";
import type { Deployment } from "../core/plan/types";
import { DEFAULT_MODEL, type RecipeCatalog } from "../core/recipe/catalog";
import { DEFAULT_INSTANCE } from "../core/render/hosts/names";
import { modelInstance } from "../core/render/stack";
import { hostStatusReads } from "../core/render/hosts/statusRead";
import { classifyHostRank } from "../core/status/hostRank";
import { exitCodeOf, formatAge, roleSummaries, STATUS_EXIT, type RankState } from "../core/status/states";
import { refuseUnusedOptions, stackPlan, type CliOptions } from "./commands";
import { type Bound, bound, mapLimited } from "./boundedRun";
import { readHost, type SshOptions } from "./hostRead";
import { readKubernetes, type KubernetesStatus } from "./kubeRead";

export interface StatusOptions extends CliOptions {
  endpoint?: string[];
  /** Seconds between the two /metrics samples that give tokens/s; with --watch, between readings too. */
  interval?: string;
  /** Read again every --interval seconds until interrupted. */
  watch?: boolean;
  /** The private key SSH signs in to the hosts with. */
  identity?: string;
}

/** One rank as `status` reports it; numbers are null where the rank is down or has no data yet. */
export interface RankStatus {
  url: string;
  labels: Partial<RankLabels>;
  up: boolean;
  model: string | null;
  running: number | null;
  waiting: number | null;
  kvCachePercent: number | null;
  generationTokensPerSecond: number | null;
  ttftP50Seconds: number | null;
  /** Why this rank makes the exit status non-zero, or null. */
  problem: string | null;
  /** Where the rank is on its way to serving (core/status/states.ts), since when (epoch seconds) and why. */
  state: RankState;
  since: number | null;
  age: string;
  detail: string | null;
  /** The last line of the rank's journal, read over SSH on a hosts stack. */
  lastLine: string | null;
}

/** For one request, its headers and its whole body. */
const REQUEST_TIMEOUT_MS = 5000;
/**
 * The most `status` reads of one body; past it the rank is a problem, so memory stays bounded
 * whatever a rank sends. vLLM 0.30.0's 41 metric families come to about 200 kB for a rank of 4
 * engines; /v1/models is far less.
 */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface Rank {
  url: string;
  labels: Partial<RankLabels>;
  /** The name its /v1/models should report, where it differs from the stack's (a model of several). */
  plannedModel?: string;
}

/** Every rank of a hosts deployment, at its metrics endpoint, with its labels and the name vLLM reports: its first served name. */
export function ranksOfDeployment(deployment: Deployment): Rank[] {
  const plannedModel = deployment.entry.servedNames[0]!;
  return scrapeTargets(deployment).map((t) => ({
    url: `http://${t.targets[0]}`,
    labels: t.labels,
    ...(plannedModel === deployment.plan.model ? {} : { plannedModel }),
  }));
}

/** The front door of a hosts stack, as `status` reports it: Envoy through its port, and the picker's metrics. */
export interface FrontDoorStatus {
  url: string;
  /** /v1/models answered through Envoy, the picker and a rank. */
  up: boolean;
  model: string | null;
  picker: { url: string; up: boolean; readyEndpoints: number | null };
  problem: string | null;
}

/** What `status` reads: `--endpoint` URLs over HTTP, or a stack's ranks over HTTP and their hosts over SSH, or its pods. */
type Source =
  | { kind: "endpoints"; ranks: Rank[]; plannedModel: string }
  | { kind: "hosts"; ranks: Rank[]; plannedModel: string; deployment: Deployment; stack: string; instance: string; pickerPort: number }
  | { kind: "kubernetes"; plannedModel: string; deployment: Deployment; instance: string };

/** What `status` reads for one model of the stack (name null: a stack without models, or --endpoint URLs). */
interface ModelSource {
  name: string | null;
  source: Source;
}

/** The ranks to ask, per model: `--endpoint` URLs, or every rank of each model of a hosts stack (and its front door), or each model's pods. */
function sourcesOf(options: StatusOptions, catalog: RecipeCatalog): ModelSource[] {
  const endpoints = (options.endpoint ?? []).map((url) => {
    const parsed = /^https?:\/\/[^/\s\p{Cc}]+\/?$/u.test(url) && URL.canParse(url) ? new URL(url) : undefined;
    if (parsed === undefined) throw new ConfigError("--endpoint", `"${url}" is not a base URL such as http://10.0.0.5:8000`);
    // It would be printed in every row; the refusal masks it.
    if (parsed.username !== "" || parsed.password !== "")
      throw new ConfigError("--endpoint", `"${url}" holds user:password@; give a base URL such as http://10.0.0.5:8000 (an API key goes in VLLM_API_KEY)`);
    return { url: url.replace(/\/$/, ""), labels: {} };
  });
  if (options.stack === undefined) {
    if (endpoints.length === 0) throw new ConfigError("--stack", "required without --endpoint: status --stack NAME or --endpoint URL ...");
    return [{ name: null, source: { kind: "endpoints", ranks: endpoints, plannedModel: options.model ?? DEFAULT_MODEL } }];
  }
  const { models } = stackPlan(options, catalog, options.stack).plan;
  if (endpoints.length > 0) {
    if (models.length > 1)
      throw new ConfigError(
        "--endpoint",
        `"${options.stack}" serves ${models.length} models, so URLs alone do not say which; give --stack alone, or --endpoint without --stack`,
      );
    return [{ name: null, source: { kind: "endpoints", ranks: endpoints, plannedModel: models[0]!.plan.model } }];
  }
  const stack = options.stack;
  const slots = modelEppSlots(models.map((m) => m.entry.name ?? ""));
  return models.map((deployment, i) => {
    // A model of several is named after its entry, on its own EPP ports (as the render names and places it).
    const instance = modelInstance(DEFAULT_INSTANCE, deployment);
    const plannedModel = models.length > 1 ? deployment.entry.servedNames[0]! : deployment.plan.model;
    const source: Source =
      deployment.settings.platform === "hosts"
        ? {
            kind: "hosts",
            ranks: ranksOfDeployment(deployment),
            plannedModel,
            deployment,
            stack,
            instance,
            pickerPort: modelEppPorts(deployment.settings.models === undefined ? null : slots[i]!).eppMetrics,
          }
        : { kind: "kubernetes", plannedModel, deployment, instance };
    return { name: deployment.entry.name, source };
  });
}

/** The EPP's gauge of the endpoints it routes to (llm-d-router v0.10.0 pkg/epp/metrics). */
const READY_ENDPOINTS = "llm_d_epp_ready_endpoints";

/** Envoy answers /v1/models through the picker and a rank; the picker serves its metrics. */
export async function frontDoorStatus(
  frontDoor: { address: string; port: number },
  plannedModel: string,
  apiKey: string | undefined,
  pickerPort: number = FRONT_DOOR_PORTS.eppMetrics,
): Promise<FrontDoorStatus> {
  const url = httpUrl(frontDoor.address, frontDoor.port);
  const picker = { url: `http://${hostPort(frontDoor.address, pickerPort)}`, up: false, readyEndpoints: null as number | null };
  const problems: string[] = [];
  try {
    picker.readyEndpoints = measured(sumOf(parseExposition(await read(picker.url, "/metrics", apiKey), new Set([READY_ENDPOINTS])), READY_ENDPOINTS));
    picker.up = true;
  } catch (error) {
    problems.push(`picker ${picker.url}: ${reason(error)}`);
  }
  let model: string | null = null;
  try {
    const listed = servedModels(await read(url, "/v1/models", apiKey));
    model = listed.includes(plannedModel) ? plannedModel : (listed[0] ?? null);
    if (model !== plannedModel) problems.push(`serves ${JSON.stringify(model)}, planned ${JSON.stringify(plannedModel)}`);
  } catch (error) {
    problems.push(reason(error));
  }
  return { url, up: model !== null, model, picker, problem: problems.join("; ") || null };
}

function intervalSeconds(options: StatusOptions): number {
  const text = options.interval ?? "5";
  const value = Number(text);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(text) || value <= 0 || value > 300) throw new ConfigError("--interval", `"${text}" is not a number of seconds in (0, 300]`);
  return value;
}

/** A redirect's target as a problem shows it: user, password, query values and fragment masked. */
function maskedLocation(location: string, from: string): string {
  let url: URL;
  try {
    url = new URL(location, from);
  } catch {
    return "a Location that is not a URL";
  }
  if (url.username) url.username = "***";
  if (url.password) url.password = "***";
  for (const name of new Set(url.searchParams.keys())) url.searchParams.set(name, "***");
  if (url.hash) url.hash = "***";
  return url.href;
}

/**
 * A rank's answer on `path`, at most MAX_BODY_BYTES of it. A redirect is not followed: it would
 * report another address's model and metrics as this rank's.
 */
async function read(rankUrl: string, path: string, apiKey: string | undefined): Promise<string> {
  const url = `${rankUrl}${path}`;
  const response = await fetch(url, {
    redirect: "manual",
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
  });
  if (!response.ok) {
    await response.body?.cancel();
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location !== null)
      throw new Error(`${path} redirected (${response.status}) to ${maskedLocation(location, url)}`);
    throw new Error(`${path} answered ${response.status}${response.status === 401 && path === "/v1/models" ? " (set VLLM_API_KEY)" : ""}`);
  }
  // 204 and its kind have no body.
  if (response.body === null) return "";
  // The request's timeout signal also aborts this read, so a slow body is bounded in time too.
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (let bytes = 0; ; ) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    bytes += value.byteLength;
    if (bytes > MAX_BODY_BYTES) {
      await reader.cancel();
      throw new Error(`${path} sent more than ${MAX_BODY_BYTES / 1024 / 1024} MiB`);
    }
    text += decoder.decode(value, { stream: true });
  }
}

/** The part of vLLM's (OpenAI's) model list `status` reads: the first entry is the served model. */
const ModelList = z.object({ data: z.array(z.object({ id: z.string() })) });

/** The first served name (vLLM's served model) a /v1/models body lists. */
const servedModel = (body: string): string | null => servedModels(body)[0] ?? null;

/** Every name a /v1/models body lists: a front door of several models lists each model's. */
function servedModels(body: string): string[] {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    throw new Error(`/v1/models: ${(error as Error).message}`);
  }
  const parsed = ModelList.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = formatPath(issue.path);
    throw new Error(`/v1/models: ${where ? `${where}: ` : ""}${issueMessage(issue)}`);
  }
  return parsed.data.data.map((entry) => entry.id);
}

/** fetch says "fetch failed" and keeps the socket's reason (ECONNREFUSED, a timeout) in `cause`. */
function reason(error: unknown): string {
  const { message, cause } = error as Error;
  return cause instanceof Error ? cause.message : message;
}

/** A rank's state from its HTTP answer alone: READY, FAILED when it serves another model, DOWN when it does not answer. */
const httpOnly = (up: boolean, problem: string | null) =>
  ({ state: up ? (problem ? "FAILED" : "READY") : "DOWN", since: null, age: "-", detail: problem, lastLine: null }) as const;

const down = (rank: Rank, problem: string): RankStatus => ({
  ...rank,
  ...httpOnly(false, problem),
  up: false,
  model: null,
  running: null,
  waiting: null,
  kvCachePercent: null,
  generationTokensPerSecond: null,
  ttftP50Seconds: null,
  problem,
});

/** The families `status` reads. */
const METRIC = {
  running: "vllm:num_requests_running",
  waiting: "vllm:num_requests_waiting",
  kvCache: "vllm:kv_cache_usage_perc",
  generated: "vllm:generation_tokens_total",
  ttft: "vllm:time_to_first_token_seconds",
} as const;
/** The samples `status` keeps of a /metrics body; the others are checked and dropped. */
const KEPT_SAMPLES: ReadonlySet<string> = new Set([...Object.values(METRIC), `${METRIC.ttft}_bucket`]);

/** A rank's value for a field, or null (unknown) when it is not a finite number in [0, max]. */
const measured = (value: number | undefined, max = Infinity): number | null =>
  value !== undefined && Number.isFinite(value) && value >= 0 && value <= max ? value : null;

/** Reads /health, /v1/models and two /metrics samples `intervalMs` apart from one rank. */
async function rankStatus(rank: Rank, plannedModel: string, intervalMs: number, apiKey: string | undefined): Promise<RankStatus> {
  let first: { generated: number | null; at: number };
  let model: string | null;
  try {
    await read(rank.url, "/health", apiKey);
    model = servedModel(await read(rank.url, "/v1/models", apiKey));
    // Times are taken as each request leaves, so the interval is the one the server counted over.
    const at = performance.now();
    // Only the total is kept over the interval: the first sample's memory is freed while it runs.
    first = { generated: measured(sumOf(parseExposition(await read(rank.url, "/metrics", apiKey), KEPT_SAMPLES), METRIC.generated)), at };
  } catch (error) {
    return down(rank, reason(error));
  }
  await new Promise((resolve) => setTimeout(resolve, intervalMs));
  const seconds = (performance.now() - first.at) / 1000;
  try {
    const second = parseExposition(await read(rank.url, "/metrics", apiKey), KEPT_SAMPLES);
    const generated = measured(sumOf(second, METRIC.generated));
    const kv = measured(meanOf(second, METRIC.kvCache), 1);
    const problem = model === plannedModel ? null : `serves ${JSON.stringify(model)}, planned ${JSON.stringify(plannedModel)}`;
    return {
      ...rank,
      ...httpOnly(true, problem),
      up: true,
      model,
      running: measured(sumOf(second, METRIC.running)),
      waiting: measured(sumOf(second, METRIC.waiting)),
      kvCachePercent: kv === null ? null : kv * 100,
      generationTokensPerSecond: first.generated === null || generated === null ? null : Math.max(0, generated - first.generated) / seconds,
      ttftP50Seconds: measured(histogramQuantile(second, METRIC.ttft, 0.5)),
      problem,
    };
  } catch (error) {
    return down(rank, `second /metrics sample: ${reason(error)}`);
  }
}

/** Asks every rank at once; `VLLM_API_KEY` from the environment goes to /v1/models, which wants it when vLLM has a key. */
export async function probeRanks(ranks: readonly Rank[], plannedModel: string, intervalSeconds: number): Promise<RankStatus[]> {
  const apiKey = process.env.VLLM_API_KEY || undefined;
  return Promise.all(ranks.map((rank) => rankStatus(rank, rank.plannedModel ?? plannedModel, intervalSeconds * 1000, apiKey)));
}

const fixed = (value: number | null, digits: number) => (value === null ? "-" : value.toFixed(digits));

/**
 * What a terminal acts on or reorders text by: C0 and C1 controls (ESC, CSI, CR, LF), DEL, line
 * and paragraph separators, bidi overrides. A rank's bytes print with them escaped, so they cannot
 * move the cursor or forge a row.
 */
const TERMINAL_CONTROLS = /[\p{Cc}\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;
/** The controls JSON.stringify leaves raw: it escapes only those below U+0020. */
const JSON_RAW_CONTROLS = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const unicodeEscape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
const printable = (text: string) => text.replace(TERMINAL_CONTROLS, unicodeEscape);

function table(statuses: readonly RankStatus[]): string {
  const header = ["ENDPOINT", "HOST", "ROLE", "RANK", "STATE", "AGE", "MODEL", "RUNNING", "WAITING", "KV%", "GEN_TOK/S", "TTFT_P50"];
  const rows = statuses.map((s) => [
    s.url,
    s.labels.host ?? "-",
    s.labels.role ?? "-",
    s.labels.rank ?? "-",
    s.state,
    s.age,
    s.model ?? "-",
    fixed(s.running, 0),
    fixed(s.waiting, 0),
    fixed(s.kvCachePercent, 1),
    fixed(s.generationTokensPerSecond, 1),
    s.ttftP50Seconds === null ? "-" : `${s.ttftP50Seconds.toFixed(3)}s`,
  ]);
  // Below the table, one line for each rank that does not serve: why, and its log's last line.
  const notes = statuses
    .filter((s) => s.state !== "READY" && (s.detail ?? s.lastLine) !== null)
    .map((s) => `${s.url}: ${[s.detail, s.lastLine === null ? null : `last log line: ${s.lastLine}`].filter((p) => p !== null).join(" | ")}`);
  const roles = statuses.every((s) => s.labels.role !== undefined) ? roleSummaries(statuses.map((s) => ({ role: s.labels.role!, state: s.state }))) : [];
  return columns(header, rows) + [...notes, ...roles].map((line) => `${printable(line)}\n`).join("");
}

/** A table with a header, columns as wide as their widest cell, every cell printable. */
function columns(header: readonly string[], cells: readonly (readonly string[])[]): string {
  const rows = cells.map((row) => row.map(printable));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (row: readonly string[]) =>
    row
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [header, ...rows].map((row) => `${line(row)}\n`).join("");
}

function frontDoorLines(door: FrontDoorStatus): string {
  const ready = door.picker.readyEndpoints === null ? "" : `, ${door.picker.readyEndpoints} endpoints ready`;
  return `${[
    `FRONT DOOR  ${door.url}  ${door.up ? "up" : "down"}  ${door.model ?? "-"}`,
    `PICKER      ${door.picker.url}  ${door.picker.up ? "up" : "down"}${ready}`,
    ...(door.problem ? [`${door.url}: ${door.problem}`] : []),
  ]
    .map(printable)
    .join("\n")}\n`;
}

function podTable(report: KubernetesStatus, now: number): string {
  const rows = report.pods.map((p) => [p.pod, p.role, p.state, formatAge(p.since, now), String(p.restarts), p.node ?? "-"]);
  const notes = report.pods
    .filter((p) => p.state !== "READY" && (p.detail ?? p.lastLine) !== null)
    .map((p) => `${p.pod}: ${[p.detail, p.lastLine === null ? null : `last log line: ${p.lastLine}`].filter((part) => part !== null).join(" | ")}`);
  const jobs = report.jobs.map((j) => `JOB ${j.name}  ${j.state}`);
  const roles = roleSummaries(report.pods, "pods");
  const problem = report.problem === null ? [] : [report.problem];
  return (
    columns(["POD", "ROLE", "STATE", "AGE", "RESTARTS", "NODE"], rows) +
    [...notes, ...jobs, ...roles, ...problem].map((line) => `${printable(line)}\n`).join("")
  );
}

/** One reading of a stack or of endpoints: what `status` prints, and its exit status. */
export interface StatusReport {
  plannedModel: string;
  ranks: RankStatus[];
  frontDoor: FrontDoorStatus | null;
  kubernetes: KubernetesStatus | null;
  roles: string[];
  exitCode: number;
}

/**
 * At most this many SSH or kubectl processes at once, all models together (OpenSSH's MaxStartups on
 * a bastion starts refusing at 10 by default; an API server throttles a client that asks too much).
 */
const PROCESSES_AT_ONCE = 8;

/** Each rank's state from its HTTP answer and what its host says (core/status/hostRank.ts), with its age and last log line. */
async function withHostStates(
  statuses: readonly RankStatus[],
  deployment: Deployment,
  stack: string,
  instance: string,
  ssh: SshOptions,
  processes: Bound,
): Promise<RankStatus[]> {
  const reads = hostStatusReads(deployment, stack, instance);
  const all = await mapLimited([...reads.hosts, ...reads.routers], processes, (r) => readHost(r, ssh));
  const [results, routers] = [all.slice(0, reads.hosts.length), all.slice(reads.hosts.length)];
  const byHost = new Map(reads.hosts.map((r, i) => [r.host.name, results[i]!]));
  // Each router host keeps its own agent's drains: a rank is out while any of them holds it out.
  const drains = new Map(routers.flatMap((router) => ("error" in router ? [] : [...router.drains])));
  return statuses.map((s) => {
    const key = `${s.labels.role}-${s.labels.rank}`;
    const result = byHost.get(s.labels.host ?? "") ?? { error: "not a host of the stack" };
    const facts = "error" in result ? null : (result.ranks.get(key) ?? null);
    const now = "error" in result ? Date.now() / 1000 : result.now;
    const hostError = "error" in result ? result.error : facts === null ? "its host's reader did not report it" : undefined;
    const drain = drains.get(reads.drainKey(s.labels.host ?? "", key)) ?? null;
    const state = classifyHostRank({ http: { up: s.up, problem: s.problem }, host: facts, hostError, drain, now });
    return { ...s, ...state, age: formatAge(state.since, now), lastLine: facts?.log.last ?? null };
  });
}

function sshOptions(options: StatusOptions, deployment: Deployment): SshOptions {
  if (options.identity !== undefined && !fs.existsSync(options.identity)) throw new ConfigError("--identity", `"${options.identity}" is not a file`);
  return { identity: options.identity, skipHostKeyCheck: deployment.settings.insecureSkipHostKeyCheck };
}

/** One model's reading: every rank once (and the front door, the hosts or the pods), its SSH or kubectl processes within `processes`. */
async function readModelStatus(source: Source, options: StatusOptions, interval: number, processes: Bound): Promise<StatusReport> {
  if (source.kind === "kubernetes") {
    const kubernetes = await readKubernetes(source.deployment, source.instance, processes);
    return {
      plannedModel: source.plannedModel,
      ranks: [],
      frontDoor: null,
      kubernetes,
      roles: roleSummaries(kubernetes.pods, "pods"),
      exitCode: kubernetes.exitCode,
    };
  }
  const frontDoor = source.kind === "hosts" ? source.deployment.frontDoor : null;
  // Checked before any read: a bad --identity stops every model's reading before one starts.
  const ssh = source.kind === "hosts" ? sshOptions(options, source.deployment) : null;
  const [probed, door] = await Promise.all([
    probeRanks(source.ranks, source.plannedModel, interval),
    frontDoor && source.kind === "hosts"
      ? frontDoorStatus(
          { address: frontDoorAddresses(frontDoor)[0]!, port: frontDoor.port },
          source.plannedModel,
          process.env.VLLM_API_KEY || undefined,
          source.pickerPort,
        )
      : null,
  ]);
  const ranks = source.kind === "hosts" ? await withHostStates(probed, source.deployment, source.stack, source.instance, ssh!, processes) : probed;
  const rankExit = exitCodeOf(ranks.map((r) => r.state));
  // A front door that fails while every rank serves has failed; while ranks start, it waits with them.
  const exitCode = door?.problem ? Math.max(rankExit === STATUS_EXIT.ready ? STATUS_EXIT.failed : rankExit, STATUS_EXIT.starting) : rankExit;
  const roles = ranks.every((r) => r.labels.role !== undefined) ? roleSummaries(ranks.map((r) => ({ role: r.labels.role!, state: r.state }))) : [];
  return { plannedModel: source.plannedModel, ranks, frontDoor: door, kubernetes: null, roles, exitCode };
}

/** One reading of every model of the stack (one for a stack without models, or URLs): each model's report, and the worst exit status. */
export interface StackStatusReport {
  models: (StatusReport & { name: string | null })[];
  exitCode: number;
}

/**
 * Reads every model's ranks once, the models at once (N models take about one model's time, not
 * N times it), their SSH and kubectl processes within one bound: the report `status` prints, in the
 * models' order.
 */
export async function readStatus(options: StatusOptions, catalog: RecipeCatalog): Promise<StackStatusReport> {
  const interval = intervalSeconds(options);
  const processes = bound(PROCESSES_AT_ONCE);
  const models = await Promise.all(
    sourcesOf(options, catalog).map(async ({ name, source }) => ({ name, ...(await readModelStatus(source, options, interval, processes)) })),
  );
  return { models, exitCode: Math.max(...models.map((m) => m.exitCode)) };
}

/** One model's report: its pods, or its ranks and front door. */
function modelText(report: StatusReport): string {
  if (report.kubernetes) return podTable(report.kubernetes, Date.now() / 1000);
  return table(report.ranks) + (report.frontDoor ? frontDoorLines(report.frontDoor) : "");
}

/** A stack of one model reads as before models; several, each under `# model <name>` (as `plan` prints them), in JSON as `{models: [...]}`. */
function reportText(report: StackStatusReport, options: StatusOptions): string {
  const documents = report.models.map(({ exitCode: _, ...document }) => document);
  if (options.format === "json") {
    const [only] = documents;
    const document = documents.length === 1 && only!.name === null ? (({ name: _, ...rest }) => rest)(only!) : { models: documents };
    return `${JSON.stringify(document, null, options.watch ? undefined : 2).replace(JSON_RAW_CONTROLS, unicodeEscape)}\n`;
  }
  if (report.models.length === 1 && report.models[0]!.name === null) return modelText(report.models[0]!);
  return report.models.map((model) => `# model ${model.name}, served as ${model.plannedModel}\n${modelText(model)}`).join("\n");
}

function checkOptions(options: StatusOptions): void {
  refuseUnusedOptions("status", options);
  if (options.format !== undefined && options.format !== "text" && options.format !== "json") {
    throw new ConfigError("--format", `unknown format "${options.format}"; allowed: "text", "json"`);
  }
}

/**
 * `status`: one line per rank: its state (INSTALLING, DOWNLOADING, COMPILING, LOADING, READY,
 * DRAINING, FAILED, DOWN) and age, its model, running/waiting, KV-cache %, generation tokens/s over
 * `--interval` seconds, TTFT p50; then why each rank that does not serve does not, and one line per
 * role. Exit status 0 when every rank is READY, 1 while some are on their way, 3 when one failed or
 * is down (STATUS_EXIT).
 */
export async function statusCommand(options: StatusOptions, catalog: RecipeCatalog): Promise<{ stdout: string; exitCode: number }> {
  checkOptions(options);
  const report = await readStatus(options, catalog);
  return { stdout: reportText(report, options), exitCode: report.exitCode };
}

/** Moves the cursor home and clears the screen, so each reading replaces the last (as `watch` does). */
export const CLEAR_SCREEN = "\u001b[H\u001b[2J";

/**
 * `status --watch`: reads again every `--interval` seconds and writes each reading over the last
 * (in JSON, one document per line), until `signal` aborts; returns the last reading's exit status,
 * or 130 when interrupted before the first.
 */
export async function watchStatus(options: StatusOptions, catalog: RecipeCatalog, write: (text: string) => void, signal: AbortSignal): Promise<number> {
  checkOptions(options);
  const interval = intervalSeconds(options);
  const aborted = new Promise<null>((resolve) => (signal.aborted ? resolve(null) : signal.addEventListener("abort", () => resolve(null), { once: true })));
  let exitCode = 130;
  while (!signal.aborted) {
    const started = performance.now();
    const report = await Promise.race([readStatus(options, catalog), aborted]);
    if (report === null) break;
    exitCode = report.exitCode;
    const heading = `rbln-serving status, every ${interval}s: ${new Date().toISOString()} (exit ${exitCode}; Ctrl-C ends)\n\n`;
    write(options.format === "json" ? reportText(report, options) : `${CLEAR_SCREEN}${heading}${reportText(report, options)}`);
    const rest = interval * 1000 - (performance.now() - started);
    if (rest > 0) await Promise.race([new Promise((resolve) => setTimeout(resolve, rest)), aborted]);
  }
  return exitCode;
}
