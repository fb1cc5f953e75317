#!/usr/bin/env node
import { parseArgs } from "node:util";
import { RecipeCatalog } from "../core/recipe/catalog";
import { commandLine } from "./commandLine";
import { runCommand } from "./commands";
import { statusCommand } from "./status";
import { recipeMain } from "./recipe";

const USAGE = `usage:
  plan   [--stack NAME] [--strategy SLUG] [--target Latency|Throughput] [--preset recommended]
         [--set axis=value ...] [--model ID] [--format text|json] [--diff STACK]
  render --stack NAME --out DIR
  diff   --stack NAME --diff STACK [--format text|json]
  status (--stack NAME | --endpoint URL ...) [--model ID] [--format text|json] [--interval SECONDS]
  recipe import PAGE.txt [--out DIR] | recipe list [--dir DIR]`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "recipe") return recipeMain(rest);
  return commandLine(
    USAGE,
    command,
    () =>
      parseArgs({
        args: rest,
        options: {
          stack: { type: "string" },
          strategy: { type: "string" },
          target: { type: "string" },
          preset: { type: "string" },
          set: { type: "string", multiple: true },
          model: { type: "string" },
          format: { type: "string" },
          diff: { type: "string" },
          out: { type: "string" },
          endpoint: { type: "string", multiple: true },
          interval: { type: "string" },
          help: { type: "boolean", short: "h" },
        },
        strict: true,
        allowPositionals: false,
      }),
    async (parsed) => {
      if (command === "status") {
        const { stdout, exitCode } = await statusCommand(parsed.values, RecipeCatalog.load());
        process.stdout.write(stdout);
        return exitCode;
      }
      process.stdout.write(runCommand(command!, parsed.values, RecipeCatalog.load()));
      return 0;
    },
  );
}

void main(process.argv.slice(2)).then((code) => (process.exitCode = code));
