import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../core/errors";
import { DEFAULT_RECIPE_DIR, parseRecipe, RecipeCatalog } from "../core/recipe/catalog";
import { splitShellWords } from "../core/shell";
import { catalogWithFixtures } from "./helpers/recipes";

/** The recipe page the shipped recipe was taken from, kept in the repository so every checkout compares against it. */
const SEED_FIXTURE = path.resolve(__dirname, "fixtures/seed/000_a2ed4c79c4de85ae.txt");
/** The shared seed on the development machines, when there is one. */
const SHARED_SEED = ["../../shared/seed", "/work/shared/seed"].map((dir) => path.resolve(__dirname, dir, "000_a2ed4c79c4de85ae.txt")).find((file) => fs.existsSync(file));
const shippedText = fs.readFileSync(path.join(DEFAULT_RECIPE_DIR, "minimax-m2.7.json"), "utf8");

describe("the seed fixture", () => {
  it.skipIf(SHARED_SEED === undefined)("is an exact copy of the shared seed", () => {
    expect(fs.readFileSync(SEED_FIXTURE)).toEqual(fs.readFileSync(SHARED_SEED!));
  });
});

describe("the shipped recipe against the seed", () => {
  const seed = fs.readFileSync(SEED_FIXTURE, "utf8");
  const start = seed.indexOf("{");
  // The seed is a JSON object followed by the page's pip lines; find where the object ends.
  let end = seed.lastIndexOf("}");
  let seedJson: Record<string, unknown> | undefined;
  while (end > start && !seedJson) {
    try {
      seedJson = JSON.parse(seed.slice(start, end + 1));
    } catch {
      end = seed.lastIndexOf("}", end - 1);
    }
  }

  it("holds the seed's JSON unchanged, plus the installs", () => {
    const { installs, credentialedIndexUrls, ...rest } = JSON.parse(shippedText);
    expect(rest).toEqual(seedJson);
    expect(installs.length).toBeGreaterThan(0);
    expect(credentialedIndexUrls).toEqual(["https://pypi.rbln.ai/simple"]);
  });

  it("holds every pip install line of the seed as structured data", () => {
    const commands = seed
      .slice(end + 1)
      .split(/^\$ /m)
      .slice(1)
      .map((block) => splitShellWords(block.replace(/^\d+$/gm, "")));
    const fromSeed = commands.map((words) => {
      expect(words.slice(0, 2)).toEqual(["pip", "install"]);
      const urls = words.flatMap((w, i) => (words[i - 1] === "--extra-index-url" ? [w] : []));
      const requirement = words[words.length - 1]!;
      return { requirement, urls };
    });
    const { installs } = JSON.parse(shippedText) as { installs: { package: string; version: string; extras: string[]; extraIndexUrls: string[] }[] };
    expect(installs.map((i) => ({ requirement: `${i.package}${i.extras.length ? `[${i.extras.join(",")}]` : ""}==${i.version}`, urls: i.extraIndexUrls }))).toEqual(fromSeed);
  });
});

describe("recipe loading", () => {
  it("finds every recipe in the folder and selects by model id", () => {
    const catalog = catalogWithFixtures();
    expect(catalog.models.sort()).toEqual(["MiniMaxAI/MiniMax-M2.7", "example/tiny-moe"]);
    expect(catalog.get("example/tiny-moe").strategies[0]!.slug).toBe("two-role");
  });

  it("refuses an unknown model, listing the known ones", () => {
    expect(() => catalogWithFixtures().get("nope/x")).toThrow(/model: unknown model "nope\/x"; allowed: .*"MiniMaxAI\/MiniMax-M2.7"/);
  });

  const cases: [string, (r: any) => void, RegExp][] = [
    ["a role without a launcher", (r) => delete r.strategies[1].options[0].grid.base[0].launcher, /strategies\[1\]\.options\[0\]\.grid\.base\[0\]\.launcher/],
    ["a rank arg that is not a flag", (r) => (r.strategies[2].options[0].grid.base[1].ranks[2].args["port"] = "port 1"), /strategies\[2\]\.options\[0\]\.grid\.base\[1\]\.ranks\[2\]\.args\.port: invalid key: a flag like --name/],
    ["a delta for an axis value the grid lacks", (r) => (r.strategies[0].options[1].grid.deltas["lmcache=disk"] = {}), /strategies\[0\]\.options\[1\]\.grid\.deltas\.lmcache=disk: names an axis value/],
    ["a delta for a role without base", (r) => (r.strategies[0].options[0].grid.deltas["lmcache=cpu"].decode = r.strategies[0].options[0].grid.deltas["lmcache=cpu"].main), /deltas\.lmcache=cpu\.decode: names a role/],
    ["a mode axis without off", (r) => (r.strategies[0].options[0].grid.modes.lmcache = ["cpu"]), /grid\.modes\.lmcache: a mode axis needs an "off" value/],
    ["npus as a string", (r) => (r.strategies[1].options[0].npus = "4"), /strategies\[1\]\.options\[0\]\.npus/],
    ["an unexpected key in a grid", (r) => (r.strategies[0].options[0].grid.extra = 1), /strategies\[0\]\.options\[0\]\.grid/],
    ["a node count that does not match the roles", (r) => (r.strategies[2].nodes = "3"), /strategies\[2\]\.nodes: 3 nodes but 2 roles/],
  ];
  for (const [what, mutate, message] of cases) {
    it(`refuses ${what} with the JSON path`, () => {
      const recipe = JSON.parse(shippedText);
      mutate(recipe);
      const attempt = () => parseRecipe(JSON.stringify(recipe), "bad.json");
      expect(attempt).toThrow(ConfigError);
      expect(attempt).toThrow(message);
    });
  }

  it("names the file of a recipe whose shell text does not parse", () => {
    const recipe = JSON.parse(shippedText);
    recipe.strategies[0].options[0].grid.base[0].args["--max-num-seqs"] = "--max-num-seqs $SEQS";
    expect(() => parseRecipe(JSON.stringify(recipe), "recipes/bad.json")).toThrow(/^recipes\/bad\.json: strategies\[0\]\.options\[0\]\.grid\.base\[0\]\.args\.--max-num-seqs: /);
  });

  it("names both files when two recipes define one model", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "recipes-"));
    for (const name of ["a.json", "b.json"]) fs.writeFileSync(path.join(dir, name), shippedText);
    expect(() => RecipeCatalog.load(dir)).toThrow(`${path.join(dir, "b.json")}: two recipes define model "MiniMaxAI/MiniMax-M2.7": ${path.join(dir, "a.json")} and ${path.join(dir, "b.json")}`);
  });

  it("refuses text that is not JSON", () => {
    expect(() => parseRecipe("{", "broken.json")).toThrow(/^broken.json: not valid JSON/);
  });
});
