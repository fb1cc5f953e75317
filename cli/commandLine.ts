import { ConfigError } from "../core/errors";

/**
 * The shell every command line here shares: a bad flag or a refused value is one line on stderr
 * and exit 2 (a stack trace only for a bug); `--help`, or no command, prints the usage.
 */
export async function commandLine<T extends { values: { help?: boolean } }>(
  usage: string,
  command: string | undefined,
  parse: () => T,
  run: (parsed: T) => number | Promise<number>,
): Promise<number> {
  let parsed: T;
  try {
    parsed = parse();
  } catch (error) {
    process.stderr.write(`error: ${(error as Error).message}; see --help\n`);
    return 2;
  }
  if (parsed.values.help || !command) {
    process.stdout.write(`${usage}\n`);
    return command ? 0 : 2;
  }
  try {
    return await run(parsed);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`error: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}
