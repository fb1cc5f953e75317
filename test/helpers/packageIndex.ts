import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { freePort } from "./sshd";

export interface StubPackage {
  name: string;
  version: string;
  /** Top-level module and its source. */
  module: string;
  source: string;
  extras?: string[];
  /** Files the wheel installs into the venv's bin (its `.data/scripts`), by name. */
  scripts?: Record<string, string>;
}

/** Builds real (tiny) wheels with Python's zipfile, with METADATA, WHEEL and a RECORD of sha256 hashes. */
const BUILD_WHEEL = `
import base64, hashlib, json, sys, zipfile
spec = json.load(sys.stdin); out = sys.argv[1]
dist = spec["name"].replace("-", "_")
info = f"{dist}-{spec['version']}.dist-info"
files = {
  f"{spec['module']}/__init__.py": spec["source"],
  f"{info}/METADATA": "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n%s" % (spec["name"], spec["version"], "".join(f"Provides-Extra: {e}\\n" for e in spec.get("extras", []))),
  f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: rbln-serving-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
for name, text in spec.get("scripts", {}).items():
  files[f"{dist}-{spec['version']}.data/scripts/{name}"] = text
record = []
for name, text in files.items():
  data = text.encode()
  digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
  record.append(f"{name},sha256={digest},{len(data)}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = "\\n".join(record) + "\\n"
with zipfile.ZipFile(f"{out}/{dist}-{spec['version']}-py3-none-any.whl", "w") as whl:
  for name, text in files.items():
    entry = zipfile.ZipInfo(name)
    # pip makes an installed file executable only when the wheel says it is a regular file with x bits (writestr gives 600).
    entry.external_attr = (0o100755 if ".data/scripts/" in name else 0o600) << 16
    whl.writestr(entry, text)
`;

export interface PackageIndex {
  url: string;
  stop(): void;
}

/** http.server whose every answer waits `delay` seconds first: a slow index, so that an install takes a while. */
const SLOW_SERVER = `
import functools, http.server, sys, time
port, root, delay = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
class Slow(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        time.sleep(delay)
        super().do_GET()
http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Slow, directory=root)).serve_forever()
`;

/**
 * A PEP 503 simple index served on loopback by python's http.server (its directory listings are the
 * index pages); with `delaySeconds`, each answer comes that much later.
 */
export async function startPackageIndex(packages: readonly StubPackage[], { delaySeconds = 0 } = {}): Promise<PackageIndex> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "pypi-"));
  for (const pkg of packages) {
    const project = path.join(root, "simple", pkg.name.toLowerCase().replace(/[-_.]+/g, "-"));
    fs.mkdirSync(project, { recursive: true });
    // The spec on stdin: a package's scripts may be longer than a command line may.
    const built = spawnSync("python3", ["-c", BUILD_WHEEL, project], { input: JSON.stringify(pkg), encoding: "utf8" });
    if (built.status !== 0) throw new Error(built.stderr);
  }
  const port = await freePort();
  const server: ChildProcess =
    delaySeconds > 0
      ? spawn("python3", ["-c", SLOW_SERVER, String(port), root, String(delaySeconds)], { stdio: "ignore" })
      : spawn("python3", ["-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", root], { stdio: "ignore" });
  for (let i = 0; i < 100; i++) {
    const up = spawnSync("python3", ["-c", `import urllib.request; urllib.request.urlopen("http://127.0.0.1:${port}/simple/")`]);
    if (up.status === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url: `http://127.0.0.1:${port}/simple`,
    stop() {
      server.kill();
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
