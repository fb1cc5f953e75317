import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { stringify } from "yaml";
import { describe, expect, it, vi } from "vitest";
import { warning } from "../core/plan/messages";
import { refuseUnusedOptions, runCommand, stackDeployment, type CliOptions } from "../cli/commands";
import { main } from "../cli/main";
import { RecipeCatalog } from "../core/recipe/catalog";
import { parseStackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment, type Deployment } from "../core/plan/deployment";
import { compareCompileKeys, recompileLines } from "../core/plan/compileKey";
import { diffDeployments, renderPlanDiff } from "../core/plan/diff";
import { renderDeployment } from "../core/render/deployment";
import { renderStackPlanText } from "../core/render/stackPlanText";

const ROOT = path.resolve(__dirname, "..");

/** Runs the CLI the way the README and docs/commands.md do: `npm run --silent <command> -- ...`. */
function cli(...args: string[]) {
  const result = spawnSync("npm", ["run", "--silent", ...args], { cwd: ROOT, encoding: "utf8" });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("--help", () => {
  /** `rbln-serving ARGS...` in this process (main.ts, the bin's source): its exit status and what it printed. */
  async function run(...args: string[]) {
    const out = { stdout: "", stderr: "" };
    const spies = (["stdout", "stderr"] as const).map((stream) =>
      vi.spyOn(process[stream], "write").mockImplementation((chunk: string | Uint8Array) => {
        out[stream] += String(chunk);
        return true;
      }),
    );
    try {
      return { status: await main(args), ...out };
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  }
  const COMMANDS = ["plan", "diff", "render", "status"];
  const EVERY = ["stack", "strategy", "target", "preset", "set", "model", "format", "diff", "against", "out", "endpoint", "interval", "watch", "identity"];

  it("rbln-serving --help, -h and help list every command and every option, exit 0; no command at all is usage on stderr, exit 2", async () => {
    // Once as the bin runs, in a process of its own.
    const spawned = spawnSync(path.join(ROOT, "node_modules/.bin/tsx"), [path.join(ROOT, "cli/main.ts"), "--help"], { cwd: ROOT, encoding: "utf8" });
    expect([spawned.status, spawned.stderr]).toEqual([0, ""]);
    expect(spawned.stdout).toBe((await run("--help")).stdout);
    for (const flag of ["--help", "-h", "help"]) {
      const help = await run(flag);
      expect([help.status, help.stderr], flag).toEqual([0, ""]);
      for (const command of [...COMMANDS, "recipe import", "recipe list"])
        expect(help.stdout, `${flag} ${command}`).toMatch(new RegExp(`^ {2}${command} `, "m"));
      // Each option on a line of its own, with its value (a flag such as --watch has none) and what it does.
      for (const option of [...EVERY, "out", "dir"])
        expect(help.stdout, `${flag} --${option}`).toMatch(new RegExp(`^ +--${option}( [A-Za-z|=.-]+)? +\\S`, "m"));
    }
    // Every option the parser takes is one of those: it refuses any other.
    for (const option of EVERY) expect((await run("plan", `--${option}`, "x", "--help")).stderr, option).not.toContain("Unknown option");
    expect((await run("plan", "--bogus", "x")).stderr).toContain("Unknown option '--bogus'");
    const none = await run();
    expect([none.status, none.stdout]).toEqual([2, ""]);
    expect(none.stderr).toContain("usage: rbln-serving <command>");
    expect((await run("nope")).stderr).toBe('error: command: unknown command "nope"; allowed: "plan", "diff", "render", "status", "recipe"; see --help\n');
  });

  it("<command> --help and -h exit 0 and list exactly the options that command reads", async () => {
    for (const command of COMMANDS) {
      // What the command reads, asked of the command itself: an option it does not read is refused.
      const reads = EVERY.filter((option) => {
        try {
          refuseUnusedOptions(command, { [option]: "x" });
          return true;
        } catch {
          return false;
        }
      });
      expect(reads, command).toContain("stack");
      for (const flag of ["--help", "-h"]) {
        const help = await run(command, flag);
        expect([help.status, help.stderr], `${command} ${flag}`).toEqual([0, ""]);
        expect(help.stdout).toMatch(new RegExp(`^usage: rbln-serving ${command} `));
        expect(
          [...help.stdout.matchAll(/^ {2}--([a-z]+)/gm)].map((m) => m[1]),
          `${command} ${flag}`,
        ).toEqual(reads);
        expect(help.stdout).toContain("-h, --help");
      }
    }
  });

  it("recipe --help, recipe import --help and recipe list --help exit 0 and list the recipe commands' options", async () => {
    for (const args of [
      ["recipe", "--help"],
      ["recipe", "-h"],
      ["recipe", "import", "--help"],
      ["recipe", "list", "-h"],
    ]) {
      const help = await run(...args);
      expect([help.status, help.stderr], args.join(" ")).toEqual([0, ""]);
      expect(help.stdout).toContain("recipe import PAGE.txt [--out DIR]");
      expect(help.stdout).toContain("--out DIR  ");
      expect(help.stdout).toContain("--dir DIR  ");
    }
    expect((await run("recipe", "nope")).status).toBe(2);
  });
});

describe("plan command", () => {
  it("prints one JSON object with the contract's fields and nothing else", () => {
    const run = cli("plan", "--", "--strategy", "prefill-decode-disaggregated", "--target", "Throughput", "--set", "spec_decode=suffix", "--format", "json");
    expect(run.status).toBe(0);
    const plan = JSON.parse(run.stdout);
    expect(Object.keys(plan)).toEqual(expect.arrayContaining(["model", "strategy", "target", "selection", "nodes", "roles", "packages", "router"]));
    expect(plan.selection.spec_decode).toBe("suffix");
    const rank = plan.roles[1].ranks[3];
    expect(Object.keys(rank)).toEqual(expect.arrayContaining(["rank", "argv", "env", "ports", "devices", "placeholders"]));
    expect(rank.argv.slice(0, 3)).toEqual(["vllm", "serve", "MiniMaxAI/MiniMax-M2.7"]);
    expect(rank.ports).toEqual([8203]);
    expect(rank.devices).toEqual([3]);
    expect(rank.placeholders).toEqual(["EPP_HOST", "POD_IP"]);
    expect(plan.packages.map((p: { requirement: string }) => p.requirement)).toContain("arctic-inference==0.1.1");
  });

  it("reads a stack file, with flags overriding its keys", () => {
    const run = cli("plan", "--", "--stack", "staging", "--set", "spec_decode=eagle3", "--format", "json");
    expect(run.status).toBe(0);
    const plan = JSON.parse(run.stdout);
    expect([plan.strategy, plan.target]).toEqual(["aggregated-pipeline-parallel", "Throughput"]);
    expect(plan.selection).toMatchObject({ lmcache: "cpu", prefix_caching: "on", spec_decode: "eagle3" });
  });

  it("prints commands a shell can run as they are", () => {
    const run = cli("plan", "--", "--stack", "dev");
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^strategy {2}aggregated-data-expert-parallel$/m);
    expect(run.stdout).toContain(
      "# main rank 0 on npu-dev-0\nenv \\\n  VLLM_ENGINE_READY_TIMEOUT_S=9600 \\\n  HF_HUB_OFFLINE=1 \\\n  HF_HOME=/var/lib/rbln-serving/huggingface \\\n" +
        "  VLLM_CACHE_ROOT=/var/lib/rbln-serving/vllm \\\n  RBLN_OFFLOAD_DIR=/var/lib/rbln-serving/offload \\\n" +
        "  /opt/rbln-serving/venvs/dev/rebel-compiler-0.12.0_vllm-rbln-0.12.0/bin/vllm serve MiniMaxAI/MiniMax-M2.7 \\\n    --block-size 4096 \\",
    );
  });

  it("warns about each secret the settings need and the stack file does not hold, and plans all the same", () => {
    const run = cli("plan", "--", "--stack", "dev");
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(
      "warning: sshPrivateKey: required with platform: hosts; set it with: pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519\n" +
        "warning: pipPassword: required when pip.username is set; set it with: pulumi config set --secret pipPassword\n",
    );
    // With the secrets in the file, nothing; a password without its user, that pairing (core/config/secrets.ts).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stack-secrets-"));
    const secure = { secure: "v1:AAAAciphertext" };
    const stack = (config: Record<string, unknown>) =>
      stringify({ config: { ...Object.fromEntries(Object.entries(readStackFile("dev").raw).map(([k, v]) => [`rbln-serving:${k}`, v])), ...config } });
    fs.writeFileSync(path.join(dir, "Pulumi.held.yaml"), stack({ "rbln-serving:sshPrivateKey": secure, "rbln-serving:pipPassword": secure }));
    fs.writeFileSync(
      path.join(dir, "Pulumi.stray.yaml"),
      stack({
        "rbln-serving:sshPrivateKey": secure,
        "rbln-serving:pipPassword": secure,
        "rbln-serving:compile": { registry: { repository: "registry.example.com/x" } },
        "rbln-serving:revision": "0123456789abcdef0123456789abcdef01234567",
        "rbln-serving:registryPassword": secure,
      }),
    );
    const warned = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      stackDeployment({}, RecipeCatalog.load(), "held", dir);
      expect(warned).not.toHaveBeenCalled();
      stackDeployment({}, RecipeCatalog.load(), "stray", dir);
      expect(warned.mock.calls).toEqual([
        ["warning: compile.registry.username: required when the registryPassword secret is set (the registry's user name)\n"],
      ]);
    } finally {
      warned.mockRestore();
      fs.rmSync(dir, { recursive: true });
    }
  });

  it("compares two stacks flag by flag, rank by rank (--diff)", () => {
    const run = cli("plan", "--", "--stack", "dev", "--diff", "staging");
    expect(run.status).toBe(0);
    expect(run.stdout).toContain(
      'selection:\n  ~ strategy "aggregated-data-expert-parallel" → "aggregated-pipeline-parallel"\n  ~ target "Latency" → "Throughput"\n',
    );
    expect(run.stdout).toContain('main rank 0:\n  - --data-parallel-size "4"\n');
    expect(run.stdout).toContain('  ~ --max-num-seqs "1" → "4"\n');
    expect(run.stdout).toContain('  + env LMCACHE_CHUNK_SIZE "256"\n');
    const json = JSON.parse(cli("diff", "--", "--stack", "dev", "--diff", "dev", "--format", "json").stdout);
    expect(json).toEqual([]);
  });

  for (const [args, message] of [
    [["--strategy", "nope", "--target", "Latency"], /^error: strategy: unknown strategy "nope"/],
    [["--strategy", "aggregated-pipeline-parallel", "--target", "Latency"], /^error: target: "Latency" is not offered/],
    [["--strategy", "aggregated-pipeline-parallel", "--target", "Throughput", "--set", "lmcache=bogus"], /^error: axes\.lmcache: unknown value "bogus"/],
    [["--strategy", "aggregated-pipeline-parallel", "--target", "Throughput", "--set", "lmcache"], /^error: --set: "lmcache" is not axis=value/],
    [["--stack", "nope"], /^error: --stack: no stack file stacks\/Pulumi\.nope\.yaml; stacks: dev, edge, multi-hosts, multi, prod, staging$/m],
    [["--strategy", "aggregated-pipeline-parallel", "--target", "Throughput", "--format", "xml"], /^error: --format: unknown format "xml"/],
    [["--bogus"], /^error: Unknown option '--bogus'/],
    [["--stack", "dev", "--set", "lmcache=cpu", "--set", "lmcache=off"], /^error: --set: axis "lmcache" given twice \("cpu", "off"\); give each axis once$/m],
  ] as const) {
    it(`refuses ${args.join(" ")} with one line and exit status 2`, () => {
      const run = cli("plan", "--", ...args);
      expect(run.status).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).toMatch(message);
      expect(run.stderr.split("\n")).toHaveLength(2);
    });
  }
});

