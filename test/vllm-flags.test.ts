import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { warning } from "../core/plan/messages";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { readVllmWords } from "../core/config/vllmArgv";
import { VLLM_RBLN_OPTIONS, VLLM_SERVE_OPTIONS } from "../core/config/vllmFlags.generated";
import { commandWords } from "../core/plan/argv";
import { planDeployment } from "../core/plan/deployment";
import { allSelections, resolvePlan } from "../core/plan/resolve";
import type { Selection } from "../core/plan/types";
import { renderHost } from "../core/render/hosts/bundle";
import { VLLM_FLAGS_FILE, vllmFlagsFileText } from "../scripts/generate-vllm-flags";
import fixture from "./fixtures/vllm-0.30.0/cli-flags.json";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { minimax, shippedCatalog } from "./helpers/recipes";
import { systemdExecArgv } from "./helpers/systemdOracle";
import { copyStandInVllm, readByVllm, type VllmReading } from "./helpers/vllmParser";

const REVISION = "0123456789abcdef0123456789abcdef01234567";
const dev = () => readStackFile("dev").raw as Record<string, any>;
const planOf = (settings: Record<string, unknown>) => planDeployment(parseStackSettings(settings), shippedCatalog);
/** The words after `serve` of each rank of a plan: the model, then the flags. */
const serveArgvs = (deployment: ReturnType<typeof planOf>) =>
  deployment.plan.roles.flatMap((role) =>
    role.ranks.map((rank) => [commandWords(rank.argv, rank.flags).at(-1)!, ...rank.argv.slice(commandWords(rank.argv, rank.flags).length)]),
  );
const errorOf = (reading: VllmReading) => ("error" in reading ? reading.error : null);

/** A hosts stack for one of the recipe's combinations: a server per node, a front door where the strategy routes, the model pinned. */
function hostsStack(selection: Selection): Record<string, unknown> {
  const nodes = resolvePlan(minimax, selection).nodes.length;
  // listenAddress where the ranks take it (the renderer adds --host); decode ranks behind the routing sidecar listen on every interface.
  const hosts = Array.from({ length: nodes }, (_, i) => ({
    name: `npu-${i}`,
    address: `10.0.0.${i + 1}`,
    ...(i === 0 ? { listenAddress: "10.0.0.1" } : {}),
    hostKey: EXAMPLE_HOST_KEY,
  }));
  return {
    ...dev(),
    strategy: selection.strategy,
    target: selection.target,
    axes: selection.axes,
    hosts,
    revision: REVISION,
    router: { host: { name: "router", address: "10.0.1.1", hostKey: EXAMPLE_HOST_KEY } },
  };
}

describe("vLLM 0.30.0's options, generated from the fixture", () => {
  it("core/config/vllmFlags.generated.ts is fresh (npm run generate)", () => {
    expect(fs.readFileSync(VLLM_FLAGS_FILE, "utf8"), `${path.relative(process.cwd(), VLLM_FLAGS_FILE)} is stale: run \`npm run generate\``).toBe(
      vllmFlagsFileText(),
    );
  });

  it("hold every option of the fixture but the model and the four the later texts dropped, and vllm-rbln's group apart", () => {
    const options = fixture.facts["flags.serve"].value.options;
    expect(VLLM_SERVE_OPTIONS.length).toBe(options.length - 1 - 4);
    expect(VLLM_RBLN_OPTIONS.map((o) => o.name)).toEqual(fixture.facts["rbln.flags"].value.options.map((o) => o.name));
    expect(new Set(VLLM_SERVE_OPTIONS.flatMap((o) => o.aliases ?? []))).toEqual(new Set(Object.keys(fixture.facts["flags.shortAliases"].value.aliases)));
  });
});

