import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
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
