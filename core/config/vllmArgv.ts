// vLLM's command line as `vllm serve` reads it: FlexibleArgumentParser's rewrites (vllm/utils/argparse_utils.py)
// and then argparse's (CPython 3.12 `_parse_optional`, allow_abbrev left on), over the options of
// vllmFlags.generated.ts. Every extraArgs word goes through here before any check, so a check sees the
// option vLLM would set, whatever prefix, alias, underscore or `=` spelling it was given in.
import { type VllmOption, VLLM_RBLN_OPTIONS, VLLM_SERVE_OPTIONS } from "./vllmFlags.generated";

/** argparse's own `-h/--help` (add_help), which prints the help and exits; `--help=<group>` searches it (FlexibleArgumentParser). */
const HELP: VllmOption = { name: "--help", values: "optional", aliases: ["-h"] };

/** What one option string of the parser stands for: its option, whether it is the `--no-` form, and whether vllm-rbln adds it. */
interface OptionString {
  option: VllmOption;
  negated: boolean;
  rbln: boolean;
}

const OPTION_STRINGS: ReadonlyMap<string, OptionString> = new Map(
  [...VLLM_SERVE_OPTIONS, HELP].flatMap((option) => optionStrings(option, false)).concat(VLLM_RBLN_OPTIONS.flatMap((option) => optionStrings(option, true))),
);

function optionStrings(option: VllmOption, rbln: boolean): [string, OptionString][] {
  return [
    ...[option.name, ...(option.aliases ?? [])].map((s): [string, OptionString] => [s, { option, negated: false, rbln }]),
    ...(option.negation ? [[option.negation, { option, negated: true, rbln }] as [string, OptionString]] : []),
  ];
}

/** A word argparse reads as a value even though it starts with `-`: a negative number (vLLM has no option that looks like one). */
const NEGATIVE_NUMBER = /^-\d+$|^-\d*\.\d+$/;

/** How argparse reads one word of the command line. */
export type WordReading =
  | { kind: "value" }
  /** `option` under its long spelling (`name`, or `negation`); `explicit` is what followed `=` or a one-letter option. */
  | { kind: "option"; option: VllmOption; spelling: string; explicit?: string; rbln: boolean }
  | { kind: "ambiguous"; candidates: string[] }
  | { kind: "unknown"; nearest: string };

/** The option an option string stands for, under its long spelling. */
function reading(found: OptionString, explicit?: string): WordReading {
  const spelling = found.negated ? found.option.negation! : found.option.name;
  return { kind: "option", option: found.option, spelling, rbln: found.rbln, ...(explicit === undefined ? {} : { explicit }) };
}

/**
 * How argparse reads `word` (after FlexibleArgumentParser's rewrites): an exact option string, one
 * before `=`, else every option string it is a prefix of (a long one up to `=`; a one-dash one
 * whole, or its first two characters with the rest as the value); else a value if it is a negative
 * number or holds a space; else an unknown option.
 */
export function readWord(word: string): WordReading {
  if (!word.startsWith("-") || word.length === 1) return { kind: "value" };
  const exact = OPTION_STRINGS.get(word);
  if (exact) return reading(exact);
  const equals = word.indexOf("=");
  const head = equals < 0 ? word : word.slice(0, equals);
  const beforeEquals = equals < 0 ? undefined : OPTION_STRINGS.get(head);
  if (beforeEquals) return reading(beforeEquals, word.slice(equals + 1));
  const matches = [...OPTION_STRINGS].filter(([s]) => (word.startsWith("--") ? s.startsWith(head) : s.startsWith(word) || s === word.slice(0, 2)));
  if (matches.length > 1) return { kind: "ambiguous", candidates: matches.map(([s]) => s) };
  if (matches.length === 1) {
    const [[matched, found]] = matches as [[string, OptionString]];
    const explicit = word.startsWith("--") ? (equals < 0 ? undefined : word.slice(equals + 1)) : matched === word.slice(0, 2) ? word.slice(2) : undefined;
    return reading(found, explicit);
  }
  if (NEGATIVE_NUMBER.test(word) || word.includes(" ")) return { kind: "value" };
  return { kind: "unknown", nearest: nearestOptionString(head) };
}

