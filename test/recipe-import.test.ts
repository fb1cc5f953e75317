import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { runCommand } from "../cli/commands";
import { recipeMain } from "../cli/recipe";
import { ConfigError, maskUrlCredentials } from "../core/errors";
import { DEFAULT_RECIPE_DIR, MAX_JSON_DEPTH, MAX_RECIPE_BYTES, RecipeCatalog } from "../core/recipe/catalog";
import { importRecipePage } from "../core/recipe/import";

const fixture = (name: string) => fs.readFileSync(path.resolve(__dirname, "fixtures", name), "utf8");
const SEED_PAGE = fixture("seed-page.txt");
const SECOND_PAGE = fixture("second-model-page.txt");
const SHIPPED = fs.readFileSync(path.join(DEFAULT_RECIPE_DIR, "minimaxai--minimax-m2.7.json"), "utf8");
const TSX = path.resolve(__dirname, "../node_modules/.bin/tsx");
const RECIPE_CLI = path.resolve(__dirname, "../cli/recipe.ts");

function refusal(page: string): string {
  try {
    importRecipePage(page, "page.txt");
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("the page was imported");
}

/** The JSON part of the second model's page and a pip command of our own after it. */
function withPipLine(pipLine: string): string {
  return `${SECOND_PAGE.slice(0, SECOND_PAGE.indexOf("\n\n  1  $ pip"))}\n\n${pipLine}\n`;
}

/** `recipe ...` in this process: its exit status and what it wrote. A stack trace would reject. */
async function recipe(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const written = { stdout: "", stderr: "" };
  const capture = (stream: "stdout" | "stderr") =>
    vi.spyOn(process[stream], "write").mockImplementation((chunk: string | Uint8Array) => {
      written[stream] += String(chunk);
      return true;
    });
  const spies = [capture("stdout"), capture("stderr")];
  try {
    return { status: await recipeMain(args), ...written };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

describe("recipe import", () => {
  it("reproduces the shipped recipe from the seed page, byte for byte", () => {
    const imported = importRecipePage(SEED_PAGE, "seed-page.txt");
    expect(imported.fileName).toBe("minimaxai--minimax-m2.7.json");
    expect(imported.text).toBe(SHIPPED);
    expect(imported.warnings).toEqual([]);
  });

  it("reads the page without its line-number gutter, and with the gutter in front of each line", () => {
    const bare = SEED_PAGE.split("\n")
      .filter((line) => !/^\d+$/.test(line))
      .join("\n");
    expect(importRecipePage(bare, "bare.txt").text).toBe(SHIPPED);
    let n = 0;
    const prefixed = bare
      .split("\n")
      .map((line) => (line.startsWith("$") || line.startsWith("  ") ? `${++n} ${line}` : line))
      .join("\n");
    expect(prefixed).not.toBe(bare);
    expect(importRecipePage(prefixed, "prefixed.txt").text).toBe(SHIPPED);
  });

  it("conditions a package on the axis value whose delta turns on the feature that imports it", () => {
    const { recipe } = importRecipePage(SEED_PAGE, "seed-page.txt");
    expect(recipe.installs.map((i) => [i.package, i.when])).toEqual([
      ["rebel-compiler", null],
      ["vllm-rbln", null],
      ["arctic-inference", { spec_decode: "suffix" }],
    ]);
    expect(recipe.credentialedIndexUrls).toEqual(["https://pypi.rbln.ai/simple"]);
  });

  it("warns and installs always a package whose condition it cannot find", () => {
    const noSuffixDelta = SECOND_PAGE.replace('\\"method\\": \\"suffix\\"', '\\"method\\": \\"ngram\\"');
    expect(noSuffixDelta).not.toBe(SECOND_PAGE);
    const unknown = `${SECOND_PAGE}\n$ pip install some-plugin==2.0\n`;
    const a = importRecipePage(noSuffixDelta, "a.txt");
    expect(a.recipe.installs.find((i) => i.package === "arctic-inference")?.when).toBeNull();
    expect(a.warnings).toEqual(['arctic-inference: no axis value set --speculative-config with "method": "suffix"; installed always']);
    const b = importRecipePage(unknown, "b.txt");
    expect(b.recipe.installs.find((i) => i.package === "some-plugin")).toMatchObject({ when: null, import: "some_plugin" });
    expect(b.warnings).toEqual(["some-plugin: not in the page's installLine and no known feature needs it; installed always"]);
  });

  it("refuses, in one line naming what is missing, a page without JSON, without pins, or with a JSON the schema rejects", () => {
    const jsonEnd = SEED_PAGE.indexOf("\n\n1\n");
    const cases: [string, RegExp][] = [
      ["MiniMax-M2.7\n\n$ pip install vllm-rbln==0.12.0\n", /^page\.txt: no JSON object/],
      [SEED_PAGE.slice(0, jsonEnd), /^page\.txt: no pinned packages: no `pip install` command follows the JSON$/],
      [SEED_PAGE.replace("rebel-compiler==0.12.0", "rebel-compiler"), /^page\.txt: pip install "rebel-compiler" is not pinned: each package needs ==VERSION$/],
      [SEED_PAGE.replace('"verified": "2026-10-07"', '"verified": "last week"'), /^page\.txt: strategies\[0\]\.options\[0\]\.verified: /],
      [SEED_PAGE.replace('"installLine": ', '"installLine": 5, "unused": '), /^page\.txt: installLine: Invalid input: expected string, received number$/],
    ];
    for (const [page, expected] of cases) {
      const message = refusal(page);
      expect(message).toMatch(expected);
      expect(message).not.toContain("\n");
    }
  });

  it("imports a second model's page with one command, and it plans at once", () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "recipes-"));
    const written = execFileSync(TSX, [RECIPE_CLI, "import", path.resolve(__dirname, "fixtures/second-model-page.txt"), "--out", out], { encoding: "utf8" });
    expect(written).toBe(`${path.join(out, "example--tiny-chat-1b.json")}\n`);
    const catalog = RecipeCatalog.load(out);
    const plan = JSON.parse(
      runCommand("plan", { model: "example/Tiny-Chat-1B", strategy: "two-role", target: "Latency", set: ["spec_decode=suffix"], format: "json" }, catalog),
    );
    expect(plan.roles.map((r: { role: string }) => r.role)).toEqual(["front", "back"]);
    expect(plan.roles[0].ranks[0].argv).toContain("--speculative-config");
    expect(JSON.stringify(plan.packages)).toContain("arctic-inference");

    const list = spawnSync(TSX, [RECIPE_CLI, "list", "--dir", out], { encoding: "utf8" });
    expect(list.status).toBe(0);
    expect(list.stdout).toBe(
      [
        "example/Tiny-Chat-1B",
        "  strategy  target   NPUs  verified",
        "  two-role  Latency  2     2026-01-01",
        "  packages: vllm-rbln==0.12.0, arctic-inference==0.1.1 (spec_decode=suffix)",
        "",
      ].join("\n"),
    );
    fs.rmSync(out, { recursive: true });
  });

  it("refuses from the command line with status 2 and one line on stderr", () => {
    const result = spawnSync(TSX, [RECIPE_CLI, "import", path.resolve(__dirname, "../README.md"), "--out", os.tmpdir()], { encoding: "utf8" });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^error: .*README\.md: no JSON object: .*\n$/);
  });

  it("refuses an --extra-index-url that is missing, not an http(s) URL, or holds credentials, in one line without them", () => {
    const allowed = "allowed: --extra-index-url https://HOST/PATH, without user:password@ (the stack's pip.username and pipPassword secret supply them)";
    const cases: [string, string][] = [
      ["$ pip install vllm-rbln==0.12.0 --extra-index-url", `pip install --extra-index-url has no URL; ${allowed}`],
      [
        "$ pip install --extra-index-url --extra-index-url https://pypi.rbln.ai/simple vllm-rbln==0.12.0",
        `pip install --extra-index-url has no URL; ${allowed}`,
      ],
      ["$ pip install --extra-index-url vllm-rbln==0.12.0", `pip install --extra-index-url "vllm-rbln==0.12.0" is not a URL; ${allowed}`],
      ["$ pip install --extra-index-url=notaurl vllm-rbln==0.12.0", `pip install --extra-index-url "notaurl" is not a URL; ${allowed}`],
      ["$ pip install --extra-index-url= vllm-rbln==0.12.0", `pip install --extra-index-url "" is not a URL; ${allowed}`],
      [
        "$ pip install --extra-index-url ftp://mirror.example.com/simple vllm-rbln==0.12.0",
        `pip install --extra-index-url "ftp://mirror.example.com/simple" is not an http(s) URL; ${allowed}`,
      ],
      [
        "$ pip install --extra-index-url file:///srv/wheels vllm-rbln==0.12.0",
        `pip install --extra-index-url "file:///srv/wheels" is not an http(s) URL; ${allowed}`,
      ],
      [
        "$ pip install --extra-index-url https://portal-user:hunter2@pypi.rbln.ai/simple vllm-rbln==0.12.0",
        `pip install --extra-index-url "https://***@pypi.rbln.ai/simple" holds credentials; ${allowed}`,
      ],
      [
        "$ pip install --extra-index-url=https://hunter2@pypi.rbln.ai/simple vllm-rbln==0.12.0",
        `pip install --extra-index-url "https://***@pypi.rbln.ai/simple" holds credentials; ${allowed}`,
      ],
      [
        "$ pip install --extra-index-url https://portal-user:hunter2@[pypi/simple vllm-rbln==0.12.0",
        `pip install --extra-index-url "https://***@[pypi/simple" is not a URL; ${allowed}`,
      ],
      // Other pip options, and a package that is no pin, are refused too, the value masked.
      [
        "$ pip install --index-url=https://portal-user:hunter2@pypi.rbln.ai/simple vllm-rbln==0.12.0",
        'pip install option "--index-url=https://***@pypi.rbln.ai/simple" is not supported; allowed: --extra-index-url URL',
      ],
      [
        "$ pip install -i https://portal-user:hunter2@pypi.rbln.ai/simple vllm-rbln==0.12.0",
        'pip install option "-i" is not supported; allowed: --extra-index-url URL',
      ],
      ["$ pip install --no-deps vllm-rbln==0.12.0", 'pip install option "--no-deps" is not supported; allowed: --extra-index-url URL'],
      ["$ pip install -r requirements.txt", 'pip install option "-r" is not supported; allowed: --extra-index-url URL'],
      [
        "$ pip install vllm-rbln@https://portal-user:hunter2@pypi.rbln.ai/vllm_rbln.whl",
        'pip install "vllm-rbln@https://***@pypi.rbln.ai/vllm_rbln.whl" is not pinned: each package needs ==VERSION',
      ],
      [
        "$ pip install $(curl https://portal-user:hunter2@x/y) vllm-rbln==0.12.0",
        'pip command is not plain shell words: "pip install $(curl https://***@x/y) vllm-rbln==0.12.0" expands $; quote it',
      ],
      [
        "$ pip install --extra-index-url https://pypi.rbln.ai/simple",
        'pip install command "pip install --extra-index-url https://pypi.rbln.ai/simple" names no package; allowed: pip install [--extra-index-url URL ...] NAME==VERSION ...',
      ],
      ["$ pip install", 'pip install command "pip install" names no package; allowed: pip install [--extra-index-url URL ...] NAME==VERSION ...'],
    ];
    for (const [pipLine, expected] of cases) {
      const message = refusal(withPipLine(pipLine));
      expect(message, pipLine).toBe(`page.txt: ${expected}`);
      expect(message).not.toContain("hunter2");
    }
    expect(
      importRecipePage(withPipLine("$ pip install --extra-index-url=http://mirror.example.com:8080/simple vllm-rbln==0.12.0"), "ok.txt").recipe.installs[0]!
        .extraIndexUrls,
    ).toEqual(["http://mirror.example.com:8080/simple"]);
  });

  it("masks the credentials of any URL in a refusal, up to the last @ before the path", () => {
    expect(new ConfigError("key", "https://u:p@host/x and http://token@h:1?q=a@b").message).toBe("key: https://***@host/x and http://***@h:1?q=a@b");
    expect(maskUrlCredentials("https://u:p@ss@host/x")).toBe("https://***@host/x");
    expect(maskUrlCredentials("a://u@b://v@c d")).toBe("a://***@b://***@c d");
    expect(maskUrlCredentials("https://host/path@x, no url, user@example.com")).toBe("https://host/path@x, no url, user@example.com");
  });

  it("refuses a page whose JSON nests deeper than the limit, before parsing it", () => {
    const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
    const deepObjects = `title\n${'{"a": '.repeat(20_000)}1${"}".repeat(20_000)}\n\n$ pip install vllm-rbln==0.12.0\n`;
    expect(refusal(deepObjects)).toBe(`page.txt: JSON nested 20000 levels deep; allowed: at most ${MAX_JSON_DEPTH} levels of objects and arrays`);
    const page = (levels: number) => SEED_PAGE.replace('{"attn": ', `{"deep": ${nested(levels)}, "attn": `);
    expect(refusal(page(20_000))).toBe(`page.txt: JSON nested 20001 levels deep; allowed: at most ${MAX_JSON_DEPTH} levels of objects and arrays`);
    expect(refusal(page(MAX_JSON_DEPTH))).toMatch(/^page\.txt: JSON nested 65 levels deep/);
    expect(importRecipePage(page(MAX_JSON_DEPTH - 1), "edge.txt").recipe.model).toBe("MiniMaxAI/MiniMax-M2.7");
  });
});

