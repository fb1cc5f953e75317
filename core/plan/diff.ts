import { otherPlatformKeys, type StackSettings } from "../config/stackConfig";
import { maskUrlCredentials } from "../errors";
import { commandWords } from "./argv";
import type { Deployment, LaunchPlan, PlanChange, RankPlan } from "./types";

/** The items whose value differs between two maps (removed, changed, then added), in first-seen order. */
export function changedItems(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): string[] {
  return [...new Set([...before.keys(), ...after.keys()])].filter((item) => before.get(item) !== after.get(item));
}

function compareMaps(scope: string, before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): PlanChange[] {
  return changedItems(before, after).map((item): PlanChange => {
    if (!after.has(item)) return { scope, kind: "removed", item, before: before.get(item)! };
    if (!before.has(item)) return { scope, kind: "added", item, after: after.get(item)! };
    return { scope, kind: "changed", item, before: before.get(item)!, after: after.get(item)! };
  });
}

/** A rank's settings as `item → value`: each flag (`--name` → its values) and each variable (`env NAME`). Compile keys hash it: its form is fixed. */
export function rankSettings(rank: RankPlan | undefined): Map<string, string> {
  if (!rank) return new Map();
  return new Map<string, string>([
    ...rank.flags.map((f) => [f.name, f.values.join(" ")] as [string, string]),
    ...Object.entries(rank.env).map(([k, v]) => [`env ${k}`, v] as [string, string]),
  ]);
}

/**
 * Characters JSON leaves as they are but a reader cannot see or tell apart: format characters
 * (zero-width, bidi controls), spaces other than U+0020 (no-break, ideographic), line and paragraph
 * separators, private use and unassigned code points.
 */
