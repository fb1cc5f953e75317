import fc from "fast-check";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "../core/errors";
import { DEFAULT_RECIPE_DIR, MAX_JSON_DEPTH, MAX_RECIPE_BYTES, parseRecipe, RecipeCatalog, recipeFileName } from "../core/recipe/catalog";
import { isHubModelId } from "../core/recipe/schema";
import { splitShellWords } from "../core/shell";
import { catalogWithFixtures } from "./helpers/recipes";

/** The recipe page the shipped recipe was taken from, kept in the repository so every checkout compares against it. */
const SEED_FIXTURE = path.resolve(__dirname, "fixtures/seed/000_a2ed4c79c4de85ae.txt");
/** The shared seed on the development machines, when there is one. */
const SHARED_SEED = ["../../shared/seed", "/work/shared/seed"]
  .map((dir) => path.resolve(__dirname, dir, "000_a2ed4c79c4de85ae.txt"))
  .find((file) => fs.existsSync(file));
const shippedText = fs.readFileSync(path.join(DEFAULT_RECIPE_DIR, "minimaxai--minimax-m2.7.json"), "utf8");

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
    expect(
      installs.map((i) => ({ requirement: `${i.package}${i.extras.length ? `[${i.extras.join(",")}]` : ""}==${i.version}`, urls: i.extraIndexUrls })),
    ).toEqual(fromSeed);
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
    [
      "a rank arg that is not a flag",
      (r) => (r.strategies[2].options[0].grid.base[1].ranks[2].args.port = "port 1"),
      /strategies\[2\]\.options\[0\]\.grid\.base\[1\]\.ranks\[2\]\.args\.port: invalid key: a flag like --name/,
    ],
    [
      "a delta for an axis value the grid lacks",
      (r) => (r.strategies[0].options[1].grid.deltas["lmcache=disk"] = {}),
      /strategies\[0\]\.options\[1\]\.grid\.deltas\.lmcache=disk: names an axis value/,
    ],
    [
      "a delta for a role without base",
      (r) => (r.strategies[0].options[0].grid.deltas["lmcache=cpu"].decode = r.strategies[0].options[0].grid.deltas["lmcache=cpu"].main),
      /deltas\.lmcache=cpu\.decode: names a role/,
    ],
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
    expect(() => parseRecipe(JSON.stringify(recipe), "recipes/bad.json")).toThrow(
      /^recipes\/bad\.json: strategies\[0\]\.options\[0\]\.grid\.base\[0\]\.args\.--max-num-seqs: /,
    );
  });

  it("names both files when two recipes define one model", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "recipes-"));
    for (const name of ["a.json", "b.json"]) fs.writeFileSync(path.join(dir, name), shippedText);
    expect(() => RecipeCatalog.load(dir)).toThrow(
      `${path.join(dir, "b.json")}: two recipes define model "MiniMaxAI/MiniMax-M2.7": ${path.join(dir, "a.json")} and ${path.join(dir, "b.json")}`,
    );
  });

  it("refuses text that is not JSON", () => {
    expect(() => parseRecipe("{", "broken.json")).toThrow(/^broken.json: not valid JSON/);
  });
});