/** The option string closest to `given` by edit distance: what a refusal offers instead of an unknown flag. */
function nearestOptionString(given: string): string {
  let best = { name: "", distance: Number.POSITIVE_INFINITY };
  for (const name of OPTION_STRINGS.keys()) {
    const distance = editDistance(given, name);
    if (distance < best.distance) best = { name, distance };
  }
  return best.name;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    previous = row;
  }
  return previous[b.length]!;
}

/**
 * FlexibleArgumentParser's rewrite of one `--` word: `_` becomes `-` between `--` and the first `.`
 * or `=`; the keys after a `.` and the value after `=` keep theirs.
 */
export function withDashes(word: string): string {
  if (!word.startsWith("--")) return word;
  const end = word.search(/[.=]/);
  return end < 0 ? word.replace(/_/g, "-") : word.slice(0, end).replace(/_/g, "-") + word.slice(end);
}

/** The optimization level FlexibleArgumentParser reads `-O3`, `-O=3` (and `-O` before 0 to 3) as. */
export function optimizationLevelOf(word: string, next: string | undefined): { level: string; words: number } | undefined {
  if (word.startsWith("-O") && word !== "-O" && word[2] !== ".") return { level: word[2] === "=" ? word.slice(3) : word.slice(2), words: 1 };
  if (word === "-O" && next !== undefined && ["0", "1", "2", "3"].includes(next)) return { level: next, words: 2 };
  return undefined;
}

/**
 * The option a flag of a rank sets, for telling two flags apart: its long name, the same for its
 * `--no-` form, with the `.key` of a JSON option's key kept. A flag the parser does not know is itself.
 */
export function flagIdentity(name: string): string {
  const dot = name.startsWith("--") ? name.indexOf(".") : -1;
  const base = dot < 0 ? name : name.slice(0, dot);
  const found = OPTION_STRINGS.get(base);
  return (found ? found.option.name : base) + (dot < 0 ? "" : name.slice(dot));
}

/** Whether `name` is an option string of `vllm serve` 0.30.0 as written (no prefix), or of vllm-rbln's group when `rbln`. */
export function isVllmOptionString(name: string, { rbln }: { rbln: boolean }): boolean {
  const found = OPTION_STRINGS.get(name);
  return found !== undefined && (rbln || !found.rbln) && found.option !== HELP;
}

/** One flag of extraArgs as vLLM reads it: its long spelling (`--flag.key` for one key of a JSON option), values, and what it was given as. */
export interface ReadFlag {
  name: string;
  values: string[];
  /** The option word as given, without a `=value`, for refusals. */
  given: string;
  option: VllmOption;
  rbln: boolean;
}

const listed = (names: readonly string[]) => names.join(", ");

/** The refusal of a word vLLM would not read as one option. */
function unreadable(word: string, found: Exclude<WordReading, { kind: "option" | "value" }>): string {
  return found.kind === "ambiguous"
    ? `"${word}" is ambiguous: vLLM's argparse could read it as ${listed(found.candidates)}; give the whole flag`
    : `"${word}" is no option of vllm serve 0.30.0 (nearest: ${found.nearest}); allowed: the options \`vllm serve --help\` lists`;
}