describe("every flag the product emits is one vLLM 0.30.0's parser reads (Python's argparse over the fixture)", () => {
  it("in all 540 combinations of the recipe, with the package's --shutdown-timeout, --revision and --tokenizer-revision", () => {
    const argvs = new Map<string, string[]>();
    let combinations = 0;
    for (const selection of allSelections(minimax)) {
      combinations++;
      for (const argv of serveArgvs(planOf(hostsStack(selection)))) argvs.set(JSON.stringify(argv), argv);
    }
    expect(combinations).toBe(540);
    const all = [...argvs.values()];
    expect(all.every((argv) => ["--shutdown-timeout", "--revision", "--tokenizer-revision"].every((flag) => argv.includes(flag)))).toBe(true);
    const refused = readByVllm(all).flatMap((reading, i) => (errorOf(reading) ? [`${all[i]!.join(" ")}: ${errorOf(reading)}`] : []));
    expect(refused).toEqual([]);
  });

  it("and as the units run them, with the --host the renderer adds, for each strategy", () => {
    const units = [...new Set([...allSelections(minimax)].map((s) => s.strategy))].flatMap((strategy) => {
      const selection = [...allSelections(minimax)].find((s) => s.strategy === strategy)!;
      const deployment = planOf(hostsStack(selection));
      return deployment.placements.flatMap((placement) => renderHost(deployment, placement, "test").ranks.map((rank) => systemdExecArgv(rank.unitText)));
    });
    const argvs = units.map((argv) => argv.slice(argv.indexOf("serve") + 1));
    expect(argvs.filter((argv) => argv.includes("--host")).length).toBeGreaterThanOrEqual(3);
    expect(readByVllm(argvs).map(errorOf)).toEqual(argvs.map(() => null));
  });

  it("the stand-in vLLM reads its command line with that parser: a misspelt flag exits 2 with argparse's message, before it serves", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stand-in-vllm-"));
    const vllm = copyStandInVllm(dir);
    const run = spawnSync(vllm, ["serve", "m", "--port", "0", "--shutdown-timout", "0"], { encoding: "utf8", timeout: 30_000 });
    fs.rmSync(dir, { recursive: true });
    expect([run.status, run.stderr.trim().split("\n").at(-1)]).toEqual([2, "vllm serve: error: unrecognized arguments: --shutdown-timout 0"]);
  });
});

