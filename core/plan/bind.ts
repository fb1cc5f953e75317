import { ConfigError } from "../errors";
import { PLACEHOLDER } from "./argv";
import type { RankPlan } from "./types";

/** A rank's argv and env with its placeholders (`<POD_IP>`, `<EPP_HOST>`) replaced by the platform's values. */
export function bindRank(rank: RankPlan, values: Readonly<Record<string, string>>, platform: string): Pick<RankPlan, "argv" | "env" | "flags"> {
  for (const name of rank.placeholders) {
    if (!(name in values)) throw new ConfigError("platform", `placeholder <${name}> has no value on platform: ${platform}`);
  }
  const bind = (text: string) => text.replace(PLACEHOLDER, (whole, name: string) => values[name] ?? whole);
  return {
    argv: rank.argv.map(bind),
    flags: rank.flags.map((f) => ({ name: f.name, values: f.values.map(bind) })),
    env: Object.fromEntries(Object.entries(rank.env).map(([name, value]) => [name, bind(value)])),
  };
}
