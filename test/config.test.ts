import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { foreignKeyWarnings, parseStackSettings, StackSettings } from "../core/config/stackConfig";
import { readStackFile } from "../core/config/stackFile";
import { planDeployment } from "../core/plan/deployment";
import { weightsStorageGib } from "../core/plan/storage";
import { renderHost } from "../core/render/hosts/bundle";
import { catalogWithFixtures, shippedCatalog } from "./helpers/recipes";

const project = parse(fs.readFileSync(path.resolve(__dirname, "../Pulumi.yaml"), "utf8"));

describe("Pulumi.yaml", () => {
  it("declares the contract's project settings", () => {
    expect(project).toMatchObject({ name: "rbln-serving", runtime: { name: "nodejs", options: { typescript: true } }, main: "index.ts", stackConfigDir: "stacks" });
  });

  it("declares the same defaults the program applies", () => {
    const defaults = StackSettings.parse({ strategy: "s", target: "t", hosts: [{ name: "h", address: "127.0.0.1", hostKey: EXAMPLE_HOST_KEY }] }) as Record<string, unknown>;
    for (const [key, declaration] of Object.entries(project.config as Record<string, { type: string; default?: unknown; description: string }>)) {
      expect(declaration.description, key).toBeTruthy();
      if (declaration.default !== undefined) expect(defaults[key], key).toEqual(declaration.default);
    }
  });
});

describe("stack files", () => {
  for (const name of ["dev", "staging", "prod"]) {
    it(`${name} validates and plans offline`, () => {
      const { raw } = readStackFile(name);
      const deployment = planDeployment(parseStackSettings(raw), shippedCatalog);
      expect(deployment.plan.roles.length).toBeGreaterThan(0);
    });
  }

  it("selects a second recipe by its model id", () => {
    const settings = parseStackSettings({ model: "example/tiny-moe", strategy: "two-role", target: "Latency", platform: "kubernetes", kubernetes: { image: "registry.example.com/x:1" } });
    const { plan } = planDeployment(settings, catalogWithFixtures());
    expect(plan.roles.map((r) => [r.role, r.node, r.ranks.map((k) => k.ports[0])])).toEqual([["front", 0, [9000]], ["back", 1, [9100, 9101]]]);
    expect(plan.roles[0]!.ranks[0]!.env).toEqual({ GREETING: "hello world", HF_HUB_OFFLINE: "1" });
  });
});

