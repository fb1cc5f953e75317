import { ConfigError } from "../errors";
import { ShellSyntaxError, splitShellWords } from "../shell";
import { jsonExtent, MAX_JSON_DEPTH, parseRecipe, recipeFileName, tooDeep } from "./catalog";
import { flagJsonValue, Strategy, type PackageInstall, type Recipe } from "./schema";

/**
 * Recipe import: a recipe page as published (a title line, the recipe's JSON object, then the
 * `pip install` commands, with or without line-number gutters) becomes a recipe file, the page's
 * JSON unchanged plus `installs` and `credentialedIndexUrls` derived from the pip commands.
 *
 * Which packages are conditional, the documented rule:
 * 1. A package the page's `installLine` names is part of every install (`when: null`).
 * 2. Any other package is needed only by a vLLM feature that imports it; FEATURE_PACKAGES says
 *    which (arctic-inference: vLLM's suffix speculative decoding imports `arctic_inference`).
 *    Its condition is the axis value whose delta, in the page's grids, turns that feature on
 *    (for suffix decoding: the delta that sets `--speculative-config` with `"method": "suffix"`).
 * 3. A package with no known feature, or whose feature no delta turns on, is installed always,
 *    with a warning naming it.
 */

/** A flag of `vllm serve` whose JSON value turns a feature on when `field` is `value`. */
interface FeatureSwitch {
  flag: string;
  field: string;
  value: string;
}

/** Packages vLLM imports only for one feature (vllm/config/speculative.py: method "suffix" needs arctic-inference). */
export const FEATURE_PACKAGES: Readonly<Record<string, FeatureSwitch>> = {
  "arctic-inference": { flag: "--speculative-config", field: "method", value: "suffix" },
};

/** Distribution name → module, where they differ by more than `-` for `_`. */
export const IMPORT_NAMES: Readonly<Record<string, string>> = { "rebel-compiler": "rebel" };

/** Package index hosts that need an account: pypi.rbln.ai takes RBLN Portal credentials. */
export const CREDENTIALED_INDEX_HOSTS: readonly string[] = ["pypi.rbln.ai"];

export interface ImportedRecipe {
  recipe: Recipe;
  /** `<org>--<name>.json`, lower case: see `recipeFileName`. */
  fileName: string;
  /** The file's text, as the shipped recipes are written. */
  text: string;
  warnings: string[];
}

const GUTTER_ONLY = /^\s*\d+\s*$/;
const GUTTER_PREFIX = /^\s*\d+(\s+|$)/;
const REQUIREMENT = /^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([A-Za-z0-9_,\s-]+)\])?==([A-Za-z0-9.+!_-]+)$/;

