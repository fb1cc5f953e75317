// The offline commands and their options, once: what the parser takes, what each command reads
// (any other given option is refused), and what --help prints.

interface OptionSpec {
  /** What the option takes, as the help writes it; none for a flag. */
  value?: string;
  /** Given more than once, each value counts. */
  multiple?: true;
  text: string;
}

/** Every option of plan, diff, render and status. */
export const OPTIONS = {
  stack: { value: "NAME", text: "read the stack file stacks/Pulumi.NAME.yaml (the stackConfigDir of Pulumi.yaml)" },
  strategy: { value: "SLUG", text: "the strategy, over the stack's, or alone without --stack" },
  target: { value: "Latency|Throughput", text: "the target, over the stack's, or alone without --stack" },
  preset: { value: "recommended", text: "start from the recipe's recommended axes" },
  set: { value: "axis=value", multiple: true, text: "an axis value, over the stack's axes; repeatable, each axis once" },
  model: { value: "ID", text: "a model id with a recipe in recipes/ (default MiniMaxAI/MiniMax-M2.7)" },
  format: { value: "text|json", text: "the output: text (default), or one JSON document" },
  diff: { value: "STACK", text: "compare with another stack: what changes from --stack to it, and what the change costs (plan --diff is diff)" },
  against: {
    value: "FILE|GIT-REF",
    text: "compare --stack's file as it is with a stack file, or with its own file at a git commit (git show REF:path): preview your edit",
  },
  out: { value: "DIR", text: "the folder render writes the files into: new, empty, or written by an earlier render" },
  endpoint: { value: "URL", multiple: true, text: "a rank's (or the front door's) URL to ask instead of a stack's; repeatable" },
  interval: { value: "SECONDS", text: "how far apart status reads the two /metrics samples, and with --watch its readings (0-300, default 5)" },
  watch: { text: "status: read again every --interval seconds, each reading over the last, until Ctrl-C; exits as the last reading" },
  identity: { value: "FILE", text: "status on hosts: the private key SSH signs in with (default: ssh's own, the agent or ~/.ssh/id_*)" },
  help: { text: "this help" },
} as const satisfies Record<string, OptionSpec>;
export type OptionName = keyof typeof OPTIONS;

const SELECTION = ["stack", "strategy", "target", "preset", "set", "model"] as const;

interface CommandSpec {
  /** What it does, in one line. */
  summary: string;
  /** Its usage line after the command's name. */
  synopsis: string;
  /** The options it reads, --help aside. */
  options: readonly OptionName[];
}

/** The commands of main.ts; `recipe` has its own (RECIPE_COMMANDS in recipe.ts). */
export const COMMANDS: Record<"plan" | "diff" | "render" | "status", CommandSpec> = {
  plan: {
    summary: "the launch plan: selection, pins, ranks, ports, NPUs and each rank's command line",
    synopsis:
      "[--stack NAME] [--strategy SLUG] [--target Latency|Throughput] [--preset recommended] [--set axis=value ...] [--model ID] [--format text|json] [--diff STACK | --against FILE|GIT-REF]",
    options: [...SELECTION, "format", "diff", "against"],
  },
  diff: {
    summary:
      "what changes between two configs, flag by flag and setting by setting, and what it costs: downloads, steps that rerun, restarts, time out of service (estimates)",
    synopsis:
      "--stack NAME (--diff STACK | --against FILE|GIT-REF) [--strategy SLUG] [--target T] [--preset recommended] [--set axis=value ...] [--model ID] [--format text|json]",
    options: [...SELECTION, "format", "diff", "against"],
  },
  render: {
    summary: "write the files the stack's resources carry (scripts, units, manifests, chart values, Prometheus files)",
    synopsis: "--stack NAME --out DIR [--strategy SLUG] [--target T] [--preset recommended] [--set axis=value ...] [--model ID]",
    options: [...SELECTION, "out"],
  },
  status: {
    summary:
      "each rank's state (INSTALLING, DOWNLOADING, COMPILING, LOADING, READY, DRAINING, FAILED, DOWN) and age, its model, requests, KV cache, tokens/s and TTFT, one line per role (exit 0 all ready, 1 starting, 3 failed or down)",
    synopsis:
      "(--stack NAME | --endpoint URL ...) [--strategy SLUG] [--target T] [--preset recommended] [--set axis=value ...] [--model ID] [--format text|json] [--interval SECONDS] [--watch] [--identity FILE]",
    options: [...SELECTION, "format", "endpoint", "interval", "watch", "identity"],
  },
};
export type CommandName = keyof typeof COMMANDS;

export const isCommand = (name: string): name is CommandName => Object.hasOwn(COMMANDS, name);

/** One option as the help lists it: `--set axis=value` and what it does. */
function optionLine(name: OptionName, width: number): string {
  const spec: OptionSpec = OPTIONS[name];
  const flag = name === "help" ? "-h, --help" : `--${name}${spec.value ? ` ${spec.value}` : ""}`;
  return `  ${flag.padEnd(width)}  ${spec.text}`;
}

function optionLines(names: readonly OptionName[]): string[] {
  const width = Math.max(...names.map((n) => (n === "help" ? 10 : n.length + 3 + ((OPTIONS[n] as OptionSpec).value?.length ?? 0))));
  return names.map((name) => optionLine(name, width));
}

/** `<command> --help`: its usage line, what it does, and each option it reads. */
export function commandHelp(name: CommandName): string {
  const command = COMMANDS[name];
  return [`usage: rbln-serving ${name} ${command.synopsis}`, "", command.summary, "", "options:", ...optionLines([...command.options, "help"])].join("\n");
}

/** A command of its own parser (recipe's), as the overall help lists it. */
export interface OtherCommand {
  usage: string;
  summary: string;
  /** Its options, each `--flag VALUE  what it does`. */
  options: readonly string[];
}

/** `rbln-serving --help`: every command with its usage line, and every option. */
export function overallHelp(others: readonly OtherCommand[]): string {
  const commands: OtherCommand[] = [
    ...Object.entries(COMMANDS).map(([name, command]) => ({ usage: `${name} ${command.synopsis}`, summary: command.summary, options: [] })),
    ...others,
  ];
  return [
    "usage: rbln-serving <command> [options]   (rbln-serving <command> --help: that command alone)",
    "",
    "commands:",
    ...commands.flatMap((c) => [`  ${c.usage}`, `      ${c.summary}`, ...c.options.map((o) => `      ${o}`)]),
    "",
    "options of plan, diff, render and status:",
    ...optionLines(Object.keys(OPTIONS) as OptionName[]),
  ].join("\n");
}