describe("extraArgs and extraEnv", () => {
  it("are literal text, but for the platform's <POD_IP>, which binds like the recipe's", () => {
    const deployment = planDeployment(parseStackSettings({ ...readStackFile("dev").raw, extraEnv: { main: { NOTE: "<A> at <POD_IP>" } }, extraArgs: { main: ["--served-model-name", "<B>"] } }), shippedCatalog);
    const [rank] = renderHost(deployment, deployment.placements[0]!, "test").ranks;
    expect(rank!.envText).toContain("NOTE='<A> at 10.20.0.11'\n");
    expect(rank!.unitText).toContain('    --served-model-name "<B>"');
    expect(deployment.plan.roles[0]!.ranks[0]!.placeholders).toEqual([]);
  });

  it("give every rank vLLM's --shutdown-timeout: rollout.shutdownTimeoutSeconds, by default the router's requestTimeout; the unit's stop timeout exceeds it", () => {
    const raw = readStackFile("dev").raw;
    const shutdownOf = (settings: Record<string, unknown>) => {
      const deployment = planDeployment(parseStackSettings(settings), shippedCatalog);
      const flag = deployment.plan.roles[0]!.ranks[0]!.flags.find((f) => f.name === "--shutdown-timeout");
      const stop = /^TimeoutStopSec=(\d+)s$/m.exec(renderHost(deployment, deployment.placements[0]!, "test").ranks[0]!.unitText)![1];
      return [flag?.values[0], Number(stop)];
    };
    expect(shutdownOf(raw)).toEqual(["3600", 3720]);
    expect(shutdownOf({ ...raw, router: { requestTimeout: "1h30m" } })).toEqual(["5400", 5520]);
    expect(shutdownOf({ ...raw, rollout: { shutdownTimeoutSeconds: 90 } })).toEqual(["90", 210]);
    expect(() => parseStackSettings({ ...raw, rollout: { shutdownTimeoutSeconds: -1 } })).toThrow(/^rollout\.shutdownTimeoutSeconds: /);
    expect(() => planDeployment(parseStackSettings({ ...raw, extraArgs: { main: ["--shutdown_timeout=5"] } }), shippedCatalog)).toThrow(/^extraArgs\.main: "--shutdown_timeout" comes from the rollout\.shutdownTimeoutSeconds setting/);
  });

  it("refuse a flag given twice in extraArgs, in any spelling: vLLM would read only the last", () => {
    const raw = readStackFile("dev").raw;
    for (const words of [["--max-log-len", "1", "--max-log-len", "2"], ["--max-log-len=1", "--max_log_len", "2"]]) {
      expect(() => planDeployment(parseStackSettings({ ...raw, extraArgs: { main: words } }), shippedCatalog)).toThrow(/^extraArgs\.main: "--max[-_]log[-_]len" is given twice; give each flag once/);
    }
  });

  it("replace a flag the recipe sets, in place, and refuse topology flags and variables", () => {
    const raw = readStackFile("dev").raw;
    const { plan } = planDeployment(parseStackSettings({ ...raw, extraArgs: { main: ["--max-num-seqs", "2", "--enable-log-requests"] } }), shippedCatalog);
    const flags = plan.roles[0]!.ranks[0]!.flags.map((f) => [f.name, ...f.values].join(" "));
    expect(flags.indexOf("--max-num-seqs 2")).toBe(7);
    expect(flags[flags.length - 1]).toBe("--enable-log-requests");
    for (const flag of ["--data-parallel-size", "--pipeline-parallel-size", "--port", "--data-parallel-rank", "--kv-transfer-config"]) {
      expect(() => planDeployment(parseStackSettings({ ...raw, extraArgs: { main: [flag, "1"] } }), shippedCatalog)).toThrow(new RegExp(`^extraArgs\\.main: "${flag}" defines the serving topology`));
    }
    expect(() => planDeployment(parseStackSettings({ ...raw, extraEnv: { main: { RBLN_VISIBLE_DEVICES: "0" } } }), shippedCatalog)).toThrow(/^extraEnv\.main\.RBLN_VISIBLE_DEVICES: is set by the recipe/);
  });

  it("refuse topology flags under vLLM's other spellings: short aliases, underscores, --flag=value, abbreviations, negations, JSON keys", () => {
    const raw = readStackFile("dev").raw;
    const plan = (words: string[]) => planDeployment(parseStackSettings({ ...raw, extraArgs: { main: words } }), shippedCatalog);
    for (const words of [
      ["-dp", "8"],
      ["-dpn", "1"],
      ["-tp", "2"],
      ["-pp", "2"],
      ["-ep"],
      ["-dpa", "10.0.0.1"],
      ["-dp=8"],
      ["-d", "8"],
      ["--data_parallel_size", "8"],
      ["--data-parallel-size=8"],
      ["--data_parallel_size=8"],
      ["--pipeline-parallel", "2"],
      ["--no-enable-expert-parallel"],
      ["--kv-transfer-config.kv_role", "kv_both"],
      ["--kv_transfer_config.kv_role=kv_both"],
      ["--port=9000"],
      ["--config", "extra.yaml"],
      ["--headless"],
    ]) {
      expect(() => plan(words), words.join(" ")).toThrow(/^extraArgs\.main: "[^"]+"( \(vLLM reads it as --[a-z-]+\))? defines the serving topology/);
    }
    expect(() => plan(["-dpn", "1"])).toThrow('extraArgs.main: "-dpn" (vLLM reads it as --data-parallel-rank) defines the serving topology');
  });

  it("replace a recipe flag given as --flag=value or with underscores, instead of adding a second", () => {
    const raw = readStackFile("dev").raw;
    for (const words of [["--max-num-seqs=8"], ["--max_num_seqs", "8"], ["--max_num_seqs=8"]]) {
      const { plan } = planDeployment(parseStackSettings({ ...raw, extraArgs: { main: words } }), shippedCatalog);
      const argv = plan.roles[0]!.ranks[0]!.argv;
      expect(argv.filter((w) => /^--max[-_]num[-_]seqs/.test(w)), words.join(" ")).toEqual(["--max-num-seqs"]);
      expect(argv[argv.indexOf("--max-num-seqs") + 1]).toBe("8");
    }
  });
});