describe("plan --stack speaks the stack's platform", () => {
  const catalog = RecipeCatalog.load();
  const text = (raw: Record<string, unknown>, stack = "t") =>
    renderStackPlanText(renderDeployment(planDeployment(parseStackSettings(raw), catalog), { stack, instance: "rbln-serving", secrets: [] }));
  const planOf = (stack: string) => {
    const spy = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      return runCommand("plan", { stack }, catalog);
    } finally {
      spy.mockRestore();
    }
  };
  /** The command block under `# <label> on <where>`, up to the next blank line. */
  const block = (out: string, header: string) => {
    const start = out.indexOf(`${header}\n`);
    expect(start, header).toBeGreaterThanOrEqual(0);
    const body = out.slice(start + header.length + 1);
    return body.slice(0, body.search(/\n\n|\n$/) + 1);
  };
  /** The words bash reads from a printed command: `env` is a function that prints each argument. */
  const bashWords = (command: string) =>
    spawnSync("bash", ["-c", `env() { printf '%s\\0' "$@"; }\n${command}`], { encoding: "utf8" })
      .stdout.split("\0")
      .slice(0, -1);

  it("on hosts: servers, addresses, URLs and units, the front door's URL and its parts, who downloads and compiles; no chart line, no placeholder", () => {
    const out = planOf("edge");
    expect(out).toContain("platform    hosts, deployment id edge\n");
    expect(out).toContain("endpoint    http://10.30.0.10:8080: the front door on edge-router (10.30.0.10)\n");
    expect(out).toMatch(/^front door {2}podman: endpoint picker ghcr\.io\/llm-d\/llm-d-router-endpoint-picker:v0\.10\.0, Envoy /m);
    expect(out).toContain("sidecar     npu-edge-1: ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0, ports 8000-8003 to the decode ranks on 8200-8203\n");
    expect(out).toContain("weights     npu-edge-0 downloads MiniMaxAI/MiniMax-M2.7 from the hub; npu-edge-1 copies them\n");
    expect(out).toMatch(
      /^compile {5}each key compiled on the NPUs of its first host \([0-9a-f]{16} on npu-edge-0, [0-9a-f]{16} on npu-edge-1\); the others copy its cache$/m,
    );
    expect(out).toMatch(/^npu-edge-0 +10\.30\.0\.11 +0 +prefill +0 +0,1,2,3 +http:\/\/10\.30\.0\.11:8000 +rbln-serving-edge\.prefill-0\.service$/m);
    expect(out).toMatch(/^npu-edge-1 +10\.30\.0\.12 +0 +decode +3 +3 +http:\/\/10\.30\.0\.12:8203 +rbln-serving-edge\.decode-3\.service$/m);
    expect(out).not.toMatch(/<[A-Z_]+>/);
    expect(out).not.toContain("llm-d-router-gateway");
    // The placeholders bound as the unit binds them: the front door's host for the KV events, the host's own address.
    const prefill = bashWords(block(out, "# prefill rank 0 on npu-edge-0"));
    expect(prefill).toContain("--kv-events-config");
    expect(JSON.parse(prefill[prefill.indexOf("--kv-events-config") + 1]!)).toMatchObject({
      endpoint: "tcp://10.30.0.10:5557",
      topic: "kv@10.30.0.11:8000@MiniMaxAI/MiniMax-M2.7",
    });
    expect(bashWords(block(out, "# decode rank 2 on npu-edge-1"))).toEqual(
      expect.arrayContaining(["VLLM_NIXL_SIDE_CHANNEL_HOST=10.30.0.12", "--data-parallel-address", "10.30.0.12"]),
    );
  });

  it("on hosts: the compile host, the registry, replicas without a front door, and one command for the servers that run the same", () => {
    const dev = readStackFile("dev").raw as Record<string, any>;
    const two = {
      ...dev,
      replicas: 2,
      hosts: [dev.hosts[0], { ...dev.hosts[0], name: "npu-dev-1", address: "10.20.0.12" }],
      revision: "0123456789abcdef0123456789abcdef01234567",
      compile: { host: { ...dev.hosts[0], name: "cpu-build-0", address: "10.20.0.50" }, registry: { repository: "registry.example.com/ml/cc" } },
    };
    const out = text(two, "two");
    expect(out).toContain("endpoints   http://10.20.0.11:8000  http://10.20.0.12:8000 (each replica's rank 0; no front door without router.host)\n");
    expect(out).toContain("weights     cpu-build-0 downloads MiniMaxAI/MiniMax-M2.7 from the hub; npu-dev-0, npu-dev-1 copy them\n");
    expect(out).toMatch(
      /^compile {5}on cpu-build-0 \(10\.20\.0\.50\), off the NPUs, before any unit changes: [0-9a-f]{16} \(main\); registry registry\.example\.com\/ml\/cc \(pull, and push what it compiles\)$/m,
    );
    expect(out).toContain("\n# main rank 0 on npu-dev-0, npu-dev-1\n");
    // A listen address is the unit's --host, so that server's command is its own.
    const listening = text({ ...two, hosts: [two.hosts[0], { ...two.hosts[1], listenAddress: "10.21.0.12" }] }, "two");
    expect(listening).toContain("\n# main rank 0 on npu-dev-0\n");
    expect(bashWords(block(listening, "# main rank 0 on npu-dev-1"))).toEqual(expect.arrayContaining(["--host", "10.21.0.12"]));
    expect(listening).toMatch(/^npu-dev-1 +10\.20\.0\.12 +1 +main +0 +0,1,2,3 +http:\/\/10\.21\.0\.12:8000 /m);
  });

  it("on Kubernetes: the ScaledObjects' bounds, the compile Jobs, the registry, the router and the EPP the ranks send events to", () => {
    const prod = readStackFile("prod").raw as Record<string, any>;
    const scaled = {
      ...prod,
      autoscaling: { enabled: true, maxReplicas: 4 },
      compile: { enabled: true, registry: { repository: "registry.example.com/ml/cc" } },
      revision: "0123456789abcdef0123456789abcdef01234567",
      kubernetes: { ...prod.kubernetes, image: `registry.example.com/ml/vllm-rbln@sha256:${"e".repeat(64)}` },
    };
    const out = text(scaled, "prod");
    expect(out).toMatch(/^platform {4}kubernetes, namespace llm-serving, image registry\.example\.com\/ml\/vllm-rbln@sha256:e{64}$/m);
    expect(out).toContain("endpoint    the address of the Gateway gateway-system/inference-gateway, once the router's HTTPRoute is attached\n");
    expect(out).toContain(
      "router      llm-d-router-gateway v0.10.0 (release router), pool ports 8000,8001,8002,8003; endpoint picker router-epp.llm-serving.svc.cluster.local\n",
    );
    expect(out).toMatch(
      /^compile {5}Job rbln-serving-compile-prefill-[0-9a-f]{10} \(prefill, key [0-9a-f]{16}\), Job rbln-serving-compile-decode-[0-9a-f]{10} \(decode, key [0-9a-f]{16}\); it compiles off the NPUs, and the role's Deployment waits for it$/m,
    );
    expect(out).toContain("registry    registry.example.com/ml/cc\n");
    expect(out).toMatch(/^prefill +rbln-serving-prefill +1-4 \(ScaledObject rbln-serving-prefill\) +0 +0,1,2,3 +8000$/m);
    expect(out).toMatch(/^decode +rbln-serving-decode +1-4 \(ScaledObject rbln-serving-decode\) +3 +3 +8203$/m);
    expect(out).not.toMatch(/<[A-Z_]+>/);
    const decode = block(out, "# decode rank 0 on each pod of rbln-serving-decode (POD_IP: the pod's IP, from the downward API)");
    expect(decode).toContain('--data-parallel-address "${POD_IP}"');
    expect(decode).toContain('"endpoint": "tcp://router-epp.llm-serving.svc.cluster.local:5557"');
    const fixed = planOf("prod");
    expect(fixed).toContain(
      "compile     each role's first pod compiles on its NPUs under the role's compile lock; the others load its cache (compile.enabled: false)\n",
    );
    expect(fixed).toContain("registry    none (compile.registry unset)\nautoscaling off: fixed replicas\n");
    expect(fixed).toMatch(/^prefill +rbln-serving-prefill +1 +0 +0,1,2,3 +8000$/m);
  });

  it("without a stack, the plan of the selection alone: its placeholders and the recipe's router, for any platform", () => {
    const out = runCommand("plan", { strategy: "prefill-decode-disaggregated", target: "Throughput" }, catalog);
    expect(out).toContain("<EPP_HOST> <POD_IP>");
    expect(out).toMatch(/^router {4}llm-d-router-gateway v0\.10\.0 \(release router\)/m);
    expect(out).not.toContain("platform ");
  });
});

