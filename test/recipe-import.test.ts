import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { runCommand } from "../cli/commands";
import { ConfigError } from "../core/errors";
import { DEFAULT_RECIPE_DIR, RecipeCatalog } from "../core/recipe/catalog";
import { importRecipePage } from "../core/recipe/import";

const fixture = (name: string) => fs.readFileSync(path.resolve(__dirname, "fixtures", name), "utf8");
const SEED_PAGE = fixture("seed-page.txt");
const SECOND_PAGE = fixture("second-model-page.txt");
const SHIPPED = fs.readFileSync(path.join(DEFAULT_RECIPE_DIR, "minimax-m2.7.json"), "utf8");
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

describe("recipe import", () => {
  it("reproduces the shipped recipe from the seed page, byte for byte", () => {
    const imported = importRecipePage(SEED_PAGE, "seed-page.txt");
    expect(imported.fileName).toBe("minimax-m2.7.json");
    expect(imported.text).toBe(SHIPPED);
    expect(imported.warnings).toEqual([]);
  });

  it("reads the page without its line-number gutter, and with the gutter in front of each line", () => {
    const bare = SEED_PAGE.split("\n").filter((line) => !/^\d+$/.test(line)).join("\n");
    expect(importRecipePage(bare, "bare.txt").text).toBe(SHIPPED);
    let n = 0;
    const prefixed = bare.split("\n").map((line) => (line.startsWith("$") || line.startsWith("  ") ? `${++n} ${line}` : line)).join("\n");
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
    expect(written).toBe(`${path.join(out, "tiny-chat-1b.json")}\n`);
    const catalog = RecipeCatalog.load(out);
    const plan = JSON.parse(runCommand("plan", { model: "example/Tiny-Chat-1B", strategy: "two-role", target: "Latency", set: ["spec_decode=suffix"], format: "json" }, catalog));
    expect(plan.roles.map((r: { role: string }) => r.role)).toEqual(["front", "back"]);
    expect(plan.roles[0].ranks[0].argv).toContain("--speculative-config");
    expect(JSON.stringify(plan.packages)).toContain("arctic-inference");

    const list = spawnSync(TSX, [RECIPE_CLI, "list", "--dir", out], { encoding: "utf8" });
    expect(list.status).toBe(0);
    expect(list.stdout).toBe(
      ["example/Tiny-Chat-1B", "  strategy  target   NPUs  verified", "  two-role  Latency  2     2026-01-01", "  packages: vllm-rbln==0.12.0, arctic-inference==0.1.1 (spec_decode=suffix)", ""].join("\n"),
    );
    fs.rmSync(out, { recursive: true });
  });

  it("refuses from the command line with status 2 and one line on stderr", () => {
    const result = spawnSync(TSX, [RECIPE_CLI, "import", path.resolve(__dirname, "../README.md"), "--out", os.tmpdir()], { encoding: "utf8" });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^error: .*README\.md: no JSON object: .*\n$/);
  });
});