describe("hosts[].hostKey", () => {
  const raw = () => readStackFile("dev").raw as Record<string, any>;
  it("takes a key line as ssh-keyscan prints it without the host name, and refuses a known_hosts line", () => {
    const host = raw().hosts[0];
    expect(() => parseStackSettings({ ...raw(), hosts: [{ ...host, hostKey: `10.20.0.11 ${host.hostKey}` }] })).toThrow(/^hosts\[0\]\.hostKey: a public host key line such as "ssh-ed25519 AAAAC3\.\.\." \(ssh-keyscan's output without the host name\)/);
    expect(parseStackSettings({ ...raw(), hosts: [{ ...host, hostKey: `${host.hostKey} root@npu` }] }).hosts[0]!.hostKey).toBe(`${host.hostKey} root@npu`);
  });
});

describe("plain-text credentials in the stack config", () => {
  const raw = () => readStackFile("dev").raw as Record<string, any>;
  it("refuses extraEnv names that hold credentials, naming the secret to use and never echoing the value", () => {
    for (const [name, secret] of [
      ["HUGGING_FACE_HUB_TOKEN", /set the hfToken secret instead: pulumi config set --secret hfToken$/],
      ["HF_HUB_TOKEN", /hfToken/],
      ["OPENAI_API_KEY", /set the apiKey secret instead/],
      ["AWS_SECRET_ACCESS_KEY", /the project's secrets are pipPassword|hfToken/],
      ["DB_PASSWORD", /pulumi config set --secret/],
      ["MY_SECRET_THING", /pulumi config set --secret/],
      ["GITHUB_TOKEN", /pulumi config set --secret/],
    ] as const) {
      const attempt = () => parseStackSettings({ ...raw(), extraEnv: { main: { [name]: "s3cr3t-value" } } });
      expect(attempt, name).toThrow(new RegExp(`^extraEnv\\.main\\.${name}: holds a credential, which would sit in the stack config in plain text; `));
      expect(attempt, name).toThrow(secret);
      expect(attempt, name).not.toThrow(/s3cr3t-value/);
    }
    for (const name of ["TOKENIZERS_PARALLELISM", "VLLM_MAX_TOKENS_PER_BATCH", "PYTHONHASHSEED", "KEYBOARD"]) {
      expect(() => parseStackSettings({ ...raw(), extraEnv: { main: { [name]: "1" } } }), name).not.toThrow();
    }
  });

  it("refuses index URLs with user:password@, naming the key and the pipPassword secret", () => {
    expect(() => parseStackSettings({ ...raw(), pip: { indexUrl: "https://me:hunter2@mirror.example.com/simple" } })).toThrow(
      /^pip\.indexUrl: a URL without user:password@; give the user as pip\.username and the password as the pipPassword secret \(pulumi config set --secret pipPassword\)$/,
    );
    expect(() => parseStackSettings({ ...raw(), pip: { extraIndexUrls: ["https://a.example.com/simple", "https://me:hunter2@b.example.com/simple"] } })).toThrow(/^pip\.extraIndexUrls\[1\]: a URL without user:password@/);
    expect(() => parseStackSettings({ ...raw(), pip: { indexUrl: "https://mirror.example.com/simple" } })).not.toThrow();
  });
});

describe("extraEnv names bash keeps for itself", () => {
  it("are refused before anything is planned", () => {
    const raw = readStackFile("dev").raw;
    for (const name of ["UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_ENV", "BASH_XTRACEFD", "BASH_VERSINFO", "GROUPS", "RANDOM", "IFS"]) {
      expect(() => parseStackSettings({ ...raw, extraEnv: { main: { [name]: "1" } } }), name).toThrow(new RegExp(`^extraEnv\\.main\\.${name}: a name bash keeps read-only or special`));
    }
    expect(() => parseStackSettings({ ...raw, extraEnv: { main: { BASHFUL: "1", MY_UID: "1" } } })).not.toThrow();
  });
});

describe("installRoot and cacheRoot", () => {
  const raw = () => readStackFile("dev").raw;
  it("refuse system directories, however spelled", () => {
    for (const dir of ["/", "/tmp", "/tmp/", "//var", "/var/lib", "/usr", "/etc", "/home", "/root", "/boot", "/proc", "/sys", "/dev", "/run", "/opt", "/srv", "/var/./lib/", "/dev/shm/cache", "/run/rbln"]) {
      for (const key of ["installRoot", "cacheRoot"]) {
        const other = key === "cacheRoot" ? { installRoot: "/opt/rbln-serving" } : { cacheRoot: "/var/lib/rbln-serving" };
        expect(() => parseStackSettings({ ...raw(), ...other, [key]: dir }), `${key} ${dir}`).toThrow(new RegExp(`^${key}: ".*" is (a system directory|on a kernel or runtime file system)`));
      }
    }
  });

  it("refuse one inside the other, and the two being equal", () => {
    expect(() => parseStackSettings({ ...raw(), installRoot: "/srv/rbln", cacheRoot: "/srv/rbln" })).toThrow('cacheRoot: "/srv/rbln" is the same directory as installRoot "/srv/rbln"; the two must be separate directories');
    expect(() => parseStackSettings({ ...raw(), installRoot: "/srv/rbln", cacheRoot: "/srv/rbln/cache/" })).toThrow('cacheRoot: "/srv/rbln/cache" is inside installRoot "/srv/rbln"');
    expect(() => parseStackSettings({ ...raw(), installRoot: "/data/rbln/install", cacheRoot: "/data/rbln" })).toThrow('cacheRoot: "/data/rbln" is around installRoot "/data/rbln/install"');
    expect(parseStackSettings({ ...raw(), installRoot: "/srv/rbln", cacheRoot: "/srv/rbln-cache" }).cacheRoot).toBe("/srv/rbln-cache");
    expect(parseStackSettings({ ...raw(), cacheRoot: "/tmp/rbln-test/cache" }).cacheRoot).toBe("/tmp/rbln-test/cache");
  });
});

describe("cache.shared", () => {
  const raw = () => readStackFile("dev").raw;
  it("takes a folder of its own: not a system directory, apart from installRoot and cacheRoot", () => {
    expect(parseStackSettings({ ...raw(), cache: { shared: "/mnt/rbln-cache/" } }).cache.shared).toBe("/mnt/rbln-cache");
    expect(parseStackSettings(raw()).cache.shared).toBeUndefined();
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "/mnt" } })).toThrow('cache.shared: "/mnt" is a system directory; give the project a directory of its own, such as /mnt/rbln-cache, where the shared filesystem is mounted');
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "/var/lib/rbln-serving/shared" } })).toThrow('cache.shared: "/var/lib/rbln-serving/shared" overlaps cacheRoot "/var/lib/rbln-serving"; the shared cache must be a folder of its own, apart from the hosts\' local roots');
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "/opt" } })).toThrow(/^cache\.shared: "\/opt" is a system directory/);
    expect(() => parseStackSettings({ ...raw(), installRoot: "/srv/rbln/install", cache: { shared: "/srv/rbln" } })).toThrow(/^cache\.shared: "\/srv\/rbln" overlaps installRoot "\/srv\/rbln\/install"/);
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "relative/path" } })).toThrow(/^cache\.shared: /);
    expect(() => parseStackSettings({ ...raw(), cache: { nfs: "/mnt/x" } })).toThrow(/^cache\.nfs: unknown key; allowed: shared$/);
  });

  it("on Kubernetes does nothing, and says so", () => {
    const prod = readStackFile("prod").raw;
    const warnings = planDeployment(parseStackSettings({ ...prod, cache: { shared: "/mnt/rbln-cache" } }), shippedCatalog).plan.warnings;
    expect(warnings).toContain("cache: does nothing with platform: kubernetes; remove it or choose the platform that reads it");
  });
});