describe("the shipped stacks", () => {
  /** What `plan --stack NAME` writes as warnings, on stdout (the plan's) and stderr (the stack file's, the secrets'): each without `warning: `. */
  function planWarnings(stack: string): string[] {
    let stderr = "";
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    let stdout: string;
    try {
      stdout = runCommand("plan", { stack }, RecipeCatalog.load());
    } finally {
      spy.mockRestore();
    }
    return `${stdout}${stderr}`.split("\n").flatMap((line) => (line.startsWith("warning: ") ? [line.slice("warning: ".length)] : []));
  }

  /**
   * The warnings a stack file says it prints on purpose: each quoted `"warning: <its start>"` in
   * its comments (a quote may run over comment lines), the comment around it saying why.
   */
  function explainedWarnings(stack: string): string[] {
    const comments = fs
      .readFileSync(path.join(ROOT, "stacks", `Pulumi.${stack}.yaml`), "utf8")
      .split("\n")
      .flatMap((line) => (/^\s*#/.test(line) ? [line.replace(/^\s*#\s?/, "").trim()] : []))
      .join(" ");
    return [...comments.matchAll(/"warning: ([^"]+)"/g)].map((m) => m[1]!.replace(/\s*\.\.\.$/, ""));
  }

  /** A warning no comment explains, and an explanation no warning needs. */
  function unexplained(warnings: readonly string[], explained: readonly string[]): string[] {
    return [
      ...warnings.filter((w) => !explained.some((start) => w.startsWith(start))).map((w) => `printed, not explained: ${w}`),
      ...explained.filter((start) => !warnings.some((w) => w.startsWith(start))).map((start) => `explained, not printed: ${start}`),
    ];
  }

  it.each(["dev", "staging", "edge", "prod", "multi-hosts"])("%s plans with no warning its stack file does not explain in a comment", (stack) => {
    const warnings = planWarnings(stack);
    expect(unexplained(warnings, explainedWarnings(stack))).toEqual([]);
    // prod holds no secret it needs and runs on one platform's settings: nothing to act on at all.
    if (stack === "prod") expect(warnings).toEqual([]);
  });

  it("would find a warning no comment explains, and a comment for a warning no longer printed", () => {
    expect(
      unexplained(["sshPrivateKey: required with platform: hosts", "router: role decode has one server"], ["sshPrivateKey: required", "pipPassword: required"]),
    ).toEqual(["printed, not explained: router: role decode has one server", "explained, not printed: pipPassword: required"]);
    expect(explainedWarnings("edge")).toEqual([
      "sshPrivateKey: required",
      "pipPassword: required",
      "router: role prefill has one server",
      "router: role decode has one server",
    ]);
  });
});

describe("a malformed stack file", () => {
  const stackDir = path.join(ROOT, "stacks");
  for (const [what, yaml, where, reason] of [
    ["a bad indent", "config:\n  rbln-serving:strategy: aggregated-data-expert-parallel\n   rbln-serving:target: Latency\n", ":2:", /invalid YAML: /],
    ["a duplicate key", "config:\n  rbln-serving:target: Latency\n  rbln-serving:target: Throughput\n", ":3:3", /invalid YAML: Map keys must be unique$/],
    ["a list instead of a mapping", "- config\n", "", /not a Pulumi stack file/],
    [
      "an alias bomb",
      `a: &a [x, x, x, x, x, x, x, x, x]\n${["b", "c", "d", "e", "f", "g", "h", "i"].map((n, i) => `${n}: &${n} [${Array(9).fill(`*${"abcdefgh"[i]}`).join(", ")}]`).join("\n")}\nconfig:\n  rbln-serving:axes: *i\n`,
      ": ",
      /invalid YAML: more than 100 aliases to expand, as in an alias bomb$/,
    ],
    [
      "a byte that is not UTF-8",
      Buffer.from([...Buffer.from("config:\n  rbln-serving:target: Lat"), 0xff, 0x0a]),
      ":2: ",
      /not UTF-8 text; save the stack file as UTF-8$/,
    ],
  ] as const) {
    it(`(${what}) is one line naming the file, line and column, exit status 2`, () => {
      const name = `malformed-${process.pid}-${what.replace(/\W+/g, "-")}`;
      const file = path.join(stackDir, `Pulumi.${name}.yaml`);
      fs.writeFileSync(file, yaml);
      try {
        const run = cli("plan", "--", "--stack", name);
        expect(run.status).toBe(2);
        expect(run.stdout).toBe("");
        expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
        expect(run.stderr.startsWith(`error: stacks/Pulumi.${name}.yaml${where}`)).toBe(true);
        expect(run.stderr.trimEnd()).toMatch(reason);
      } finally {
        fs.rmSync(file);
      }
    });
  }
});

describe("a stack file that is no regular file", () => {
  it("(a folder, a FIFO, a device, a file too large) is refused unread, in one line naming it", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stack-kinds-"));
    fs.mkdirSync(path.join(dir, "Pulumi.folder.yaml"));
    expect(spawnSync("mkfifo", [path.join(dir, "Pulumi.fifo.yaml")]).status).toBe(0);
    fs.symlinkSync("/dev/zero", path.join(dir, "Pulumi.device.yaml"));
    const large = `config:\n  rbln-serving:strategy: ${"x".repeat(5 * 2 ** 20)}\n`;
    fs.writeFileSync(path.join(dir, "Pulumi.large.yaml"), large);
    const allowed = "allowed: a stack file: a YAML text file of at most 4 MiB";
    for (const [name, problem] of [
      ["folder", "is a folder"],
      ["fifo", "is not a regular file"],
      ["device", "is not a regular file"],
      ["large", `is ${large.length} bytes`],
    ]) {
      const shown = path.relative(process.cwd(), path.join(dir, `Pulumi.${name}.yaml`));
      expect(() => readStackFile(name!, dir), name).toThrow(`--stack: ${JSON.stringify(shown)} ${problem}; ${allowed}`);
    }
    fs.rmSync(dir, { recursive: true });
  });
});

describe("a refused index URL", () => {
  it("is one line with exit status 2, its password masked, also given as JSON text", () => {
    const name = `bad-url-${process.pid}`;
    const file = path.join(ROOT, "stacks", `Pulumi.${name}.yaml`);
    fs.writeFileSync(
      file,
      `config:\n  rbln-serving:strategy: aggregated-data-expert-parallel\n  rbln-serving:target: Latency\n  rbln-serving:pip: '{"indexUrl": "https://me:hunter2@host name/"}'\n`,
    );
    try {
      const run = cli("plan", "--", "--stack", name);
      expect(run.status).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).toBe('error: pip.indexUrl: an http:// or https:// URL such as https://mirror.example.com/simple (got "https://***@host name/")\n');
    } finally {
      fs.rmSync(file);
    }
  });
});

