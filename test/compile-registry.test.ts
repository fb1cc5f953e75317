import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as https from "node:https";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMPILE_ARTIFACT, reportedDigest } from "../core/render/compileCache";
import { compileJobScript } from "../core/render/kubernetes/compileJob";
import { selfSignedLoopbackCert, startRegistry, type TestRegistry } from "./helpers/ociRegistry";
import { freePort } from "./helpers/sshd";
import { copyStandInVllm } from "./helpers/vllmParser";

/**
 * The compiled-cache registry as compile-flow.sh and registry.sh use it (issue 31), through the
 * compile Job's script (the flow the compile host runs too, without root) under real bash, against a
 * real OCI registry on loopback (Debian's docker-registry, TLS and basic auth; test/helpers/ociRegistry.ts)
 * and against a server on loopback that is not a registry. skopeo trusts their certificates through
 * SSL_CERT_FILE, which Go reads in place of the system's CAs: nothing of this machine is touched.
 * - What "absent" is: only the registry's own "manifest unknown" (or "name unknown") after its /v2/
 *   answered; a /v2/ that answers 404, a 500, a bare 404, no answer: the step fails in one line
 *   naming the registry, and nothing is written.
 * - What a pulled artifact may do: only add files of its own key; never replace another key's
 *   bundle, change a folder the cache has, carry another key's identity, or hold names, links,
 *   sparse files or sizes the cache does not take.
 * - The Job's phases: the compile runs without the registry password, and never calls skopeo.
 */
let registry: TestRegistry;
let work: string;
let caFile: string;
let auth: string;
let notARegistry: { host: string; cert: string; mode: string; stop: () => void };
const KEY = "k1k1k1k1k1k1k1k1";
const OTHER_KEY = "k2k2k2k2k2k2k2k2";
const repository = (name = "ml/rbln-compile-cache") => `${registry.host}/${name}`;

