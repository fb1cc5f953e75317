import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { z } from "zod";
import type { Host } from "../core/config/schema";
import { DrainFacts, HostRankFacts } from "../core/status/hostRank";
import type { HostStatusRead } from "../core/render/hosts/statusRead";
import { failureLine, runBounded } from "./boundedRun";

/** How `status` reaches the hosts: OpenSSH's client, with the stack's host keys and the user's own key. */
export interface SshOptions {
  /** A private key file (`ssh -i`); unset, ssh's own (the agent, ~/.ssh/id_*). */
  identity?: string;
  /** The stack's insecureSkipHostKeyCheck: any host key is taken. */
  skipHostKeyCheck: boolean;
  /** Extra `-o` options, for tests. */
  extraOptions?: string[];
}

/** What one host's read gave: each rank's facts by key, the drains (router host), the host's clock; or why it failed. */
export type HostReadResult = { ranks: Map<string, HostRankFacts>; drains: Map<string, DrainFacts>; now: number } | { error: string };

const READ_TIMEOUT_MS = 60_000;
/** At most this much of a reader's output is kept: a few kB per rank. */
const MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

const ReaderOutput = z.object({ now: z.number().finite(), ranks: z.record(z.string(), z.unknown()), drains: z.record(z.string(), z.unknown()) });

/** `-o` options naming the one key the server may present, under an alias of our own, in a known_hosts file written for it. */
function hostKeyOptions(server: Pick<Host, "name" | "hostKey">, alias: string, knownHosts: string, skip: boolean): string[] {
  if (skip || server.hostKey === undefined) return ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"];
  fs.appendFileSync(knownHosts, `${alias} ${server.hostKey}\n`);
  return ["-o", `HostKeyAlias=${alias}`, "-o", "StrictHostKeyChecking=yes", "-o", `UserKnownHostsFile=${knownHosts}`, "-o", "GlobalKnownHostsFile=/dev/null"];
}

const shellWord = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

/** ssh's arguments for `host`, through its bastion (ProxyCommand, so the bastion's key is checked the same way). */
export function sshArguments(host: Host, ssh: SshOptions, knownHosts: string): string[] {
  const common = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR", ...(ssh.extraOptions ?? [])];
  const identity = ssh.identity ? ["-i", ssh.identity, "-o", "IdentitiesOnly=yes"] : [];
  const proxy = host.proxy
    ? [
        "-o",
        `ProxyCommand=${[
          "ssh",
          ...common,
          ...identity,
          ...hostKeyOptions({ name: `${host.name}-proxy`, hostKey: host.proxy.hostKey }, `rbln-proxy-${host.name}`, knownHosts, ssh.skipHostKeyCheck),
          "-p",
          String(host.proxy.port),
          "-W",
          "%h:%p",
          `${host.proxy.user}@${host.proxy.address}`,
        ]
          .map((w) => (w === "%h:%p" ? w : shellWord(w)))
          .join(" ")}`,
      ]
    : [];
  return [
    ...common,
    ...identity,
    ...hostKeyOptions(host, `rbln-${host.name}`, knownHosts, ssh.skipHostKeyCheck),
    ...proxy,
    "-p",
    String(host.port),
    `${host.user}@${host.address}`,
  ];
}

/** Each entry of a record that parses, by its key; one that does not is left out (its rank reads as unread). */
function parsedEntries<T>(record: Record<string, unknown>, schema: z.ZodType<T>): Map<string, T> {
  return new Map(Object.entries(record).flatMap(([key, value]) => (schema.safeParse(value).success ? [[key, schema.parse(value)] as const] : [])));
}

/** Runs one host's reader over SSH. */
export async function readHost(read: HostStatusRead, ssh: SshOptions): Promise<HostReadResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rbln-status-"));
  try {
    const result = await runBounded("ssh", [...sshArguments(read.host, ssh, path.join(dir, "known_hosts")), read.command], {
      stdin: read.script,
      timeoutMs: READ_TIMEOUT_MS,
      maxStdoutBytes: MAX_OUTPUT_BYTES,
    });
    if (result.code !== 0) return { error: failureLine(result, "ssh") };
    let output: z.infer<typeof ReaderOutput>;
    try {
      output = ReaderOutput.parse(JSON.parse(result.stdout));
    } catch {
      return { error: "the host's reader printed no status document" };
    }
    return { ranks: parsedEntries(output.ranks, HostRankFacts), drains: parsedEntries(output.drains, DrainFacts), now: output.now };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
