import * as fs from "node:fs";
import * as path from "node:path";
import type { TestHost } from "./hostNamespace";
import { knownFlagsJson, STAND_IN_MODULES } from "./vllmParser";

const FAKE_VLLM = path.join(__dirname, "..", "fixtures", "fake-vllm", "vllm");

/**
 * Makes a fake host look like an installed NPU server: a complete venv whose `vllm` is the stand-in
 * (test/fixtures/fake-vllm, which reads its command line with argparse over vLLM 0.30.0's options
 * from the fixture, and refuses a flag vLLM does not have), so
 * the install step has nothing to do, and the NPU device nodes the units wait for, as plain files
 * under `devRoot`.
 */
export async function prepareStandInServer(host: TestHost, options: { venv: string; devRoot: string; npus?: number }): Promise<void> {
  const { venv, devRoot } = options;
  const devices = Array.from({ length: options.npus ?? 4 }, (_, i) => `${devRoot}/rbln${i}`).join(" ");
  const setup = await host.run(
    [
      "set -e",
      `install -d -m 0755 ${venv}/bin ${devRoot}`,
      `cat > ${venv}/bin/vllm`,
      `chmod 0755 ${venv}/bin/vllm`,
      `touch ${venv}/.rbln-serving-complete ${devices}`,
    ].join("; "),
    fs.readFileSync(FAKE_VLLM, "utf8"),
  );
  if (setup.status !== 0 || setup.stderr !== "") throw new Error(`preparing ${host.name}: ${setup.stderr}`);
  for (const [file, text] of [
    ...STAND_IN_MODULES.map((module) => [path.basename(module), fs.readFileSync(module, "utf8")]),
    ["known-flags.json", knownFlagsJson()],
  ]) {
    const copy = await host.run(`cat > ${venv}/bin/${file}`, text);
    if (copy.status !== 0 || copy.stderr !== "") throw new Error(`preparing ${host.name}: ${copy.stderr}`);
  }
}