/** The option and spelling one option word opens, after FlexibleArgumentParser's rewrites; a refusal (the detail of a ConfigError) else. */
function openFlag(word: string, next: string | undefined): { flag: ReadFlag; words: number } | string {
  const level = optimizationLevelOf(word, next);
  if (level) {
    const found = readWord("--optimization-level") as Extract<WordReading, { kind: "option" }>;
    return { flag: { name: found.spelling, values: [level.level], given: word.split("=")[0]!, option: found.option, rbln: false }, words: level.words };
  }
  const rewritten = withDashes(word);
  const equals = rewritten.indexOf("=");
  const dot = rewritten.startsWith("--") ? rewritten.indexOf(".") : -1;
  if (dot >= 0 && (equals < 0 || dot < equals)) {
    // `--flag.key value`: FlexibleArgumentParser merges the keys into one `--flag '<json>'`, which argparse then expands like any flag.
    const found = readWord(rewritten.slice(0, dot));
    if (found.kind !== "option") return unreadable(rewritten.slice(0, dot), found as Exclude<WordReading, { kind: "option" | "value" }>);
    if (!found.option.json || found.spelling !== found.option.name)
      return `"${word}": ${found.option.name} is no JSON object, so vLLM cannot set one key of it; give ${found.option.name} its whole value`;
    const key = equals < 0 ? rewritten.slice(dot) : rewritten.slice(dot, equals);
    if (equals < 0 && next === undefined) return `"${word}" takes one value; give it one`;
    const values = [equals < 0 ? next! : rewritten.slice(equals + 1)];
    return { flag: { name: found.spelling + key, values, given: word.split("=")[0]!, option: found.option, rbln: found.rbln }, words: equals < 0 ? 2 : 1 };
  }
  const found = readWord(rewritten);
  if (found.kind === "value") throw new Error(`readVllmWords passes option words only, not "${word}"`);
  if (found.kind !== "option") return unreadable(rewritten.split("=")[0]!, found);
  const given = word.split("=")[0]!;
  return {
    flag: { name: found.spelling, values: found.explicit === undefined ? [] : [found.explicit], given, option: found.option, rbln: found.rbln },
    words: 1,
  };
}

/** How many value words an option takes after its option word: [least, most]. */
function valueWords(option: VllmOption, explicit: boolean): [number, number] {
  if (explicit) return [0, 0];
  return { none: [0, 0], one: [1, 1], optional: [0, 1], oneOrMore: [1, Number.POSITIVE_INFINITY], unresolved: [0, 1] }[option.values] as [number, number];
}

/**
 * extraArgs words as vLLM's parser reads them, grouped into flags under their long spelling: a
 * prefix, alias, underscore, `--flag=value`, `-O3` or negation becomes the option it sets, with the
 * value words that option takes. A word vLLM would not read the same way (an ambiguous prefix, an
 * unknown flag, a value where none fits) gives the refusal's detail instead.
 */
export function readVllmWords(words: readonly string[]): ReadFlag[] | string {
  const flags: ReadFlag[] = [];
  for (let i = 0; i < words.length; ) {
    const word = words[i]!;
    if (word === "--") return `"--" ends vLLM's options: every word after it would be read as the model; leave it out`;
    if (readWord(withDashes(word)).kind === "value")
      return flags.length === 0 ? `"${word}" comes before any flag; give flags such as ["--max-log-len", "100"]` : valueRefusal(flags.at(-1)!, word);
    const opened = openFlag(word, words[i + 1]);
    if (typeof opened === "string") return opened;
    const { flag } = opened;
    i += opened.words;
    const explicit = flag.values.length > 0;
    const dotted = flag.name.includes(".");
    if (explicit && !dotted && flag.option.values === "none") return `"${word}": ${flag.name} is a switch and takes no value; give it alone`;
    if (explicit && !dotted && opened.words === 1 && readWord(flag.values[0]!).kind !== "value")
      return `"${word}": written apart, vLLM would read the value "${flag.values[0]}" as an option; choose another value`;
    const [least, most] = dotted || opened.words === 2 ? [0, 0] : valueWords(flag.option, explicit);
    while (flag.values.length < most && i < words.length && readWord(withDashes(words[i]!)).kind === "value") flag.values.push(words[i++]!);
    if (flag.values.length < least)
      return `"${word}": ${flag.name} takes ${most === 1 ? "one value" : "one or more values"}; give ${most === 1 ? "it" : "them"} after it`;
    flags.push(flag);
  }
  return flags;
}

/** The refusal of a value word that no flag before it takes. */
function valueRefusal(flag: ReadFlag, word: string): string {
  return `"${word}" follows ${flag.given}, which takes ${flag.values.length === 0 ? "no value" : "no more values"}; remove it or give the flag it belongs to`;
}