/** Reads a recipe page; refuses, in one line naming what is missing, a page it cannot make a recipe of. */
export function importRecipePage(page: string, source: string): ImportedRecipe {
  const lines = page.replace(/\r\n?/g, "\n").split("\n");
  const start = lines.findIndex((line) => /^\s*(\d+\s+)?\{/.test(line));
  if (start < 0) throw new ConfigError(source, "no JSON object: a recipe page is a title line, the recipe's JSON, then its pip install commands");
  const { json, rest } = readJsonObject(lines.slice(start), source);
  const commands = pipCommands(rest, source);
  if (commands.length === 0) throw new ConfigError(source, "no pinned packages: no `pip install` command follows the JSON");

  const installs: PackageInstall[] = [];
  const warnings: string[] = [];
  const baseLine = typeof json.installLine === "string" ? json.installLine : "";
  const base = new Set(baseRequirements(baseLine));
  for (const { words, urls } of commands) {
    for (const word of words) {
      const match = REQUIREMENT.exec(word);
      if (!match) throw new ConfigError(source, `pip install ${JSON.stringify(word)} is not pinned: each package needs ==VERSION`);
      const [name, extras, version] = [match[1]!, match[2], match[3]!];
      const when = base.has(normalize(name)) ? null : featureCondition(name, json, warnings);
      installs.push({
        package: name,
        version,
        extras: extras ? extras.split(",").map((e) => e.trim()) : [],
        extraIndexUrls: urls,
        when,
        import: IMPORT_NAMES[normalize(name)] ?? normalize(name).replace(/-/g, "_"),
      });
    }
  }
  const allUrls = [...new Set(installs.flatMap((i) => i.extraIndexUrls))];
  const credentialedIndexUrls = allUrls.filter((url) => CREDENTIALED_INDEX_HOSTS.includes(new URL(url).hostname));
  const output = { ...json, installs, credentialedIndexUrls };
  const text = `${JSON.stringify(output, null, 2)}\n`;
  const recipe = parseRecipe(text, source);
  return { recipe, fileName: recipeFileName(recipe.model), text, warnings };
}

/** The JSON object at the top of `lines` and the lines after it; a gutter inside the object is removed. */
function readJsonObject(lines: string[], source: string): { json: Record<string, unknown>; rest: string[] } {
  for (const strip of [false, true]) {
    const text = (strip ? lines.map((line) => line.replace(GUTTER_PREFIX, "")) : lines).join("\n");
    const { end, depth } = jsonExtent(text, text.indexOf("{"));
    if (depth > MAX_JSON_DEPTH) throw tooDeep(source, depth);
    if (end < 0) continue;
    try {
      const json = JSON.parse(text.slice(text.indexOf("{"), end + 1)) as unknown;
      if (json === null || typeof json !== "object" || Array.isArray(json)) continue;
      const consumed = text.slice(0, end + 1).split("\n").length;
      return { json: json as Record<string, unknown>, rest: lines.slice(consumed) };
    } catch {
      // Try again without a gutter.
    }
  }
  throw new ConfigError(source, "no JSON object: the text after the title line does not parse as one JSON object");
}

/** The `pip install` commands after the JSON: requirement words and the command's extra index URLs. */
function pipCommands(lines: string[], source: string): { words: string[]; urls: string[] }[] {
  const text = lines
    .filter((line) => !GUTTER_ONLY.test(line))
    .map((line) => line.replace(GUTTER_PREFIX, ""))
    .join("\n")
    .replace(/\\\n/g, " ");
  const commands: { words: string[]; urls: string[] }[] = [];
  for (const line of text.split("\n")) {
    const command = line.replace(/^\s*\$\s*/, "");
    if (!/^(pip3?|python3? -m pip) install\b/.test(command)) continue;
    let words: string[];
    try {
      words = splitShellWords(command);
    } catch (error) {
      if (error instanceof ShellSyntaxError) throw new ConfigError(source, `pip command is not plain shell words: ${error.message}`);
      throw error;
    }
    words = words.slice(words.indexOf("install") + 1);
    const urls: string[] = [];
    const requirements: string[] = [];
    for (let i = 0; i < words.length; i++) {
      const word = words[i]!;
      if (word === EXTRA_INDEX_URL) urls.push(indexUrl(words[++i], source));
      else if (word.startsWith(`${EXTRA_INDEX_URL}=`)) urls.push(indexUrl(word.slice(EXTRA_INDEX_URL.length + 1), source));
      else if (word.startsWith("-"))
        throw new ConfigError(source, `pip install option ${JSON.stringify(word)} is not supported; allowed: ${EXTRA_INDEX_URL} URL`);
      else requirements.push(word);
    }
    if (requirements.length === 0)
      throw new ConfigError(
        source,
        `pip install command ${JSON.stringify(command)} names no package; allowed: pip install [${EXTRA_INDEX_URL} URL ...] NAME==VERSION ...`,
      );
    commands.push({ words: requirements, urls });
  }
  return commands;
}

const EXTRA_INDEX_URL = "--extra-index-url";

/** The value of `--extra-index-url`: an http(s) URL without credentials (a recipe is shared text; the stack supplies them). */
function indexUrl(value: string | undefined, source: string): string {
  const allowed = `allowed: ${EXTRA_INDEX_URL} https://HOST/PATH, without user:password@ (the stack's pip.username and pipPassword secret supply them)`;
  if (value === undefined || value.startsWith("-")) throw new ConfigError(source, `pip install ${EXTRA_INDEX_URL} has no URL; ${allowed}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(source, `pip install ${EXTRA_INDEX_URL} ${JSON.stringify(value)} is not a URL; ${allowed}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new ConfigError(source, `pip install ${EXTRA_INDEX_URL} ${JSON.stringify(value)} is not an http(s) URL; ${allowed}`);
  if (url.username !== "" || url.password !== "")
    throw new ConfigError(source, `pip install ${EXTRA_INDEX_URL} ${JSON.stringify(value)} holds credentials; ${allowed}`);
  return value;
}

/** PyPI names compare case-insensitively, with runs of `-`, `_` and `.` alike (PEP 503). */
function normalize(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

/** The package names of the page's unpinned install line, e.g. `pip install rebel-compiler "vllm-rbln[kv_connectors]"`. */
function baseRequirements(installLine: string): string[] {
  let words: string[];
  try {
    words = splitShellWords(installLine);
  } catch {
    return [];
  }
  return words.slice(words.indexOf("install") + 1).flatMap((word) => (word.startsWith("-") ? [] : [normalize(word.replace(/[[<>=!~;].*$/, ""))]));
}

/** The axis value that turns on the feature needing `name` (rule 2), or null with a warning (rule 3). */
function featureCondition(name: string, json: Record<string, unknown>, warnings: string[]): Record<string, string> | null {
  const feature = FEATURE_PACKAGES[normalize(name)];
  if (!feature) {
    warnings.push(`${name}: not in the page's installLine and no known feature needs it; installed always`);
    return null;
  }
  // A page whose strategies do not parse is refused by the schema check that follows.
  const strategies = Strategy.array().safeParse(json.strategies).data ?? [];
  const keys = new Set<string>();
  for (const option of strategies.flatMap((strategy) => strategy.options)) {
    for (const [key, roles] of Object.entries(option.grid.deltas)) {
      for (const delta of Object.values(roles)) {
        const shellText = delta.add_args[feature.flag];
        if (shellText !== undefined && flagJsonValue(shellText)?.[feature.field] === feature.value) keys.add(key);
      }
    }
  }
  if (keys.size !== 1) {
    warnings.push(
      `${name}: ${keys.size === 0 ? "no axis value" : `several axis values (${[...keys].join(", ")})`} set ${feature.flag} with "${feature.field}": "${feature.value}"; installed always`,
    );
    return null;
  }
  const [axis, value] = [...keys][0]!.split("=") as [string, string];
  return { [axis]: value };
}