describe("host addresses", () => {
  it("accept IPv6, bracketed in URLs, and refuse what is no address", () => {
    const raw = readStackFile("dev").raw as Record<string, any>;
    for (const address of ["::1", "fd00::5", "2001:db8::10", "10.0.0.1", "npu-1.example.com"]) {
      const deployment = planDeployment(parseStackSettings({ ...raw, hosts: [{ ...raw.hosts[0], address }] }), shippedCatalog);
      expect(renderHost(deployment, deployment.placements[0]!, "test").ranks[0]!.url, address).toBe(`http://${address.includes(":") ? `[${address}]` : address}:8000`);
    }
    for (const address of ["not an address", "a:b", "-x", "::g"]) {
      expect(() => parseStackSettings({ ...raw, hosts: [{ ...raw.hosts[0], address }] }), address).toThrow(/^hosts\[0\]\.address: a host name or IP address/);
    }
  });
});

describe("keys under another namespace", () => {
  it("warn, naming the key, when read from a stack file", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stacks-"));
    fs.writeFileSync(path.join(dir, "Pulumi.t.yaml"), "config:\n  rbln-serving:strategy: aggregated-data-expert-parallel\n  rbln_serving:target: Latency\n  other:hosts: []\n  aws:region: eu-west-1\n");
    expect(readStackFile("t", dir).warnings).toEqual([
      'Pulumi.t.yaml: rbln_serving:target: not read: the project reads keys under "rbln-serving:" only; did you mean rbln-serving:target?',
      'Pulumi.t.yaml: other:hosts: not read: the project reads keys under "rbln-serving:" only; did you mean rbln-serving:hosts?',
    ]);
  });
});

