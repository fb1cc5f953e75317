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
  stop(): void;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, child: ChildProcess, log: () => string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (child.exitCode !== null) throw new Error(`sshd exited (${child.exitCode}): ${log()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => {
        socket.end();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`sshd did not listen on 127.0.0.1:${port}: ${log()}`);
}

/** A real OpenSSH server on loopback with a throwaway host key and client key; root logs in by key. */
export async function startSshd(): Promise<TestSshServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sshd-"));
  for (const key of ["host_key", "client_key"]) {
    spawnSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, key)], { stdio: "ignore" });
  }
  fs.copyFileSync(path.join(dir, "client_key.pub"), path.join(dir, "authorized_keys"));
  const port = await freePort();
  const config = path.join(dir, "sshd_config");
  fs.writeFileSync(
    config,
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${dir}/host_key`,
      `PidFile ${dir}/sshd.pid`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      "PermitRootLogin prohibit-password",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UsePAM no",
      "StrictModes no",
      "",
    ].join("\n"),
  );
  fs.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  let log = "";
  const child = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", config], { stdio: ["ignore", "ignore", "pipe"] });
  child.stderr!.on("data", (chunk: Buffer) => (log += chunk.toString()));
  await waitForPort(port, child, () => log);
  const hostKey = fs.readFileSync(path.join(dir, "host_key.pub"), "utf8").split(" ").slice(0, 2).join(" ");
  fs.writeFileSync(path.join(dir, "known_hosts"), `[127.0.0.1]:${port} ${hostKey}\n`);
  return {
    port,
    hostKey,
    run(command, stdin = "") {
      // Asynchronous, so servers in this test process keep answering while the command runs.
      const ssh = spawn("ssh", ["-i", `${dir}/client_key`, "-p", String(port), "-o", "StrictHostKeyChecking=yes", "-o", `UserKnownHostsFile=${dir}/known_hosts`, "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1", command]);
      let stdout = "";
      let stderr = "";
      ssh.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      ssh.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      ssh.stdin.end(stdin);
      return new Promise((resolve) => ssh.on("close", (status) => resolve({ status, stdout, stderr })));
    },
    stop() {
      child.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
