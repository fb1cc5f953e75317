import { STDOUT_REF, type Registration } from "./pulumiHarness";

/**
 * A small stand-in for the Pulumi engine's `up`, for tests that run the program's commands for
 * real: it takes the commands the program registered under the mock runtime and runs each whose
 * inputs changed since the last run, over SSH, as the engine would: a command starts once all its
 * dependencies are done (an unchanged one is done once its own are), independent ones run side by side, and after the first failure no new
 * command starts (the engine's default) while those already running finish. A failed update keeps
 * the previous inputs in the state, so the next `up` tries it again. A command whose stdin is another
 * command's stdout (under mocks a reference, see `stdoutRef`) gets what that command printed, in this
 * run or, when it did not run again, as kept in the state: the engine passes outputs the same way.
 */
export interface CommandRun {
  name: string;
  status: number | null;
  stdout: string;
  stderr: string;
  startedAt: number;
  endedAt: number;
}

export interface UpResult {
  runs: CommandRun[];
  failed: CommandRun[];
  /** Commands whose inputs changed but that never started, because something failed first. */
  notStarted: string[];
}

export type Executor = (
  connection: { host: string; port: number },
  command: string,
  stdin: string,
) => Promise<{ status: number | null; stdout: string; stderr: string }>;

const COMMAND = "command:remote:Command";

export class FakeEngine {
  /** URN → the inputs the last successful run left in the state. */
  private readonly state = new Map<string, string>();
  /** Command name → its stdout in the state (trimmed at the end, as @pulumi/command does). */
  private readonly stdouts = new Map<string, string>();

  constructor(
    private readonly execute: Executor,
    /** Commands taken as done without running (e.g. preflight on a host without NPUs). */
    private readonly assumeDone: (name: string) => boolean = () => false,
  ) {}

  async up(registrations: readonly Registration[]): Promise<UpResult> {
    const commands = registrations.filter((r) => r.type === COMMAND);
    const byUrn = new Map(commands.map((r) => [r.urn, r]));
    const fingerprint = (r: Registration) => JSON.stringify({ create: r.inputs.create, stdin: r.inputs.stdin, connection: r.inputs.connection });
    const pending = new Set(commands.filter((r) => this.state.get(r.urn) !== fingerprint(r) && !this.assumeDone(r.name)).map((r) => r.urn));
    // Unchanged ("same") commands are done once their dependencies are: the engine registers a resource only
    // after those it depends on, so a wave's unchanged units still wait for the previous wave's changes.
    const same = new Set(commands.filter((r) => !pending.has(r.urn)).map((r) => r.urn));
    const done = new Set<string>();
    const runs: CommandRun[] = [];
    const failed: CommandRun[] = [];
    const running = new Map<string, Promise<void>>();

    const start = (r: Registration) => {
      pending.delete(r.urn);
      const startedAt = Date.now();
      const { host, port } = r.inputs.connection;
      const stdin = String(r.inputs.stdin ?? "").replace(STDOUT_REF, (_, name: string) => {
        const stdout = this.stdouts.get(name);
        if (stdout === undefined) throw new Error(`${r.name} reads the stdout of ${name}, which has not run`);
        return stdout;
      });
      const promise = this.execute({ host, port }, r.inputs.create, stdin).then((result) => {
        const run = { name: r.name, ...result, startedAt, endedAt: Date.now() };
        runs.push(run);
        running.delete(r.urn);
        if (result.status === 0) {
          done.add(r.urn);
          this.state.set(r.urn, fingerprint(r));
          this.stdouts.set(r.name, result.stdout.trimEnd());
        } else failed.push(run);
      });
      running.set(r.urn, promise);
    };

    for (;;) {
      const ready = (r: Registration) => r.dependencies.filter((d) => byUrn.has(d)).every((d) => done.has(d));
      for (let changed = true; changed; ) {
        changed = false;
        for (const urn of [...same]) {
          if (!ready(byUrn.get(urn)!)) continue;
          same.delete(urn);
          done.add(urn);
          changed = true;
        }
      }
      if (failed.length === 0) {
        for (const urn of [...pending]) {
          const r = byUrn.get(urn)!;
          if (ready(r)) start(r);
        }
      }
      if (running.size === 0) break;
      await Promise.race(running.values());
    }
    return { runs, failed, notStarted: [...pending].map((urn) => byUrn.get(urn)!.name) };
  }
}
