import { execFileSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { joinShellWords, quoteShellWord, splitShellWords } from "../core/shell";
import { hostileString } from "./helpers/arbitraries";

describe("shell words", () => {
  it("splits what it quotes back into the same word", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", maxLength: 60 }).filter((s) => !s.includes("\0")),
        (word) => {
          expect(splitShellWords(quoteShellWord(word))).toEqual([word]);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("splits what it joins back into the same words", () => {
    fc.assert(
      fc.property(fc.array(hostileString, { maxLength: 8 }), (words) => {
        expect(splitShellWords(joinShellWords(words))).toEqual(words);
      }),
      { numRuns: 2000 },
    );
  });

  it("quotes so that real bash reads the words back byte for byte", () => {
    const samples = fc.sample(fc.array(hostileString, { minLength: 1, maxLength: 6 }), { numRuns: 200, seed: 7 });
    const script = samples.map((words) => `printf '%s\\0' ${joinShellWords(words)}; printf '\\1'`).join("\n");
    const output = execFileSync("bash", ["-c", script], { encoding: "utf8" });
    const groups = output
      .split("\u0001")
      .slice(0, -1)
      .map((g) => g.split("\0").slice(0, -1));
    expect(groups).toEqual(samples);
  });

  it("parses the recipe's quoted JSON values as one word with their newlines", () => {
    expect(splitShellWords(`--kv-transfer-config '{\n  "kv_role": "kv_both"\n}'`)).toEqual(["--kv-transfer-config", '{\n  "kv_role": "kv_both"\n}']);
    expect(splitShellWords(`VLLM_NIXL_SIDE_CHANNEL_HOST='<POD_IP>'`)).toEqual(["VLLM_NIXL_SIDE_CHANNEL_HOST=<POD_IP>"]);
  });
});