describe("extraArgs are read as vLLM's parser reads them, before any check", () => {
  const plan = (words: string[], more: Record<string, unknown> = {}) => planOf({ ...dev(), ...more, extraArgs: { main: words } });
  const flagsOf = (words: string[], more: Record<string, unknown> = {}) =>
    plan(words, more).plan.roles[0]!.ranks[0]!.flags.map((f) => [f.name, ...f.values].join(" "));
  const recipeFlags = flagsOf([]);
  const replaced = (at: number, flag: string) => recipeFlags.map((f, i) => (i === at ? flag : f));

  it("agree with Python's argparse over the fixture on every spelling: a prefix, `_`, `=`, `--no-`, an alias, `-O3`, a JSON key", () => {
    const corpus: string[][] = [
      ["--max-num-seq", "8"],
      ["--max_num_seq=8"],
      ["--max-log", "5"],
      ["--no-enable-prefix"],
      ["--enable-prefix-c"],
      ["-q", "fp8"],
      ["-qfp8"],
      ["-s", '{"method":"ngram"}'],
      ["-sc", '{"method":"ngram"}'],
      ["-O3"],
      ["-O=2"],
      ["-O", "1"],
      ["--compilation-config.mode", "3"],
      ["--compilation_config.cudagraph_mode=NONE"],
      ["--seed", "-1"],
      ["--served-model-name", "a", "b"],
      ["--enable-log-req"],
      ["--max-num", "8"],
      ["--max-log-lenn", "1"],
      ["-x"],
      ["--rbln-use-custom-s"],
      ["--rbln-use-c"],
      ["--enable-log-requests", "yes"],
      ["--max-log-len"],
    ];
    const read = corpus.map((words) => readVllmWords(words));
    const emitted = read.map((flags) => (typeof flags === "string" ? [] : flags.flatMap((f) => [f.name, ...f.values])));
    const [given, asEmitted] = [readByVllm(corpus.map((words) => ["m", ...words])), readByVllm(emitted.map((words) => ["m", ...words]))];
    corpus.forEach((words, i) => {
      const refused = typeof read[i] === "string";
      // The product refuses what vLLM refuses; what it takes, it emits in a spelling vLLM reads as the words given.
      expect(refused, `${words.join(" ")}: ${read[i]} / ${JSON.stringify(given[i])}`).toBe("error" in given[i]!);
      if (!refused) expect(asEmitted[i], words.join(" ")).toEqual(given[i]);
    });
  });

  it("refuse a prefix of a flag the package sets as that setting's: --shutdown-time, --revisio, --tokenizer-rev, --hf-tok", () => {
    expect(() => plan(["--shutdown-time", "0"])).toThrow(
      'extraArgs.main: "--shutdown-time" (vLLM reads it as --shutdown-timeout) comes from the rollout.shutdownTimeoutSeconds setting; set that instead',
    );
    expect(() => plan(["--shutdown_t=0"])).toThrow(
      /^extraArgs\.main: "--shutdown_t" \(vLLM reads it as --shutdown-timeout\) comes from the rollout\.shutdownTimeoutSeconds setting/,
    );
    expect(() => plan(["--revisio", REVISION])).toThrow('extraArgs.main: "--revisio" (vLLM reads it as --revision) comes from the revision setting');
    expect(() => plan(["--tokenizer-rev", REVISION])).toThrow(
      /^extraArgs\.main: "--tokenizer-rev" \(vLLM reads it as --tokenizer-revision\) comes from the revision setting/,
    );
    expect(() => plan(["--hf-tok", "hf_x"])).toThrow(/^extraArgs\.main: "--hf-tok" \(vLLM reads it as --hf-token\) comes from the hfToken secret/);
    expect(() => plan(["--download-d", "/tmp"])).toThrow(/comes from the cacheRoot setting/);
    expect(() => plan(["-h"])).toThrow(/^extraArgs\.main: "-h" \(vLLM reads it as --help\) prints vLLM's help and exits/);
    // No compile, no warm-up, no bundle: nothing to tell a load from a compile by (bundle.skippedWithoutWarmUp).
    expect(() => plan(["--enforce-eag"])).toThrow(
      /^extraArgs\.main: "--enforce-eag" \(vLLM reads it as --enforce-eager\) makes vllm-rbln skip its compile and warm-up and save no compiled cache/,
    );
  });

  it("refuse topology flags by prefix and by short alias alone", () => {
    expect(() => plan(["--data-parallel-ra", "1"])).toThrow(
      'extraArgs.main: "--data-parallel-ra" (vLLM reads it as --data-parallel-rank) defines the serving topology',
    );
    expect(() => plan(["--data-parallel-si", "8"])).toThrow(
      /"--data-parallel-si" is ambiguous: vLLM's argparse could read it as --data-parallel-size, --data-parallel-size-local;/,
    );
    expect(() => plan(["-e"])).toThrow('extraArgs.main: "-e" (vLLM reads it as --enable-expert-parallel) defines the serving topology');
    expect(() => plan(["--kv-transfer.kv_role", "kv_both"])).toThrow(
      /^extraArgs\.main: "--kv-transfer\.kv_role" \(vLLM reads it as --kv-transfer-config\) defines the serving topology/,
    );
  });

  it("replace the recipe's flag in place under any spelling of it, its --no- form too: --max-num-seq sits where --max-num-seqs was", () => {
    const at = recipeFlags.indexOf("--max-num-seqs 1");
    for (const words of [["--max-num-seq", "8"], ["--max_num_se=8"], ["--max-num-seqs", "8"]])
      expect(flagsOf(words), words.join(" ")).toEqual(replaced(at, "--max-num-seqs 8"));
    const prefixCaching = recipeFlags.indexOf("--no-enable-prefix-caching");
    expect(flagsOf(["--enable-prefix-c"])).toEqual(replaced(prefixCaching, "--enable-prefix-caching"));
    // An alias replaces the recipe's whole JSON option, and the draft model it names is the one downloaded.
    const eagle = { axes: { spec_decode: "eagle3" } };
    const deployment = plan(["-sc", '{"method":"ngram","num_speculative_tokens":2}'], eagle);
    expect(deployment.plan.roles[0]!.ranks[0]!.flags.filter((f) => f.name === "--speculative-config")).toEqual([
      { name: "--speculative-config", values: ['{"method":"ngram","num_speculative_tokens":2}'] },
    ]);
    expect(deployment.plan.models.map((m) => m.use)).toEqual(["model"]);
  });

  it("refuse one option twice in any two spellings, and a JSON key beside the whole option", () => {
    expect(() => plan(["--max-num-seq", "2", "--max-num-seqs", "3"])).toThrow(
      'extraArgs.main: "--max-num-seqs" is given twice; give each flag once, with all its values (vLLM would read only the last: "--max-num-seq" and "--max-num-seqs" both set --max-num-seqs)',
    );
    expect(() => plan(["--enable-log-requests", "--no-enable-log-req"])).toThrow(/^extraArgs\.main: "--no-enable-log-req" is given twice/);
    expect(() => plan(["--speculative-config.num_speculative_tokens", "2"], { axes: { spec_decode: "eagle3" } })).toThrow(
      'extraArgs.main: "--speculative-config.num_speculative_tokens" sets one key of --speculative-config, which the recipe gives whole: vLLM appends the keys as one whole --speculative-config after it, which replaces it; give --speculative-config once, whole, with your change in it',
    );
    expect(() => plan(["-sc", "{}", "--speculative_config.method=ngram"])).toThrow(/sets one key of --speculative-config, which extraArgs gives whole/);
    // Keys of an option the recipe does not set merge as vLLM merges them.
    expect(flagsOf(["--compilation-config.mode", "3", "--compilation-config.cudagraph_mode", "NONE"]).slice(-2)).toEqual([
      "--compilation-config.mode 3",
      "--compilation-config.cudagraph_mode NONE",
    ]);
  });

  it("refuse an ambiguous prefix listing what it could be, and an unknown flag naming the nearest", () => {
    expect(() => plan(["--max-num", "8"])).toThrow(
      'extraArgs.main: "--max-num" is ambiguous: vLLM\'s argparse could read it as --max-num-batched-tokens, --max-num-seqs, --max-num-scheduled-tokens, --max-num-queued-reqs, --max-num-queued-tokens; give the whole flag',
    );
    expect(() => plan(["--max-log-lenn", "1"])).toThrow(
      'extraArgs.main: "--max-log-lenn" is no option of vllm serve 0.30.0 (nearest: --max-log-len); allowed: the options `vllm serve --help` lists',
    );
    expect(() => plan(["--disable-log-requests"])).toThrow(/is no option of vllm serve 0\.30\.0 \(nearest: --enable-log-requests\)/);
    expect(() => plan(["--enable-log-requests", "yes"])).toThrow(
      'extraArgs.main: "yes" follows --enable-log-requests, which takes no value; remove it or give the flag it belongs to',
    );
  });

  it("take vllm-rbln's --rbln-* flags with a warning: newer vllm-rbln has them, the pinned 0.12.0 is not confirmed to", () => {
    const deployment = plan(["--rbln-use-custom-s"]);
    expect(deployment.plan.roles[0]!.ranks[0]!.flags.at(-1)).toEqual({ name: "--rbln-use-custom-sampler", values: [] });
    expect(deployment.plan.messages).toContainEqual(
      warning(
        "extraArgs.main: --rbln-use-custom-sampler is one of vllm-rbln's --rbln-* flags, read in a newer vllm-rbln than the pinned one and not confirmed for it; if it lacks the flag, the rank exits at start (argparse) and the unit step fails",
      ),
    );
    expect(() => plan(["--rbln-use-c"])).toThrow(
      /"--rbln-use-c" is ambiguous: vLLM's argparse could read it as --rbln-use-custom-sampler, .*--rbln-use-custom-kernel/,
    );
  });
});

describe("a draft model named by one key", () => {
  it("is downloaded like the recipe's: --speculative-config.model adds it to the models", () => {
    const deployment = planOf({ ...dev(), extraArgs: { main: ["--speculative_config.model", "org/draft", "--speculative-config.method", "eagle3"] } });
    expect(deployment.plan.models.map((m) => [m.id, m.use])).toEqual([
      ["MiniMaxAI/MiniMax-M2.7", "model"],
      ["org/draft", "draft"],
    ]);
  });
});
