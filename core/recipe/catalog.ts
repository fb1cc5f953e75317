import * as fs from "node:fs";
import * as path from "node:path";
import { ConfigError, formatPath, issueMessage, listValues } from "../errors";
import { packageRoot } from "../packageRoot";
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
  return result.data;
}

/** Every recipe in a folder, by model id. */
export class RecipeCatalog {
  private constructor(private readonly byModel: ReadonlyMap<string, Recipe>) {}

  static load(dir: string = DEFAULT_RECIPE_DIR): RecipeCatalog {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
    return RecipeCatalog.of(files.map((f) => parseRecipe(fs.readFileSync(path.join(dir, f), "utf8"), path.join(dir, f))));
  }

  static of(recipes: readonly Recipe[]): RecipeCatalog {
    const byModel = new Map<string, Recipe>();
    for (const recipe of recipes) {
      if (byModel.has(recipe.model)) throw new ConfigError("recipes", `two recipes define model "${recipe.model}"`);
      byModel.set(recipe.model, recipe);
    }
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
