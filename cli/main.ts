#!/usr/bin/env node
import { parseArgs } from "node:util";
import { ConfigError } from "../core/errors";
import { RecipeCatalog } from "../core/recipe/catalog";
import { runCommand } from "./commands";
import { recipeMain } from "./recipe";

const USAGE = `usage:
  plan   [--stack NAME] [--strategy SLUG] [--target Latency|Throughput] [--preset recommended]
         [--set axis=value ...] [--model ID] [--format text|json] [--diff STACK]
  render --stack NAME --out DIR
  diff   --stack NAME --diff STACK [--format text|json]
  recipe import PAGE.txt [--out DIR] | recipe list [--dir DIR]`;

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  if (command === "recipe") return recipeMain(rest);
  let parsed;
  try {
    parsed = parseArgs({
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
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    process.stderr.write(`error: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (parsed.values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command ? 0 : 2;
  }
  try {
    process.stdout.write(runCommand(command, parsed.values, RecipeCatalog.load()));
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`error: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}

process.exitCode = main(process.argv.slice(2));