describe("settings the chosen platform does not read", () => {
  const warningsOf = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog).plan.warnings.filter((w) => w.includes("does nothing"));
  it("warn in the plan, naming the key and the platform", () => {
    const prod = readStackFile("prod").raw;
    const dev = readStackFile("dev").raw as Record<string, any>;
    expect(warningsOf(prod)).toEqual([]);
    expect(warningsOf(dev)).toEqual([]);
    expect(warningsOf({ ...prod, hosts: dev.hosts, pip: { username: "u" }, versions: { vllmRbln: "0.12.1" }, cacheRoot: "/data/rbln" })).toEqual([
      "hosts: does nothing with platform: kubernetes; remove it or choose the platform that reads it",
      "pip: does nothing with platform: kubernetes; remove it or choose the platform that reads it",
      "versions: does nothing with platform: kubernetes (the image fixes the versions); remove it or choose the platform that reads it",
      "cacheRoot: does nothing with platform: kubernetes; remove it or choose the platform that reads it",
    ]);
    expect(warningsOf({ ...dev, kubernetes: { namespace: "x" } })).toEqual(["kubernetes: does nothing with platform: hosts; remove it or choose the platform that reads it"]);
    expect(warningsOf({ ...prod, minFreeDiskGbToRestart: 10 })).toEqual(["minFreeDiskGbToRestart: does nothing with platform: kubernetes; remove it or choose the platform that reads it"]);
  });
});

describe("storage for the weights", () => {
  it("is checked against the model's size with its margin, on the platform that uses it", () => {
    const dev = readStackFile("dev").raw;
    const prod = readStackFile("prod").raw as Record<string, any>;
    const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
    expect(weightsStorageGib("MiniMaxAI/MiniMax-M2.7")).toBe(268);
    expect(() => plan({ ...dev, minFreeDiskGb: 0 })).toThrow("minFreeDiskGb: 0 is too small: the weights of MiniMaxAI/MiniMax-M2.7 are about 230 GB; with a 25% margin they need 268 GiB (default 500)");
    expect(() => plan({ ...dev, minFreeDiskGb: 267 })).toThrow(/^minFreeDiskGb: 267 is too small/);
    expect(() => plan({ ...dev, minFreeDiskGb: 268 })).not.toThrow();
    expect(() => plan({ ...prod, kubernetes: { ...prod.kubernetes, weightsVolumeSize: "10Gi" } })).toThrow('kubernetes.weightsVolumeSize: "10Gi" is too small: the weights of MiniMaxAI/MiniMax-M2.7 are about 230 GB; with a 25% margin they need 268 GiB (default 500Gi)');
    expect(() => plan({ ...prod, kubernetes: { ...prod.kubernetes, weightsVolumeSize: "274432Mi" } })).not.toThrow();
  });

  it("defaults to the same figure on hosts and on Kubernetes, enough for the model", () => {
    const defaults = StackSettings.parse({ strategy: "s", target: "t", hosts: [{ name: "h", address: "127.0.0.1", hostKey: EXAMPLE_HOST_KEY }] });
    expect(`${defaults.minFreeDiskGb}Gi`).toBe(defaults.kubernetes.weightsVolumeSize);
    expect(defaults.minFreeDiskGb).toBeGreaterThanOrEqual(weightsStorageGib("MiniMaxAI/MiniMax-M2.7")!);
  });
});

