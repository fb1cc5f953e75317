import * as fs from "node:fs";
import * as path from "node:path";
import { ConfigError, formatPath, issueMessage, listValues } from "../errors";
import { packageRoot } from "../packageRoot";
import { ShellSyntaxError, splitShellWords } from "../shell";
import { Recipe } from "./schema";

/** The recipes shipped with the package. */
export const DEFAULT_RECIPE_DIR = path.join(packageRoot(), "recipes");
export const DEFAULT_MODEL = "MiniMaxAI/MiniMax-M2.7";

/** Parses and validates one recipe; a fault is refused with the file and the JSON path. */
export function parseRecipe(text: string, source: string): Recipe {
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
    const texts = SHELL_TEXT.has(key) && typeof child === "string" ? [[here, child] as const] : SHELL_MAPS.has(key) && child !== null && typeof child === "object" && !Array.isArray(child) ? Object.entries(child).map(([name, text]) => [[...here, name], text] as const) : [];
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

/** Every recipe in a folder, by model id. */
export class RecipeCatalog {
  private constructor(private readonly byModel: ReadonlyMap<string, Recipe>) {}

  static load(dir: string = DEFAULT_RECIPE_DIR): RecipeCatalog {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
    const sources = files.map((f) => path.join(dir, f));
    return RecipeCatalog.of(sources.map((source) => parseRecipe(fs.readFileSync(source, "utf8"), source)), sources);
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
