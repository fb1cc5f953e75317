import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { runCommand } from "../cli/commands";
import { readStackFile } from "../core/config/stackFile";
import { runProgram } from "../program";
import { shippedCatalog } from "./helpers/recipes";
import { runUnderMocks } from "./helpers/pulumiHarness";

/**
 * A stack without `models` is a list of one model, and stays what it was before `models` existed:
 * the same plan, the same rendered files, the same resources (URNs, inputs, parents, dependencies).
 * The golden file was written by the code before `models` (main at 41f0974) and is checked against
 * the code now. When a change elsewhere legitimately alters a shipped stack, write it again with
 * `UPDATE_GOLDEN=1 npx vitest run test/single-model.test.ts` from the code before your change, then
 * run the test on the change.
 */

const GOLDEN = path.join(__dirname, "fixtures/single-model-golden.json");
const STACKS = ["dev", "staging", "edge", "prod"];
const SECRETS = { sshPrivateKey: "key", pipPassword: "pw", hfToken: "hf", apiKey: "api" };

const digest = (value: unknown) =>
  createHash("sha256")
    .update(typeof value === "string" ? value : JSON.stringify(value))
    .digest("hex")
    .slice(0, 16);

interface StackSnapshot {
  plan: string;
  files: Record<string, string>;
  resources: Record<string, string>;
}

function renderedFiles(stack: string): Record<string, string> {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "single-model-"));
  try {
    const listed = runCommand("render", { stack, out }, shippedCatalog).trim().split("\n");
    return Object.fromEntries(listed.map((file) => [path.relative(out, file), digest(fs.readFileSync(file, "utf8"))]));
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
}

async function snapshot(stack: string): Promise<StackSnapshot> {
  const { registrations, error } = await runUnderMocks(runProgram, readStackFile(stack).raw, SECRETS);
  expect(error).toBeUndefined();
  return {
    plan: digest(runCommand("plan", { stack, format: "json" }, shippedCatalog)),
    files: renderedFiles(stack),
    resources: Object.fromEntries(
      registrations.map((r) => [r.urn, digest({ inputs: r.inputs, parent: r.parent, dependencies: [...r.dependencies].sort(), read: r.read })]),
    ),
  };
}

describe("a stack without models renders and registers what it did before models existed", async () => {
  const now: Record<string, StackSnapshot> = {};
  for (const stack of STACKS) now[stack] = await snapshot(stack);
  if (process.env.UPDATE_GOLDEN === "1") fs.writeFileSync(GOLDEN, `${JSON.stringify(now, null, 1)}\n`);
  const golden = JSON.parse(fs.readFileSync(GOLDEN, "utf8")) as Record<string, StackSnapshot>;

  it.each(STACKS)("stack %s: the same plan, files and resources", (stack) => {
    const [before, after] = [golden[stack]!, now[stack]!];
    expect(after.plan, "plan --format json").toBe(before.plan);
    expect(Object.keys(after.files).sort(), "the files render writes").toEqual(Object.keys(before.files).sort());
    for (const [file, hash] of Object.entries(before.files)) expect(after.files[file], file).toBe(hash);
    expect(Object.keys(after.resources).sort(), "the URNs").toEqual(Object.keys(before.resources).sort());
    for (const [urn, hash] of Object.entries(before.resources)) expect(after.resources[urn], urn).toBe(hash);
  });
});
