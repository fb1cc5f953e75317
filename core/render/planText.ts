import type { LaunchPlan, RankPlan } from "../plan/types";
import { commandWords } from "../plan/argv";
import { maskUrlCredentials } from "../errors";
import { messagesAt, type PlanMessage } from "../plan/messages";
import { shellCommandLines } from "./shellCommand";

/** A rank's command as a paste-able shell command: `env NAME=value ... vllm serve ... \` one flag a line; credentials in a URL masked. */
export function rankCommandLine(rank: RankPlan): string {
  const shown = maskedRank(rank);
  return shellCommandLines({ command: commandWords(shown.argv, shown.flags), flags: shown.flags, env: shown.env }).join("\n");
}

/** A rank as the commands print it: every word and value with the credentials of a URL masked (`http://***@proxy`). */
function maskedRank(rank: RankPlan): RankPlan {
  return {
    ...rank,
    argv: rank.argv.map(maskUrlCredentials),
    flags: rank.flags.map((f) => ({ ...f, values: f.values.map(maskUrlCredentials) })),
    env: Object.fromEntries(Object.entries(rank.env).map(([name, value]) => [name, maskUrlCredentials(value)])),
  };
}

/** The plan as `plan --format json` prints it: credentials in a URL masked in every rank. */
export function maskedPlan(plan: LaunchPlan): LaunchPlan {
  return { ...plan, roles: plan.roles.map((role) => ({ ...role, ranks: role.ranks.map(maskedRank) })) };
}

/** Rows of cells, each column as wide as its widest cell. */
export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** The notes, then the warnings, each group after a blank line: `note: ...`, `warning: ...`. */
export function messageLines(messages: readonly PlanMessage[]): string[] {
  return (["note", "warning"] as const).flatMap((level) => {
    const texts = messagesAt(messages, level);
    return texts.length > 0 ? ["", ...texts.map((text) => `${level}: ${text}`)] : [];
  });
}

/** The selection, the pins, the models and the compile keys: the head of every plan. */
export function selectionLines(plan: LaunchPlan): string[] {
  return [
    `model     ${plan.model}`,
    `strategy  ${plan.strategy}`,
    `target    ${plan.target}${plan.preset ? ` (preset ${plan.preset})` : ""}, verified ${plan.verified}`,
    `axes      ${Object.entries(plan.selection)
      .map(([a, v]) => `${a}=${v}`)
      .join("  ")}`,
    `packages  ${plan.packages.map((p) => p.requirement).join("  ")}`,
    `revision  ${plan.revision ?? "resolved at first download (stack output modelRevision)"}`,
    `models    ${plan.models.map((m) => (m.use === "draft" ? `${m.id} (draft, ${m.roles.join(",")})` : m.id)).join("  ")}`,
    `compile   ${plan.roles.map((r) => `${r.role}=${r.compileKey}`).join("  ")}`,
  ];
}

/**
 * The plan for people, without a platform (no stack): the selection, a node/role/rank table, then
 * each rank's full command with the placeholders the platform binds, and the recipe's router.
 */
export function renderPlanText(plan: LaunchPlan): string {
  const out = [...selectionLines(plan), ""];
  const rows = [["NODE", "ROLE", "RANK", "NPUS", "PORTS", "PLACEHOLDERS"]];
  for (const role of plan.roles) {
    for (const rank of role.ranks) {
      rows.push([
        String(role.node),
        role.role,
        String(rank.rank),
        rank.devices.join(","),
        rank.ports.join(","),
        rank.placeholders.map((p) => `<${p}>`).join(" ") || "-",
      ]);
    }
  }
  out.push(table(rows));
  for (const role of plan.roles) {
    for (const rank of role.ranks) {
      out.push("", `# ${role.role} rank ${rank.rank} on node ${role.node}`, rankCommandLine(rank));
    }
  }
  if (plan.router) {
    const router = plan.router;
    out.push("", `router    ${router.chart} ${router.version} (release ${router.release}), pool ports ${router.values.inference_pool.target_ports.join(",")}`);
  }
  out.push(...messageLines(plan.messages));
  return `${out.join("\n")}\n`;
}
