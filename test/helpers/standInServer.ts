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

/** Where a fake host's slow network goes: first on the SSH session's PATH, empty on this machine; give it to each host as a private path. */
export const SLOW_NETWORK_DIR = "/usr/local/sbin";

/**
 * Makes compiled caches arrive slowly on a fake host, as a 50 GB cache does over a real link, through
 * wrappers in SLOW_NETWORK_DIR that wait, then run the real tool: each rsync of `vllm/rbln` (a copy
 * from a peer or the compile host) starts `copySeconds` late, each `skopeo copy` into an OCI layout
 * (a pull from the registry; not a push) `pullSeconds` late. So a unit that does not wait for its
 * cache starts without it and compiles, which the tests see, where a tiny cache would land first by
 * luck. A pull runs beside the seed's hub download, which the unit waits for anyway: it must be late
 * by more than that download takes.
 */
export async function slowCompiledCaches(host: TestHost, delays: { copySeconds: number; pullSeconds: number }): Promise<void> {
  const wrappers = {
    rsync: `#!/bin/sh\n# Tests: a slow link for compiled caches.\ncase "$*" in *vllm/rbln*) sleep ${delays.copySeconds} ;; esac\nexec /usr/bin/rsync "$@"\n`,
    // The destination is the last argument.
    skopeo: `#!/bin/sh\n# Tests: a slow link for compiled caches.\nfor last; do :; done\ncase "$1 $last" in "copy oci:"*) sleep ${delays.pullSeconds} ;; esac\nexec /usr/bin/skopeo "$@"\n`,
  };
  for (const [tool, text] of Object.entries(wrappers)) {
    const put = await host.run(`cat > ${SLOW_NETWORK_DIR}/${tool} && chmod 0755 ${SLOW_NETWORK_DIR}/${tool}`, text);
    if (put.status !== 0 || put.stderr !== "") throw new Error(`slowing ${tool} on ${host.name}: ${put.stderr}`);
  }
}
