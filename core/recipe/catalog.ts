import * as path from "node:path";
import { ConfigError, formatPath, issueMessage, listValues } from "../errors";
import { packageRoot } from "../packageRoot";
import { ShellSyntaxError, splitShellWords } from "../shell";
import { listUserFolder, readUserFile } from "../userFiles";
import { Recipe } from "./schema";

/** The recipes shipped with the package. */
export const DEFAULT_RECIPE_DIR = path.join(packageRoot(), "recipes");
export const DEFAULT_MODEL = "MiniMaxAI/MiniMax-M2.7";

/**
 * A recipe file, or a recipe page, larger than this is refused unread: the shipped recipe is 62 KiB,
 * and a page of 1 MiB built to be slow (nested at the allowed depth) takes seconds to import.
 */
export const MAX_RECIPE_BYTES = 2 ** 20;

/**
 * Objects and arrays nested deeper than this are refused before parsing: the shipped recipe nests
 * 11 levels, and the schema check, the shell check and JSON.stringify recurse once per level.
 */
export const MAX_JSON_DEPTH = 64;

const BACKSLASH = "\\".charCodeAt(0);
const QUOTE = '"'.charCodeAt(0);
const OPEN_BRACE = "{".charCodeAt(0);
const OPEN_BRACKET = "[".charCodeAt(0);
const CLOSE_BRACE = "}".charCodeAt(0);
const CLOSE_BRACKET = "]".charCodeAt(0);

/** Where the JSON object or array opened at `open` closes (-1: it does not) and how deep it nests; brackets inside strings do not count. */
export function jsonExtent(text: string, open: number): { end: number; depth: number } {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  // Character codes, not one-character strings: the scan runs over whole pages.
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) deepest = Math.max(deepest, ++depth);
    else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) return { end: i, depth: deepest };
  }
  return { end: -1, depth: deepest };
}

/** The refusal of JSON nested deeper than MAX_JSON_DEPTH, naming the file. */
export function tooDeep(source: string, depth: number): ConfigError {
  return new ConfigError(source, `JSON nested ${depth} levels deep; allowed: at most ${MAX_JSON_DEPTH} levels of objects and arrays`);
}

/**
 * The file a model's recipe is written to: `<org>--<name>.json`, lower case. The whole id is in
 * the name, and the hub allows no `--` in an id, so two models cannot share a file name.
 */
export function recipeFileName(model: string): string {
  return `${model.toLowerCase().replace("/", "--")}.json`;
}

/** Parses and validates one recipe; a fault is refused with the file and the JSON path. */
export function parseRecipe(text: string, source: string): Recipe {
  const { depth } = jsonExtent(text, Math.max(0, text.search(/[{[]/)));
  if (depth > MAX_JSON_DEPTH) throw tooDeep(source, depth);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(source, `not valid JSON (${(error as Error).message})`);
  }
  const result = Recipe.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new ConfigError(source, `${formatPath(issue.path) || "(root)"}: ${issueMessage(issue)}`);
  }
  const shellFault = firstShellFault(result.data);
  if (shellFault) throw new ConfigError(source, shellFault);
  return result.data;
}

/** Keys whose string (`launcher`) or map values (`args`, `envs`, ...) are shell text. */
const SHELL_TEXT = new Set(["launcher"]);
const SHELL_MAPS = new Set(["args", "envs", "add_args", "add_envs"]);

/** Shell texts already split once: every load (one per program run, one per library call) reads the same recipes. */
const wellFormedShellTexts = new Set<string>();

/** The first shell text of a recipe that does not split into words, as `path: reason`; checked once at load, so the file is named. */
function firstShellFault(value: unknown, at: PropertyKey[] = []): string | undefined {
  if (value === null || typeof value !== "object") return undefined;
  for (const [key, child] of Object.entries(value)) {
    const here = [...at, Array.isArray(value) ? Number(key) : key];
    const texts =
      SHELL_TEXT.has(key) && typeof child === "string"
        ? [[here, child] as const]
        : SHELL_MAPS.has(key) && child !== null && typeof child === "object" && !Array.isArray(child)
          ? Object.entries(child).map(([name, text]) => [[...here, name], text] as const)
          : [];
    for (const [where, text] of texts) {
      if (typeof text !== "string" || wellFormedShellTexts.has(text)) continue;
      try {
        splitShellWords(text);
        wellFormedShellTexts.add(text);
      } catch (error) {
        if (error instanceof ShellSyntaxError) return `${formatPath(where)}: ${error.message}`;
        throw error;
      }
    }
    if (texts.length === 0) {
      const fault = firstShellFault(child, here);
      if (fault) return fault;
    }
  }
  return undefined;
}

/** The recipe files of a folder: every `*.json`, whatever its name. */
export function recipeFiles(dir: string): string[] {
  const names = listUserFolder(dir, { key: "recipe folder", wanted: "a folder of recipe files (*.json)" });
  return names
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => path.join(dir, name));
}

export function readRecipeFile(file: string): string {
  return readUserFile(file, { key: "recipe file", wanted: `a recipe: a JSON file of at most ${MAX_RECIPE_BYTES / 2 ** 20} MiB` }, MAX_RECIPE_BYTES);
}

/** Every recipe in a folder, by model id. */
export class RecipeCatalog {
  private constructor(private readonly byModel: ReadonlyMap<string, Recipe>) {}

  static load(dir: string = DEFAULT_RECIPE_DIR): RecipeCatalog {
    const sources = recipeFiles(dir);
    return RecipeCatalog.of(
      sources.map((source) => parseRecipe(readRecipeFile(source), source)),
      sources,
    );
  }

  /** `sources[i]` names where `recipes[i]` came from, for the error when two define one model. */
  static of(recipes: readonly Recipe[], sources: readonly string[] = []): RecipeCatalog {
    const byModel = new Map<string, Recipe>();
    const sourceOf = new Map<string, string>();
    recipes.forEach((recipe, i) => {
      const source = sources[i] ?? `recipe ${i}`;
      if (byModel.has(recipe.model)) throw new ConfigError(source, `two recipes define model "${recipe.model}": ${sourceOf.get(recipe.model)} and ${source}`);
      byModel.set(recipe.model, recipe);
      sourceOf.set(recipe.model, source);
    });
    return new RecipeCatalog(byModel);
  }

  get models(): string[] {
    return [...this.byModel.keys()];
  }

  get(model: string): Recipe {
    const recipe = this.byModel.get(model);
    if (!recipe) throw new ConfigError("model", `unknown model "${model}"; allowed: ${listValues(this.models)}`);
    return recipe;
  }
}