describe("refusals and warnings of the deployment (fast checks, also for mutation testing)", () => {
  const dev = () => readStackFile("dev").raw as Record<string, any>;
  const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
  const keyless = () => dev().hosts.map(({ hostKey: _, ...host }: Record<string, unknown>) => host);

  it("requires host keys for hosts and bastions on platform hosts only, and warns when told to skip them", () => {
    expect(() => parseStackSettings({ ...dev(), hosts: keyless() })).toThrow(/^hosts\[0\]\.hostKey: required/);
    expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], proxy: { address: "10.0.0.1" } }] })).toThrow(/^hosts\[0\]\.proxy\.hostKey: required/);
    expect(() => parseStackSettings({ ...dev(), sshProxy: { address: "10.0.0.1" } })).toThrow(/^sshProxy\.hostKey: required/);
    expect(plan({ ...dev(), hosts: keyless(), insecureSkipHostKeyCheck: true }).plan.warnings).toContainEqual(expect.stringMatching(/^insecureSkipHostKeyCheck: true: SSH host keys are not checked/));
    expect(plan(dev()).plan.warnings).toEqual([]);
    const prod = readStackFile("prod").raw;
    expect(() => parseStackSettings({ ...prod, sshProxy: { address: "10.0.0.1" } })).not.toThrow();
    expect(plan({ ...prod, insecureSkipHostKeyCheck: true }).plan.warnings.filter((w) => w.startsWith("insecureSkipHostKeyCheck: true: SSH"))).toEqual([]);
  });

  it("places each host behind its own proxy, else the stack's sshProxy", () => {
    const bastion = { address: "10.0.0.1", hostKey: EXAMPLE_HOST_KEY };
    expect(plan({ ...dev(), sshProxy: bastion }).placements[0]!.host.proxy).toMatchObject({ address: "10.0.0.1", user: "root", port: 22 });
    expect(plan({ ...dev(), sshProxy: bastion, hosts: [{ ...dev().hosts[0], proxy: { ...bastion, address: "10.0.0.2" } }] }).placements[0]!.host.proxy!.address).toBe("10.0.0.2");
    expect(plan(dev()).placements[0]!.host.proxy).toBeUndefined();
  });

  it("takes minFreeDiskGbToRestart as whole GiB from 0 (default 50: one compiled cache) into every unit step", () => {
    expect(() => parseStackSettings({ ...dev(), minFreeDiskGbToRestart: -1 })).toThrow("minFreeDiskGbToRestart: Too small: expected number to be >=0 (got -1)");
    expect(() => parseStackSettings({ ...dev(), minFreeDiskGbToRestart: 1.5 })).toThrow(/^minFreeDiskGbToRestart: .*expected int.*\(got 1\.5\)$/);
    expect(parseStackSettings(dev()).minFreeDiskGbToRestart).toBe(50);
    const deployment = plan({ ...dev(), cacheRoot: "/data/rbln", minFreeDiskGbToRestart: 0 });
    expect(renderHost(deployment, deployment.placements[0]!, "dev").ranks[0]!.applyScript).toContain("\ncache_root=/data/rbln\nrestart_free_gb=0\n");
  });

  it("refuses an index URL with only a user name, too", () => {
    expect(() => parseStackSettings({ ...dev(), pip: { indexUrl: "https://token@mirror.example.com/simple" } })).toThrow(/^pip\.indexUrl: a URL without user:password@/);
  });

  it("keeps a JSON flag's key as given, normalising the flag name only", () => {
    const { plan: p } = plan({ ...dev(), extraArgs: { main: ["--speculative_config.num_speculative_tokens", "3", "--max-log-len=10"] } });
    expect(p.roles[0]!.ranks[0]!.flags.slice(-2)).toEqual([
      { name: "--speculative-config.num_speculative_tokens", values: ["3"] },
      { name: "--max-log-len", values: ["10"] },
    ]);
    expect(() => plan({ ...dev(), extraArgs: { main: ["100", "--max-log-len"] } })).toThrow('extraArgs.main: "100" comes before any flag');
    expect(() => plan({ ...dev(), extraArgs: { main: ["-O", "3"] } })).not.toThrow();
  });

  it("refuses extras for a role the strategy lacks, a host count that does not fit, per-role replicas and the router on hosts", () => {
    expect(() => plan({ ...dev(), extraArgs: { decode: ["--x"] } })).toThrow('extraArgs.decode: strategy "aggregated-data-expert-parallel" has no role "decode"; allowed: "main"');
    expect(() => plan({ ...dev(), extraEnv: { decode: { X: "1" } } })).toThrow(/^extraEnv\.decode: strategy/);
    expect(() => plan({ ...dev(), replicas: 2 })).toThrow('hosts: 1 given; strategy "aggregated-data-expert-parallel" with replicas: 2 needs exactly 2 (1 per replica)');
    expect(() => plan({ ...dev(), prefillReplicas: 2 })).toThrow('prefillReplicas: applies only to a strategy with a "prefill" role on platform: kubernetes; use replicas');
    expect(() => plan({ ...readStackFile("prod").raw, platform: "hosts", hosts: [dev().hosts[0], { ...dev().hosts[0], name: "b", address: "10.20.0.12" }] })).toThrow(/^platform: strategy "prefill-decode-disaggregated" needs the llm-d router/);
    const two = plan({ ...dev(), replicas: 2, hosts: [dev().hosts[0], { ...dev().hosts[0], name: "b", address: "10.20.0.12" }] });
    expect(two.placements.map((p) => [p.replica, p.node, p.host.name])).toEqual([[0, 0, "npu-dev-0"], [1, 0, "b"]]);
  });

  it("names the value it refuses, or says it is missing, and lists the allowed keys for an unknown one", () => {
    expect(() => parseStackSettings({ ...dev(), replicas: "many" })).toThrow(/^replicas: .*\(got "many"\)$/);
    expect(() => parseStackSettings({ ...dev(), strategy: undefined })).toThrow(/^strategy: .*\(missing\)$/);
    expect(() => parseStackSettings({ ...dev(), colour: "blue" })).toThrow(/^colour: unknown key; allowed: model, revision, strategy, .* and the secrets sshPrivateKey, hfToken, pipPassword, apiKey, registryPassword$/);
    expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], colour: "blue" }] })).toThrow("hosts[0].colour: unknown key; allowed: name, address, user, port, listenAddress, hostKey, proxy");
    expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], proxy: { address: "10.0.0.9", colour: "blue" } }] })).toThrow("hosts[0].proxy.colour: unknown key; allowed: address, user, port, hostKey");
    expect(() => parseStackSettings({ ...dev(), rollout: { max: 1 } })).toThrow("rollout.max: unknown key; allowed: maxUnavailable");
    expect(() => parseStackSettings({ ...dev(), platform: "kubernetes" })).toThrow(/^kubernetes\.image: required with platform: kubernetes/);
    expect(() => parseStackSettings({ ...dev(), hosts: [] })).toThrow(/^hosts: required with platform: hosts/);
    expect(() => parseStackSettings({ ...dev(), hosts: [dev().hosts[0], { ...dev().hosts[0], address: "10.0.0.9" }], replicas: 2 })).toThrow(/^hosts\[1\]\.name: duplicate of hosts\[0\]\.name "npu-dev-0"/);
    expect(() => parseStackSettings({ ...dev(), cacheRoot: "/var/lib/../x" })).toThrow(/^cacheRoot: a path without '\.\.'/);
  });

  it("warns about a lookalike namespace whatever the key, and not about keys without one", () => {
    expect(foreignKeyWarnings(["RBLN_Serving:colour", "plain", "aws:region"])).toEqual(['RBLN_Serving:colour: not read: the project reads keys under "rbln-serving:" only; did you mean rbln-serving:colour?']);
  });
});