describe("recipe import and list on the command line", () => {
  const made: string[] = [];
  const folder = () => {
    made.push(fs.mkdtempSync(path.join(os.tmpdir(), "recipe-cli-")));
    return made.at(-1)!;
  };
  afterAll(() => {
    for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
  });
  const PAGE_WANTED = `allowed: a recipe page: a text file of at most ${MAX_RECIPE_BYTES / 2 ** 20} MiB`;

  async function refused(args: string[], expected: string) {
    const run = await recipe(...args);
    expect(run).toEqual({ status: 2, stdout: "", stderr: `error: ${expected}\n` });
  }

  it("refuses a PAGE that is missing, a folder, no regular file, too big, or under a file: exit 2, one line", async () => {
    const dir = folder();
    const out = path.join(dir, "out");
    const file = path.join(dir, "file.txt");
    fs.writeFileSync(file, "text");
    const fifo = path.join(dir, "fifo");
    execFileSync("mkfifo", [fifo]);
    const huge = path.join(dir, "huge.txt");
    fs.writeFileSync(huge, Buffer.alloc(MAX_RECIPE_BYTES + 1, "a"));
    await refused(
      ["import", path.join(dir, "missing.txt"), "--out", out],
      `PAGE: ${JSON.stringify(path.join(dir, "missing.txt"))} does not exist; ${PAGE_WANTED}`,
    );
    await refused(["import", dir, "--out", out], `PAGE: ${JSON.stringify(dir)} is a folder; ${PAGE_WANTED}`);
    await refused(["import", fifo, "--out", out], `PAGE: ${JSON.stringify(fifo)} is not a regular file; ${PAGE_WANTED}`);
    await refused(["import", huge, "--out", out], `PAGE: ${JSON.stringify(huge)} is ${MAX_RECIPE_BYTES + 1} bytes; ${PAGE_WANTED}`);
    await refused(
      ["import", path.join(file, "page.txt"), "--out", out],
      `PAGE: ${JSON.stringify(path.join(file, "page.txt"))} does not exist: a part of its path is a file; ${PAGE_WANTED}`,
    );
    expect(fs.existsSync(out)).toBe(false);
  });

  it("refuses an --out that is empty, a file, or under a file, and list --dir of a missing folder or a file", async () => {
    const dir = folder();
    const file = path.join(dir, "file");
    fs.writeFileSync(file, "text");
    const page = path.resolve(__dirname, "fixtures/second-model-page.txt");
    await refused(["import", page, "--out", ""], "--out: empty; allowed: a folder for recipe files");
    await refused(["import", page, "--out", file], `--out: ${JSON.stringify(file)} is not a folder; allowed: a folder for recipe files`);
    await refused(
      ["import", page, "--out", path.join(file, "sub")],
      `--out: ${JSON.stringify(path.join(file, "sub"))} does not exist: a part of its path is a file; allowed: a folder for recipe files`,
    );
    await refused(
      ["list", "--dir", path.join(dir, "missing")],
      `recipe folder: ${JSON.stringify(path.join(dir, "missing"))} does not exist; allowed: a folder of recipe files (*.json)`,
    );
    await refused(["list", "--dir", file], `recipe folder: ${JSON.stringify(file)} is not a folder; allowed: a folder of recipe files (*.json)`);
    expect(fs.readFileSync(file, "utf8")).toBe("text");
  });

  it("refuses a word or option the command does not read, and writes nothing", async () => {
    const dir = folder();
    const page = path.resolve(__dirname, "fixtures/second-model-page.txt");
    await refused(["import", page, "extra.txt", "--out", dir], 'PAGE: "extra.txt" is a second page; allowed: recipe import PAGE.txt [--out DIR]');
    await refused(["import", page, "--dir", dir], "--dir: not an option of recipe import, which takes --out; allowed: recipe import PAGE.txt [--out DIR]");
    await refused(["list", "--dir", dir, "extra"], 'recipe list: "extra" is a word it does not read; allowed: recipe list [--dir DIR]');
    await refused(["list", "--out", dir], "--out: not an option of recipe list, which takes --dir; allowed: recipe list [--dir DIR]");
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  describe("where the recipe is written", () => {
    const SEED = path.resolve(__dirname, "fixtures/seed-page.txt");
    const otherOrgPage = (dir: string, model: string) => {
      const file = path.join(dir, "other-page.txt");
      fs.writeFileSync(file, SEED_PAGE.replaceAll("MiniMaxAI/MiniMax-M2.7", model));
      return file;
    };

    it("never replaces the recipe of another model whose name ends the same", async () => {
      const dir = folder();
      // The shipped recipe under the name imports used to give it (the model's last part).
      fs.writeFileSync(path.join(dir, "minimax-m2.7.json"), SHIPPED);
      const run = await recipe("import", otherOrgPage(dir, "other/MiniMax-M2.7"), "--out", dir);
      expect(run).toEqual({ status: 0, stdout: `${path.join(dir, "other--minimax-m2.7.json")}\n`, stderr: "" });
      expect(fs.readFileSync(path.join(dir, "minimax-m2.7.json"), "utf8")).toBe(SHIPPED);
      expect(RecipeCatalog.load(dir).models.sort()).toEqual(["MiniMaxAI/MiniMax-M2.7", "other/MiniMax-M2.7"]);
    });

    it("refuses to write over a file of another model, or one that is not a recipe, at the model's file name", async () => {
      const dir = folder();
      const target = path.join(dir, "other--minimax-m2.7.json");
      const otherCase = SHIPPED.replaceAll("MiniMaxAI/MiniMax-M2.7", "Other/MiniMax-M2.7");
      fs.writeFileSync(target, otherCase);
      const page = otherOrgPage(dir, "other/MiniMax-M2.7");
      await refused(
        ["import", page, "--out", dir],
        `--out: ${JSON.stringify(target)} holds the recipe of another model, "Other/MiniMax-M2.7"; not replaced; allowed: a folder where other--minimax-m2.7.json is free or holds the recipe of "other/MiniMax-M2.7"`,
      );
      expect(fs.readFileSync(target, "utf8")).toBe(otherCase);
      fs.writeFileSync(target, "notes, not JSON");
      await refused(
        ["import", page, "--out", dir],
        `--out: ${JSON.stringify(target)} holds something that is not a recipe; not replaced; allowed: a folder where other--minimax-m2.7.json is free or holds the recipe of "other/MiniMax-M2.7"`,
      );
      expect(fs.readFileSync(target, "utf8")).toBe("notes, not JSON");
    });

    it("replaces the model's own file, whatever its name, saying so in one line; the seed page gives the shipped recipe byte for byte", async () => {
      const dir = folder();
      const shipped = path.join(dir, "minimaxai--minimax-m2.7.json");
      fs.writeFileSync(shipped, SHIPPED.replace('"variant": "FP8"\n}', '"variant": "FP8", "edited": true\n}'));
      expect(await recipe("import", SEED, "--out", dir)).toEqual({
        status: 0,
        stdout: `${shipped}\n`,
        stderr: `replacing ${shipped}: it holds the recipe of MiniMaxAI/MiniMax-M2.7\n`,
      });
      expect(fs.readFileSync(shipped, "utf8")).toBe(SHIPPED);

      const renamed = path.join(dir, "mine.json");
      fs.renameSync(shipped, renamed);
      expect(await recipe("import", SEED, "--out", dir)).toEqual({
        status: 0,
        stdout: `${renamed}\n`,
        stderr: `replacing ${renamed}: it holds the recipe of MiniMaxAI/MiniMax-M2.7\n`,
      });
      expect(fs.readdirSync(dir).filter((f) => f.endsWith(".json"))).toEqual(["mine.json"]);
      expect(RecipeCatalog.load(dir).models).toEqual(["MiniMaxAI/MiniMax-M2.7"]);
    });
  });
});
