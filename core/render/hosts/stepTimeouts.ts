import type { Host } from "../../config/schema";
import { engineReadyTimeoutSeconds } from "../../plan/argv";
import type { Deployment } from "../../plan/types";
import type { HostCacheLayout } from "./cacheLayout";
import { HOST_DEFAULTS } from "./defaults";

/**
 * The host steps' Pulumi timeouts (create, update, delete), each the sum of the waits its script
 * contains, from the plan's numbers. A timeout below them cuts a step that is still within its own
 * bounds: the provider drops the connection, and the script sees a hang-up in the middle of a change
 * instead of reaching its own failure and way back. One function per step kind lists its waits.
 */

/** One thing a step may wait for, and its bound. */
export interface Wait {
  what: string;
  seconds: number;
}

/** A step's waits when it runs (create and update run one script) and when it is deleted (without a delete script, its commands' budget: nothing runs). */
export interface StepWaits {
  run: readonly Wait[];
  remove: readonly Wait[];
}

/** Pulumi's customTimeouts of a step, as its durations. */
export interface StepTimeouts {
  create: string;
  update: string;
  delete: string;
}

export const totalSeconds = (waits: readonly Wait[]): number => waits.reduce((sum, w) => sum + w.seconds, 0);

/** A step's timeouts: the sum of its waits, in whole minutes. */
export function timeoutsOf(waits: StepWaits): StepTimeouts {
  const minutes = (list: readonly Wait[]) => `${Math.ceil(totalSeconds(list) / 60)}m`;
  return { create: minutes(waits.run), update: minutes(waits.run), delete: minutes(waits.remove) };
}

/** How long systemd gives a stopping rank: vLLM's shutdown timeout (its in-flight requests finish), then the engine processes end. */
export function stopTimeoutSeconds(deployment: Deployment): number {
  return deployment.shutdownTimeoutSeconds + HOST_DEFAULTS.unit.stopMarginSeconds;
}

/** The longest a switch of units can take: a unit stopped (its drain included) and a unit started, device wait included. */
export function switchSeconds(deployment: Deployment): number {
  return 2 * stopTimeoutSeconds(deployment) + HOST_DEFAULTS.unit.deviceWaitSeconds + 60;
}

/** How long a rank may take to serve: the engine's ready timeout; with a shared cache a first-wave rank may wait for another host's compile, then load. */
export function readyTimeoutSeconds(cache: HostCacheLayout, env: Readonly<Record<string, string>>): number {
  return engineReadyTimeoutSeconds(env) * (cache.leaseLock ? 2 : 1);
}

/** How long a drain waits for another server of the role to serve: as long as a rank may take to serve (it may be starting, even compiling). */
export function drainWaitSeconds(deployment: Deployment, cache: HostCacheLayout): number {
  return Math.max(...deployment.plan.roles.map((role) => readyTimeoutSeconds(cache, role.ranks[0]!.env)));
}

/** systemd's TimeoutStopSec of a front-door container: the runtime's stop (`stop` seconds before its SIGKILL), and 30 s for the runtime itself. */
export function containerStopTimeoutSeconds(stop: number = HOST_DEFAULTS.frontDoor.containerStopSeconds): number {
  return stop + 30;
}

const { steps, ssh } = HOST_DEFAULTS;
/** Reaching the host: the provider dials a rebooting host dialErrorLimit times, each up to perDialTimeout; over a bastion, the bastion first. */
const connection = (host: Pick<Host, "proxy">): Wait => ({
  what: "reaching the host over SSH",
  seconds: ssh.dialErrorLimit * ssh.perDialTimeout * (host.proxy ? 2 : 1),
});
const commands: Wait = { what: "its commands", seconds: steps.commandSeconds };
/** The setup lock (service-account.sh): held by another step for its account and folders, a few commands. */
const setupLock: Wait = { what: "the setup lock", seconds: steps.commandSeconds };
/** A call to the router host (peer-ssh.sh): its ConnectTimeout, a dead link's ServerAlive bound (3 × 30 s), and what the router does. */
const routerCall = (what: string, seconds: number): Wait => ({ what, seconds: steps.peerSsh.connectSeconds + steps.peerSsh.deadLinkSeconds + seconds });

/** Taking `endpoints` endpoints out of the front door, one call each: each may wait for another server of its role, then the EPP's settle. */
function drains(deployment: Deployment, cache: HostCacheLayout, endpoints: number): Wait[] {
  const wait = drainWaitSeconds(deployment, cache) + HOST_DEFAULTS.frontDoor.settleSeconds;
  return Array.from({ length: endpoints }, (_, i) => routerCall(`the drain of endpoint ${i + 1} of ${endpoints}`, wait));
}

const rejoins = (endpoints: number): Wait[] => Array.from({ length: endpoints }, (_, i) => routerCall(`the rejoin of endpoint ${i + 1} of ${endpoints}`, 0));

