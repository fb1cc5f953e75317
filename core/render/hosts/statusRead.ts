import { weightsMarker } from "../../cache/markers";
import type { Host } from "../../config/schema";
import { isDataParallelGroup } from "../../plan/dataParallel";
import type { Deployment } from "../../plan/types";
import { packageFile } from "../../template";
import { megaCacheModelDir } from "../compileCache";
import { hostCacheLayout } from "./cacheLayout";
import { compileMarker, DEFAULT_INSTANCE, deploymentId, frontDoorStateDir, groupRestartUnitName, unitName, venvPath } from "./names";
import { HOST_SCRIPT_DIR } from "./scripts";

/**
 * vllm-rbln 0.12.0's lines (test/fixtures/vllm-rbln-0.12.0.json): printed before warm-up when a
 * compiled bundle is found, and for each graph warmed up. A hint only: extraEnv can silence them
 * (VLLM_LOGGING_LEVEL), so the bundles' files decide first.
 */
const VLLM_RBLN_LOG = { hit: "Loaded rbln mega-cache bundle from ", warmUp: "rbln_backend [warm-up]" } as const;

/** One rank as the host reader looks for it: its unit, its group's restart unit, and the markers of its host's steps. */
interface RankReadSpec {
  key: string;
  unit: string;
  group: string | null;
  venv: string;
  hfHome: string;
  weightsMarkers: string[];
  compileMarker: string;
  /** The folder of the model's mega-cache bundles (megaCacheModelDir), as the unit step reads it. */
  bundleDir: string;
}

/** What `status` runs on one host over SSH: a Python program (stdin of `python3 -`) that prints one JSON document. */
export interface HostStatusRead {
  host: Host;
  /** `python3 -`, through `sudo -n` for a user other than root (the journal and the drains are root's). */
  command: string;
  script: string;
  /** The ranks it reads, by key (`<role>-<rank>`), in plan order. */
  ranks: { key: string; role: string; rank: number }[];
}

/** The reader with its spec in place: a JSON text as a Python string literal (JSON's escapes are Python's). */
function readerScript(spec: { ranks: RankReadSpec[]; drainsDir: string | null; hitLine: string; warmUpLine: string }): string {
  return packageFile(`${HOST_SCRIPT_DIR}/status-read.py`).replace("json.loads(SPEC_JSON)", () => `json.loads(${JSON.stringify(JSON.stringify(spec))})`);
}

const commandOf = (host: Pick<Host, "user">) => (host.user === "root" ? "python3 -" : "sudo -n python3 -");

/**
 * Every NPU host's read for `status`, and each router host's (its agent's drains), named as
 * `pulumi up` names them on stack `stack`: units, venv, markers. `instance` is the program's own,
 * or a model's of several (modelInstance), whose drains its own folder on the router host keeps.
 */
export function hostStatusReads(
  deployment: Deployment,
  stack: string,
  instance = DEFAULT_INSTANCE,
): { hosts: HostStatusRead[]; routers: HostStatusRead[]; drainKey: (host: string, key: string) => string } {
  const { settings, plan } = deployment;
  const id = deploymentId(stack, instance);
  const cache = hostCacheLayout(settings);
  const hfHome = `${cache.root}/huggingface`;
  const common = { hitLine: VLLM_RBLN_LOG.hit, warmUpLine: VLLM_RBLN_LOG.warmUp };
  const hosts = deployment.placements.map((placement) => {
    const roles = plan.roles.filter((role) => role.node === placement.node);
    const ranks = roles.flatMap((role) =>
      role.ranks.map((rank) => ({
        key: `${role.role}-${rank.rank}`,
        unit: unitName(id, role.role, rank.rank),
        group: isDataParallelGroup(role) ? groupRestartUnitName(id, role.role) : null,
        venv: venvPath(settings.installRoot, id, plan.packages),
        hfHome,
        weightsMarkers: plan.models.map((m) => weightsMarker(hfHome, m.id)),
        compileMarker: compileMarker(cache.root, role.compileKey),
        bundleDir: megaCacheModelDir(`${cache.root}/vllm/rbln`, plan.model),
      })),
    );
    return {
      host: placement.host,
      command: commandOf(placement.host),
      script: readerScript({ ranks, drainsDir: null, ...common }),
      ranks: roles.flatMap((role) => role.ranks.map((rank) => ({ key: `${role.role}-${rank.rank}`, role: role.role, rank: rank.rank }))),
    };
  });
  const drainsDir = `${frontDoorStateDir(settings.installRoot, id)}/drains`;
  const routers = (deployment.frontDoor?.routers ?? []).map(({ host }) => ({
    host,
    command: commandOf(host),
    script: readerScript({ ranks: [], drainsDir, ...common }),
    ranks: [],
  }));
  // The front door's endpoint names (core/plan/frontDoor.ts): `<host>-<role>-<rank>`.
  return { hosts, routers, drainKey: (host, key) => `${host}-${key}` };
}
