import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { unitApplyScript, unitRemoveScript, type FrontDoorAccess } from "../core/render/hosts/scripts";
import { renderEnvFile } from "../core/render/hosts/systemd";

/**
 * The unit step's script under real bash with a stand-in systemctl that records its calls: a
 * second run with the same content restarts nothing, a changed secret restarts, removal leaves
 * the caches alone; the locks; taking over a unit of the names before deployment ids; a failure of
 * any command once the change begins, made on purpose.
 */
const UNIT = "rbln-serving-test.main-0.service";
const LEGACY = "rbln-serving-main-0.service";
/** How the step asks systemd about the rank while it waits. */
const SHOW = `show -p ActiveState -p SubState -p NRestarts -p Result -p ExecMainStatus -p MainPID ${UNIT}`;
let dir: string;
let server: http.Server;
let port: number;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "unit-apply-"));
  fs.mkdirSync(path.join(dir, "bin"));
  fs.mkdirSync(path.join(dir, "units"));
  fs.mkdirSync(path.join(dir, "enabled"));
  // Every stand-in counts its call; the one numbered $FAIL_AT fails, as a broken tool would.
  fs.writeFileSync(
    path.join(dir, "bin", "fail-at.sh"),
    `count=$(( $(cat "$STATE/count" 2>/dev/null || echo 0) + 1 ))\necho "$count" > "$STATE/count"\nif [ "$count" = "\${FAIL_AT:-}" ]; then echo "$(basename "$0") $*" > "$STATE/injected"; echo "$(basename "$0"): failed on purpose" >&2; exit 1; fi\n`,
  );
  // One unit runs at a time: "active" holds the unit file it was (re)started from, and the rank serves
  // while it exists; "enabled/" holds the units a reboot would start.
  fs.writeFileSync(
    path.join(dir, "bin", "systemctl"),
    [
      "#!/usr/bin/env bash",
      'echo "$*" >> "$STATE/calls"',
      '[ "$1" != restart ] || rm -f "$STATE/active"',
      '. "$STATE/bin/fail-at.sh"',
      'case "$1" in',
      '  is-active) [ -f "$STATE/active" ] ;;',
      // A unit file marked so starts and fails at once; restart-seconds makes a restart take that long.
      '  restart) [ ! -f "$STATE/restart-seconds" ] || sleep "$(cat "$STATE/restart-seconds")"; grep -q "^# fails to start" "$STATE/units/$2" || cp "$STATE/units/$2" "$STATE/active"; [ ! -f "$STATE/on-restart" ] || bash "$STATE/on-restart" ;;',
      '  enable) touch "$STATE/enabled/${*: -1}" ;;',
      '  disable) rm -f "$STATE/enabled/${*: -1}"; [ "$2" != --now ] || rm -f "$STATE/active" ;;',
      '  stop) rm -f "$STATE/active" ;;',
      '  show) if [ -f "$STATE/active" ]; then echo ActiveState=active; else printf "ActiveState=failed\\nResult=exit-code\\nExecMainStatus=1\\n"; fi ;;',
      // The units systemd has loaded, as the test wrote them to $STATE/listed-units.
      '  list-units) cat "$STATE/listed-units" 2>/dev/null || true ;;',
      "esac",
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  // The router host's side of the drains: each SSH session's command is recorded; the drain numbered
  // $STATE/ssh-fail-drain fails, as one the router refuses.
  fs.writeFileSync(
    path.join(dir, "bin", "ssh"),
    [
      "#!/usr/bin/env bash",
      // With several router hosts: the one named in $STATE/ssh-unreachable cannot be reached (ssh's 255), the one in $STATE/ssh-refuses refuses.
      // Shell builtins only: the steps' timing tests run this on a loaded machine.
      'remote=${*: -2:1}; key=; unreachable=; refuses=; { read -r key; read -r key; } < "$2"',
      '[ ! -f "$STATE/ssh-unreachable" ] || read -r unreachable < "$STATE/ssh-unreachable"',
      '[ ! -f "$STATE/ssh-refuses" ] || read -r refuses < "$STATE/ssh-refuses"',
      'echo "$remote $key ${*: -1}" >> "$STATE/ssh-remotes"',
      '[ "$remote" != "$unreachable" ] || { echo "ssh: connect to host: Connection timed out" >&2; exit 255; }',
      'echo "ssh ${*: -1}" >> "$STATE/calls"',
      '[ "$remote" != "$refuses" ] || { echo "front door: refused on purpose" >&2; exit 1; }',
      'case "${*: -1}" in drain*) n=$(( $(cat "$STATE/drains" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$STATE/drains"; [ "$n" != "$(cat "$STATE/ssh-fail-drain" 2>/dev/null)" ] || { echo "front door: refused on purpose" >&2; exit 1; } ;; esac',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  for (const tool of ["cp", "mv", "touch"])
    fs.writeFileSync(path.join(dir, "bin", tool), `#!/usr/bin/env bash\n. "$STATE/bin/fail-at.sh"\nexec /bin/${tool} "$@"\n`, { mode: 0o755 });
  // The rank's log, as journalctl -o cat prints it: what the test wrote to $STATE/journal.
  fs.writeFileSync(path.join(dir, "bin", "journalctl"), `#!/usr/bin/env bash\ncat "$STATE/journal" 2>/dev/null || true\n`, { mode: 0o755 });
  server = http.createServer((_, response) => response.writeHead(fs.existsSync(path.join(dir, "active")) ? 200 : 503).end("{}"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as { port: number }).port;
});

afterAll(() => {
  server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const hostLock = () => path.join(dir, "units.lock");
/** The rank's model's bundle folder (megaCacheModelDir), and what the stand-in rank does there at each (re)start: the shell commands of $STATE/on-restart. */
const bundles = () => path.join(dir, "cache", "vllm", "rbln", "org_model-0123abcd");
const onRestart = (commands: string) => fs.writeFileSync(path.join(dir, "on-restart"), commands);
const envFile = (name: string) => path.join(dir, "env", name);

interface ApplyOptions {
  unitText?: string;
  envText?: string;
  hostLockWaitSeconds?: number;
  minFreeDiskGbToRestart?: number;
  /** The number of the stand-in call (systemctl, cp, mv, touch, counted together) that fails. */
  failAt?: number;
  compileMarker?: string;
  /** The front door the rank is behind: its key goes first on stdin. */
  frontDoor?: FrontDoorAccess;
  onStdout?: (stdout: string) => void;
  /**
   * A signal to the step's bash once it has made a call (the stand-ins record it): SIGKILL as a reboot
   * ends it, SIGHUP as a lost connection. On a call, not after a time: on a loaded machine a fixed
   * delay landed before the step got there.
   */
  cut?: { afterCall: string; signal: NodeJS.Signals };
  /** This deployment's units on the host, and those the stack runs there. */
  hostUnits?: { glob: string; keep: string[] };
}

function apply(
  stdin: string,
  {
    unitText = "[Service]\nExecStart=/bin/true\n",
    envText = "VLLM_ENGINE_READY_TIMEOUT_S='9600'\n",
    hostLockWaitSeconds = 60,
    minFreeDiskGbToRestart = 0,
    failAt,
    compileMarker = path.join(dir, "no-such-marker"),
    frontDoor,
    onStdout,
    cut,
    hostUnits,
  }: ApplyOptions = {},
): Promise<Run> {
  const script = unitApplyScript({
    hostName: "test-host",
    unitDir: path.join(dir, "units"),
    unitName: UNIT,
    unitText,
    envPath: envFile("test.main-0.env"),
    envText,
    stateDir: path.join(dir, "rollout"),
    cacheRoot: path.join(dir, "cache"),
    minFreeDiskGbToRestart,
    legacy: { unitName: LEGACY, envPath: envFile("main-0.env") },
    hostLock: hostLock(),
    hostLockWaitSeconds,
    rank: { unitName: UNIT, label: "main rank 0", port, bundleDir: bundles() },
    wait: { probeHost: "127.0.0.1", timeoutSeconds: 30, intervalSeconds: 1, startLimitBurst: 3 },
    compileMarker,
    cacheBundleDir: bundles(),
    frontDoor,
    hostUnits,
  });
  // A key per router host, each naming its host on its middle line.
  const key = (frontDoor?.routers ?? []).map((_, i) => `-----BEGIN OPENSSH PRIVATE KEY-----\nkey of router ${i}\n-----END OPENSSH PRIVATE KEY-----\n`).join("");
  return runBash(script, key + stdin, onStdout, failAt, cut);
}

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  calls: string[];
  /** How many calls the counting stand-ins (systemctl, cp, mv, touch) took. */
  counted: number;
  /** The call that failed on purpose (FAIL_AT). */
  injected: string | null;
}

function runBash(script: string, stdin: string, onStdout?: (stdout: string) => void, failAt?: number, cut?: ApplyOptions["cut"]): Promise<Run> {
  for (const record of ["calls", "count", "injected", "drains"]) fs.rmSync(path.join(dir, record), { force: true });
  // A host's root PATH behind the stand-ins (not this machine's pyenv shims, which take a second per python3).
  const child = spawn("bash", ["-c", script], {
    env: { PATH: `${dir}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`, STATE: dir, ...(failAt ? { FAIL_AT: String(failAt) } : {}) },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
    onStdout?.(stdout);
  });
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  child.stdin.end(stdin);
  if (cut) {
    const watch = setInterval(() => {
      const made = fs.existsSync(path.join(dir, "calls")) ? fs.readFileSync(path.join(dir, "calls"), "utf8").split("\n") : [];
      if (!made.includes(cut.afterCall)) return;
      clearInterval(watch);
      child.kill(cut.signal);
    }, 20);
    child.on("close", () => clearInterval(watch));
  }
  return new Promise((resolve) =>
    child.on("close", (status) => {
      const calls = fs.existsSync(path.join(dir, "calls")) ? fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n") : [];
      const counted = fs.existsSync(path.join(dir, "count")) ? Number(fs.readFileSync(path.join(dir, "count"), "utf8")) : 0;
      const injected = fs.existsSync(path.join(dir, "injected")) ? fs.readFileSync(path.join(dir, "injected"), "utf8").trim() : null;
      resolve({ status, stdout, stderr, calls, counted, injected });
    }),
  );
}

/** Holds `lock` as another deploy would (one process, so killing it lets go); resolves once it holds it. */
async function holdLock(lock: string): Promise<{ release: () => void }> {
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  const holder = spawn("bash", ["-c", 'exec 9>"$1"; flock 9; echo held; exec sleep 60', "holder", lock]);
  await new Promise<void>((resolve) => holder.stdout.once("data", () => resolve()));
  return { release: () => holder.kill() };
}

describe("the unit step", () => {
  const secrets = "HF_TOKEN='hf_1'\nVLLM_API_KEY='key-1'\n";

  it("writes the env file (0600, secrets from stdin) and unit, enables and starts, then waits until the rank serves", async () => {
    const run = await apply(secrets);
    expect(run.status).toBe(0);
    expect(run.calls).toEqual(["daemon-reload", `enable --quiet ${UNIT}`, `reset-failed ${UNIT}`, `restart ${UNIT}`, SHOW]);
    expect(fs.readFileSync(envFile("test.main-0.env"), "utf8")).toBe(`VLLM_ENGINE_READY_TIMEOUT_S='9600'\n${secrets}`);
    expect(fs.statSync(envFile("test.main-0.env")).mode & 0o777).toBe(0o600);
    expect(run.stdout).toMatch(/ready test-host: main rank 0 serves on port \d+/);
  });

  it("prints none of the secrets it reads from stdin: its output is Pulumi's log and the step's recorded stdout", async () => {
    const marked = "HF_TOKEN='hf_MARKER_TOKEN'\nVLLM_API_KEY='MARKER_API_KEY'\n";
    const runs = [await apply(marked), await apply(marked, { unitText: "[Service]\nExecStart=/bin/false\n" })];
    expect(runs[0]!.status, runs[0]!.stderr).toBe(0);
    for (const run of runs) for (const secret of ["hf_MARKER_TOKEN", "MARKER_API_KEY"]) expect(run.stdout + run.stderr).not.toContain(secret);
  });

  it("takes env values over several lines: LMCACHE_EXTRA_CONFIG of lmcache: rds, extraEnv with newlines and quotes", async () => {
    const envText = renderEnvFile({
      VLLM_ENGINE_READY_TIMEOUT_S: "9600",
      LMCACHE_EXTRA_CONFIG: '{\n  "storage_plugin.RDSBackend.class_name": "RDSBackend"\n}',
      NOTE: 'it\'s $HOME\nand `more` \\ "quoted"',
    });
    const run = await apply(secrets, { envText });
    expect(run.status, run.stderr).toBe(0);
    expect(run.calls).toContain(`restart ${UNIT}`);
    expect(fs.readFileSync(envFile("test.main-0.env"), "utf8")).toBe(envText + secrets);
    expect(await apply(secrets)).toMatchObject({ status: 0 });
  });

  it("restarts nothing when run again with the same content", async () => {
    const run = await apply(secrets);
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([`is-active --quiet ${UNIT}`, `enable --quiet ${UNIT}`, SHOW]);
    expect(run.stdout).toContain("unchanged and running");
  });

  it("restarts when a secret or the unit changes", async () => {
    expect((await apply("HF_TOKEN='hf_2'\n")).calls).toContain(`restart ${UNIT}`);
    expect((await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n" })).calls).toContain(`restart ${UNIT}`);
  });

  it("checks free disk under the cache root before a (re)start, and on too little changes nothing", async () => {
    fs.mkdirSync(path.join(dir, "cache"), { recursive: true });
    // Every file of the fake host but the harness's records of the stand-ins' calls, with its content.
    const files = () =>
      fs
        .readdirSync(dir, { recursive: true })
        .map(String)
        .filter((f) => !["calls", "count", "injected"].includes(f))
        .sort()
        .map((f) => [f, fs.statSync(path.join(dir, f)).isFile() ? fs.readFileSync(path.join(dir, f), "utf8") : ""]);
    const tooLittle = new RegExp(
      `^test-host main rank 0: only \\d+ GiB free under ${dir}/cache, need 1000000000 GiB to restart \\(the compile cache grows on a start\\); nothing changed$`,
    );
    // The step's own line is the last (bash may print the machine's ~/.bashrc noise before it).
    const lastLine = (run: Run) => run.stderr.trim().split("\n").pop();
    const before = files();
    // A changed unit: refused before its files are moved into place; the running rank is not touched.
    const change = await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/sleep 2\n", minFreeDiskGbToRestart: 10 ** 9 });
    expect(change).toMatchObject({ status: 1, calls: [] });
    expect(lastLine(change)).toMatch(tooLittle);
    expect(files()).toEqual(before);
    // Unchanged and running: nothing restarts, so nothing is checked.
    expect(await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n", minFreeDiskGbToRestart: 10 ** 9 })).toMatchObject({
      status: 0,
      calls: [`is-active --quiet ${UNIT}`, `enable --quiet ${UNIT}`, SHOW],
    });
    // Unchanged but stopped: the start is refused.
    fs.rmSync(path.join(dir, "active"));
    const start = await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n", minFreeDiskGbToRestart: 10 ** 9 });
    expect(start).toMatchObject({ status: 1, calls: [`is-active --quiet ${UNIT}`] });
    expect(lastLine(start)).toMatch(tooLittle);
    // With the room there, the same start goes ahead.
    expect((await apply("HF_TOKEN='hf_2'\n", { unitText: "[Service]\nExecStart=/bin/false\n", minFreeDiskGbToRestart: 1 })).calls).toContain(`restart ${UNIT}`);
  });

  it("with its key's compiled cache placed ahead, a rank that compiles instead of loading fails the change and is rolled back; one that loads passes, whatever its log shows", async () => {
    const marker = path.join(dir, "cache", "vllm", "rbln-serving-complete", "compile-k1");
    fs.mkdirSync(path.dirname(marker), { recursive: true });
    fs.writeFileSync(marker, "sha256:00\n");
    // The bundle placed ahead, as vllm-rbln lays it out: <model folder>/<signature>/rank0/mega_cache.bin.
    const placed = path.join(bundles(), "0123456789abcdef", "rank0", "mega_cache.bin");
    fs.mkdirSync(path.dirname(placed), { recursive: true });
    fs.writeFileSync(placed, "compiled ahead\n");
    const journal = path.join(dir, "journal");
    const unit = (n: number) => ({ unitText: `[Service]\nExecStart=/bin/true\n# compiled ahead, change ${n}\n`, compileMarker: marker });
    try {
      // Compiles: its signature differs, so it saves a bundle at a new path; the placed one stays as it was.
      onRestart(
        `d=${bundles()}/fedcba9876543210/rank0; mkdir -p $d && echo compiled > $d/mega_cache.bin.1.tmp && mv $d/mega_cache.bin.1.tmp $d/mega_cache.bin`,
      );
      fs.writeFileSync(journal, "Loaded rbln mega-cache bundle from (a log line does not count)\n");
      const miss = await apply(secrets, unit(1));
      expect(miss.status).toBe(1);
      expect(miss.stderr.trim().split("\n").pop()).toBe(
        `test-host main rank 0: the new config failed (compiled cache miss: the compiled cache of its key is here (${marker}), but the rank compiles instead of loading it (it saved a new bundle, fedcba9876543210/rank0/mega_cache.bin)); the previous config is restored and serving`,
      );
      fs.rmSync(path.join(bundles(), "fedcba9876543210"), { recursive: true });
      // Loads: it saves the bundle it loaded again, renamed over it. Its log may show nothing of it
      // (VLLM_LOGGING_LEVEL=WARNING), or a warm-up but not the load (a logging config that keeps the
      // backend's lines and drops the mega cache's): a load all the same.
      onRestart(`cp ${placed} ${placed}.2.tmp && mv ${placed}.2.tmp ${placed}`);
      for (const [n, log] of [
        [2, ""],
        [3, "rbln_backend [warm-up] model: inputs=1\nrbln_backend done: 12.50s\n"],
      ] as const) {
        fs.writeFileSync(journal, log);
        const hit = await apply(secrets, unit(n));
        expect(hit.status, hit.stderr).toBe(0);
      }
      // Serves and saved nothing since its start: whether it loaded cannot be told, so the change fails.
      onRestart("true");
      const silent = await apply(secrets, unit(4));
      expect(silent.status).toBe(1);
      expect(silent.stderr).toContain("compiled cache not confirmed");
      // Without the marker nothing is expected: a rank that compiles its own key is waited for.
      const own = await apply(secrets, { unitText: "[Service]\nExecStart=/bin/true\n# compiled here\n" });
      expect(own.status).toBe(0);
    } finally {
      for (const file of [journal, marker, path.join(dir, "on-restart")]) fs.rmSync(file, { force: true });
      fs.rmSync(bundles(), { recursive: true, force: true });
    }
  });

  it("refuses to change a unit another deploy is changing, and touches nothing", async () => {
    const holder = await holdLock(path.join(dir, "rollout", `${UNIT}.lock`));
    try {
      const before = fs.readFileSync(path.join(dir, "units", UNIT), "utf8");
      const run = await apply("HF_TOKEN='hf_3'\n", { unitText: "[Service]\nExecStart=/bin/sleep 1\n" });
      expect(run.status).toBe(1);
      expect(run.calls).toEqual([]);
      expect(fs.readFileSync(path.join(dir, "units", UNIT), "utf8")).toBe(before);
    } finally {
      holder.release();
    }
  });

  it("waits while another deploy switches units on the host, then goes on", async () => {
    const other = await holdLock(hostLock());
    let released = false;
    const run = await apply("HF_TOKEN='hf_4'\n", {
      onStdout: (stdout) => {
        if (!released && stdout.includes("waiting up to 60s for another rbln-serving deploy to finish switching units on this host")) {
          released = true;
          other.release();
        }
      },
    });
    expect(released).toBe(true);
    expect(run.status).toBe(0);
    expect(run.calls).toContain(`restart ${UNIT}`);
  });

  it("fails with one line when the host lock stays taken past its bound, and touches nothing", async () => {
    const other = await holdLock(hostLock());
    try {
      const before = fs.readFileSync(path.join(dir, "units", UNIT), "utf8");
      const run = await apply("HF_TOKEN='hf_5'\n", { unitText: "[Service]\nExecStart=/bin/sleep 2\n", hostLockWaitSeconds: 1 });
      expect(run.status).toBe(1);
      expect(run.stderr.trim().split("\n").pop()).toBe(`test-host main rank 0: another rbln-serving deploy held ${hostLock()} for 1s; run again when it ends`);
      expect(run.calls).toEqual([]);
      expect(fs.readFileSync(path.join(dir, "units", UNIT), "utf8")).toBe(before);
    } finally {
      other.release();
    }
  });

  it("takes over the rank's unit of the names before deployment ids: stopped before the restart, removed once the new unit serves", async () => {
    const legacyState = ["previous", "previous-env", "pending"].map((suffix) => path.join(dir, "rollout", `${LEGACY}.${suffix}`));
    fs.writeFileSync(path.join(dir, "units", LEGACY), "# Managed by rbln-serving (Pulumi); local edits are overwritten.\n[Service]\nExecStart=/bin/true\n");
    fs.writeFileSync(envFile("main-0.env"), "HF_TOKEN='hf_old'\n");
    for (const file of legacyState) fs.writeFileSync(file, "");
    const run = await apply("HF_TOKEN='hf_6'\n");
    expect(run.status).toBe(0);
    expect(run.calls.slice(run.calls.indexOf(`disable --now --quiet ${LEGACY}`))).toEqual([
      `disable --now --quiet ${LEGACY}`,
      `reset-failed ${UNIT}`,
      `restart ${UNIT}`,
      SHOW,
      "daemon-reload",
    ]);
    expect(run.stdout).toContain(`unit test-host: removed ${LEGACY}, which ${UNIT} replaced`);
    for (const file of [path.join(dir, "units", LEGACY), envFile("main-0.env"), ...legacyState]) expect(fs.existsSync(file), file).toBe(false);
  });

  it("leaves it alone when it listens on another address: it belongs to another deployment on the host", async () => {
    fs.writeFileSync(
      path.join(dir, "units", LEGACY),
      "# Managed by rbln-serving (Pulumi); local edits are overwritten.\n[Service]\nExecStart=/bin/true \\\n    --host 10.0.0.2\n",
    );
    const run = await apply("HF_TOKEN='hf_7'\n", { unitText: "[Service]\nExecStart=/bin/true \\\n    --host 10.0.0.1 \\\n    --port 8000\n" });
    expect(run.status).toBe(0);
    expect(run.calls.filter((call) => call.includes(LEGACY))).toEqual([]);
    expect(fs.existsSync(path.join(dir, "units", LEGACY))).toBe(true);
    // The same address, or all interfaces on either side, is in the way.
    const listens: [string | null, string | null][] = [
      ["10.0.0.2", "10.0.0.2"],
      ["0.0.0.0", "10.0.0.2"],
      [null, "10.0.0.2"],
      ["10.0.0.1", null],
    ];
    for (const [ours, theirs] of listens) {
      const host = (address: string | null) => (address ? ` \\\n    --host ${address}` : "");
      fs.writeFileSync(
        path.join(dir, "units", LEGACY),
        `# Managed by rbln-serving (Pulumi); local edits are overwritten.\n[Service]\nExecStart=/bin/true${host(theirs)}\n`,
      );
      const takeover = await apply(`HF_TOKEN='hf_${ours}_${theirs}'\n`, { unitText: `[Service]\nExecStart=/bin/true${host(ours)}\n` });
      expect(takeover.calls, `${ours} ${theirs}`).toContain(`disable --now --quiet ${LEGACY}`);
      expect(fs.existsSync(path.join(dir, "units", LEGACY))).toBe(false);
    }
  });

  it("leaves a unit of that name alone when rbln-serving did not write it", async () => {
    fs.writeFileSync(path.join(dir, "units", LEGACY), "[Service]\nExecStart=/bin/true\n");
    const run = await apply("HF_TOKEN='hf_8'\n");
    expect(run.status).toBe(0);
    expect(run.calls.filter((call) => call.includes(LEGACY))).toEqual([]);
    expect(fs.existsSync(path.join(dir, "units", LEGACY))).toBe(true);
  });

  it("on removal stops, disables and deletes the unit and env file, and touches nothing else", async () => {
    fs.mkdirSync(path.join(dir, "cache", "huggingface"), { recursive: true });
    const script = unitRemoveScript({
      hostName: "test-host",
      unitDir: path.join(dir, "units"),
      unitName: UNIT,
      envPath: envFile("test.main-0.env"),
      stateDir: path.join(dir, "rollout"),
    });
    const run = await runBash(script, "");
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([`disable --now --quiet ${UNIT}`, "daemon-reload"]);
    expect(fs.existsSync(path.join(dir, "units", UNIT))).toBe(false);
    expect(fs.existsSync(envFile("test.main-0.env"))).toBe(false);
    expect(fs.existsSync(path.join(dir, "cache", "huggingface"))).toBe(true);
  });
});

const A = { unitText: "[Service]\nExecStart=/bin/true a\n", envText: "CONFIG='a'\n" };
const B = { unitText: "[Service]\nExecStart=/bin/true b\n", envText: "CONFIG='b'\n" };
const read = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8") : null);
/** What is in place and what runs: the unit and env files (and the old-named ones), what a reboot starts, the unit file the running unit started from, a pending change. */
const state = () => ({
  unit: read(path.join(dir, "units", UNIT)),
  env: read(envFile("test.main-0.env")),
  legacy: [read(path.join(dir, "units", LEGACY)), read(envFile("main-0.env"))],
  enabled: fs.readdirSync(path.join(dir, "enabled")),
  running: read(path.join(dir, "active")),
  pending: fs.existsSync(path.join(dir, "rollout", `${UNIT}.pending`)),
});
type State = ReturnType<typeof state>;
const serving = (config: typeof A): State => ({
  unit: config.unitText,
  env: config.envText,
  legacy: [null, null],
  enabled: [UNIT],
  running: config.unitText,
  pending: false,
});
/** The state a step that served `config` leaves, written directly (running the step for it would double the test's time). */
const servingNow = (config: typeof A) => {
  removeUnit();
  fs.mkdirSync(path.dirname(envFile("test.main-0.env")), { recursive: true });
  fs.writeFileSync(path.join(dir, "units", UNIT), config.unitText);
  fs.writeFileSync(envFile("test.main-0.env"), config.envText);
  fs.writeFileSync(path.join(dir, "active"), config.unitText);
  fs.writeFileSync(path.join(dir, "enabled", UNIT), "");
};
const removeUnit = () => {
  const files = [path.join(dir, "units", UNIT), envFile("test.main-0.env"), path.join(dir, "units", LEGACY), envFile("main-0.env"), path.join(dir, "active")];
  const state = ["previous", "previous-env", "pending"].map((s) => path.join(dir, "rollout", `${UNIT}.${s}`));
  for (const file of [...files, ...state, ...fs.readdirSync(path.join(dir, "enabled")).map((u) => path.join(dir, "enabled", u))])
    fs.rmSync(file, { force: true });
};

describe("the unit step and the units the stack no longer runs on its host", () => {
  const PREFILL = "rbln-serving-test.prefill-0.service";
  const hostUnits = { glob: "rbln-serving-test.*.service", keep: [UNIT, "rbln-serving-test.sidecar.service"] };
  const listed = (names: string[]) => fs.writeFileSync(path.join(dir, "listed-units"), names.map((n) => `${n} loaded active running rank\n`).join(""));
  afterAll(() => fs.rmSync(path.join(dir, "listed-units"), { force: true }));

  it("stops and disables a removed role's ranks, all in one call, right before its own rank starts (not the ones it keeps, not the front door's)", async () => {
    removeUnit();
    const DECODE = "rbln-serving-test.decode-1.service";
    listed([PREFILL, UNIT, DECODE, "rbln-serving-test.sidecar.service", "rbln-serving-test.front-door-epp.service"]);
    const run = await apply("", { ...B, hostUnits });
    expect(run.status, run.stderr).toBe(0);
    // Side by side: each stop may drain for vLLM's shutdown timeout, and the step's timeout counts one.
    const stop = run.calls.indexOf(`disable --now --quiet ${PREFILL} ${DECODE}`);
    expect(stop).toBeGreaterThan(-1);
    expect(stop).toBeLessThan(run.calls.indexOf(`restart ${UNIT}`));
    expect(run.calls.filter((c) => c.startsWith("disable"))).toEqual([`disable --now --quiet ${PREFILL} ${DECODE}`]);
    for (const unit of [PREFILL, DECODE])
      expect(run.stdout).toContain(`unit test-host: stopped ${unit}, which the stack no longer runs on this host (its delete removes its files)`);
  });

  it("starts it again when the new rank does not serve and there is nothing to go back to; a step that changes nothing stops nothing", async () => {
    removeUnit();
    listed([PREFILL]);
    const failed = await apply("", { unitText: "# fails to start\n[Service]\nExecStart=/bin/false\n", envText: B.envText, hostUnits });
    expect(failed.status).toBe(1);
    expect(failed.calls.slice(failed.calls.indexOf(`disable --now --quiet ${PREFILL}`))).toContain(`enable --now --quiet ${PREFILL}`);
    servingNow(B);
    const unchanged = await apply("", { ...B, hostUnits });
    expect(unchanged.calls.filter((c) => c.includes(PREFILL))).toEqual([]);
  });
});

describe("the unit step when a command fails once the change begins", { timeout: 180_000 }, () => {
  const LEGACY_TEXT = "# Managed by rbln-serving (Pulumi); local edits are overwritten.\n[Service]\nExecStart=/bin/true legacy\n";
  const LEGACY_ENV = "CONFIG='legacy'\n";
  /**
   * Counts the calls a clean change from `setup`'s state to B makes, then, from that state again each
   * time, fails each of them in turn; the step must end in the state `expected` names for whether
   * the new config served (exit 0, or a failure after it served). Returns the last line of each run
   * that did not serve.
   */
  async function failEachCall(setup: () => void, expected: (served: boolean) => Partial<State>): Promise<string[]> {
    setup();
    const clean = await apply("", B);
    expect(clean.status, clean.stderr).toBe(0);
    const lines: string[] = [];
    for (let failAt = 1; failAt <= clean.counted; failAt++) {
      setup();
      const run = await apply("", { ...B, failAt });
      expect(run.injected, `call ${failAt}`).not.toBeNull();
      const last = run.stderr.trim().split("\n").pop()!;
      const served = run.status === 0 || last.includes("the new config serves, but the step failed after");
      const want = expected(served);
      const got = Object.fromEntries(Object.entries(state()).filter(([key]) => key in want));
      expect(got, `${run.injected} failed:\n${run.stderr}`).toEqual(want);
      if (!served) lines.push(last);
    }
    return lines;
  }

  it("a change ends on the new config serving, or on the previous one restored and serving", async () => {
    const lines = await failEachCall(
      () => servingNow(A),
      (served) => serving(served ? B : A),
    );
    for (const line of lines) {
      expect(line).toMatch(
        /^test-host main rank 0: (the unit step failed \(`.+` exited 1\); (the previous config is restored and serving|nothing changed)|the new config failed \(unit exited 1\); the previous config is restored and serving)$/,
      );
    }
    // Failures before the switch (keeping the previous files), in it (the files, systemd), and of the start.
    expect(lines.some((l) => l.endsWith("nothing changed"))).toBe(true);
    expect(lines.filter((l) => /the unit step failed .*restored and serving$/.test(l)).length).toBeGreaterThanOrEqual(4);
    expect(lines.some((l) => l.includes("the new config failed"))).toBe(true);
  });

  it("a first deploy ends serving, or stopped, saying there is nothing to go back to", async () => {
    // Whether the new files stay depends on where it failed; nothing runs or starts at a reboot.
    const lines = await failEachCall(removeUnit, (served) => (served ? serving(B) : { enabled: [], running: null, pending: false }));
    expect(lines.length).toBeGreaterThanOrEqual(4);
    for (const line of lines) expect(line).toMatch(new RegExp(`; there is no previous config to go back to, so ${UNIT} is stopped and disabled$`));
  });

  it("a takeover of the unit before deployment ids ends on the new unit serving, or on the old one back and serving", async () => {
    const lines = await failEachCall(
      () => {
        removeUnit();
        fs.writeFileSync(path.join(dir, "units", LEGACY), LEGACY_TEXT);
        fs.writeFileSync(envFile("main-0.env"), LEGACY_ENV);
        fs.writeFileSync(path.join(dir, "active"), LEGACY_TEXT);
        fs.writeFileSync(path.join(dir, "enabled", LEGACY), "");
      },
      (served) => (served ? serving(B) : { unit: null, env: null, legacy: [LEGACY_TEXT, LEGACY_ENV], enabled: [LEGACY], running: LEGACY_TEXT, pending: false }),
    );
    expect(lines.length).toBeGreaterThanOrEqual(4);
    for (const line of lines) expect(line).toMatch(/; the previous config is restored and serving$/);
  });
});

describe("the unit step behind the front door", { timeout: 60_000 }, () => {
  const ENDPOINT = "test-host-main-0";
  const door = (renewSeconds = 3600): FrontDoorAccess => ({
    routers: [{ address: "127.0.0.9", port: 22, hostKey: "" }],
    bind: "127.0.0.1",
    endpoints: [ENDPOINT],
    renewSeconds,
  });
  /** The calls that take the rank out or in, and those that stop it. */
  const drainsAndStops = (run: Run) => run.calls.filter((call) => /^(ssh |restart |disable --now)/.test(call));
  const lastLine = (run: Run) => run.stderr.trim().split("\n").pop();
  const calls = () => read(path.join(dir, "calls"));
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Runs `change` with its compiled cache placed ahead and a rank that compiles instead: a change that serves, then fails the step. */
  async function compilesInstead<T>(change: (compileMarker: string) => Promise<T>): Promise<T> {
    const marker = path.join(dir, "cache", "vllm", "rbln-serving-complete", "compile-front-door");
    fs.mkdirSync(path.dirname(marker), { recursive: true });
    fs.writeFileSync(marker, "sha256:00\n");
    onRestart(`d=${bundles()}/fedcba9876543210/rank0; mkdir -p $d && echo compiled > $d/mega_cache.bin`);
    try {
      return await change(marker);
    } finally {
      for (const file of [marker, path.join(dir, "on-restart")]) fs.rmSync(file, { force: true });
      fs.rmSync(bundles(), { recursive: true, force: true });
    }
  }

  afterEach(() => {
    for (const file of ["ssh-fail-drain", "restart-seconds", "ssh-unreachable", "ssh-refuses", "ssh-remotes"]) fs.rmSync(path.join(dir, file), { force: true });
  });

  it("with two router hosts, drains and rejoins on each with its own key; passes over one it cannot reach, and fails at one that refuses", async () => {
    const two = (): FrontDoorAccess => ({ ...door(), routers: [...door().routers, { address: "127.0.0.10", port: 22, hostKey: "" }] });
    const remotes = () => fs.readFileSync(path.join(dir, "ssh-remotes"), "utf8").trim().split("\n");
    servingNow(A);
    const run = await apply("", { ...B, frontDoor: two() });
    expect(run.status, run.stderr).toBe(0);
    expect(remotes()).toEqual([
      `root@127.0.0.9 key of router 0 drain ${ENDPOINT}`,
      `root@127.0.0.10 key of router 1 drain ${ENDPOINT}`,
      `root@127.0.0.9 key of router 0 rejoin ${ENDPOINT}`,
      `root@127.0.0.10 key of router 1 rejoin ${ENDPOINT}`,
    ]);
    fs.rmSync(path.join(dir, "ssh-remotes"));
    fs.writeFileSync(path.join(dir, "ssh-unreachable"), "root@127.0.0.10");
    servingNow(A);
    const passedOver = await apply("", { ...B, frontDoor: two() });
    expect(passedOver.status, passedOver.stderr).toBe(0);
    expect(passedOver.stderr).toContain(`test-host: the front door on 127.0.0.10 could not be reached to drain ${ENDPOINT}; passed over`);
    expect(drainsAndStops(passedOver)).toEqual([`ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh rejoin ${ENDPOINT}`]);
    // None reachable: nothing changes.
    fs.writeFileSync(path.join(dir, "ssh-unreachable"), "root@127.0.0.9");
    const alone = await apply("", { ...A, frontDoor: { ...door(), routers: door().routers } });
    expect(alone.status).toBe(1);
    expect(alone.stderr).toContain(`test-host: the front door did not take ${ENDPOINT} out (see above); nothing changed`);
    fs.rmSync(path.join(dir, "ssh-unreachable"));
    fs.writeFileSync(path.join(dir, "ssh-refuses"), "root@127.0.0.10");
    const refused = await apply("", { ...A, frontDoor: two() });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(`test-host: the front door did not take ${ENDPOINT} out (see above); nothing changed`);
    expect(state()).toEqual(serving(B));
  });

  it("takes the rank out before it restarts it, and back in as the last thing it does, once the new config served", async () => {
    servingNow(A);
    const run = await apply("", { ...B, frontDoor: door() });
    expect(run.status, run.stderr).toBe(0);
    expect(drainsAndStops(run)).toEqual([`ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh rejoin ${ENDPOINT}`]);
    expect(run.calls.at(-1)).toBe(`ssh rejoin ${ENDPOINT}`);
  });

  it("goes back through a drain too: a change that served and failed drains again before the previous config starts, or before a first deploy's unit stops", async () => {
    servingNow(A);
    const back = await compilesInstead((compileMarker) => apply("", { ...B, compileMarker, frontDoor: door() }));
    expect(lastLine(back)).toMatch(/: the new config failed \(compiled cache miss: .*\); the previous config is restored and serving$/);
    expect(drainsAndStops(back)).toEqual([`ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh rejoin ${ENDPOINT}`]);
    expect(state()).toEqual(serving(A));
    removeUnit();
    const first = await compilesInstead((compileMarker) => apply("", { ...B, compileMarker, frontDoor: door() }));
    expect(lastLine(first)).toMatch(/; there is no previous config to go back to, so \S+ is stopped and disabled$/);
    expect(drainsAndStops(first)).toEqual([
      `ssh drain ${ENDPOINT}`,
      `restart ${UNIT}`,
      `ssh drain ${ENDPOINT}`,
      `disable --now --quiet ${UNIT}`,
      `ssh rejoin ${ENDPOINT}`,
    ]);
  });

  it("when the way back cannot drain, leaves a rank that serves on the new config, pending, and takes one that does not serve back all the same", async () => {
    fs.writeFileSync(path.join(dir, "ssh-fail-drain"), "2");
    servingNow(A);
    const stays = await compilesInstead((compileMarker) => apply("", { ...B, compileMarker, frontDoor: door() }));
    expect(stays.status).toBe(1);
    expect(lastLine(stays)).toMatch(
      /: the new config failed \(compiled cache miss: .*\); the front door did not take it out to go back \(see above\), so it stays on the new config, which serves; run the step again$/,
    );
    expect(drainsAndStops(stays)).toEqual([`ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh drain ${ENDPOINT}`, `ssh rejoin ${ENDPOINT}`]);
    expect(state()).toEqual({ ...serving(B), pending: true });
    servingNow(A);
    const fails = { unitText: "[Service]\nExecStart=/bin/false\n# fails to start\n", envText: B.envText };
    const back = await apply("", { ...fails, frontDoor: door() });
    expect(lastLine(back)).toBe("test-host main rank 0: the new config failed (unit exited 1); the previous config is restored and serving");
    expect(drainsAndStops(back)).toEqual([`ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh rejoin ${ENDPOINT}`]);
    expect(state()).toEqual(serving(A));
  });

  it("renews its drain while it runs, and stops renewing once it has rejoined, or once it is killed", async () => {
    fs.writeFileSync(path.join(dir, "restart-seconds"), "2.5");
    servingNow(A);
    const run = await apply("", { ...B, frontDoor: door(1) });
    expect(run.status, run.stderr).toBe(0);
    const renewals = drainsAndStops(run)
      .slice(1, -1)
      .filter((call) => call === `ssh renew ${ENDPOINT}`);
    expect(renewals.length).toBeGreaterThanOrEqual(2);
    expect(run.calls.at(-1)).toBe(`ssh rejoin ${ENDPOINT}`);
    const after = calls();
    await sleep(2500);
    expect(calls()).toBe(after);
    // Killed outright (a reboot) while it restarts the rank: no rejoin, and the renewals stop, so the lease runs out.
    servingNow(A);
    const killed = await apply("", { ...B, frontDoor: door(1), cut: { afterCall: `restart ${UNIT}`, signal: "SIGKILL" } });
    expect(killed.status).toBeNull();
    expect(killed.calls).not.toContain(`ssh rejoin ${ENDPOINT}`);
    await sleep(1200);
    const settled = calls();
    await sleep(2500);
    expect(calls()).toBe(settled);
  });

  it("cut by a signal while it restarts the rank, leaves it drained with the change pending: it may be stopping", async () => {
    fs.writeFileSync(path.join(dir, "restart-seconds"), "2");
    servingNow(A);
    const cut = await apply("", { ...B, frontDoor: door(), cut: { afterCall: `restart ${UNIT}`, signal: "SIGHUP" } });
    expect(cut.status).toBe(1);
    expect(drainsAndStops(cut)).toEqual([`ssh drain ${ENDPOINT}`, `restart ${UNIT}`]);
    expect(state().pending).toBe(true);
    // The next run holds that drain as its own, and rejoins once the change has served.
    fs.rmSync(path.join(dir, "restart-seconds"));
    const resumed = await apply("", { ...B, frontDoor: door() });
    expect(resumed.stdout).toContain("resuming the unfinished change");
    expect(drainsAndStops(resumed)).toEqual([`ssh drain ${ENDPOINT}`, `restart ${UNIT}`, `ssh rejoin ${ENDPOINT}`]);
    expect(state()).toEqual(serving(B));
  });
});
