import * as fs from "node:fs";
import * as path from "node:path";
import type { TestHost } from "./hostNamespace";

const FAKE_VLLM = path.join(__dirname, "..", "fixtures", "fake-vllm", "vllm");

/**
 * Makes a fake host look like an installed NPU server: a complete venv whose `vllm` is the stand-in
 * (test/fixtures/fake-vllm, which accepts `knownFlags` and refuses others as argparse does), so
 * the install step has nothing to do, and the NPU device nodes the units wait for, as plain files
 * under `devRoot`.
 */
export async function prepareStandInServer(
  host: TestHost,
  options: { venv: string; knownFlags: Iterable<string>; devRoot: string; npus?: number },
): Promise<void> {
  const { venv, devRoot } = options;
  const devices = Array.from({ length: options.npus ?? 4 }, (_, i) => `${devRoot}/rbln${i}`).join(" ");
  const setup = await host.run(
    [
      "set -e",
      `install -d -m 0755 ${venv}/bin ${devRoot}`,
      `cat > ${venv}/bin/vllm`,
      `chmod 0755 ${venv}/bin/vllm`,
      `printf '%s' '${JSON.stringify([...options.knownFlags])}' > ${venv}/bin/known-flags.json`,
      `touch ${venv}/.rbln-serving-complete ${devices}`,
    ].join("; "),
    fs.readFileSync(FAKE_VLLM, "utf8"),
  );
  if (setup.status !== 0 || setup.stderr !== "") throw new Error(`preparing ${host.name}: ${setup.stderr}`);
}