/** Pulling `images` container images (images.sh): three attempts each, 10 s apart. */
function imagePulls(images: number): Wait[] {
  return Array.from({ length: images }, (_, i) => ({ what: `the pull of image ${i + 1} of ${images}`, seconds: 3 * steps.imagePullSeconds + 2 * 10 }));
}

/** What a rank's unit step waits for (unit-apply.sh), forward and on its way back; its delete stops the rank. */
export function unitStepWaits(
  deployment: Deployment,
  cache: HostCacheLayout,
  p: { host: Pick<Host, "proxy">; readySeconds: number; intervalSeconds: number; endpoints: number },
): StepWaits {
  const stop = { what: "a stop: vLLM's shutdown timeout and the engine's end", seconds: stopTimeoutSeconds(deployment) };
  const restart = [stop, { what: "a start: the device wait and the exec", seconds: HOST_DEFAULTS.unit.startTimeoutSeconds }];
  const lock = { what: "the host lock, held by another deploy's switch", seconds: switchSeconds(deployment) };
  // The last turn of the readiness loop: both probes (serving.sh, 10 s each) and a sleep.
  const serving = { what: "the rank's readiness", seconds: p.readySeconds + p.intervalSeconds + 2 * steps.probeTimeoutSeconds };
  const drain = drains(deployment, cache, p.endpoints);
  return {
    run: [
      connection(p.host),
      commands,
      lock,
      ...drain,
      lock,
      { ...stop, what: "the old-named unit's stop" },
      { ...stop, what: "the stray units' stop, side by side (stray-units.sh)" },
      ...restart,
      serving,
      // The way back: a drain again, the lock, the previous config's restart and readiness.
      ...drain,
      lock,
      ...restart,
      serving,
      ...rejoins(p.endpoints),
    ],
    remove: [connection(p.host), commands, stop],
  };
}

/** A routing sidecar's step (sidecar-apply.sh): its image, the drain of the host's endpoints, the restart, the answer on every port. */
export function sidecarStepWaits(deployment: Deployment, cache: HostCacheLayout, host: Pick<Host, "proxy">, endpoints: number): StepWaits {
  const stop = { what: "the container's stop", seconds: containerStopTimeoutSeconds() };
  return {
    run: [
      connection(host),
      commands,
      ...imagePulls(1),
      ...drains(deployment, cache, endpoints),
      stop,
      { what: "the container's start (systemd's default)", seconds: steps.systemdStartSeconds },
      { what: "the sidecar's answer on every port", seconds: HOST_DEFAULTS.frontDoor.sidecarReadyTimeoutSeconds + 1 + steps.probeTimeoutSeconds },
      ...rejoins(endpoints),
    ],
    remove: [connection(host), commands, stop],
  };
}

/** What a router host's apply step waits for beyond one router host's, with several router hosts (front-door-roll.sh). */
export interface FailoverWaits {
  /** How long it waits for a peer to answer at the virtual address it gave up (takeover_s). */
  takeoverSeconds: number;
  /** How long Envoy's drain may wait for its in-flight requests (drain_timeout_s). */
  envoyDrainSeconds: number;
  /** The EPP container's stop: its streams finish (the runtime's stop). */
  eppStopSeconds: number;
  /** With a virtual address: keepalived's unit stops and starts too. */
  keepalived: boolean;
}

/** Envoy's admin calls of a drain (front-door-roll.sh's admin, 5 s each): /healthcheck/fail, /drain_listeners, the in-flight count before and after. */
const ADMIN_CALLS = 4;

/**
 * The front door's apply step (front-door-apply.sh): two images, its three units restarted (the EPP's
 * and Envoy's containers, the agent), Envoy and the EPP answering; with several router hosts the roll
 * as well: keepalived's stop and the peer's takeover, Envoy's drain, the EPP's longer stop,
 * keepalived's check of its config and its start. With `models` (front-door-models-apply.sh): each
 * model's EPP image, EPP and agent restarted, and removed endpoints settled.
 */
