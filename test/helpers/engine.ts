import { STDOUT_REF, type Registration } from "./pulumiHarness";

/**
 * A small stand-in for the Pulumi engine's `up`, for tests that run the program's commands for
 * real: it takes the commands the program registered under the mock runtime, compares them with
 * its state, and runs over SSH what `pulumi up` would, as @pulumi/command 1.2.1 decides it
 * (provider/pkg/provider/remote in pulumi/pulumi-command at v1.2.1, with pulumi-go-provider
 * v1.3.0's default diff: only a change of `triggers`, or of a property named in the resource's
 * `replaceOnChanges`, replaces; every other change, the connection's too, is an update):
 *
 * - create: a command not in the state runs its `create`;
 * - update: a command whose inputs changed runs its `update`, else its `create`, with the new inputs
 *   (on the new connection);
 * - replace: with `deleteBeforeReplace` the old `delete` runs (old connection, old stdin) and then the
 *   new `create`, in the command's place in the order; without it the new `create` runs there and
 *   the old one is deleted with the deletes;
 * - delete: a command in the state that the program no longer registers runs its `delete` (as
 *   recorded in the state), after every create and update, dependents before what they depend on,
 *   independent ones side by side; `retainOnDelete` drops it from the state without running it.
 *
 * A step starts once all its dependencies are done (an unchanged command is done once its own are:
 * the engine registers a resource only after those it depends on, so a wave's unchanged units still
 * wait for the previous wave's changes), independent ones run side by side, and after
 * the first failure no new step starts (the engine's default), deletes included, while those
 * already running finish. A failed update keeps the previous inputs in the state, so the next `up`
 * tries it again; a failed delete keeps the command in the state. `customTimeouts` are honoured:
 * a step that runs longer fails (the remote process is not stopped: the provider's SSH session
 * does not watch the engine's deadline either). A command whose stdin is another command's stdout
 * (under mocks a reference, see `stdoutRef`) gets what that command printed, in this run or, when
 * it did not run again, as kept in the state: the engine passes outputs the same way.
 */
export interface CommandRun {
  name: string;
  /** What ran: the create (or the update that ran it), or the delete. */
  operation: "create" | "update" | "delete";
  status: number | null;
  stdout: string;
  stderr: string;
  startedAt: number;
  endedAt: number;
}

export interface UpResult {
  runs: CommandRun[];
  failed: CommandRun[];
  /** Commands whose inputs changed (or that were to be deleted) but that never started, because something failed first. */
  notStarted: string[];
}

export type Executor = (
  connection: { host: string; port: number },
  command: string,
  stdin: string,
) => Promise<{ status: number | null; stdout: string; stderr: string }>;

const COMMAND = "command:remote:Command";

/** What the state keeps of a command that ran: enough to compare, to delete it, and to order deletes. */
interface Recorded {
  urn: string;
  name: string;
  inputs: Record<string, any>;
  stdout: string;
  dependencies: string[];
  retainOnDelete: boolean;
  deleteTimeout?: string;
}

/** A step of one `up`. */
type Step =
  | { kind: "create" | "update"; r: Registration; old?: Recorded }
  | { kind: "replace"; r: Registration; old: Recorded; deleteFirst: boolean }
  | { kind: "delete"; old: Recorded };

