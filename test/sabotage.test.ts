import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { applyEdits, occurrences } from "./sabotage/apply";
import { BREAKAGES } from "./sabotage/breakages";

const ROOT = path.resolve(__dirname, "..");

/** The sabotage suite's list (npm run test:sabotage) kept applicable: it is run by hand, so a breakage that no longer applies is found here. */
describe("the sabotage suite's breakages", () => {
  it("have unique names, a reason and at least one test; host-tier tests are under test/hosts/, fast ones outside it; every named test file exists", () => {
    expect(new Set(BREAKAGES.map((b) => b.name)).size).toBe(BREAKAGES.length);
    for (const b of BREAKAGES) {
      expect(b.name, b.name).toMatch(/^[a-z0-9-]+$/);
      expect(b.why.length, b.name).toBeGreaterThan(20);
      expect([...(b.tests.fast ?? []), ...(b.tests.hosts ?? [])].length, b.name).toBeGreaterThan(0);
      for (const file of b.tests.fast ?? []) expect(file, b.name).toMatch(/^test\/(?!hosts\/)[^/]+\.test\.ts$/);
      for (const file of b.tests.hosts ?? []) expect(file, b.name).toMatch(/^test\/hosts\/[^/]+\.test\.ts$/);
      for (const file of [...(b.tests.fast ?? []), ...(b.tests.hosts ?? [])]) expect(fs.existsSync(path.join(ROOT, file)), `${b.name}: ${file}`).toBe(true);
    }
  });

  it("each apply to the product as it is: every edit's search text occurs exactly once, in a shipped file, and changes it", () => {
    for (const b of BREAKAGES) {
      for (const edit of b.edits) {
        expect(edit.file, b.name).toMatch(/^(core|components|cli|provider)\/|^program\.ts$/);
        expect(edit.replace, b.name).not.toBe(edit.search);
      }
      expect(() => applyEdits(ROOT, b.edits, true), b.name).not.toThrow();
    }
  });

  it("an edit that no longer applies is an error that names the file and the count, and changes nothing", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sabotage-apply-"));
    fs.writeFileSync(path.join(dir, "a.sh"), "x\nx\n");
    fs.writeFileSync(path.join(dir, "b.sh"), "y\n");
    const edits = (search: string) => [
      { file: "b.sh", search: "y", replace: "z" },
      { file: "a.sh", search, replace: "w" },
    ];
    expect(() => applyEdits(dir, edits("x"))).toThrow('a.sh: the edit\'s search text occurs 2 times, not once: "x"');
    expect(() => applyEdits(dir, edits("q"))).toThrow("a.sh: the edit's search text occurs 0 times, not once");
    expect(fs.readFileSync(path.join(dir, "b.sh"), "utf8")).toBe("y\n");
    const restore = applyEdits(dir, edits("x\nx"));
    expect([fs.readFileSync(path.join(dir, "a.sh"), "utf8"), fs.readFileSync(path.join(dir, "b.sh"), "utf8")]).toEqual(["w\n", "z\n"]);
    restore();
    expect([fs.readFileSync(path.join(dir, "a.sh"), "utf8"), fs.readFileSync(path.join(dir, "b.sh"), "utf8")]).toEqual(["x\nx\n", "y\n"]);
    expect(occurrences("aaa", "aa")).toBe(1);
    fs.rmSync(dir, { recursive: true });
  });
});