/** An HTTPS server on loopback that answers as `mode` says: its /v2/ 404 (not a registry), or 500s, or a bare 404 for manifests. */
async function startNotARegistry(dir: string): Promise<typeof notARegistry> {
  const { key, cert } = selfSignedLoopbackCert(dir);
  const state = { mode: "ping-404" };
  const server = https.createServer({ key, cert }, (request, response) => {
    const ping = request.url === "/v2/";
    if (state.mode === "ping-404" && ping) return response.writeHead(404).end("404 page not found\n");
    if (state.mode === "ping-500" && ping) return response.writeHead(500).end();
    if (ping) return response.writeHead(200, { "docker-distribution-api-version": "registry/2.0" }).end("{}");
    if (state.mode === "manifest-500") return response.writeHead(500).end();
    return response.writeHead(404).end();
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    host: `127.0.0.1:${port}`,
    cert,
    get mode() {
      return state.mode;
    },
    set mode(mode: string) {
      state.mode = mode;
    },
    stop: () => server.close(),
  };
}

beforeAll(async () => {
  registry = await startRegistry();
  work = fs.mkdtempSync(path.join(os.tmpdir(), "compile-registry-"));
  notARegistry = await startNotARegistry(fs.mkdtempSync(path.join(work, "tls-")));
  caFile = path.join(work, "ca.pem");
  fs.writeFileSync(caFile, registry.caCert + notARegistry.cert);
  auth = path.join(work, "auth.json");
  fs.writeFileSync(auth, '{"auths":{}}\n');
  skopeo(["login", "--authfile", auth, "--username", registry.user, "--password-stdin", registry.host], registry.password);
  copyStandInVllm(work, "vllm-bin");
}, 60_000);

afterAll(() => {
  registry?.stop();
  notARegistry?.stop();
  fs.rmSync(work, { recursive: true, force: true });
});

function skopeo(args: string[], input?: string): string {
  const run = spawnSync("skopeo", args, { input, encoding: "utf8", env: { PATH: process.env.PATH, SSL_CERT_FILE: caFile } });
  if (run.status !== 0) throw new Error(`skopeo ${args.join(" ")}: ${run.stderr}`);
  return run.stdout;
}

function python(code: string, ...args: string[]): string {
  const run = spawnSync("python3", ["-c", code, ...args], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(run.stderr);
  return run.stdout;
}

interface Member {
  name: string;
  content?: string;
  /** A folder with this mode. */
  dirMode?: number;
  /** A symbolic link to this target. */
  link?: string;
}

/** A tar of `members`, written by Python's tarfile (so any name, mode or type can be made), at `file`. */
function tarOf(file: string, members: Member[]): string {
  python(
    `import io, json, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as tar:
    for m in json.loads(sys.argv[2]):
        info = tarfile.TarInfo(m["name"])
        if "dirMode" in m:
            info.type, info.mode = tarfile.DIRTYPE, m["dirMode"]
            tar.addfile(info)
        elif "link" in m:
            info.type, info.linkname = tarfile.SYMTYPE, m["link"]
            tar.addfile(info)
        else:
            data = m["content"].encode()
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))`,
    file,
    JSON.stringify(members),
  );
  return file;
}

/**
 * Pushes an artifact of rbln-serving's type with `layer` as its one layer under tag `tag`, its
 * config and its annotation naming `configKey` and `annotationKey` (the tag by default), as
 * registry.sh's push lays it out. Returns its digest.
 */
function pushArtifact(tag: string, layer: string, { configKey = tag, annotationKey = tag, repo = repository() } = {}): string {
  const layout = fs.mkdtempSync(path.join(work, "layout-"));
  python(
    `import hashlib, json, os, sys
layout, layer, tag, config_key, annotation_key, artifact, config_type, layer_type = sys.argv[1:9]
os.makedirs(os.path.join(layout, "blobs", "sha256"))
def blob(data):
    digest = hashlib.sha256(data).hexdigest()
    open(os.path.join(layout, "blobs", "sha256", digest), "wb").write(data)
    return {"digest": "sha256:" + digest, "size": len(data)}
dump = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":")).encode()
manifest = dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": artifact,
    "config": {"mediaType": config_type, **blob(dump({"compileKey": config_key}))},
    "layers": [{"mediaType": layer_type, **blob(open(layer, "rb").read())}],
    "annotations": {"ai.rbln-serving.compile-key": annotation_key}})
m = blob(manifest)
open(os.path.join(layout, "index.json"), "wb").write(dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", **m, "annotations": {"org.opencontainers.image.ref.name": tag}}]}))
open(os.path.join(layout, "oci-layout"), "wb").write(dump({"imageLayoutVersion": "1.0.0"}))
print(m["digest"])`,
    layout,
    layer,
    tag,
    configKey,
    annotationKey,
    COMPILE_ARTIFACT.artifactType,
    COMPILE_ARTIFACT.configType,
    COMPILE_ARTIFACT.layerType,
  );
  skopeo(["copy", "--quiet", "--preserve-digests", "--authfile", auth, `oci:${layout}:${tag}`, `docker://${repo}:${tag}`]);
  return `sha256:${python("import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())", path.join(layout, "blobs", "sha256", JSON.parse(fs.readFileSync(path.join(layout, "index.json"), "utf8")).manifests[0].digest.slice(7))).trim()}`;
}

interface StepOptions {
  key?: string;
  compileHere?: boolean;
  repo?: string;
  phase?: "all" | "pull" | "compile" | "push";
  /** The registry user; none: anonymous, no login (a registry that lets anyone read). */
  username?: string | null;
  /** The Job's environment: the password only where the Job gives it (the pull and push containers). */
  password?: boolean;
  /** A folder put first on PATH (a skopeo that records or meddles). */
  pathFirst?: string;
  env?: Record<string, string>;
}

/** The compile Job's script for one key on the "volume" `volume`, the stand-in vllm as its launch script. */
async function step(
  volume: string,
  { key = KEY, compileHere = false, repo = repository(), phase = "all", username = registry.user, password = true, pathFirst, env = {} }: StepOptions = {},
) {
  const port = await freePort();
  fs.writeFileSync(`${volume}/launch.sh`, `exec ${work}/vllm-bin serve org/model --port ${port} --host 127.0.0.1\n`);
  const script = compileJobScript({
    key,
    roles: ["main"],
    marker: `${volume}/vllm/rbln-serving-complete/compile-${key}`,
    compileHere,
    launch: `${volume}/launch.sh`,
    ports: [port],
    timeoutSeconds: 60,
    intervalSeconds: 1,
    registry: { repository: repo, ...(username ? { username } : {}) },
  });
  // Not spawnSync: the server that is not a registry answers from this process.
  const child = spawn("bash", ["-c", script, "compile-job.sh", phase], {
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: `${pathFirst ? `${pathFirst}:` : ""}${process.env.PATH}`,
      // A home of its own: bash on a socket reads ~/.bashrc (this machine's prints noise).
      HOME: volume,
      SSL_CERT_FILE: caFile,
      VLLM_CACHE_ROOT: `${volume}/vllm`,
      VLLM_RBLN_COMPILE_ONLY: "1",
      VLLM_RBLN_USE_VLLM_MODEL: "1",
      RBLN_FORCE_NPU_NAME: "RBLN-CR13",
      FAKE_VLLM_READY_AFTER: "0",
      ...(password ? { REGISTRY_PASSWORD: registry.password } : {}),
      ...env,
    },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const errors = stderr.trim().split("\n").filter(Boolean);
  return { status, stdout, errors, last: stdout.trimEnd().split("\n").pop() };
}

/** Every path under the volume's cache with its mode and, for files, content: what a step must leave as it was. */
function listing(volume: string): string[] {
  const root = `${volume}/vllm`;
  if (!fs.existsSync(root)) return [];
  return (fs.readdirSync(root, { recursive: true }) as string[]).sort().map((p) => {
    const stat = fs.lstatSync(path.join(root, p));
    return `${p} ${(stat.mode & 0o7777).toString(8)} ${stat.isFile() ? fs.readFileSync(path.join(root, p), "utf8") : ""}`;
  });
}

const volume = () => {
  const dir = fs.mkdtempSync(path.join(work, "volume-"));
  fs.mkdirSync(`${dir}/vllm/rbln`, { recursive: true });
  return dir;
};

describe("a key the registry does not have: only the registry's own word for it", { timeout: 60_000 }, () => {
  it("a repository the registry has never seen is 'manifest unknown': the key is absent, and a pull-only step leaves it to the first start", async () => {
    const v = volume();
    const run = await step(v, { repo: repository("ml/never-pushed") });
    expect([run.status, run.errors]).toEqual([0, []]);
    expect(run.last).toBe(`compiled ${KEY} none`);
    expect(run.stdout).toContain(`${repository("ml/never-pushed")} has no ${KEY}: the first pod of main compiles it`);
  });

  it.each([
    [
      "a /v2/ that answers 404 (a web server, not a registry)",
      "ping-404",
      /pinging container registry 127\.0\.0\.1:\d+: invalid status code from registry 404 \(Not Found\)$/,
    ],
    ["a /v2/ that answers 500", "ping-500", /pinging container registry 127\.0\.0\.1:\d+: invalid status code from registry 500 \(Internal Server Error\)$/],
    [
      "manifests answered with 500",
      "manifest-500",
      /reading manifest \w+ in 127\.0\.0\.1:\d+\/ml\/cache: received unexpected HTTP status: 500 Internal Server Error$/,
    ],
    ["manifests answered with a bare 404, no registry error", "manifest-404", /reading manifest \w+ in 127\.0\.0\.1:\d+\/ml\/cache: StatusCode: 404,$/],
  ])("%s fails the step in one line naming the registry; nothing is written", async (_, mode, why) => {
    notARegistry.mode = mode;
    const v = volume();
    const before = listing(v);
    const run = await step(v, { repo: `${notARegistry.host}/ml/cache`, compileHere: true, username: null, password: false });
    expect(run.status).toBe(1);
    expect(run.errors).toHaveLength(1);
    expect(run.errors[0]).toMatch(new RegExp(`^compile job ${KEY}: asking ${notARegistry.host}/ml/cache for ${KEY} failed: `));
    expect(run.errors[0]).toMatch(why);
    expect(run.stdout).not.toContain("compiling");
    expect(listing(v)).toEqual(before);
  });

  it("a registry that is down fails the step in one line naming it, before anything is written; the password is never printed", async () => {
    const down = `127.0.0.1:${await freePort()}`;
    const v = volume();
    const before = listing(v);
    const run = await step(v, { repo: `${down}/ml/cache`, compileHere: true });
    expect(run.status).toBe(1);
    expect(run.errors).toEqual([expect.stringMatching(new RegExp(`^compile job ${KEY}: login to ${down} as ${registry.user} failed: .*connection refused$`))]);
    expect(run.stdout + run.errors.join("\n")).not.toContain(registry.password);
    expect(listing(v)).toEqual(before);
  });
});

describe("a pulled artifact adds only its own key's files", { timeout: 60_000 }, () => {
  /** A volume where another key's bundle is in place, as its pull or compile left it. */
  function volumeWithOtherKey(): string {
    const v = volume();
    const bundle = `${v}/vllm/rbln/org_model-00000000/aaaaaaaaaaaaaaaa/rank0/mega_cache.bin`;
    fs.mkdirSync(path.dirname(bundle), { recursive: true });
    fs.writeFileSync(bundle, "the other key's bundle\n");
    fs.mkdirSync(`${v}/vllm/rbln-serving-complete`, { recursive: true });
    fs.writeFileSync(`${v}/vllm/rbln-serving-complete/compile-${OTHER_KEY}`, "local\n");
    fs.writeFileSync(`${v}/vllm/rbln-serving-complete/compile-${OTHER_KEY}.files`, "org_model-00000000/aaaaaaaaaaaaaaaa/rank0/mega_cache.bin\n");
    return v;
  }
  const layer = (name: string, members: Member[]) => tarOf(path.join(work, `${name}.tar`), members);

  it("adds its files beside the other key's, shares a file with the same bytes, and leaves the folders it finds as they are (a folder of mode 0000 in the tar)", async () => {
    const v = volumeWithOtherKey();
    fs.chmodSync(`${v}/vllm/rbln/org_model-00000000`, 0o750);
    const tag = "c0c0c0c0c0c0c0c0";
    const digest = pushArtifact(
      tag,
      layer("modes", [
        { name: "org_model-00000000", dirMode: 0 },
        { name: "org_model-00000000/aaaaaaaaaaaaaaaa/rank0/mega_cache.bin", content: "the other key's bundle\n" },
        { name: "org_model-00000000/bbbbbbbbbbbbbbbb/rank0/mega_cache.bin", content: "this key's bundle\n" },
      ]),
    );
    const run = await step(v, { key: tag });
    expect([run.status, run.errors]).toEqual([0, []]);
    expect(reportedDigest(run.stdout, tag)).toBe(digest);
    expect((fs.statSync(`${v}/vllm/rbln/org_model-00000000`).mode & 0o7777).toString(8)).toBe("750");
    expect(fs.readFileSync(`${v}/vllm/rbln/org_model-00000000/bbbbbbbbbbbbbbbb/rank0/mega_cache.bin`, "utf8")).toBe("this key's bundle\n");
    expect(fs.readFileSync(`${v}/vllm/rbln-serving-complete/compile-${tag}.files`, "utf8")).toBe(
      "org_model-00000000/aaaaaaaaaaaaaaaa/rank0/mega_cache.bin\norg_model-00000000/bbbbbbbbbbbbbbbb/rank0/mega_cache.bin\n",
    );
  });

  it.each<[string, () => { tag: string; digestOf: () => string }, RegExp]>([
    [
      "one that would replace another key's bundle",
      () => {
        const tag = "d0d0d0d0d0d0d0d0";
        const l = layer("replace", [{ name: "org_model-00000000/aaaaaaaaaaaaaaaa/rank0/mega_cache.bin", content: "not the other key's bundle\n" }]);
        return { tag, digestOf: () => pushArtifact(tag, l) };
      },
      new RegExp(
        `: org_model-00000000/aaaaaaaaaaaaaaaa/rank0/mega_cache\\.bin is in \\S+ already with other content \\(key ${OTHER_KEY}\\); a key's files never replace another's; refused, nothing changed$`,
      ),
    ],
    [
      "one whose config names another key (another key's artifact under this key's tag)",
      () => {
        const tag = "d1d1d1d1d1d1d1d1";
        const l = layer("config", [{ name: "org_model-00000000/cccccccccccccccc/rank0/mega_cache.bin", content: "x\n" }]);
        return { tag, digestOf: () => pushArtifact(tag, l, { configKey: OTHER_KEY }) };
      },
      new RegExp(`@sha256:[0-9a-f]{64}: its config names key '${OTHER_KEY}', not d1d1d1d1d1d1d1d1: another key's artifact; refused, nothing changed$`),
    ],
    [
      "one whose annotation names another key",
      () => {
        const tag = "d2d2d2d2d2d2d2d2";
        const l = layer("annotation", [{ name: "org_model-00000000/cccccccccccccccc/rank0/mega_cache.bin", content: "x\n" }]);
        return { tag, digestOf: () => pushArtifact(tag, l, { annotationKey: OTHER_KEY }) };
      },
      new RegExp(`: its annotation names key '${OTHER_KEY}', not d2d2d2d2d2d2d2d2: another key's artifact; refused, nothing changed$`),
    ],
    [
      "one with a newline in a name (a wrong file list)",
      () => {
        const tag = "d3d3d3d3d3d3d3d3";
        const l = layer("newline", [{ name: "org_model-00000000/x\nrank0/mega_cache.bin", content: "x\n" }]);
        return { tag, digestOf: () => pushArtifact(tag, l) };
      },
      /: its layer holds a name the cache does not take \('org_model-00000000\/x\\nrank0\/mega_cache\.bin'\): only letters, digits and \._@\+=,:%~- under the cache; refused, nothing changed$/,
    ],
    [
      "one with a link",
      () => {
        const tag = "d4d4d4d4d4d4d4d4";
        const l = layer("link", [{ name: "org_model-00000000/evil", link: "/etc/passwd" }]);
        return { tag, digestOf: () => pushArtifact(tag, l) };
      },
      /: its layer holds links, devices, sparse files or paths outside the cache \('org_model-00000000\/evil'\); refused, nothing changed$/,
    ],
    [
      "one with a sparse file (its size unbounded by the layer's)",
      () => {
        const tag = "d5d5d5d5d5d5d5d5";
        const src = fs.mkdtempSync(path.join(work, "sparse-"));
        fs.mkdirSync(`${src}/org_model-00000000`);
        fs.writeFileSync(`${src}/org_model-00000000/holes.bin`, "");
        fs.truncateSync(`${src}/org_model-00000000/holes.bin`, 64 * 1024 * 1024 * 1024);
        const l = path.join(work, "sparse.tar");
        const made = spawnSync("tar", ["--sparse", "--format=pax", "-cf", l, "-C", src, "org_model-00000000/holes.bin"], { encoding: "utf8" });
        if (made.status !== 0) throw new Error(made.stderr);
        return { tag, digestOf: () => pushArtifact(tag, l) };
      },
      /: its layer holds links, devices, sparse files or paths outside the cache \('org_model-00000000\/holes\.bin'\); refused, nothing changed$/,
    ],
    [
      "one whose member says it is larger than the layer (cut short)",
      () => {
        const tag = "d6d6d6d6d6d6d6d6";
        const l = layer("cut", [{ name: "org_model-00000000/big/mega_cache.bin", content: "y".repeat(64 * 1024) }]);
        fs.truncateSync(l, 16 * 1024);
        return { tag, digestOf: () => pushArtifact(tag, l) };
      },
      /: its layer (says its files hold \d+ bytes, more than the \d+ bytes it has|cannot be read as a tar of the cache .*); refused, nothing changed$/,
    ],
  ])("refuses %s in one line, and changes nothing", async (_, make, why) => {
    const v = volumeWithOtherKey();
    const { tag, digestOf } = make();
    digestOf();
    const before = listing(v);
    const run = await step(v, { key: tag });
    expect(run.status).toBe(1);
    expect(run.errors).toHaveLength(1);
    expect(run.errors[0]).toMatch(new RegExp(`^compile job ${tag}: `));
    expect(run.errors[0]).toMatch(why);
    expect(listing(v)).toEqual(before);
  });

  it("pulls the digest the tag pointed to when asked, even if the tag moves before the pull", async () => {
    const tag = "e0e0e0e0e0e0e0e0";
    const first = pushArtifact(tag, layer("first", [{ name: "org_model-00000000/eeeeeeeeeeeeeeee/rank0/mega_cache.bin", content: "first\n" }]));
    // Another artifact of the same key, kept elsewhere until the tag is moved to it.
    const second = pushArtifact(tag, layer("second", [{ name: "org_model-00000000/eeeeeeeeeeeeeeee/rank0/mega_cache.bin", content: "second\n" }]), {
      repo: repository("ml/staging"),
    });
    // A skopeo that, right after the step asked for the tag's digest, moves the tag to that other artifact.
    const bin = fs.mkdtempSync(path.join(work, "bin-"));
    fs.writeFileSync(
      `${bin}/skopeo`,
      [
        "#!/usr/bin/env bash",
        '/usr/bin/skopeo "$@"; status=$?',
        `if [ "$1" = inspect ] && [ ! -e ${bin}/moved ]; then touch ${bin}/moved`,
        `  /usr/bin/skopeo copy --quiet --preserve-digests --authfile ${auth} docker://${repository("ml/staging")}@${second} docker://${repository()}:${tag}`,
        "fi",
        'exit "$status"',
        "",
      ].join("\n"),
      { mode: 0o755 },
    );
    const v = volume();
    const run = await step(v, { key: tag, pathFirst: bin });
    expect([run.status, run.errors]).toEqual([0, []]);
    expect(fs.existsSync(`${bin}/moved`)).toBe(true);
    expect(second).not.toBe(first);
    expect(reportedDigest(run.stdout, tag)).toBe(first);
    expect(fs.readFileSync(`${v}/vllm/rbln/org_model-00000000/eeeeeeeeeeeeeeee/rank0/mega_cache.bin`, "utf8")).toBe("first\n");
  });
});

describe("the compile Job's phases: pull, compile without the password, push", { timeout: 120_000 }, () => {
  it("compiles in a container that has no password and calls no skopeo, then pushes; a second volume pulls what was pushed", async () => {
    const key = "f0f0f0f0f0f0f0f0";
    const bin = fs.mkdtempSync(path.join(work, "bin-"));
    const calls = `${bin}/calls`;
    fs.writeFileSync(`${bin}/skopeo`, `#!/usr/bin/env bash\necho "$PHASE $1" >> ${calls}\nexec /usr/bin/skopeo "$@"\n`, { mode: 0o755 });
    const v = volume();
    const phase = (name: "pull" | "compile" | "push", password: boolean) =>
      step(v, { key, compileHere: true, phase: name, password, pathFirst: bin, env: { PHASE: name } });
    const pull = await phase("pull", true);
    expect([pull.status, pull.errors]).toEqual([0, []]);
    const compile = await phase("compile", false);
    expect([compile.status, compile.errors]).toEqual([0, []]);
    expect(compile.stdout).toContain(`compile job ${key}: compiled 1 file(s) in `);
    const push = await phase("push", true);
    expect([push.status, push.errors]).toEqual([0, []]);
    const digest = reportedDigest(push.stdout, key)!;
    expect(push.stdout).toContain(`pushed to ${repository()}@${digest}`);
    const byPhase = fs.readFileSync(calls, "utf8").trim().split("\n");
    expect(byPhase.filter((c) => c.startsWith("compile "))).toEqual([]);
    expect(byPhase).toEqual(expect.arrayContaining(["pull login", "pull inspect", "push login", "push inspect", "push copy"]));
    // Another volume: the pull brings it, the compile has nothing to do, the push reports the digest.
    const other = volume();
    const again = (name: "pull" | "compile" | "push", password: boolean) => step(other, { key, compileHere: true, phase: name, password });
    expect((await again("pull", true)).stdout).toContain(`pulled ${repository()}@${digest} and checked it: nothing to compile`);
    expect((await again("compile", false)).stdout).not.toContain("compiling");
    expect((await again("push", true)).last).toBe(`compiled ${key} ${digest}`);
  });
});
