import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { importRecipePage } from "../../core/recipe/import";
import { DEFAULT_RECIPE_DIR, RecipeCatalog } from "../../core/recipe/catalog";

export const FIXTURE_RECIPE_DIR = path.resolve(__dirname, "../fixtures/recipes");

/** The shipped recipes plus the synthetic test recipe, loaded from one folder like a user would. */
export function catalogWithFixtures(): RecipeCatalog {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "recipes-"));
  for (const source of [DEFAULT_RECIPE_DIR, FIXTURE_RECIPE_DIR]) {
    for (const file of fs.readdirSync(source)) fs.copyFileSync(path.join(source, file), path.join(dir, file));
  }
  return RecipeCatalog.load(dir);
}

export const shippedCatalog = RecipeCatalog.load();
export const minimax = shippedCatalog.get("MiniMaxAI/MiniMax-M2.7");

/**
 * The shipped recipes plus the second model's, imported from its page (test/fixtures/second-model-page.txt)
 * as `recipe import` imports it (the same importRecipePage, the same text written): the catalog of
 * a stack of two models.
 */
export function catalogWithSecondModel(): RecipeCatalog {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "recipes-"));
  for (const file of fs.readdirSync(DEFAULT_RECIPE_DIR)) fs.copyFileSync(path.join(DEFAULT_RECIPE_DIR, file), path.join(dir, file));
  const page = path.resolve(__dirname, "../fixtures/second-model-page.txt");
  fs.writeFileSync(path.join(dir, "example--tiny-chat-1b.json"), importRecipePage(fs.readFileSync(page, "utf8"), page).text);
  return RecipeCatalog.load(dir);
}

/** The second model's id (test/fixtures/second-model-page.txt). */
export const SECOND_MODEL = "example/Tiny-Chat-1B";