describe("render --out", () => {
  const catalog = RecipeCatalog.load();
  const render = (stack: string, out: string, extra: CliOptions = {}) => runCommand("render", { stack, out, ...extra }, catalog);
  const fresh = () => fs.mkdtempSync(path.join(os.tmpdir(), "render-"));

  it("refuses an empty folder name and a file", () => {
    expect(() => render("dev", "")).toThrow(/^--out: empty; give a folder/);
    const file = path.join(fresh(), "file.txt");
    fs.writeFileSync(file, "x");
    expect(() => render("dev", file)).toThrow(/^--out: ".*file\.txt" is a file; give a folder/);
  });

  it("replaces what an earlier render wrote, so no host of another stack stays", () => {
    const out = path.join(fresh(), "rendered");
    render("dev", out);
    expect(fs.existsSync(path.join(out, "hosts/npu-dev-0/install.sh"))).toBe(true);
    render("staging", out);
    expect(fs.readdirSync(path.join(out, "hosts"))).toEqual(["npu-stg-0"]);
    render("prod", out);
    expect(fs.readdirSync(out).sort()).toEqual([".rbln-serving-render", "kubernetes", "router"]);
  });

  it("names units, env files and venvs after the stack, as the program's instance on it gets them", () => {
    const out = path.join(fresh(), "rendered");
    render("staging", out);
    const host = path.join(out, "hosts/npu-stg-0");
    expect([...fs.readdirSync(path.join(host, "systemd")), ...fs.readdirSync(path.join(host, "env"))]).toEqual([
      "rbln-serving-staging.main-0.service",
      "staging.main-0.env",
    ]);
    expect(fs.readFileSync(path.join(host, "systemd/rbln-serving-staging.main-0.service"), "utf8")).toMatch(
      /^EnvironmentFile=\/opt\/rbln-serving\/env\/staging\.main-0\.env$/m,
    );
    expect(fs.readFileSync(path.join(host, "install.sh"), "utf8")).toMatch(/^venv=\/opt\/rbln-serving\/venvs\/staging\/rebel-compiler-/m);
  });

  it("refuses a folder holding files it did not write, and leaves them", () => {
    const out = fresh();
    fs.writeFileSync(path.join(out, "notes.txt"), "mine");
    expect(() => render("dev", out)).toThrow(/holds files render did not write; give a new or empty folder$/);
    expect(fs.readdirSync(out)).toEqual(["notes.txt"]);
  });

  it("never writes, replaces or removes anything through a symbolic link under --out, and changes nothing when it finds one", () => {
    const elsewhere = fresh();
    fs.writeFileSync(path.join(elsewhere, "install.sh"), "keep me");
    fs.writeFileSync(path.join(elsewhere, "file"), "keep me too");
    // A folder of an earlier render replaced by a link to elsewhere.
    const out = path.join(fresh(), "rendered");
    render("dev", out);
    const host = path.join(out, "hosts/npu-dev-0");
    fs.rmSync(host, { recursive: true });
    fs.symlinkSync(elsewhere, host);
    const before = fs.readFileSync(path.join(out, ".rbln-serving-render"), "utf8");
    expect(() => render("dev", out)).toThrow(/^--out: ".*hosts\/npu-dev-0" is a symbolic link; render writes nothing through links: remove it$/);
    expect(fs.readdirSync(elsewhere).sort()).toEqual(["file", "install.sh"]);
    expect(fs.readFileSync(path.join(elsewhere, "install.sh"), "utf8")).toBe("keep me");
    expect(fs.readFileSync(path.join(out, ".rbln-serving-render"), "utf8")).toBe(before);
    // A file of an earlier render replaced by a link to a file elsewhere.
    fs.unlinkSync(host);
    render("dev", out);
    fs.rmSync(path.join(host, "pip.conf"));
    fs.symlinkSync(path.join(elsewhere, "file"), path.join(host, "pip.conf"));
    expect(() => render("dev", out)).toThrow(/pip\.conf" is a symbolic link/);
    expect(fs.readFileSync(path.join(elsewhere, "file"), "utf8")).toBe("keep me too");
    // The manifest itself, and a folder render has not written yet.
    fs.unlinkSync(path.join(host, "pip.conf"));
    fs.writeFileSync(path.join(host, "pip.conf"), "");
    render("staging", out);
    fs.symlinkSync(elsewhere, path.join(out, "hosts", "npu-dev-0"));
    expect(() => render("dev", out)).toThrow(/hosts\/npu-dev-0" is a symbolic link/);
    expect(fs.readdirSync(elsewhere).sort()).toEqual(["file", "install.sh"]);
    fs.unlinkSync(path.join(out, "hosts", "npu-dev-0"));
    fs.renameSync(path.join(out, ".rbln-serving-render"), path.join(elsewhere, "manifest"));
    fs.symlinkSync(path.join(elsewhere, "manifest"), path.join(out, ".rbln-serving-render"));
    expect(() => render("dev", out)).toThrow(/\.rbln-serving-render" is a symbolic link/);
  });

  it("may itself be reached through a link the user made", () => {
    const real = fresh();
    const link = path.join(fresh(), "link");
    fs.symlinkSync(real, link);
    render("dev", link);
    expect(fs.existsSync(path.join(real, "hosts/npu-dev-0/install.sh"))).toBe(true);
  });

  it("refuses --format and other options it does not read", () => {
    expect(() => render("dev", fresh(), { format: "json" })).toThrow(
      /^--format: not an option of render \(render writes files; --format is for plan and diff\)/,
    );
    expect(() => runCommand("plan", { stack: "dev", out: "x" }, catalog)).toThrow(/^--out: not an option of plan/);
  });
});

describe("diff between stacks", () => {
  const catalog = RecipeCatalog.load();
  const dev = readStackFile("dev").raw as Record<string, any>;
  const deploy = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), catalog);
  const diff = (b: Record<string, unknown>, secretsA: string[] = [], secretsB: string[] = []) =>
    renderPlanDiff(diffDeployments(deploy(dev), deploy(b), secretsA, secretsB));

  it("shows every setting that changes what is deployed, not only flags", () => {
    expect(diff(dev)).toBe("no changes\n");
    expect(diff({ ...dev, hosts: [{ ...dev.hosts[0], address: "10.20.0.12" }] })).toBe('settings:\n  ~ hosts[0].address "10.20.0.11" → "10.20.0.12"\n');
    expect(diff({ ...dev, cacheRoot: "/data/rbln", installRoot: "/srv/rbln" })).toBe(
      'settings:\n  ~ installRoot "/opt/rbln-serving" → "/srv/rbln"\n  ~ cacheRoot "/var/lib/rbln-serving" → "/data/rbln"\n',
    );
    expect(diff({ ...dev, minFreeDiskGb: 600 })).toContain("  ~ minFreeDiskGb 500 → 600\n");
    // One change, not also an empty `cache` removed.
    expect(diff({ ...dev, cache: { shared: "/mnt/rbln-cache" } })).toBe('settings:\n  + cache.shared "/mnt/rbln-cache"\n');
    expect(diff({ ...dev, hosts: [...dev.hosts, { ...dev.hosts[0], name: "npu-dev-1", address: "10.20.0.12" }], replicas: 2 })).toContain(
      '  + hosts[1].name "npu-dev-1"\n',
    );
    expect(diff({ ...dev, versions: { vllmRbln: "0.12.1" } })).toMatch(/^packages:\n {2}~ vllm-rbln "vllm-rbln\S*==0\.12\.0" → "vllm-rbln\S*==0\.12\.1"\n/);
    expect(diff(dev, ["sshPrivateKey"], ["sshPrivateKey", "apiKey"])).toBe("secrets:\n  + apiKey set\n");
    const platform = diff({ ...dev, platform: "kubernetes", kubernetes: { image: "registry.example.com/x:1" } });
    expect(platform).toContain('  ~ platform "hosts" → "kubernetes"\n');
    expect(platform).toContain('  - hosts[0].address "10.20.0.11"\n');
  });

  it("tells apart keys that hold a dot from nested keys, and a string from the number it spells", () => {
    const prod = readStackFile("prod").raw as Record<string, any>;
    const k8s = (affinity: unknown) => deploy({ ...prod, kubernetes: { ...prod.kubernetes, affinity } });
    const changes = renderPlanDiff(diffDeployments(k8s({ nodeAffinity: { weight: 1 } }), k8s({ "nodeAffinity.weight": "1" })));
    expect(changes).toBe('settings:\n  - kubernetes.affinity.nodeAffinity.weight 1\n  + kubernetes.affinity["nodeAffinity.weight"] "1"\n');
    expect(renderPlanDiff(diffDeployments(k8s({ a: { b: 1 } }), k8s({ a: { b: "1" } })))).toBe('settings:\n  ~ kubernetes.affinity.a.b 1 → "1"\n');
  });

  it("shows values no two of which look alike: 1 against 01, spaces at either end, control and invisible characters, one word or two", () => {
    const main = (args: string[], env: Record<string, string> = {}) => deploy({ ...dev, extraArgs: { main: args }, extraEnv: { main: env } });
    const rankLines = (a: Deployment, b: Deployment) =>
      renderPlanDiff(diffDeployments(a, b))
        .split("\n")
        .filter((line) => /^ {2}[~+-] (--max-log-len|--lora-modules|env NOTE)/.test(line));
    expect(rankLines(main(["--max-log-len", "1"]), main(["--max-log-len", "01"]))).toEqual(['  ~ --max-log-len "1" → "01"']);
    expect(rankLines(main([], { NOTE: "x" }), main([], { NOTE: "x " }))).toEqual(['  ~ env NOTE "x" → "x "']);
    expect(rankLines(main([], { NOTE: " x" }), main([], { NOTE: "x" }))).toEqual(['  ~ env NOTE " x" → "x"']);
    expect(rankLines(main([], { NOTE: "a\tb\nc" }), main([], { NOTE: "a b c" }))).toEqual(['  ~ env NOTE "a\\tb\\nc" → "a b c"']);
    // No-break space, zero-width space, a right-to-left override, a line separator: each an escape, not a look-alike.
    expect(rankLines(main([], { NOTE: "a b" }), main([], { NOTE: "a\u00a0b\u200b\u202e\u2028" }))).toEqual([
      '  ~ env NOTE "a b" → "a\\u00a0b\\u200b\\u202e\\u2028"',
    ]);
    // One value with a space against two values.
    expect(rankLines(main(["--lora-modules", "a b"]), main(["--lora-modules", "a", "b"]))).toEqual(['  ~ --lora-modules "a b" → "a" "b"']);
    // Settings too, and the recompile line.
    expect(diff({ ...dev, cacheRoot: "/var/lib/rbln-serving/" })).toBe("no changes\n");
    expect(recompileLines(compareCompileKeys(main(["--num-gpu-blocks-override", "1"]).plan, main(["--num-gpu-blocks-override", "01"]).plan))).toEqual([
      warning('recompiles main: --num-gpu-blocks-override "1" -> "01" (hours on first start)'),
    ]);
  });
});
