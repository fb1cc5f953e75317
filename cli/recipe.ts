import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { ConfigError } from "../core/errors";
import { DEFAULT_RECIPE_DIR, MAX_RECIPE_BYTES, RecipeCatalog, readRecipeFile, recipeFiles } from "../core/recipe/catalog";
import { importRecipePage, type ImportedRecipe } from "../core/recipe/import";
import { makeUserFolder, readUserFile, writeUserFile, type UserPath } from "../core/userFiles";
import { commandLine } from "./commandLine";
import type { OtherCommand } from "./usage";
import type { Recipe } from "../core/recipe/schema";

/** The recipe commands, with their options, as --help lists them. */
export const RECIPE_COMMANDS: readonly OtherCommand[] = [
  {
    usage: "recipe import PAGE.txt [--out DIR]",
    summary: "write DIR/<org>--<name>.json from a recipe page",
    options: ["--out DIR  the folder the recipe file goes into (default recipes/)"],
  },
  {
    usage: "recipe list [--dir DIR]",
    summary: "every model: strategies, targets, NPUs, verified dates, pins",
    options: ["--dir DIR  the folder of recipe files to read (default recipes/)"],
  },
];

const USAGE = [
  "usage:",
  ...RECIPE_COMMANDS.flatMap((c) => [`  ${c.usage}`, `      ${c.summary}`, ...c.options.map((o) => `      ${o}`)]),
  "      -h, --help  this help",
].join("\n");

const PAGE: UserPath = { key: "PAGE", wanted: `a recipe page: a text file of at most ${MAX_RECIPE_BYTES / 2 ** 20} MiB` };
const OUT: UserPath = { key: "--out", wanted: "a folder for recipe files" };

function importCommand(page: string | undefined, out: string): string {
  if (page === undefined) throw new ConfigError("PAGE", "required: recipe import PAGE.txt [--out DIR]");
  const imported = importRecipePage(readUserFile(page, PAGE, MAX_RECIPE_BYTES), page);
  for (const warning of imported.warnings) process.stderr.write(`warning: ${warning}\n`);
  makeUserFolder(out, OUT);
  const { file, replaces } = recipeTarget(out, imported);
  if (replaces) process.stderr.write(`replacing ${file}: it holds the recipe of ${imported.recipe.model}\n`);
  writeUserFile(file, imported.text, OUT);
  return `${file}\n`;
}

/** The model a recipe file names, or undefined for a file that is not a recipe. */
function modelIn(file: string): string | undefined {
  try {
    const model: unknown = (JSON.parse(readRecipeFile(file)) as { model?: unknown } | null)?.model;
    return typeof model === "string" ? model : undefined;
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

/**
 * Where the import writes: the file of `dir` that already holds this model's recipe (the catalog
 * loads every `*.json`, so a second file of one model would break it), else the model's own file
 * name. A file of another model, or one that is not a recipe, is never replaced.
 */
function recipeTarget(dir: string, imported: ImportedRecipe): { file: string; replaces: boolean } {
  const model = imported.recipe.model;
  const own = recipeFiles(dir).find((file) => modelIn(file) === model);
  if (own !== undefined) return { file: own, replaces: true };
  const file = path.join(dir, imported.fileName);
  if (fs.existsSync(file)) {
    const other = modelIn(file);
    throw new ConfigError(
      OUT.key,
      `${JSON.stringify(file)} holds ${other === undefined ? "something that is not a recipe" : `the recipe of another model, "${other}"`}; not replaced; allowed: a folder where ${imported.fileName} is free or holds the recipe of "${model}"`,
    );
  }
  return { file, replaces: false };
}

function describeInstall(install: Recipe["installs"][number]): string {
  const extras = install.extras.length ? `[${install.extras.join(",")}]` : "";
  const when = install.when
    ? ` (${Object.entries(install.when)
        .map(([axis, value]) => `${axis}=${value}`)
        .join(", ")})`
    : "";
  return `${install.package}${extras}==${install.version}${when}`;
}

function listCommand(dir: string): string {
  const catalog = RecipeCatalog.load(dir);
  return catalog.models
    .sort()
    .map((model) => {
      const recipe = catalog.get(model);
      const rows = recipe.strategies.flatMap((s) => s.options.map((o) => [s.slug, o.target, String(o.npus), o.verified]));
      const header = ["strategy", "target", "NPUs", "verified"];
      const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      const table = [header, ...rows].map(
        (row) =>
          `  ${row
            .map((cell, i) => cell.padEnd(widths[i]!))
            .join("  ")
            .trimEnd()}`,
      );
      return [model, ...table, `  packages: ${recipe.installs.map(describeInstall).join(", ")}`].join("\n");
    })
    .join("\n\n")
    .concat("\n");
}

/** Refuses an option or word the recipe command does not read, rather than ignoring it. */
function refuseUnread(command: "import" | "list", parsed: { values: { out?: string; dir?: string }; positionals: string[] }): void {
  const [option, other, usage] =
    command === "import" ? (["--out", "dir", "recipe import PAGE.txt [--out DIR]"] as const) : (["--dir", "out", "recipe list [--dir DIR]"] as const);
  if (parsed.values[other] !== undefined) throw new ConfigError(`--${other}`, `not an option of recipe ${command}, which takes ${option}; allowed: ${usage}`);
  const extra = parsed.positionals[command === "import" ? 1 : 0];
  if (extra !== undefined)
    throw new ConfigError(
      command === "import" ? "PAGE" : "recipe list",
      `${JSON.stringify(extra)} is ${command === "import" ? "a second page" : "a word it does not read"}; allowed: ${usage}`,
    );
}

export function recipeMain(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // `recipe --help` asks for the help of both commands.
  if (command === "--help" || command === "-h") {
    process.stdout.write(`${USAGE}\n`);
    return Promise.resolve(0);
  }
  return commandLine(
    USAGE,
    command,
    () =>
      parseArgs({
        args: rest,
        options: { out: { type: "string" }, dir: { type: "string" }, help: { type: "boolean", short: "h" } },
        strict: true,
        allowPositionals: true,
      }),
    (parsed) => {
      if (command !== "import" && command !== "list") throw new ConfigError("command", `unknown recipe command "${command}"; allowed: "import", "list"`);
      refuseUnread(command, parsed);
      if (command === "import") process.stdout.write(importCommand(parsed.positionals[0], parsed.values.out ?? "recipes"));
      else process.stdout.write(listCommand(parsed.values.dir ?? DEFAULT_RECIPE_DIR));
      return 0;
    },
  );
}

if (require.main === module) void recipeMain(process.argv.slice(2)).then((code) => (process.exitCode = code));