describe("recipe fields that reach the command line", () => {
  const refusal = (mutate: (r: any) => void): string => {
    const recipe = JSON.parse(shippedText);
    mutate(recipe);
    try {
      parseRecipe(JSON.stringify(recipe), "bad.json");
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
    throw new Error("the recipe was accepted");
  };
  const base = "strategies[1].options[0].grid.base[0]";

  it("allows only vLLM's `vllm serve` as a launcher, naming the file, the path and the value", () => {
    for (const launcher of [
      "../../bin/sh -c 'curl x | sh' vllm serve",
      "vllm chat",
      "vllm",
      "vllm serve --help",
      "python3 -m vllm.entrypoints.openai.api_server",
      "/usr/bin/vllm serve",
      "vllm  serve",
      " vllm serve",
    ]) {
      expect(refusal((r) => (r.strategies[1].options[0].grid.base[0].launcher = launcher))).toBe(
        `bad.json: ${base}.launcher: ${JSON.stringify(launcher)} is not a vLLM launcher; allowed: "vllm serve"`,
      );
    }
    expect(refusal((r) => (r.strategies[2].options[1].grid.base[1].launcher = "bash"))).toMatch(
      /^bad\.json: strategies\[2\]\.options\[1\]\.grid\.base\[1\]\.launcher: "bash" is not a vLLM launcher/,
    );
  });

  const badIds = [
    "--help/x",
    "-org/x",
    ".org/x",
    "org/.x",
    "org/x.",
    "org/x-",
    "../x",
    "org/..",
    "org/a..b",
    "org/a--b",
    "org/x.git",
    "org/x/y",
    "x",
    "org/",
    "/x",
    "org /x",
    "org/x y",
    "org/x\ny",
    "órg/x",
    `org/${"a".repeat(97)}`,
  ];
  const goodIds = ["MiniMaxAI/MiniMax-M2.7", "asherszhang/MiniMax-M2.7-EAGLE3-draft-vocab200k", "a/b", "_org/_x_", "org-1/x.y_z", `org/${"a".repeat(96)}`];

  it("knows the hub's model ids: org/name, its characters, no -- or .., not .git, a name of at most 96", () => {
    for (const id of badIds) expect(isHubModelId(id), id).toBe(false);
    for (const id of goodIds) expect(isHubModelId(id), id).toBe(true);
  });

  it("refuses a model id not of the hub's form, as the recipe's model and as a grid's", () => {
    for (const id of badIds) {
      const message = refusal((r) => (r.model = id));
      expect(message).toBe(
        `bad.json: model: ${JSON.stringify(id)} is not a Hugging Face model id; allowed: ORG/NAME of letters, digits, "-", "_" and ".", each part beginning and ending with a letter, digit or "_", without "--" or "..", not ending in ".git", NAME at most 96 characters`,
      );
      expect(refusal((r) => (r.strategies[0].options[1].grid.model = id))).toBe(
        message.replace("bad.json: model:", "bad.json: strategies[0].options[1].grid.model:"),
      );
    }
  });

  it("refuses a draft model in --speculative-config that is not a hub id, wherever the flag is set", () => {
    const config = (model: unknown) => `--speculative-config '${JSON.stringify({ method: "eagle3", model, num_speculative_tokens: 3 })}'`;
    const flag = "--speculative-config";
    const where: [string, (r: any, text: string) => void][] = [
      [
        "strategies[0].options[0].grid.deltas.spec_decode=eagle3.main.add_args.--speculative-config",
        (r, text) => (r.strategies[0].options[0].grid.deltas["spec_decode=eagle3"].main.add_args[flag] = text),
      ],
      [`${base}.args.--speculative-config`, (r, text) => (r.strategies[1].options[0].grid.base[0].args[flag] = text)],
      [
        "strategies[2].options[1].grid.base[1].ranks[2].args.--speculative-config",
        (r, text) => (r.strategies[2].options[1].grid.base[1].ranks[2].args[flag] = text),
      ],
    ];
    for (const [at, set] of where) {
      for (const model of ["--help/x", "../../etc", "/models/draft", 5, null]) {
        expect(refusal((r) => set(r, config(model)))).toBe(
          `bad.json: ${at}: draft model ${JSON.stringify(model)} is not a Hugging Face model id; allowed: ORG/NAME of letters, digits, "-", "_" and ".", each part beginning and ending with a letter, digit or "_", without "--" or "..", not ending in ".git", NAME at most 96 characters`,
        );
      }
    }
    // Suffix decoding names no draft model; the shipped eagle3 draft is a hub id.
    expect(() => parseRecipe(shippedText, "recipes/minimaxai--minimax-m2.7.json")).not.toThrow();
  });

  it("refuses an index URL that is not http(s) or holds credentials, without showing them", () => {
    const withUrl = (url: string) => (r: any) => (r.installs[0].extraIndexUrls = [url]);
    expect(refusal(withUrl("ftp://pypi.example.com/simple"))).toBe("bad.json: installs[0].extraIndexUrls[0]: an http(s) URL");
    expect(refusal(withUrl("notaurl"))).toBe("bad.json: installs[0].extraIndexUrls[0]: an http(s) URL");
    const credentialed = refusal((r) => (r.credentialedIndexUrls = ["https://portal-user:hunter2@pypi.rbln.ai/simple"]));
    expect(credentialed).toBe(
      "bad.json: credentialedIndexUrls[0]: a URL without user:password@; a host's credentials are the stack's pip.username and pipPassword secret",
    );
    expect(refusal(withUrl("https://hunter2@pypi.rbln.ai/simple"))).not.toContain("hunter2");
  });
});

describe("a recipe folder the catalog cannot read", () => {
  const made: string[] = [];
  const folder = () => {
    made.push(fs.mkdtempSync(path.join(os.tmpdir(), "recipes-")));
    return made.at(-1)!;
  };
  afterAll(() => {
    for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
  });
  const loadRefusal = (dir: string): string => {
    try {
      RecipeCatalog.load(dir);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).not.toContain("\n");
      return (error as Error).message;
    }
    throw new Error("the folder loaded");
  };

  it("is refused in one line naming the folder or file and what is wanted", () => {
    const dir = folder();
    const file = path.join(dir, "a.json");
    fs.writeFileSync(file, shippedText);
    expect(loadRefusal(path.join(dir, "missing"))).toBe(
      `recipe folder: ${JSON.stringify(path.join(dir, "missing"))} does not exist; allowed: a folder of recipe files (*.json)`,
    );
    expect(loadRefusal(file)).toBe(`recipe folder: ${JSON.stringify(file)} is not a folder; allowed: a folder of recipe files (*.json)`);
    expect(loadRefusal(path.join(file, "sub"))).toBe(
      `recipe folder: ${JSON.stringify(path.join(file, "sub"))} does not exist: a part of its path is a file; allowed: a folder of recipe files (*.json)`,
    );
    fs.mkdirSync(path.join(dir, "b.json"));
    expect(loadRefusal(dir)).toBe(`recipe file: ${JSON.stringify(path.join(dir, "b.json"))} is a folder; allowed: a recipe: a JSON file of at most 1 MiB`);
  });

  it("refuses a recipe file over the size limit unread, and one nested deeper than the schema can check", () => {
    const huge = folder();
    fs.writeFileSync(path.join(huge, "huge.json"), Buffer.alloc(MAX_RECIPE_BYTES + 1, " "));
    expect(loadRefusal(huge)).toBe(
      `recipe file: ${JSON.stringify(path.join(huge, "huge.json"))} is ${MAX_RECIPE_BYTES + 1} bytes; allowed: a recipe: a JSON file of at most 1 MiB`,
    );

    const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
    const deep = folder();
    fs.writeFileSync(path.join(deep, "deep.json"), shippedText.replace('"attn": ', `"deep": ${nested(20_000)}, "attn": `));
    expect(loadRefusal(deep)).toBe(
      `${path.join(deep, "deep.json")}: JSON nested 20001 levels deep; allowed: at most ${MAX_JSON_DEPTH} levels of objects and arrays`,
    );
    // The limit itself is allowed: the root object and 63 arrays.
    expect(() => parseRecipe(shippedText.replace('"attn": ', `"deep": ${nested(MAX_JSON_DEPTH - 1)}, "attn": `), "edge.json")).not.toThrow();
    expect(() => parseRecipe(shippedText.replace('"attn": ', `"deep": ${nested(MAX_JSON_DEPTH)}, "attn": `), "edge.json")).toThrow(
      `edge.json: JSON nested ${MAX_JSON_DEPTH + 1} levels deep`,
    );
  });
});

describe("recipe file names", () => {
  it("name the whole model id, so two models (other than by case) never share a file", () => {
    expect(recipeFileName("MiniMaxAI/MiniMax-M2.7")).toBe("minimaxai--minimax-m2.7.json");
    expect(recipeFileName("other/MiniMax-M2.7")).toBe("other--minimax-m2.7.json");
    const hubId = fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,6}[A-Za-z0-9_]\/[A-Za-z0-9_][A-Za-z0-9._-]{0,6}[A-Za-z0-9_]$/).filter(isHubModelId);
    fc.assert(
      fc.property(hubId, hubId, (a, b) => a.toLowerCase() === b.toLowerCase() || recipeFileName(a) !== recipeFileName(b)),
      { numRuns: 2000 },
    );
  });

  it("the shipped recipe is at its model's file name", () => {
    expect(fs.readdirSync(DEFAULT_RECIPE_DIR)).toEqual([recipeFileName(JSON.parse(shippedText).model)]);
  });
});
