#!/usr/bin/env node
import { parseArgs } from "node:util";
import { RecipeCatalog } from "../core/recipe/catalog";
import { commandLine } from "./commandLine";
import { runCommand } from "./commands";
import { statusCommand, watchStatus, type StatusOptions } from "./status";
import { RECIPE_COMMANDS, recipeMain } from "./recipe";
import { COMMANDS, commandHelp, isCommand, OPTIONS, overallHelp } from "./usage";

/** parseArgs' options, from the one table of them. */
const PARSE_OPTIONS = Object.fromEntries(
  Object.entries(OPTIONS).map(([name, spec]) => [
    name,
    {
      type: "value" in spec ? ("string" as const) : ("boolean" as const),
      ...("multiple" in spec ? { multiple: true } : {}),
      ...(name === "help" ? { short: "h" } : {}),
    },
  ]),
);

/** `status --watch` until SIGINT or SIGTERM; then it exits at once, with the last reading's status, whatever reads are still out. */
async function watchUntilInterrupted(options: StatusOptions): Promise<number> {
  const stop = new AbortController();
  const interrupt = () => stop.abort();
  process.once("SIGINT", interrupt);
  process.once("SIGTERM", interrupt);
  const code = await watchStatus(options, RecipeCatalog.load(), (text) => process.stdout.write(text), stop.signal);
  process.stdout.write("\n", () => process.exit(code));
  return code;
}

/** `rbln-serving ARGS...`: the exit status; what it prints goes to stdout and stderr. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "recipe") return recipeMain(rest);
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    (command === undefined ? process.stderr : process.stdout).write(`${overallHelp(RECIPE_COMMANDS)}\n`);
    return command === undefined ? 2 : 0;
  }
  if (!isCommand(command)) {
    process.stderr.write(
      `error: command: unknown command ${JSON.stringify(command)}; allowed: ${[...Object.keys(COMMANDS), "recipe"].map((c) => JSON.stringify(c)).join(", ")}; see --help\n`,
    );
    return 2;
  }
  return commandLine(
    commandHelp(command),
    command,
    () => parseArgs({ args: rest, options: PARSE_OPTIONS, strict: true, allowPositionals: false }),
    async (parsed) => {
      const values = parsed.values as StatusOptions;
      if (command === "status" && values.watch) return watchUntilInterrupted(values);
      if (command === "status") {
        const { stdout, exitCode } = await statusCommand(values, RecipeCatalog.load());
        process.stdout.write(stdout);
        return exitCode;
      }
      process.stdout.write(runCommand(command, values, RecipeCatalog.load()));
      return 0;
    },
  );
}

if (require.main === module) void main(process.argv.slice(2)).then((code) => (process.exitCode = code));
