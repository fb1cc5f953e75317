import { existsSync } from "node:fs";
import { join } from "node:path";

/**
 * The shape of a research fixture (test/fixtures/vllm-rbln-0.12.0.json, test/fixtures/keda.json):
 * facts read from other projects' sources, each citing where it was read.
 *
 * - `pinned`: the versions this project uses, by component.
 * - `sources`: where facts were read. `git`: repository, path and a commit or a tag/branch;
 *   `web`: an https URL; `index`: a text of the code index whose commit the index did not name
 *   (its ids, the path it claims, a note); `registry`: a package registry asked with its client;
 *   `local`: a file of this repository.
 * - `facts`: each a claim, its value, a status and the ids of its sources.
 *   `confirmed`: read at the pinned version of its component (at least one source is at that
 *   version); `closest`: read at the nearest version that could be read; `inferred`: follows from
 *   what was read; `unconfirmed`: not found (value null, `readInstead` says what was read).
 */
export type Status = "confirmed" | "closest" | "inferred" | "unconfirmed";

export interface SourceVersion {
  component: string;
  version: string;
}

export interface Source {
  kind: "git" | "web" | "index" | "registry" | "local";
  repository?: string;
  ref?: string;
  commit?: string;
  path?: string;
  url?: string;
  indexIds?: string[];
  registry?: string;
  package?: string;
  command?: string;
  version?: SourceVersion;
  note?: string;
}

export interface Fact {
  claim: string;
  value: unknown;
  status: Status;
  component: string;
  sources: string[];
  note?: string;
  readInstead?: string;
}

export interface ResearchFixture {
  about: string;
  pinned: Record<string, string>;
  readOn?: string;
  sources: Record<string, Source>;
  facts: Record<string, Fact>;
}

const STATUSES: readonly Status[] = ["confirmed", "closest", "inferred", "unconfirmed"];
const REPOSITORY = /^[A-Za-z0-9][A-Za-z0-9_.-]*\/[A-Za-z0-9_.-]+$/;
const COMMIT = /^[0-9a-f]{7,40}$/;

const isText = (value: unknown): value is string => typeof value === "string" && value.trim() !== "";

function sourceProblems(id: string, source: Source, root: string | undefined): string[] {
  const at = `sources.${id}`;
  const problems: string[] = [];
  if (source.commit !== undefined && !COMMIT.test(source.commit)) problems.push(`${at}.commit: "${source.commit}" is not a hex commit id`);
  if (source.version !== undefined && (!isText(source.version.component) || !isText(source.version.version))) {
    problems.push(`${at}.version: needs component and version`);
  }
  switch (source.kind) {
    case "git":
      if (!isText(source.repository) || !REPOSITORY.test(source.repository)) problems.push(`${at}.repository: needs owner/name`);
      if (!isText(source.path)) problems.push(`${at}.path: missing`);
      if (!isText(source.commit) && !isText(source.ref)) problems.push(`${at}: needs a commit or a tag/branch (ref)`);
      break;
    case "web":
      if (!isText(source.url) || !source.url.startsWith("https://")) problems.push(`${at}.url: needs an https URL`);
      break;
    case "index":
      if (!Array.isArray(source.indexIds) || source.indexIds.length === 0 || !source.indexIds.every((i) => /^\d+$/.test(i))) {
        problems.push(`${at}.indexIds: needs the index's numeric text ids`);
      }
      if (!isText(source.repository)) problems.push(`${at}.repository: missing`);
      if (!isText(source.path)) problems.push(`${at}.path: missing`);
      if (!isText(source.note)) problems.push(`${at}.note: an index text without a commit must say what it holds`);
      break;
    case "registry":
      if (!isText(source.registry) || !isText(source.package) || !isText(source.command)) problems.push(`${at}: needs registry, package and command`);
      break;
    case "local":
      if (!isText(source.path)) problems.push(`${at}.path: missing`);
      else if (root !== undefined && !existsSync(join(root, source.path))) problems.push(`${at}.path: ${source.path} does not exist in this repository`);
      break;
    default:
      problems.push(`${at}.kind: "${String((source as { kind: unknown }).kind)}" is not one of git, web, index, registry, local`);
  }
  return problems;
}

/** The version a source was read at: its explicit version, else a git source's tag/branch. */
export function sourceVersion(source: Source): SourceVersion | { component: undefined; version: string } | undefined {
  if (source.version) return source.version;
  if (source.kind === "git" && isText(source.ref)) return { component: undefined, version: source.ref };
  return undefined;
}

/**
 * Every way `fixture` falls short of the shape above; empty when it is well-formed. `root` is the
 * repository root, to check that `local` sources exist.
 */
export function checkResearchFixture(fixture: unknown, root?: string): string[] {
  const problems: string[] = [];
  if (fixture === null || typeof fixture !== "object") return ["fixture: not an object"];
  const f = fixture as Partial<ResearchFixture>;
  if (!isText(f.about)) problems.push("about: missing");
  const pinned = f.pinned && typeof f.pinned === "object" ? f.pinned : undefined;
  if (!pinned || Object.keys(pinned).length === 0 || !Object.values(pinned).every(isText)) problems.push("pinned: needs component versions");
  const sources = f.sources && typeof f.sources === "object" ? f.sources : undefined;
  if (!sources || Object.keys(sources).length === 0) problems.push("sources: none");
  const facts = f.facts && typeof f.facts === "object" ? f.facts : undefined;
  if (!facts || Object.keys(facts).length === 0) problems.push("facts: none");
  for (const [id, source] of Object.entries(sources ?? {})) problems.push(...sourceProblems(id, source, root));

  const cited = new Set<string>();
  for (const [id, fact] of Object.entries(facts ?? {})) {
    const at = `facts.${id}`;
    if (!isText(fact.claim)) problems.push(`${at}.claim: missing`);
    if (!isText(fact.component)) problems.push(`${at}.component: missing`);
    if (!STATUSES.includes(fact.status)) problems.push(`${at}.status: "${String(fact.status)}" is not one of ${STATUSES.join(", ")}`);
    if (!("value" in fact)) problems.push(`${at}.value: missing (null when unconfirmed)`);
    if (!Array.isArray(fact.sources) || fact.sources.length === 0) {
      problems.push(`${at}.sources: a fact needs at least one source`);
      continue;
    }
    for (const ref of fact.sources) {
      cited.add(ref);
      if (!sources || !(ref in sources)) problems.push(`${at}.sources: "${ref}" is not in sources`);
    }
    if (fact.status !== "confirmed" && !isText(fact.note))
      problems.push(`${at}.note: a ${fact.status} fact must say what was read instead of the pinned version`);
    if (fact.status === "unconfirmed") {
      if (fact.value !== null) problems.push(`${at}.value: an unconfirmed fact has no value (null)`);
      if (!isText(fact.readInstead)) problems.push(`${at}.readInstead: missing`);
    } else if (fact.value === null || fact.value === undefined) {
      problems.push(`${at}.value: only an unconfirmed fact may be null`);
    }
    const pin = pinned?.[fact.component];
    if (fact.status === "confirmed" && pin !== undefined && sources) {
      const atPin = fact.sources.some((ref) => {
        const source = sources[ref];
        const version = source && sourceVersion(source);
        return version !== undefined && (version.component === undefined || version.component === fact.component) && version.version === pin;
      });
      if (!atPin) problems.push(`${at}: confirmed for ${fact.component} ${pin}, but no source is at ${pin}`);
    }
  }
  for (const id of Object.keys(sources ?? {})) if (!cited.has(id)) problems.push(`sources.${id}: cited by no fact`);
  return problems;
}
