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
}

/** Builds real (tiny) wheels with Python's zipfile, with METADATA, WHEEL and a RECORD of sha256 hashes. */
const BUILD_WHEEL = `
import base64, hashlib, json, sys, zipfile
spec = json.loads(sys.argv[1]); out = sys.argv[2]
dist = spec["name"].replace("-", "_")
info = f"{dist}-{spec['version']}.dist-info"
files = {
  f"{spec['module']}/__init__.py": spec["source"],
  f"{info}/METADATA": "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n%s" % (spec["name"], spec["version"], "".join(f"Provides-Extra: {e}\\n" for e in spec.get("extras", []))),
  f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: rbln-serving-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
for name, text in files.items():
  data = text.encode()
  digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
  record.append(f"{name},sha256={digest},{len(data)}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = "\\n".join(record) + "\\n"
with zipfile.ZipFile(f"{out}/{dist}-{spec['version']}-py3-none-any.whl", "w") as whl:
  for name, text in files.items():
    whl.writestr(name, text)
`;

export interface PackageIndex {
  url: string;
  stop(): void;
}

/** A PEP 503 simple index served on loopback by python's http.server (its directory listings are the index pages). */
export async function startPackageIndex(packages: readonly StubPackage[]): Promise<PackageIndex> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "pypi-"));
  for (const pkg of packages) {
    const project = path.join(root, "simple", pkg.name.toLowerCase().replace(/[-_.]+/g, "-"));
    fs.mkdirSync(project, { recursive: true });
    const built = spawnSync("python3", ["-c", BUILD_WHEEL, JSON.stringify(pkg), project], { encoding: "utf8" });
    if (built.status !== 0) throw new Error(built.stderr);
  }
  const port = await freePort();
  const server: ChildProcess = spawn("python3", ["-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", root], { stdio: "ignore" });
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
