import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { readStackFile } from "../core/config/stackFile";
import { HOST_DEFAULTS } from "../core/render/hosts/defaults";
import { runProgram } from "../program";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { ofType, runUnderMocks, type Registration } from "./helpers/pulumiHarness";
import { scriptSettings } from "./helpers/scriptSettings";

/**
 * Every host step's Pulumi timeouts cover the waits its script contains (issue 31): a timeout below
 * them cuts a step in the middle of a change. The waits are read here from what each step runs (its
 * settings, its unit's TimeoutStopSec, the front door's drain bounds), not from the product's own
 * sums (core/render/hosts/stepTimeouts.ts), so a script that waits longer fails this test until its
 * step's timeout follows.
 */
const REVISION = "0123456789abcdef0123456789abcdef01234567";
const REGISTRY = { repository: "registry.example.com/ml/rbln-compile-cache", username: "ci" };
const host = (name: string, address: string) => ({ name, address, hostKey: EXAMPLE_HOST_KEY });
const compileHost = host("cpu-0", "10.0.1.5");
const three = [0, 1, 2].map((i) => host(`npu-${i}`, `10.0.0.${i + 10}`));
const dev = readStackFile("dev").raw;
const multiHosts = readStackFile("multi-hosts").raw;
// Enough models that their restarts outgrow the rounding of one model's timeout to whole minutes.
const twelve = Array.from({ length: 12 }, (_, i) => host(`npu-m${i}`, `10.40.1.${i + 10}`));
const edge = readStackFile("edge").raw;
const STACKS: [string, Record<string, unknown>][] = [
  ["dev", dev],
  ["staging", readStackFile("staging").raw],
  ["edge", edge],
  ["edge, compile ahead with a registry", { ...edge, revision: REVISION, compile: { host: compileHost, registry: REGISTRY } }],
  [
    "edge, a registry only, a day's shutdown timeout",
    { ...edge, revision: REVISION, compile: { registry: REGISTRY }, rollout: { shutdownTimeoutSeconds: 86400 } },
  ],
  ["dev, three replicas copying, behind a front door", { ...dev, replicas: 3, hosts: three, router: { host: host("door", "10.0.0.5") } }],
  [
    "edge, two router hosts with a virtual address",
    { ...edge, router: { hosts: [host("door-a", "10.30.0.5"), host("door-b", "10.30.0.6")], virtualAddress: "10.30.0.100" } },
  ],
  ["dev, three replicas on a shared cache", { ...dev, replicas: 3, hosts: three, cache: { shared: "/mnt/rbln-cache" } }],
  ["multi-hosts, two models behind one router host", multiHosts],
  [
    "twelve models behind one router host, one server each",
    {
      ...multiHosts,
      hosts: twelve,
      models: twelve.map(({ name }, i) => ({
        name: `m${i}`,
        strategy: "aggregated-pipeline-parallel",
        target: "Throughput",
        servedNames: [`m${i}`],
        hosts: [name],
      })),
    },
  ],
];
/** The secrets the settings need: the SSH key, and each password whose user is set. */
const secretsFor = (raw: Record<string, any>) => ({
  sshPrivateKey: "MARKER-SSH-KEY",
  ...(raw.pip?.username !== undefined ? { pipPassword: "MARKER-PIP-PW" } : {}),
  ...(raw.compile?.registry?.username !== undefined ? { registryPassword: "MARKER-REGISTRY-PW" } : {}),
});

