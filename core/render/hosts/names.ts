import { createHash } from "node:crypto";
import { ConfigError } from "../../errors";
import type { PackagePlan } from "../../plan/types";

/**
 * What a deployment's things on a host are called, and where they are. Several deployments (stacks, or ModelServing
 * instances) can share a host, so units, env files, venvs and rollout state carry a deployment id
 * made from the stack and the instance name.
 */

/** The name the Pulumi program gives its ModelServing; the offline commands assume it, so `render` shows the names `pulumi up` creates. */
export const DEFAULT_INSTANCE = "rbln-serving";

/** A readable part: what unit names and file names take without escaping, and no dot (dots separate the parts). */
const PLAIN = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;
const MAX_PLAIN_LENGTH = 64;
/** Each readable part of a hashed id is cut to this, so an id stays within 24 + 1 + 24 + 1 + 12 = 62 characters. */
const MAX_PART_LENGTH = 24;

/**
 * `<stack>` for the program's own instance, `<stack>.<instance>` for another; when either has a
 * character outside `[A-Za-z0-9_-]` (Pulumi stack names may have dots, instance names anything) or
 * the id would pass 64 characters, `<stack>.<instance>.<hash>` with the parts cut and cleaned and
 * 12 hex digits of the SHA-256 of the exact pair. Different pairs never share an id: a readable id
 * has at most one dot and splits back into its pair, a hashed one has exactly two (up to a 48-bit
 * hash collision).
 */
export function deploymentId(stack: string, instance: string): string {
  const readable = instance === DEFAULT_INSTANCE ? stack : `${stack}.${instance}`;
  if (PLAIN.test(stack) && (instance === DEFAULT_INSTANCE || PLAIN.test(instance)) && readable.length <= MAX_PLAIN_LENGTH) return readable;
  const hash = createHash("sha256")
    .update(JSON.stringify([stack, instance]))
    .digest("hex")
    .slice(0, 12);
  const clean = (part: string) => part.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, MAX_PART_LENGTH) || "-";
  return `${clean(stack)}.${clean(instance)}.${hash}`;
}

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * An instance name may be any printable text (`deploymentId` cleans it for the hosts), but no control
 * character: a newline or an escape would reach resource names and log lines as it is.
 */
export function checkInstanceName(name: string): void {
  if (!CONTROL.test(name)) return;
  // JSON escapes C0 controls; DEL and C1 it leaves raw, so they are escaped here for the one line.
  const shown = JSON.stringify(name).replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  throw new ConfigError("name", `${shown} holds a control character; an instance name may hold printable characters only`);
}

/**
 * `rbln-serving-dev.main-0.service`. Role and rank follow the id's last dot: role names have no dots
 * (the recipe schema), so two deployments' units differ whenever their ids do, whatever the roles.
 */
export function unitName(id: string, role: string, rank: number): string {
  return `rbln-serving-${id}.${role}-${rank}.service`;
}

/** The unit name of a decode host's routing sidecar. */
export function sidecarUnitName(id: string): string {
  return `rbln-serving-${id}.sidecar.service`;
}

/** Every unit of deployment `id` on a host: what a unit step looks among for strays. */
export function deploymentUnitGlob(id: string): string {
  return `rbln-serving-${id}.*.service`;
}

/** The unit name of versions before deployment ids, which a unit step takes over (see unit-apply.sh). */
export function legacyUnitName(role: string, rank: number): string {
  return `rbln-serving-${role}-${rank}.service`;
}

export function envPath(installRoot: string, id: string, role: string, rank: number): string {
  return `${installRoot}/env/${id}.${role}-${rank}.env`;
}

export function legacyEnvPath(installRoot: string, role: string, rank: number): string {
  return `${installRoot}/env/${role}-${rank}.env`;
}

/** The deployment's venvs and its `current` link; another deployment's never change with it. */
export function venvsDir(installRoot: string, id: string): string {
  return `${installRoot}/venvs/${id}`;
}

/** The venv directory carries the pinned versions, so a version change is a new venv beside the old, in the deployment's own folder. */
export function venvPath(installRoot: string, id: string, packages: readonly PackagePlan[]): string {
  return `${venvsDir(installRoot, id)}/${packages.map((p) => `${p.name}-${p.version}`).join("_")}`;
}

/** Written once a host holds the compiled cache of these compile keys, copied from a peer. */
export function compileMarker(cacheRoot: string, keys: string): string {
  return `${cacheRoot}/vllm/rbln-serving-complete/compile-${keys}`;
}

/** The front door's folder on its router host: its config, and the drains its agent keeps (drains/NAME.json). */
export function frontDoorStateDir(installRoot: string, id: string): string {
  return `${installRoot}/router/${id}`;
}

/** Where a rank's unit step keeps the previous unit and env file, the pending mark and its lock. */
export function rolloutStateDir(installRoot: string): string {
  return `${installRoot}/rollout`;
}

/** The unit that restarts a role's data-parallel group on a host as one: `rbln-serving-dev.decode-group-restart.service`. */
export function groupRestartUnitName(id: string, role: string): string {
  return `rbln-serving-${id}.${role}-group-restart.service`;
}

/** Its script, beside the deployment's other programs. */
export function groupRestartScriptPath(installRoot: string, id: string, role: string): string {
  return `${installRoot}/bin/rbln-serving-${id}.${role}-group-restart.sh`;
}

/** When it restarted the group, one epoch line each: its crash-loop bound. Under /run: a reboot starts afresh. */
export function groupRestartHistory(id: string, role: string): string {
  return `/run/rbln-serving-${id}.${role}-group.restarts`;
}
