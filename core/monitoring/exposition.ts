/** One sample of the Prometheus text exposition format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/**
 * A sample value or bucket bound: +Inf, -Inf, NaN or a decimal number; undefined for anything else,
 * including a number past a double's range (1e400), which Prometheus refuses too.
 */
function parseValue(text: string): number | undefined {
  switch (text) {
    case "+Inf":
      return Infinity;
    case "-Inf":
      return -Infinity;
    case "NaN":
      return NaN;
  }
  const value = Number(text);
  return text === "" || !Number.isFinite(value) ? undefined : value;
}

/** A line as error messages quote it: a rank's line may be megabytes long. */
const excerpt = (line: string) => (line.length > 80 ? `${line.slice(0, 80)}…` : line);

/** Reads a label set `{a="x",b="y"}` from the start of `rest`; returns the labels and what follows. */
function parseLabels(rest: string, line: string): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (rest[i] === " " || rest[i] === ",") i++;
    if (rest[i] === "}") return { labels, rest: rest.slice(i + 1) };
    const name = LABEL_NAME.exec(rest.slice(i))?.[0];
    if (!name) throw new Error(`bad label name in: ${excerpt(line)}`);
    i += name.length;
    while (rest[i] === " ") i++;
    if (rest[i] !== "=" || rest[i + 1] !== '"') throw new Error(`bad label ${name} in: ${excerpt(line)}`);
    i += 2;
    let value = "";
    for (; rest[i] !== '"'; i++) {
      if (i >= rest.length) throw new Error(`unterminated label value in: ${excerpt(line)}`);
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
 * comment lines are skipped, timestamps ignored, label values unescaped. With `keep`, samples of
 * other names are checked but not kept: a body of many small samples costs little memory then.
 */
export function parseExposition(text: string, keep?: ReadonlySet<string>): Sample[] {
  const samples: Sample[] = [];
  // Line by line rather than split("\n"), which would hold every line of the body at once.
  for (let start = 0, end = 0; start < text.length; start = end + 1) {
    end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end).trim();
    if (line === "" || line.startsWith("#")) continue;
    const name = NAME.exec(line)?.[0];
    if (!name) throw new Error(`bad metric name in: ${excerpt(line)}`);
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith("{")) ({ labels, rest } = parseLabels(rest, line));
    const value = parseValue(/^\S*/.exec(rest.trimStart())![0]);
    if (value === undefined) throw new Error(`bad sample value in: ${excerpt(line)}`);
    if (keep === undefined || keep.has(name)) samples.push({ name, labels, value });
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
 * as PromQL's histogram_quantile does; undefined without observations or with a bucket count that
 * is not a finite number of at least 0. A bound that is not a number throws.
 */
export function histogramQuantile(samples: readonly Sample[], histogram: string, q: number): number | undefined {
  const byBound = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${histogram}_bucket` || s.labels.le === undefined) continue;
    const bound = parseValue(s.labels.le);
    if (bound === undefined || Number.isNaN(bound)) throw new Error(`bad bucket bound le=${JSON.stringify(excerpt(s.labels.le))} in ${s.name}`);
    if (!Number.isFinite(s.value) || s.value < 0) return undefined;
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