export function frontDoorApplyWaits(
  host: Pick<Host, "proxy">,
  failover: FailoverWaits | null = null,
  { models, images, removedModelDrainSeconds = 0 }: { models: number; images: number; removedModelDrainSeconds?: number } = { models: 1, images: 2 },
): StepWaits {
  const vrrp = failover?.keepalived ?? false;
  // A front door of several models (front-door-models-apply.sh) restarts each model's EPP and agent in turn, then Envoy.
  const perModel = (what: string, seconds: number) => Array.from({ length: models }, () => ({ what, seconds }));
  const stops = [
    ...perModel("the EPP container's stop", containerStopTimeoutSeconds(failover?.eppStopSeconds)),
    { what: "Envoy's container's stop", seconds: containerStopTimeoutSeconds() },
    ...perModel("the agent's stop (systemd's default)", steps.systemdStopSeconds),
    ...(vrrp ? [{ what: "keepalived's stop (systemd's default)", seconds: steps.systemdStopSeconds }] : []),
  ];
  const units = 2 * models + 1 + (vrrp ? 1 : 0);
  const starts = Array.from({ length: units }, (_, i) => ({ what: `unit ${i + 1}'s start (systemd's default)`, seconds: steps.systemdStartSeconds }));
  const roll = failover
    ? [
        ...(vrrp ? [{ what: "a peer taking the virtual address", seconds: failover.takeoverSeconds }] : []),
        { what: "Envoy's drain of its in-flight requests", seconds: failover.envoyDrainSeconds + ADMIN_CALLS * 5 },
        ...(vrrp ? [{ what: "keepalived -t on its config", seconds: steps.commandSeconds }] : []),
      ]
    : [];
  return {
    run: [
      connection(host),
      commands,
      // The EPP's image (each model's, where they differ) and Envoy's.
      ...imagePulls(images),
      ...roll,
      ...stops,
      ...starts,
      // Within the same deadline: the agent taking removed endpoints out of the EPP's file; then their settle, one poll late at most.
      { what: "Envoy and the EPP answering", seconds: HOST_DEFAULTS.frontDoor.readyTimeoutSeconds + 2 + 2 * steps.probeTimeoutSeconds },
      ...perModel("a removed endpoint's settle", HOST_DEFAULTS.frontDoor.settleSeconds + 1),
      // A model taken out of the stack: its requests in flight end before its EPP goes (front-door-models-apply.sh).
      ...(removedModelDrainSeconds > 0 ? [{ what: "a removed model's requests in flight", seconds: removedModelDrainSeconds + 5 }] : []),
    ],
    remove: [connection(host), commands, ...stops],
  };
}

/** A front door TLS step (front-door-tls.sh): openssl's commands, after the issuer's lock, which each of the `routers` router hosts' steps holds for its own. */
export function tlsStepWaits(host: Pick<Host, "proxy">, routers: number): StepWaits {
  return {
    run: [connection(host), commands, { what: "the issuer's lock, held by the other router hosts' steps", seconds: (routers - 1) * steps.commandSeconds }],
    remove: [connection(host), commands],
  };
}

/** A step of commands alone: preflight, a grant and its revoke, the front door's access. */
export function commandStepWaits(host: Pick<Host, "proxy">): StepWaits {
  return { run: [connection(host), commands], remove: [connection(host), commands] };
}

/** A data-parallel group's step (group-apply.sh writes its restart unit; group-remove.sh stops it, a restart in progress included, under systemd's default stop). */
export function groupStepWaits(host: Pick<Host, "proxy">): StepWaits {
  return {
    run: [connection(host), commands],
    remove: [connection(host), commands, { what: "the group's restart unit's stop (systemd's default)", seconds: steps.systemdStopSeconds }],
  };
}

/** The install step: pip's work under its budget, after the setup lock. */
export function installStepWaits(host: Pick<Host, "proxy">): StepWaits {
  return { run: [connection(host), commands, setupLock, { what: "pip installs the pinned packages", seconds: steps.installSeconds }], remove: [commands] };
}

/** The weights step: the download; with a shared cache another host's download first, under its lease. */
export function weightsStepWaits(host: Pick<Host, "proxy">, cache: HostCacheLayout): StepWaits {
  const download = { what: "the download from the hub", seconds: steps.downloadSeconds };
  return {
    run: [connection(host), commands, setupLock, ...(cache.leaseLock ? [{ ...download, what: "another host's download, under the lease" }] : []), download],
    remove: [commands],
  };
}

/** A copy from a peer (copy.sh): rsync under its budget. */
export function copyStepWaits(host: Pick<Host, "proxy">): StepWaits {
  return { run: [connection(host), commands, setupLock, { what: "the copy", seconds: steps.copySeconds }], remove: [commands] };
}

/** A compile key's step (compile-key.sh): a registry transfer, and with compileHere the compile-only run of every rank and their stops. */
export function compileStepWaits(
  host: Pick<Host, "proxy">,
  p: { compileHere: boolean; registry: boolean; timeoutSeconds: number; intervalSeconds: number; ranks: number },
): StepWaits {
  const compile = p.compileHere
    ? [
        // The last turn of the wait: a probe of every rank, and a sleep.
        { what: "the compile-only run", seconds: p.timeoutSeconds + p.intervalSeconds + p.ranks * steps.probeTimeoutSeconds },
        { what: "the compile-only units' stops (systemd's default)", seconds: p.ranks * steps.systemdStopSeconds },
      ]
    : [];
  return {
    run: [connection(host), commands, ...(p.registry ? [{ what: "a registry pull or push", seconds: steps.registryTransferSeconds }] : []), ...compile],
    remove: [commands],
  };
}
