import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { freePort, waitForPort } from "./sshd";

/**
 * A real OCI registry on loopback: Debian's docker-registry (distribution 2.8), with TLS from a
 * certificate made for 127.0.0.1 (the clients trust it as a CA in their certs.d, as a site trusts
 * its own registry's CA; no client turns TLS checks off) and htpasswd (bcrypt) basic auth, its blobs
 * on a folder of its own so a test can corrupt one.
 */
export interface TestRegistry {
  /** `127.0.0.1:<port>`, the registry's name in repositories and in certs.d. */
  host: string;
  user: string;
  password: string;
  /** The CA certificate (here: the server's self-signed certificate), PEM. */
  caCert: string;
  /** Where distribution keeps the blob of a digest (`sha256:...`). */
  blobPath(digest: string): string;
  stop(): void;
}

/** A self-signed certificate for 127.0.0.1 (key.pem, cert.pem in `dir`), valid for a day: a test's TLS server on loopback. */
export function selfSignedLoopbackCert(dir: string): { key: string; cert: string } {
  const made = spawnSync(
    "openssl",
    ["req", "-x509", "-newkey", "ed25519", "-nodes", "-keyout", `${dir}/key.pem`, "-out", `${dir}/cert.pem`, "-days", "1"].concat([
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
    ]),
    { encoding: "utf8" },
  );
  if (made.status !== 0) throw new Error(`openssl: ${made.stderr}`);
  return { key: fs.readFileSync(`${dir}/key.pem`, "utf8"), cert: fs.readFileSync(`${dir}/cert.pem`, "utf8") };
}

export async function startRegistry(user = "ci", password = "s3cret-registry-pw"): Promise<TestRegistry> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-registry-"));
  const port = await freePort("127.0.0.1");
  const host = `127.0.0.1:${port}`;
  selfSignedLoopbackCert(dir);
  // distribution's htpasswd takes bcrypt only; Python's crypt (libxcrypt) makes one. At bcrypt's
  // lowest cost (4): the registry checks it on every request, and skopeo sends dozens per copy.
  const hash = spawnSync(
    "python3",
    ["-W", "ignore", "-c", "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))", password],
    { encoding: "utf8" },
  );
  if (hash.status !== 0) throw new Error(`bcrypt: ${hash.stderr}`);
  fs.writeFileSync(`${dir}/htpasswd`, `${user}:${hash.stdout.trim()}\n`);
  fs.writeFileSync(
    `${dir}/config.yml`,
    [
      "version: 0.1",
      "log: {level: warn}",
      `storage: {filesystem: {rootdirectory: ${dir}/store}, delete: {enabled: true}}`,
      `http: {addr: "${host}", tls: {certificate: ${dir}/cert.pem, key: ${dir}/key.pem}}`,
      `auth: {htpasswd: {realm: rbln-test, path: ${dir}/htpasswd}}`,
      "",
    ].join("\n"),
  );
  const server = spawn("docker-registry", ["serve", `${dir}/config.yml`], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  server.stdout!.on("data", (c: Buffer) => (log += c.toString()));
  server.stderr!.on("data", (c: Buffer) => (log += c.toString()));
  await waitForPort("127.0.0.1", port, () => (server.exitCode !== null ? `docker-registry exited (${server.exitCode}): ${log}` : undefined));
  return {
    host,
    user,
    password,
    caCert: fs.readFileSync(`${dir}/cert.pem`, "utf8"),
    blobPath: (digest) => {
      const hex = digest.replace(/^sha256:/, "");
      return `${dir}/store/docker/registry/v2/blobs/sha256/${hex.slice(0, 2)}/${hex}/data`;
    },
    stop: () => {
      server.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
