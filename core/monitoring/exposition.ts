/** One sample of the Prometheus text exposition format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function parseValue(text: string, line: string): number {
  switch (text) {
    case "+Inf":
      return Infinity;
    case "-Inf":
      return -Infinity;
    case "NaN":
      return NaN;
  }
  const value = Number(text);
  if (text === "" || Number.isNaN(value)) throw new Error(`bad sample value in: ${line}`);
  return value;
}

/** Reads a label set `{a="x",b="y"}` from the start of `rest`; returns the labels and what follows. */
function parseLabels(rest: string, line: string): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (rest[i] === " " || rest[i] === ",") i++;
    if (rest[i] === "}") return { labels, rest: rest.slice(i + 1) };
    const name = LABEL_NAME.exec(rest.slice(i))?.[0];
    if (!name) throw new Error(`bad label name in: ${line}`);
    i += name.length;
    while (rest[i] === " ") i++;
    if (rest[i] !== "=" || rest[i + 1] !== '"') throw new Error(`bad label ${name} in: ${line}`);
    i += 2;
    let value = "";
    for (; rest[i] !== '"'; i++) {
      if (i >= rest.length) throw new Error(`unterminated label value in: ${line}`);
      if (rest[i] === "\\") {
        const escaped = rest[++i];
        value += escaped === "n" ? "\n" : escaped;
      } else value += rest[i];
    }
    labels[name] = value;
    i++;
  }
}

/**
 * Parses the Prometheus text format (version 0.0.4, what vLLM's prometheus_client serves):
 * comment lines are skipped, timestamps ignored, label values unescaped.
 */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const name = NAME.exec(line)?.[0];
    if (!name) throw new Error(`bad metric name in: ${line}`);
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith("{")) ({ labels, rest } = parseLabels(rest, line));
    const [valueText = ""] = rest.trim().split(/\s+/);
    samples.push({ name, labels, value: parseValue(valueText, line) });
  }
  return samples;
}

/** The sum of a family's samples (over engines and other labels); undefined when there is none. */
export function sumOf(samples: readonly Sample[], name: string): number | undefined {
  const matching = samples.filter((s) => s.name === name);
  return matching.length === 0 ? undefined : matching.reduce((total, s) => total + s.value, 0);
}

/** The mean of a family's samples, e.g. KV-cache usage over a rank's engines. */
export function meanOf(samples: readonly Sample[], name: string): number | undefined {
  const matching = samples.filter((s) => s.name === name);
  return matching.length === 0 ? undefined : matching.reduce((total, s) => total + s.value, 0) / matching.length;
}

/**
 * A quantile of a histogram summed over its label sets, interpolated linearly inside the bucket
 * as PromQL's histogram_quantile does; undefined without observations.
 */
export function histogramQuantile(samples: readonly Sample[], histogram: string, q: number): number | undefined {
  const byBound = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${histogram}_bucket` || s.labels["le"] === undefined) continue;
    const bound = parseValue(s.labels["le"], s.name);
    byBound.set(bound, (byBound.get(bound) ?? 0) + s.value);
  }
  const buckets = [...byBound.entries()].sort(([a], [b]) => a - b);
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return undefined;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [bound, count] of buckets) {
    if (count >= rank) {
      // Past the last finite bound there is nothing to interpolate: PromQL answers that bound.
      if (bound === Infinity) return lowerBound;
      return lowerBound + ((bound - lowerBound) * (rank - lowerCount)) / (count - lowerCount);
    }
    lowerBound = bound;
    lowerCount = count;
  }
  return lowerBound;
}
