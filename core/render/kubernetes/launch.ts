import { commandWords } from "../../plan/argv";
import { splitCredentialEnv } from "../../config/secrets";
import { bindRank } from "../../plan/bind";
import type { RankPlan, RolePlan } from "../../plan/types";
import { shellComment } from "../../shell";
import { type CommandParts, shellCommandLines } from "../shellCommand";

/** The shell variable a pod's `<POD_IP>` becomes: the downward API sets it. */
export const POD_IP_VARIABLE = { POD_IP: "POD_IP" } as const;

/** A rank's command in its pod: `<EPP_HOST>` bound to the EPP Service, `<POD_IP>` left for POD_IP_VARIABLE. */
export function launchParts(rank: RankPlan, eppHost: string | null): CommandParts {
  const bound = bindRank(rank, { ...(eppHost ? { EPP_HOST: eppHost } : {}), POD_IP: "<POD_IP>" }, "kubernetes");
  // A variable whose value carries URL credentials comes from the Secret (roleEnvironment), never from the ConfigMap or the plan.
  return { command: commandWords(bound.argv, bound.flags), flags: bound.flags, env: splitCredentialEnv(bound.env).plain };
}

/** The launch script of a role: `exec` one rank, or supervise several and stop them all when one ends. */
export function launchScript(role: RolePlan, model: string, eppHost: string | null): string {
  const ranks = role.ranks.map((rank) => shellCommandLines(launchParts(rank, eppHost), POD_IP_VARIABLE));
  const header = [
    "#!/usr/bin/env bash",
    shellComment(`rbln-serving: ${role.role} of ${model}, ${role.ranks.length} rank(s)`),
    "set -euo pipefail",
    `: "\${POD_IP:?POD_IP comes from the downward API}"`,
  ];
  if (ranks.length === 1) return [...header, `exec ${ranks[0]!.join("\n")}`, ""].join("\n");
  return [
    ...header,
    "# The ranks form one data-parallel group: when one ends, end the rest so the pod restarts whole.",
    "pids=()",
    "trap 'kill \"${pids[@]}\" 2>/dev/null || true' TERM INT",
    ...role.ranks.flatMap((rank, i) => [`# rank ${rank.rank}`, `${ranks[i]!.join("\n")} &`, "pids+=($!)"]),
    "status=0",
    "wait -n || status=$?",
    'kill "${pids[@]}" 2>/dev/null || true',
    "wait || true",
    'exit "$(( status == 0 ? 1 : status ))"',
    "",
  ].join("\n");
}