/** The inputs that decide whether a command changed (what the provider diffs). */
const DIFFED = ["create", "update", "delete", "stdin", "connection", "environment", "triggers", "logging", "addPreviousOutputInEnv"] as const;

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/** Milliseconds of a Pulumi duration ("90s", "10m", "1h30m"). */
export function durationMs(duration: string): number {
  const parts = [...duration.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== duration) throw new Error(`not a duration: ${duration}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
  return parts.reduce((sum, [, n, u]) => sum + Number(n) * unit[u as keyof typeof unit], 0);
}

export class FakeEngine {
  /** URN → what the last successful run left in the state. */
  private readonly state = new Map<string, Recorded>();

  constructor(
    private readonly execute: Executor,
    /** Commands taken as done without running (e.g. preflight on a host without NPUs). */
    private readonly assumeDone: (name: string) => boolean = () => false,
  ) {}

  /** The names of the commands in the state. */
  stateNames(): string[] {
    return [...this.state.values()].map((r) => r.name);
  }

  /** What `up` would do for each registered command, and the deletes. */
  private plan(commands: readonly Registration[]): Step[] {
    const steps: Step[] = [];
    for (const r of commands) {
      const old = this.state.get(r.urn);
      // Taken as done, created or changed alike.
      if (this.assumeDone(r.name)) {
        this.state.set(r.urn, recorded(r, old?.stdout ?? ""));
        continue;
      }
      if (!old) {
        steps.push({ kind: "create", r });
        continue;
      }
      const changed = DIFFED.filter((key) => !same(old.inputs[key], r.inputs[key]));
      if (changed.length === 0) continue;
      const replaces = changed.some((key) => key === "triggers" || r.replaceOnChanges.includes(key));
      steps.push(replaces ? { kind: "replace", r, old, deleteFirst: r.deleteBeforeReplace } : { kind: "update", r, old });
    }
    const registered = new Set(commands.map((r) => r.urn));
    for (const old of this.state.values()) if (!registered.has(old.urn)) steps.push({ kind: "delete", old });
    return steps;
  }

  async up(registrations: readonly Registration[]): Promise<UpResult> {
    const commands = registrations.filter((r) => r.type === COMMAND);
    const steps = this.plan(commands);
    const runs: CommandRun[] = [];
    const failed: CommandRun[] = [];
    const run = async (name: string, operation: CommandRun["operation"], inputs: Record<string, any>, command: string, timeout: string | undefined) => {
      const startedAt = Date.now();
      const { host, port } = inputs.connection;
      const result = await withTimeout(this.execute({ host, port }, command, this.stdinOf(name, inputs.stdin)), timeout, `${name}: ${operation}`);
      const done = { name, operation, ...result, startedAt, endedAt: Date.now() };
      runs.push(done);
      if (result.status !== 0) failed.push(done);
      return result.status === 0 ? result : undefined;
    };

    // Creates, updates and replacements, in dependency order.
    const pending = new Map(steps.flatMap((s) => (s.kind === "delete" ? [] : [[s.r.urn, s] as const])));
    type Change = Exclude<Step, { kind: "delete" }>;
    const replacedLater: Recorded[] = [];
    // Every registered command, the unchanged ones too: they do nothing, once their dependencies are done.
    const registered = new Map(commands.map((r) => [r.urn, r]));
    await this.inOrder(
      [...registered.keys()],
      (urn) => registered.get(urn)!.dependencies.filter((d) => registered.has(d)),
      () => failed.length > 0,
      async (urn) => {
        const step: Change | undefined = pending.get(urn);
        if (!step) return;
        const { r } = step;
        if (step.kind === "replace" && step.deleteFirst) {
          if (!(await this.remove(step.old, run))) return;
        }
        const operation = step.kind === "update" ? "update" : "create";
        const script = operation === "update" ? (r.inputs.update ?? r.inputs.create) : r.inputs.create;
        const timeout = r.customTimeouts[operation] || undefined;
        const result = await run(r.name, operation, r.inputs, String(script), timeout);
        if (!result) return;
        this.state.set(r.urn, recorded(r, result.stdout.trimEnd()));
        if (step.kind === "replace" && !step.deleteFirst) replacedLater.push(step.old);
      },
    );

    // Deletes, once everything else is done and nothing failed: dependents first.
    // A replaced command's old self is deleted under a key of its own: the state holds the new one under its URN.
    const deletes = new Map(
      [...steps.flatMap((s) => (s.kind === "delete" ? [s.old] : [])), ...replacedLater].map((old) => [
        old.urn + (this.state.get(old.urn) === old ? "" : "#replaced"),
        old,
      ]),
    );
    const notStartedDeletes = new Set(deletes.keys());
    // Nothing failed: inOrder starts none once something has.
    await this.inOrder(
      [...deletes.keys()],
      // What depends on this one, among those deleted, goes first.
      (key) => [...deletes.entries()].filter(([, other]) => other.dependencies.includes(deletes.get(key)!.urn)).map(([k]) => k),
      () => failed.length > 0,
      async (key) => {
        notStartedDeletes.delete(key);
        await this.remove(deletes.get(key)!, run);
      },
    );
    const ran = new Set(runs.map((x) => x.name));
    const notStarted = [...pending.values()].flatMap((s) => (ran.has(s.r.name) ? [] : [s.r.name]));
    return { runs, failed, notStarted: [...notStarted, ...[...notStartedDeletes].map((k) => deletes.get(k)!.name)] };
  }

  /** Runs a recorded command's delete (none: nothing to run) and drops it from the state; false when it failed. */
  private async remove(
    old: Recorded,
    run: (name: string, operation: "delete", inputs: Record<string, any>, command: string, timeout: string | undefined) => Promise<unknown>,
  ): Promise<boolean> {
    if (!old.retainOnDelete && old.inputs.delete !== undefined) {
      if (!(await run(old.name, "delete", old.inputs, String(old.inputs.delete), old.deleteTimeout))) return false;
    }
    if (this.state.get(old.urn) === old) this.state.delete(old.urn);
    return true;
  }

  /** stdin with every stdout reference replaced by what that command printed. */
  private stdinOf(name: string, stdin: unknown): string {
    return String(stdin ?? "").replace(STDOUT_REF, (_, source: string) => {
      const stdout = [...this.state.values()].find((r) => r.name === source)?.stdout;
      if (stdout === undefined) throw new Error(`${name} reads the stdout of ${source}, which has not run`);
      return stdout;
    });
  }

  /** Runs `act` for every key once all its `before` keys are done; none starts once `stop()` holds. */
  private async inOrder(keys: string[], before: (key: string) => string[], stop: () => boolean, act: (key: string) => Promise<void>): Promise<void> {
    const waiting = new Set(keys);
    const finished = new Set<string>();
    const running = new Map<string, Promise<void>>();
    for (;;) {
      if (!stop()) {
        for (const key of [...waiting]) {
          if (before(key).every((k) => finished.has(k) || !keys.includes(k))) {
            waiting.delete(key);
            running.set(
              key,
              act(key).then(() => {
                running.delete(key);
                finished.add(key);
              }),
            );
          }
        }
      }
      if (running.size === 0) return;
      await Promise.race(running.values());
    }
  }
}

function recorded(r: Registration, stdout: string): Recorded {
  return {
    urn: r.urn,
    name: r.name,
    inputs: r.inputs,
    stdout,
    dependencies: r.dependencies,
    retainOnDelete: r.retainOnDelete,
    ...(r.customTimeouts.delete ? { deleteTimeout: r.customTimeouts.delete } : {}),
  };
}

/** The executor's result, or a failure once `timeout` (a Pulumi duration) has passed. */
async function withTimeout<T extends { status: number | null; stdout: string; stderr: string }>(
  work: Promise<T>,
  timeout: string | undefined,
  what: string,
): Promise<T | { status: null; stdout: string; stderr: string }> {
  if (timeout === undefined) return work;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<{ status: null; stdout: string; stderr: string }>((resolve) => {
    timer = setTimeout(() => resolve({ status: null, stdout: "", stderr: `${what}: timed out after ${timeout} (customTimeouts)` }), durationMs(timeout));
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
