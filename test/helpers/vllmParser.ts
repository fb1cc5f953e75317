import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import fixture from "../fixtures/vllm-0.30.0/cli-flags.json";

/** The parser module the stand-in vLLM imports (test/fixtures/fake-vllm/vllm_argparse.py): Python's argparse over the fixture's options. */
export const VLLM_ARGPARSE = path.join(__dirname, "..", "fixtures", "fake-vllm", "vllm_argparse.py");

/** known-flags.json for the stand-in: the fixture's options of `vllm serve` and of vllm-rbln's group, as read in their source. */
export function knownFlagsJson(): string {
  return JSON.stringify({ serve: fixture.facts["flags.serve"].value.options, rbln: fixture.facts["rbln.flags"].value.options });
}

/** How `vllm serve` reads a command line: argparse's error, or the options it sets (argparse's namespace). */
export type VllmReading = { error: string } | { read: Record<string, unknown> };

/** How vLLM's parser reads each argv (the words after `serve`, the model first), by Python's argparse over the fixture. */
export function readByVllm(argvs: readonly (readonly string[])[]): VllmReading[] {
  const flags = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "vllm-flags-")), "known-flags.json");
  fs.writeFileSync(flags, knownFlagsJson());
  const run = spawnSync("python3", [VLLM_ARGPARSE, flags], { input: JSON.stringify(argvs), encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
  fs.rmSync(path.dirname(flags), { recursive: true });
  if (run.status !== 0) throw new Error(`vllm_argparse.py failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as VllmReading[];
}

/** The stand-in's compiled-cache signature (test/fixtures/fake-vllm/rbln_signature.py), which it imports. */
export const RBLN_SIGNATURE = path.join(path.dirname(VLLM_ARGPARSE), "rbln_signature.py");

/** The Python modules the stand-in vLLM imports from beside itself, by file name. */
export const STAND_IN_MODULES = [VLLM_ARGPARSE, RBLN_SIGNATURE];

/** The stand-in vLLM copied into `dir` as `name`, with its modules and the fixture's options beside it. */
export function copyStandInVllm(dir: string, name = "vllm"): string {
  const bin = path.join(dir, name);
  fs.copyFileSync(path.join(path.dirname(VLLM_ARGPARSE), "vllm"), bin);
  fs.chmodSync(bin, 0o755);
  for (const module of STAND_IN_MODULES) fs.copyFileSync(module, path.join(dir, path.basename(module)));
  fs.writeFileSync(path.join(dir, "known-flags.json"), knownFlagsJson());
  return bin;
}
