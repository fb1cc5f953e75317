import type { RolePlan } from "../../plan/types";
import { renderScript, renderTemplate } from "../../template";
import { HOST_DEFAULTS } from "./defaults";
import { groupRestartHistory, groupRestartScriptPath, groupRestartUnitName, rolloutStateDir, unitName } from "./names";
import type { HostContext } from "./rank";
import { HOST_SCRIPT_DIR } from "./scripts";
import { groupStepWaits, timeoutsOf, type StepTimeouts } from "./stepTimeouts";

/** A role's data-parallel group on a host: the unit that restarts its ranks as one, and the steps that write and remove it. */
export interface RenderedGroup {
  role: string;
  unitName: string;
  /** The ranks' units, in rank order. */
  ranks: string[];
  unitText: string;
  scriptText: string;
  applyScript: string;
  removeScript: string;
  /** Its step's Pulumi timeouts (stepTimeouts.ts). */
  timeouts: StepTimeouts;
}

/**
 * How long the front door may take to drop a group once a rank of it fails: the agent's next probe
 * (an interval and a probe's timeout), then the EPP's reload and the requests it already placed.
 * Nothing to wait for without a front door.
 */
export function frontDoorLeaveSeconds(context: Pick<HostContext, "deployment">): number {
  const { intervalSeconds, probeTimeoutSeconds, settleSeconds } = HOST_DEFAULTS.frontDoor;
  return context.deployment.frontDoor ? intervalSeconds + probeTimeoutSeconds + settleSeconds : 0;
}

/** The group of `role`'s ranks on this host (a role of several data-parallel processes), supervised as one. */
export function renderGroup(context: HostContext, role: RolePlan): RenderedGroup {
  const { settings, plan } = context.deployment;
  const host = context.placement.host.name;
  const name = groupRestartUnitName(context.id, role.role);
  const unitPath = `${HOST_DEFAULTS.systemdUnitDir}/${name}`;
  const scriptPath = groupRestartScriptPath(settings.installRoot, context.id, role.role);
  const history = groupRestartHistory(context.id, role.role);
  const ranks = role.ranks.map((rank) => unitName(context.id, role.role, rank.rank));
  const { timings } = context;
  const leave = frontDoorLeaveSeconds(context);
  const scriptText = renderScript(`${HOST_SCRIPT_DIR}/group-restart.sh`, `restart the ${role.role} data-parallel group on ${host} as one`, {
    host_name: host,
    label: `${role.role} data-parallel group`,
    units: ranks,
    state_dir: rolloutStateDir(settings.installRoot),
    history,
    start_limit_burst: timings.startLimitBurst,
    start_limit_interval_s: timings.startLimitIntervalSeconds,
    restart_s: timings.restartSeconds,
    leave_s: leave,
    stop_grace_s: timings.groupStopGraceSeconds,
  });
  const unitText = renderTemplate("core/render/hosts/templates/group-restart.service", {
    managed_marker: HOST_DEFAULTS.managedMarker,
    description: `rbln-serving ${plan.model} ${role.role}: restarts its data-parallel group as one`.replace(/%/g, "%%"),
    script_path: scriptPath,
    // Two waits for the peers' stop, the restart delay, and a rank's start (its device wait and exec).
    timeout_s: leave + 2 * timings.groupStopGraceSeconds + timings.restartSeconds + HOST_DEFAULTS.unit.startTimeoutSeconds + 60,
  });
  return {
    role: role.role,
    unitName: name,
    ranks,
    unitText,
    scriptText,
    applyScript: renderScript(`${HOST_SCRIPT_DIR}/group-apply.sh`, `the ${role.role} data-parallel group's restart unit on ${host}`, {
      host_name: host,
      unit: name,
      unit_path: unitPath,
      unit_text: unitText,
      script_path: scriptPath,
      script_text: scriptText,
    }),
    removeScript: renderScript(`${HOST_SCRIPT_DIR}/group-remove.sh`, `remove the ${role.role} data-parallel group's restart unit from ${host}`, {
      host_name: host,
      unit: name,
      unit_path: unitPath,
      script_path: scriptPath,
      history,
    }),
    timeouts: timeoutsOf(groupStepWaits(context.placement.host)),
  };
}