const INVISIBLE = /[\p{Cf}\p{Zs}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/gu;

/**
 * A value as a diff shows it, so that no two values look alike: a string in JSON quotes (a
 * leading or trailing space, `01` against `1`, a control character escaped), with every character
 * a reader could not see as a `\u` escape; a number, boolean or null as JSON writes it. Credentials
 * in a URL are masked (`http://***@proxy:3128`): a diff never prints them.
 */
export function shownValue(value: unknown): string {
  const text = JSON.stringify(typeof value === "string" ? maskUrlCredentials(value) : value) ?? String(value);
  if (typeof value !== "string") return text;
  const unicodeEscape = (c: string) => Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`).join("");
  return text.replace(INVISIBLE, (c) => (c === " " ? c : unicodeEscape(c)));
}

/** A flag's values as a diff shows them: each word quoted, or that it takes none. */
function shownWords(words: readonly string[]): string {
  return words.length === 0 ? "(no value)" : words.map(shownValue).join(" ");
}

/** A rank's settings as `item → shown value` (shownValue): the items of rankSettings, their values unambiguous. */
export function shownRankSettings(rank: RankPlan | undefined): Map<string, string> {
  if (!rank) return new Map();
  return new Map<string, string>([
    ...rank.flags.map((f) => [f.name, shownWords(f.values)] as [string, string]),
    ...Object.entries(rank.env).map(([k, v]) => [`env ${k}`, shownValue(v)] as [string, string]),
  ]);
}

/** What a diff compares of a rank: its command words, then its settings. */
function rankItems(rank: RankPlan | undefined): Map<string, string> {
  if (!rank) return new Map();
  return new Map([["command", shownWords(commandWords(rank.argv, rank.flags))], ...shownRankSettings(rank)]);
}

/**
 * A rank's changes: its items compared as shown, and an item whose value changed only inside its
 * masked credentials said to have changed, without showing either.
 */
function compareRanks(scope: string, a: RankPlan, b: RankPlan): PlanChange[] {
  const [shownA, shownB] = [rankItems(a), rankItems(b)];
  const shownChanges = compareMaps(scope, shownA, shownB);
  const hidden = changedItems(rankSettings(a), rankSettings(b)).filter((item) => shownA.get(item) === shownB.get(item));
  return [
    ...shownChanges,
    ...hidden.map((item): PlanChange => ({ scope, kind: "changed", item, before: shownA.get(item)!, after: `${shownB.get(item)!} (its credentials changed)` })),
  ];
}

/** What changes, flag by flag and rank by rank, from plan `a` to plan `b`. */
export function diffPlans(a: LaunchPlan, b: LaunchPlan): PlanChange[] {
  const changes: PlanChange[] = [];
  const header = (p: LaunchPlan) =>
    new Map(
      [["model", p.model], ["strategy", p.strategy], ["target", p.target], ...Object.entries(p.selection)].map(([item, value]) => [item!, shownValue(value)]),
    );
  changes.push(...compareMaps("selection", header(a), header(b)));
  const packages = (p: LaunchPlan) => new Map(p.packages.map((pkg) => [pkg.name, shownValue(pkg.requirement)]));
  changes.push(...compareMaps("packages", packages(a), packages(b)));
  const ranks = (p: LaunchPlan) =>
    new Map(p.roles.flatMap((role) => role.ranks.map((rank) => [`${role.role} rank ${rank.rank}`, { node: role.node, rank }] as const)));
  const ranksA = ranks(a);
  const ranksB = ranks(b);
  for (const scope of new Set([...ranksA.keys(), ...ranksB.keys()])) {
    const before = ranksA.get(scope);
    const after = ranksB.get(scope);
    if (!before) changes.push({ scope, kind: "added", item: "rank", after: `node ${after!.node}` });
    else if (!after) changes.push({ scope, kind: "removed", item: "rank", before: `node ${before.node}` });
    else {
      if (before.node !== after.node) changes.push({ scope, kind: "changed", item: "node", before: String(before.node), after: String(after.node) });
      changes.push(...compareRanks(scope, before.rank, after.rank));
    }
  }
  return changes;
}

/** Settings the plan already shows (selection, packages, each rank's flags and environment). */
const IN_THE_PLAN = new Set(["model", "strategy", "target", "preset", "axes", "versions", "extraArgs", "extraEnv"]);

/** `hosts[0].address` → `"10.0.0.1"` (shownValue): every leaf of the settings the platform reads and the plan does not show. */
function settingLeaves(settings: StackSettings): Map<string, string> {
  const ignored = otherPlatformKeys(settings.platform);
  const top = Object.fromEntries(Object.entries(settings).filter(([key]) => !IN_THE_PLAN.has(key) && !ignored.includes(key)));
  return leaves(top);
}

/** A key as a path writes it: `.name`, or `["a.b"]` when a dot, a bracket or another character would make two paths one. */
function pathStep(key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? key : JSON.stringify([key]);
}

/** An empty list or map is no leaf: `cache: {}` against `cache.shared: /x` is one change, not two. */
function leaves(value: unknown, at: string = "", found = new Map<string, string>()): Map<string, string> {
  if (value !== null && typeof value === "object") {
    for (const [key, child] of Object.entries(value)) {
      const step = Array.isArray(value) ? `[${key}]` : pathStep(key);
      leaves(child, step.startsWith("[") || at === "" ? `${at}${step}` : `${at}.${step}`, found);
    }
  } else if (value !== undefined) {
    found.set(at, shownValue(value));
  }
  return found;
}

/** Everything that changes what is deployed from stack `a` to stack `b`: the plan's changes, and every other setting and the set secrets. */
export function diffDeployments(a: Deployment, b: Deployment, secretsA: readonly string[] = [], secretsB: readonly string[] = []): PlanChange[] {
  const plan = diffPlans(a.plan, b.plan);
  const secrets = (names: readonly string[]) => new Map(names.map((name) => [name, "set"]));
  return [
    ...plan.filter((c) => c.scope === "selection"),
    ...compareMaps("settings", settingLeaves(a.settings), settingLeaves(b.settings)),
    ...compareMaps("secrets", secrets(secretsA), secrets(secretsB)),
    ...plan.filter((c) => c.scope !== "selection"),
  ];
}

export function renderPlanDiff(changes: readonly PlanChange[]): string {
  if (changes.length === 0) return "no changes\n";
  const lines: string[] = [];
  let scope = "";
  for (const change of changes) {
    if (change.scope !== scope) {
      scope = change.scope;
      lines.push(`${scope}:`);
    }
    const mark = { added: "+", removed: "-", changed: "~", unchanged: "=" }[change.kind];
    const text = change.kind === "changed" ? `${change.before} → ${change.after}` : (change.after ?? change.before ?? "");
    lines.push(`  ${mark} ${change.item}${text ? ` ${text.replace(/\n/g, "\n      ")}` : ""}`);
  }
  return `${lines.join("\n")}\n`;
}
