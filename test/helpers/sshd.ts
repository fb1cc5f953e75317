import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

export interface CommandResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export interface TestSshServer {
  port: number;
  /** The server's public host key line (`ssh-ed25519 AAAA...`), which `run` insists on. */
  hostKey: string;
  /** Runs a command string the way @pulumi/command's remote.Command does: one SSH session, stdin attached. */
  run(command: string, stdin?: string): Promise<CommandResult>;
  /** root's authorized_keys on this server, where grants under test are written. */
  authorizedKeys: string;
  /** One session with another client key (a file), connecting from `bind` (a loopback address, `ssh -b`). */
  runAs(clientKey: string, command: string, bind?: string): Promise<CommandResult>;
  stop(): void;
}

export async function freePort(address = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, address, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls until address:port accepts connections; `failure` returns a reason to give up early (e.g. the server exited). */
export async function waitForPort(address: string, port: number, failure: () => string | undefined, attempts = 100): Promise<void> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const reason = failure();
    if (reason) throw new Error(reason);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, address, () => {
        socket.end();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listened on ${address}:${port}: ${failure() ?? ""}`);
}

/**
 * Writes a throwaway host key, client key and sshd_config into `dir` for a server on address:port where root
 * logs in by key only. `configDir` is where sshd will see `dir` (differs when sshd runs in another mount namespace).
 * Sessions get a home of their own: root's dotfiles on this machine are not a server's (here its ~/.bashrc runs
 * `pyenv init`, whose rehash lock serialises every session, for up to 60 s each once a killed one leaves it behind).
 */
export function writeSshdFiles(dir: string, address: string, port: number, configDir = dir): string {
  for (const key of ["host_key", "client_key"]) {
    spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, key)], { stdio: "ignore" });
  }
  fs.copyFileSync(path.join(dir, "client_key.pub"), path.join(dir, "authorized_keys"));
  fs.mkdirSync(path.join(dir, "home"), { mode: 0o700 });
  const config = path.join(dir, "sshd_config");
  fs.writeFileSync(
    config,
    [
      `Port ${port}`,
      `ListenAddress ${address}`,
      `HostKey ${configDir}/host_key`,
      `PidFile ${configDir}/sshd.pid`,
      `AuthorizedKeysFile ${configDir}/authorized_keys`,
      "PermitRootLogin prohibit-password",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UsePAM no",
      "StrictModes no",
      `SetEnv HOME=${configDir}/home`,
      "",
    ].join("\n"),
  );
  return config;
}

/** One SSH session as root running `command` with `stdin` attached. Asynchronous, so servers in this process keep answering. */
/** One SSH session as root; with `knownHosts`, the server must present the host key it lists. */
export function runOverSsh(
  clientKey: string,
  address: string,
  port: number,
  command: string,
  stdin = "",
  knownHosts?: string,
  bind?: string,
): Promise<CommandResult> {
  const hostKeyCheck = knownHosts
    ? ["-o", "StrictHostKeyChecking=yes", "-o", `UserKnownHostsFile=${knownHosts}`]
    : ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"];
  const from = bind ? ["-b", bind] : [];
  const ssh = spawn("ssh", [
    "-i",
    clientKey,
    "-o",
    "IdentitiesOnly=yes",
    ...from,
    "-p",
    String(port),
    ...hostKeyCheck,
    "-o",
    "BatchMode=yes",
    "-o",
    "LogLevel=ERROR",
    `root@${address}`,
    command,
  ]);
  let stdout = "";
  let stderr = "";
  ssh.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  ssh.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  ssh.stdin.end(stdin);
  return new Promise((resolve) => ssh.on("close", (status) => resolve({ status, stdout, stderr })));
}

/**
 * A real OpenSSH server on loopback with a throwaway host key and client key; root logs in by key.
 * `keyOptions` go before the client key in authorized_keys (`from="..."`, as the product's grants).
 */
export async function startSshd(keyOptions?: string): Promise<TestSshServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sshd-"));
  const port = await freePort();
  const config = writeSshdFiles(dir, "127.0.0.1", port);
  if (keyOptions) fs.writeFileSync(path.join(dir, "authorized_keys"), `${keyOptions} ${fs.readFileSync(path.join(dir, "client_key.pub"), "utf8")}`);
  fs.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  let log = "";
  const child: ChildProcess = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", config], { stdio: ["ignore", "ignore", "pipe"] });
  child.stderr!.on("data", (chunk: Buffer) => (log += chunk.toString()));
  await waitForPort("127.0.0.1", port, () => (child.exitCode !== null ? `sshd exited (${child.exitCode}): ${log}` : undefined));
  const hostKey = fs.readFileSync(path.join(dir, "host_key.pub"), "utf8").split(" ").slice(0, 2).join(" ");
  fs.writeFileSync(path.join(dir, "known_hosts"), `[127.0.0.1]:${port} ${hostKey}\n`);
  return {
    port,
    hostKey,
    run: (command, stdin) => runOverSsh(`${dir}/client_key`, "127.0.0.1", port, command, stdin, `${dir}/known_hosts`),
    authorizedKeys: path.join(dir, "authorized_keys"),
    runAs: (clientKey, command, bind) => runOverSsh(clientKey, "127.0.0.1", port, command, "", `${dir}/known_hosts`, bind),
    stop() {
      child.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