/** Pulumi's duration as seconds: "97m", "2h", "90s", "1h30m". */
function seconds(duration: string): number {
  const parts = [...duration.matchAll(/(\d+)(h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== duration) throw new Error(`not a duration: "${duration}"`);
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * { h: 3600, m: 60, s: 1 }[unit as "h" | "m" | "s"], 0);
}

const one = (script: string, name: string) => scriptSettings(script, name)[0];
const has = (script: string, name: string) => new RegExp(`^${name}=`, "m").test(script);
/** A unit text's TimeoutStopSec / TimeoutStartSec, in seconds; unset, systemd's default (DefaultTimeoutStopSec, DefaultTimeoutStartSec: 90 s). */
const unitSeconds = (unit: string, key: string) => Number(new RegExp(`^${key}=(\\d+)s?$`, "m").exec(unit)?.[1] ?? 90);

/** The drain bounds of the stack's front door, from the desired endpoints its apply step writes. */
function drainBound(commands: readonly Registration[]): number {
  const apply = commands.find((c) => has(String(c.inputs.create), "desired_json"));
  if (!apply) return 0;
  const desired = JSON.parse(one(String(apply.inputs.create), "desired_json")!);
  return desired.drainWaitSeconds + desired.settleSeconds;
}

/** What a step's script waits for when it runs and when it is deleted, read from what it runs. */
function waitsOf(step: Registration, drain: number): { run: number; remove: number } {
  const create = String(step.inputs.create);
  const n = (name: string) => Number(one(create, name));
  const endpoints = has(create, "front_door_endpoint") ? one(create, "front_door_endpoint")!.split(" ").filter(Boolean).length : 0;
  const drains = one(create, "router_ssh_address") ? endpoints * drain : 0;
  if (has(create, "host_lock_wait_s")) {
    const unit = one(create, "unit_text")!;
    const [stop, start] = [unitSeconds(unit, "TimeoutStopSec"), unitSeconds(unit, "TimeoutStartSec")];
    // Forward: the lock, the drain, the lock again, the old-named unit's stop, the strays' stop (all at
    // once), a restart, the readiness; back: the drain, the lock, a restart, the readiness.
    const strays = one(create, "stray_glob") ? stop : 0;
    const run = 3 * n("host_lock_wait_s") + 2 * drains + 3 * stop + strays + 2 * start + 2 * (n("timeout_s") + n("interval_s"));
    return { run, remove: stop };
  }
  if (has(create, "epp_unit")) {
    const vrrp = one(create, "keepalived_unit_name") !== "";
    const units = ["epp_unit", "proxy_unit", "agent_unit", ...(vrrp ? ["keepalived_unit"] : [])];
    const stops = units.reduce((sum, unit) => sum + unitSeconds(one(create, unit)!, "TimeoutStopSec"), 0);
    // Several router hosts (front-door-roll.sh): the peer's takeover of the address, then Envoy's drain.
    const roll = one(create, "tls_name") !== "" ? n("drain_timeout_s") + (vrrp ? n("takeover_s") : 0) : 0;
    // The images (images.sh: three tries, 10 s apart, each within the pull budget) and each unit's start.
    const { imagePullSeconds, systemdStartSeconds } = HOST_DEFAULTS.steps;
    const pulls = scriptSettings(create, "images").length * (3 * imagePullSeconds + 20);
    return { run: n("ready_timeout_s") + n("settle_s") + stops + roll + pulls + units.length * systemdStartSeconds, remove: stops };
  }
  if (has(create, "epp_units")) {
    // A front door of several models (front-door-models-apply.sh): each model's EPP and agent, and the one Envoy, restarted in turn.
    const texts = [...scriptSettings(create, "epp_units"), ...scriptSettings(create, "agent_units"), one(create, "proxy_unit")!];
    const stops = texts.reduce((sum, unit) => sum + unitSeconds(unit, "TimeoutStopSec"), 0);
    const { imagePullSeconds, systemdStartSeconds } = HOST_DEFAULTS.steps;
    const pulls = scriptSettings(create, "images").length * (3 * imagePullSeconds + 20);
    const settles = scriptSettings(create, "model_dirs").length * n("settle_s");
    // A model taken out: its requests in flight, once for all its clusters; several router hosts: the roll, and keepalived.
    const vrrp = one(create, "keepalived_unit_name") !== "";
    const roll = one(create, "tls_name") !== "" ? n("drain_timeout_s") + (vrrp ? n("takeover_s") : 0) : 0;
    const keepalived = vrrp ? unitSeconds(one(create, "keepalived_unit")!, "TimeoutStopSec") + systemdStartSeconds : 0;
    const starts = texts.length * systemdStartSeconds;
    return { run: n("ready_timeout_s") + settles + stops + pulls + starts + n("removed_model_drain_s") + roll + keepalived, remove: stops };
  }
  if (has(create, "ready_timeout_s")) {
    const stop = unitSeconds(one(create, "unit_text")!, "TimeoutStopSec");
    return { run: n("ready_timeout_s") + drains + stop, remove: stop };
  }
  if (one(create, "compile_here") === "yes") return { run: n("timeout_s") + n("interval_s"), remove: 0 };
  return { run: 0, remove: 0 };
}

describe.each(STACKS)("%s: every host step's timeouts cover what it waits for", async (_, raw) => {
  const { registrations, error } = await runUnderMocks(runProgram, raw, secretsFor(raw));
  const commands = ofType(registrations, "command:remote:Command");
  const drain = drainBound(commands);

  it("runs, and every step has create, update and delete timeouts", () => {
    expect(error).toBeUndefined();
    expect(commands.length).toBeGreaterThan(3);
    for (const step of commands)
      for (const kind of ["create", "update", "delete"] as const) expect(step.customTimeouts[kind], `${step.name} ${kind}`).not.toBe("");
  });

  it("each timeout is at least the sum of the waits its script contains, and an SSH connection and a command besides", () => {
    const floor = HOST_DEFAULTS.steps.commandSeconds;
    for (const step of commands) {
      const waits = waitsOf(step, drain);
      const timeouts = {
        create: seconds(step.customTimeouts.create),
        update: seconds(step.customTimeouts.update),
        delete: seconds(step.customTimeouts.delete),
      };
      expect(timeouts.create, `${step.name}: create`).toBeGreaterThanOrEqual(waits.run + floor);
      expect(timeouts.update, `${step.name}: update`).toBe(timeouts.create);
      if (step.inputs.delete !== undefined) expect(timeouts.delete, `${step.name}: delete`).toBeGreaterThanOrEqual(waits.remove + floor);
    }
  });

  it("a copy's grant outlives the copy: it expires after the copy step's timeout", () => {
    const allows = commands.filter((c) => has(String(c.inputs.create), "expiry_hours"));
    for (const allow of allows) {
      const grant = String(allow.inputs.create);
      const kind = one(grant, "tag")!.endsWith(`weights-${one(grant, "dest_name")}`) ? "weights" : "compiled cache";
      const copy = commands.find((c) => {
        const script = String(c.inputs.create);
        return (
          has(script, "bind_address") &&
          one(script, "host_name") === one(grant, "dest_name") &&
          one(script, "source_name") === one(grant, "host_name") &&
          one(script, "what")!.startsWith(kind)
        );
      });
      expect(copy, allow.name).toBeDefined();
      expect(Number(one(grant, "expiry_hours")) * 3600, copy!.name).toBeGreaterThan(seconds(copy!.customTimeouts.create));
    }
  });
});

it("docs/hosts.md states the dev stack's unit step timeouts", async () => {
  const { registrations } = await runUnderMocks(runProgram, dev, secretsFor(dev));
  const unit = ofType(registrations, "command:remote:Command").find((c) => c.name.endsWith("-main-0"))!;
  const shown = (duration: string) => `${Math.floor(seconds(duration) / 3600)} h ${Math.round((seconds(duration) % 3600) / 60)} min`;
  const text = fs.readFileSync(path.join(__dirname, "../docs/hosts.md"), "utf8").replace(/\s+/g, " ");
  expect(text).toContain(`a unit step may take ${shown(unit.customTimeouts.create)} and its delete ${shown(unit.customTimeouts.delete)}`);
});

it("reads the waits the scripts hard-code as the timeouts assume them: the probe's 10 s, peer-ssh.sh's connect and keep-alive", () => {
  const script = (name: string) => fs.readFileSync(path.join(__dirname, "../core/render/hosts/scripts", name), "utf8");
  expect(script("serving.sh")).toContain(`python3 -c "$probe_py" "$probe_host" ${HOST_DEFAULTS.steps.probeTimeoutSeconds} "$1"`);
  expect(script("compile-key.sh")).toContain(`python3 -c "$probe_py" "$probe_host" ${HOST_DEFAULTS.steps.probeTimeoutSeconds} `);
  const { connectSeconds, deadLinkSeconds } = HOST_DEFAULTS.steps.peerSsh;
  expect(script("peer-ssh.sh")).toContain(`-o ConnectTimeout=${connectSeconds} -o ServerAliveInterval=${deadLinkSeconds / 3}`);
  expect(script("peer-ssh.sh")).not.toContain("ServerAliveCountMax");
});
