import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { messagesAt, note, warning } from "../core/plan/messages";
import { z } from "zod";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";
import { holdsCiphertext, pulumiConfigText, readConfigEntries } from "../core/config/configEntries";
import { foreignKeyWarnings, parseStackSettings, StackSettings } from "../core/config/stackConfig";
import { SECRET_ENV, SECRET_KEYS } from "../core/config/secrets";
import { PACKAGE_ENV } from "../core/config/vllmOptions";
import envFixture from "./fixtures/vllm-0.30.0/env.json";
import { readStackFile } from "../core/config/stackFile";
import { OFFLINE_ENV } from "../core/config/defaults";
import { ConfigError } from "../core/errors";
import { planDeployment } from "../core/plan/deployment";
import { PROJECT_FILE, projectFileText, projectKeys } from "../scripts/generate-project-config";
import { checkIndexCredentials, pipIndexUrls } from "../core/plan/pipIndexes";
import { weightsStorageGib } from "../core/plan/storage";
import { renderHost } from "../core/render/hosts/bundle";
import { renderKubernetesWorkloads } from "../core/render/kubernetes/workloads";
import { catalogWithFixtures, shippedCatalog } from "./helpers/recipes";

const project = parse(fs.readFileSync(path.resolve(__dirname, "../Pulumi.yaml"), "utf8"));

describe("Pulumi.yaml", () => {
  it("declares the contract's project settings", () => {
    expect(project).toMatchObject({
      name: "rbln-serving",
      runtime: { name: "nodejs", options: { typescript: true } },
      main: "index.ts",
      stackConfigDir: "stacks",
    });
  });

  it("has its config block and the comment above it generated from the schema, and fresh", () => {
    expect(fs.readFileSync(PROJECT_FILE, "utf8"), `Pulumi.yaml is stale: run \`npm run generate\``).toBe(projectFileText());
    const { declared, optional, otherTypes } = projectKeys();
    // Every key and secret is declared or named in the comment, once.
    const comment = fs.readFileSync(PROJECT_FILE, "utf8").split("config:\n")[0]!;
    const named = [...optional, ...otherTypes, ...SECRET_KEYS].filter((key) => new RegExp(`[ ,]${key}[,;.]`).test(comment.replace(/\n# /g, " ")));
    expect([...Object.keys(project.config), ...named].sort()).toEqual([...Object.keys(StackSettings.shape), ...SECRET_KEYS].sort());
    expect(declared.map(([key]) => key)).toEqual(Object.keys(project.config));
    expect(project.config.minFreeDiskGbToRestart).toMatchObject({
      type: "integer",
      default: 50,
      description: expect.stringMatching(/^Hosts: the free disk, in GiB/),
    });
  });

  it("declares only keys Pulumi can type and need not require: the others by kind in the comment", () => {
    const schema = z.strictObject({
      name: z.string(),
      count: z.number().int().default(1),
      ratio: z.number().default(0.5),
      note: z.string().optional(),
      mode: z.enum(["a", "b"]).default("a"),
      hosts: z.array(z.string()).default([]),
    });
    const { declared, optional, otherTypes } = projectKeys(schema);
    expect(declared.map(([key]) => key)).toEqual(["name", "count", "mode"]);
    expect(optional).toEqual(["note"]);
    expect(otherTypes).toEqual(["ratio", "hosts"]);
    expect(() => projectFileText("name: x\nconfig: {}\n", schema)).toThrow("Pulumi.yaml has no line");
  });

  it("declares the same defaults the program applies", () => {
    const defaults = StackSettings.parse({ strategy: "s", target: "t", hosts: [{ name: "h", address: "127.0.0.1", hostKey: EXAMPLE_HOST_KEY }] }) as Record<
      string,
      unknown
    >;
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
    const settings = parseStackSettings({
      model: "example/tiny-moe",
      strategy: "two-role",
      target: "Latency",
      platform: "kubernetes",
      kubernetes: { image: "registry.example.com/x:1" },
    });
    const { plan } = planDeployment(settings, catalogWithFixtures());
    expect(plan.roles.map((r) => [r.role, r.node, r.ranks.map((k) => k.ports[0])])).toEqual([
      ["front", 0, [9000]],
      ["back", 1, [9100, 9101]],
    ]);
    expect(plan.roles[0]!.ranks[0]!.env).toEqual({ GREETING: "hello world", HF_HUB_OFFLINE: "1" });
  });
});

describe("extraArgs and extraEnv", () => {
  it("are literal text, but for the platform's <POD_IP>, which binds like the recipe's", () => {
    const deployment = planDeployment(
      parseStackSettings({ ...readStackFile("dev").raw, extraEnv: { main: { NOTE: "<A> at <POD_IP>" } }, extraArgs: { main: ["--served-model-name", "<B>"] } }),
      shippedCatalog,
    );
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
    // 0 here means what it means to vLLM: abort at once; said as a warning. router.requestTimeout's 0 (no limit) is refused unless this is set.
    expect(shutdownOf({ ...raw, router: { requestTimeout: "0s" }, rollout: { shutdownTimeoutSeconds: 0 } })).toEqual(["0", 120]);
    expect(planDeployment(parseStackSettings({ ...raw, rollout: { shutdownTimeoutSeconds: 0 } }), shippedCatalog).plan.messages).toContainEqual(
      warning(
        "rollout.shutdownTimeoutSeconds: 0: a stopping rank aborts its in-flight requests at once (vLLM's --shutdown-timeout 0), so every restart cuts the requests it serves; give the seconds a request may take to finish",
      ),
    );
    expect(() => parseStackSettings({ ...raw, router: { requestTimeout: "0s" } })).toThrow(/^router\.requestTimeout: "0s" lets a request run without limit/);
    expect(() => parseStackSettings({ ...raw, rollout: { shutdownTimeoutSeconds: -1 } })).toThrow(/^rollout\.shutdownTimeoutSeconds: /);
    expect(() => planDeployment(parseStackSettings({ ...raw, extraArgs: { main: ["--shutdown_timeout=5"] } }), shippedCatalog)).toThrow(
      /^extraArgs\.main: "--shutdown_timeout" comes from the rollout\.shutdownTimeoutSeconds setting/,
    );
  });

  it("refuse a flag given twice in extraArgs, in any spelling: vLLM would read only the last", () => {
    const raw = readStackFile("dev").raw;
    for (const words of [
      ["--max-log-len", "1", "--max-log-len", "2"],
      ["--max-log-len=1", "--max_log_len", "2"],
    ]) {
      expect(() => planDeployment(parseStackSettings({ ...raw, extraArgs: { main: words } }), shippedCatalog)).toThrow(
        /^extraArgs\.main: "--max[-_]log[-_]len" is given twice; give each flag once/,
      );
    }
  });

  it("replace a flag the recipe sets, in place, and refuse topology flags and variables", () => {
    const raw = readStackFile("dev").raw;
    const { plan } = planDeployment(parseStackSettings({ ...raw, extraArgs: { main: ["--max-num-seqs", "2", "--enable-log-requests"] } }), shippedCatalog);
    const flags = plan.roles[0]!.ranks[0]!.flags.map((f) => [f.name, ...f.values].join(" "));
    expect(flags.indexOf("--max-num-seqs 2")).toBe(7);
    expect(flags[flags.length - 1]).toBe("--enable-log-requests");
    for (const flag of ["--data-parallel-size", "--pipeline-parallel-size", "--port", "--data-parallel-rank", "--kv-transfer-config"]) {
      expect(() => planDeployment(parseStackSettings({ ...raw, extraArgs: { main: [flag, "1"] } }), shippedCatalog)).toThrow(
        new RegExp(`^extraArgs\\.main: "${flag}" defines the serving topology`),
      );
    }
    expect(() => planDeployment(parseStackSettings({ ...raw, extraEnv: { main: { RBLN_VISIBLE_DEVICES: "0" } } }), shippedCatalog)).toThrow(
      /^extraEnv\.main\.RBLN_VISIBLE_DEVICES: is set by the recipe/,
    );
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
      expect(
        argv.filter((w) => /^--max[-_]num[-_]seqs/.test(w)),
        words.join(" "),
      ).toEqual(["--max-num-seqs"]);
      expect(argv[argv.indexOf("--max-num-seqs") + 1]).toBe("8");
    }
  });
});

describe("hosts[].hostKey", () => {
  const raw = () => readStackFile("dev").raw as Record<string, any>;
  it("takes a key line as ssh-keyscan prints it without the host name, and refuses a known_hosts line", () => {
    const host = raw().hosts[0];
    expect(() => parseStackSettings({ ...raw(), hosts: [{ ...host, hostKey: `10.20.0.11 ${host.hostKey}` }] })).toThrow(
      /^hosts\[0\]\.hostKey: a public host key line such as "ssh-ed25519 AAAAC3\.\.\." \(ssh-keyscan's output without the host name\)/,
    );
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
    expect(() =>
      parseStackSettings({ ...raw(), pip: { extraIndexUrls: ["https://a.example.com/simple", "https://me:hunter2@b.example.com/simple"] } }),
    ).toThrow(/^pip\.extraIndexUrls\[1\]: a URL without user:password@/);
    expect(() => parseStackSettings({ ...raw(), pip: { indexUrl: "https://mirror.example.com/simple" } })).not.toThrow();
  });

  it("refuses autoscaling.prometheusAddress with a credential, a query or a fragment, in one line that shows none of them", () => {
    const prod = readStackFile("prod").raw as Record<string, any>;
    const address = (prometheusAddress: string) => () => parseStackSettings({ ...prod, autoscaling: { enabled: true, maxReplicas: 2, prometheusAddress } });
    const refusal = (shown: string) =>
      `autoscaling.prometheusAddress: a URL without user:password@, ?query or #fragment (got ${JSON.stringify(shown)}): KEDA appends /api/v1/query?query=... to it, and the ScaledObject holds it in plain text; give KEDA its credentials through a TriggerAuthentication of your own`;
    for (const [url, shown] of [
      ["http://prom.example.com:9090?access_token=hunter2", "http://prom.example.com:9090?***"],
      // The class: user info in any form, a query anywhere or empty, a fragment, percent-encoded.
      ["https://me:hunter2@prom.example.com:9090", "https://***@prom.example.com:9090"],
      ["http://hunter2@prom.example.com", "http://***@prom.example.com"],
      ["http://:hunter2@prom.example.com", "http://***@prom.example.com"],
      ["http://prom.example.com/prefix?", "http://prom.example.com/prefix?***"],
      ["http://prom.example.com:9090/#hunter2", "http://prom.example.com:9090/#***"],
      ["http://prom.example.com/x?a=b@hunter2", "http://prom.example.com/x?***"],
      ["http://me%3Ahunter2@prom.example.com/?token=hunter2", "http://***@prom.example.com/?***"],
    ] as const) {
      expect(address(url), url).toThrow(new ConfigError("autoscaling.prometheusAddress", refusal(shown).replace(/^[^:]*: /, "")));
    }
    // Not a URL KEDA can send as it is: whitespace, control characters, no host, another scheme; shown without what may be a credential.
    for (const [url, shown] of [
      ["http://prom.example.com/a b", "http://prom.example.com/a b"],
      ["http://prom.example.com\n", "http://prom.example.com\n"],
      ["prom:hunter2@prom.example.com:9090", "***@prom.example.com:9090"],
      ["ftp://prom.example.com", "ftp://prom.example.com"],
      ["http:///api", "http:///api"],
    ] as const) {
      expect(address(url), url).toThrow(
        `autoscaling.prometheusAddress: an http:// or https:// URL of printable characters, such as http://prometheus-operated.monitoring.svc:9090 (got ${JSON.stringify(shown).replace(/\n/g, "\\n")})`,
      );
    }
    for (const url of ["http://prom.example.com:9090/x@y", "https://[fd00::9]:9090/prometheus", "http://prometheus-operated.monitoring.svc:9090"])
      expect(parseStackSettings({ ...prod, autoscaling: { prometheusAddress: url } }).autoscaling.prometheusAddress).toBe(url);
  });

  it("never shows what follows a ':' in a refused pip.username or compile.registry.username: a password typed with the user", () => {
    expect(() => parseStackSettings({ ...raw(), pip: { username: "me:hunter2" } })).toThrow(
      `pip.username: a user name without spaces, ':', '@' or '/' (got "me:***")`,
    );
    expect(() => parseStackSettings({ ...raw(), compile: { registry: { repository: "registry.example.com/c", username: "me:hunter2:x" } } })).toThrow(
      `compile.registry.username: a user name without spaces or ':' (got "me:***")`,
    );
    expect(() => parseStackSettings({ ...raw(), pip: { username: "me you" } })).toThrow(
      `pip.username: a user name without spaces, ':', '@' or '/' (got "me you")`,
    );
  });
});

describe("extraEnv names bash keeps for itself", () => {
  it("are refused before anything is planned", () => {
    const raw = readStackFile("dev").raw;
    for (const name of ["UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_ENV", "BASH_XTRACEFD", "BASH_VERSINFO", "GROUPS", "RANDOM", "IFS"]) {
      expect(() => parseStackSettings({ ...raw, extraEnv: { main: { [name]: "1" } } }), name).toThrow(
        new RegExp(`^extraEnv\\.main\\.${name}: a name bash keeps read-only or special`),
      );
    }
    expect(() => parseStackSettings({ ...raw, extraEnv: { main: { BASHFUL: "1", MY_UID: "1" } } })).not.toThrow();
  });
});

describe("installRoot and cacheRoot", () => {
  const raw = () => readStackFile("dev").raw;
  it("refuse system directories, however spelled", () => {
    for (const dir of [
      "/",
      "/tmp",
      "/tmp/",
      "//var",
      "/var/lib",
      "/usr",
      "/etc",
      "/home",
      "/root",
      "/boot",
      "/proc",
      "/sys",
      "/dev",
      "/run",
      "/opt",
      "/srv",
      "/var/./lib/",
      "/dev/shm/cache",
      "/run/rbln",
    ]) {
      for (const key of ["installRoot", "cacheRoot"]) {
        const other = key === "cacheRoot" ? { installRoot: "/opt/rbln-serving" } : { cacheRoot: "/var/lib/rbln-serving" };
        expect(() => parseStackSettings({ ...raw(), ...other, [key]: dir }), `${key} ${dir}`).toThrow(
          new RegExp(`^${key}: ".*" is (a system directory|on a kernel or runtime file system)`),
        );
      }
    }
  });

  it("refuse one inside the other, and the two being equal", () => {
    expect(() => parseStackSettings({ ...raw(), installRoot: "/srv/rbln", cacheRoot: "/srv/rbln" })).toThrow(
      'cacheRoot: "/srv/rbln" is the same directory as installRoot "/srv/rbln"; the two must be separate directories',
    );
    expect(() => parseStackSettings({ ...raw(), installRoot: "/srv/rbln", cacheRoot: "/srv/rbln/cache/" })).toThrow(
      'cacheRoot: "/srv/rbln/cache" is inside installRoot "/srv/rbln"',
    );
    expect(() => parseStackSettings({ ...raw(), installRoot: "/data/rbln/install", cacheRoot: "/data/rbln" })).toThrow(
      'cacheRoot: "/data/rbln" is around installRoot "/data/rbln/install"',
    );
    expect(parseStackSettings({ ...raw(), installRoot: "/srv/rbln", cacheRoot: "/srv/rbln-cache" }).cacheRoot).toBe("/srv/rbln-cache");
    expect(parseStackSettings({ ...raw(), cacheRoot: "/tmp/rbln-test/cache" }).cacheRoot).toBe("/tmp/rbln-test/cache");
  });
});

describe("cache.shared", () => {
  const raw = () => readStackFile("dev").raw;
  it("takes a folder of its own: not a system directory, apart from installRoot and cacheRoot", () => {
    expect(parseStackSettings({ ...raw(), cache: { shared: "/mnt/rbln-cache/" } }).cache.shared).toBe("/mnt/rbln-cache");
    expect(parseStackSettings(raw()).cache.shared).toBeUndefined();
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "/mnt" } })).toThrow(
      'cache.shared: "/mnt" is a system directory; give the project a directory of its own, such as /mnt/rbln-cache, where the shared filesystem is mounted',
    );
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "/var/lib/rbln-serving/shared" } })).toThrow(
      'cache.shared: "/var/lib/rbln-serving/shared" overlaps cacheRoot "/var/lib/rbln-serving"; the shared cache must be a folder of its own, apart from the hosts\' local roots',
    );
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "/opt" } })).toThrow(/^cache\.shared: "\/opt" is a system directory/);
    expect(() => parseStackSettings({ ...raw(), installRoot: "/srv/rbln/install", cache: { shared: "/srv/rbln" } })).toThrow(
      /^cache\.shared: "\/srv\/rbln" overlaps installRoot "\/srv\/rbln\/install"/,
    );
    expect(() => parseStackSettings({ ...raw(), cache: { shared: "relative/path" } })).toThrow(/^cache\.shared: /);
    expect(() => parseStackSettings({ ...raw(), cache: { nfs: "/mnt/x" } })).toThrow(/^cache\.nfs: unknown key; allowed: shared$/);
  });

  it("on Kubernetes does nothing, and says so", () => {
    const prod = readStackFile("prod").raw;
    const { messages } = planDeployment(parseStackSettings({ ...prod, cache: { shared: "/mnt/rbln-cache" } }), shippedCatalog).plan;
    expect(messages).toContainEqual(warning("cache: does nothing with platform: kubernetes; remove it or choose the platform that reads it"));
  });
});

describe("host addresses", () => {
  it("accept IPv6, bracketed in URLs, and refuse what is no address", () => {
    const raw = readStackFile("dev").raw as Record<string, any>;
    for (const address of ["::1", "fd00::5", "2001:db8::10", "10.0.0.1", "npu-1.example.com"]) {
      const deployment = planDeployment(parseStackSettings({ ...raw, hosts: [{ ...raw.hosts[0], address }] }), shippedCatalog);
      expect(renderHost(deployment, deployment.placements[0]!, "test").ranks[0]!.url, address).toBe(
        `http://${address.includes(":") ? `[${address}]` : address}:8000`,
      );
    }
    for (const address of ["not an address", "a:b", "-x", "::g"]) {
      expect(() => parseStackSettings({ ...raw, hosts: [{ ...raw.hosts[0], address }] }), address).toThrow(/^hosts\[0\]\.address: a host name or IP address/);
    }
  });
});

describe("keys under another namespace", () => {
  it("warn, naming the key, when read from a stack file", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stacks-"));
    fs.writeFileSync(
      path.join(dir, "Pulumi.t.yaml"),
      "config:\n  rbln-serving:strategy: aggregated-data-expert-parallel\n  rbln_serving:target: Latency\n  other:hosts: []\n  aws:region: eu-west-1\n",
    );
    expect(readStackFile("t", dir).warnings).toEqual([
      'Pulumi.t.yaml: rbln_serving:target: not read: the project reads keys under "rbln-serving:" only; did you mean rbln-serving:target?',
      'Pulumi.t.yaml: other:hosts: not read: the project reads keys under "rbln-serving:" only; did you mean rbln-serving:hosts?',
    ]);
  });
});

describe("settings the chosen platform does not read", () => {
  const warningsOf = (raw: Record<string, unknown>) =>
    messagesAt(planDeployment(parseStackSettings(raw), shippedCatalog).plan.messages, "warning").filter((w) => w.includes("does nothing"));
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
    expect(warningsOf({ ...dev, kubernetes: { namespace: "x" } })).toEqual([
      "kubernetes: does nothing with platform: hosts; remove it or choose the platform that reads it",
    ]);
    expect(warningsOf({ ...prod, minFreeDiskGbToRestart: 10 })).toEqual([
      "minFreeDiskGbToRestart: does nothing with platform: kubernetes; remove it or choose the platform that reads it",
    ]);
  });
});

describe("storage for the weights", () => {
  it("is checked against the model's size with its margin, on the platform that uses it", () => {
    const dev = readStackFile("dev").raw;
    const prod = readStackFile("prod").raw as Record<string, any>;
    const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
    expect(weightsStorageGib("MiniMaxAI/MiniMax-M2.7")).toBe(268);
    expect(() => plan({ ...dev, minFreeDiskGb: 0 })).toThrow(
      "minFreeDiskGb: 0 is too small: the weights of MiniMaxAI/MiniMax-M2.7 are about 230 GB; with a 25% margin they need 268 GiB (default 500)",
    );
    expect(() => plan({ ...dev, minFreeDiskGb: 267 })).toThrow(/^minFreeDiskGb: 267 is too small/);
    expect(() => plan({ ...dev, minFreeDiskGb: 268 })).not.toThrow();
    expect(() => plan({ ...prod, kubernetes: { ...prod.kubernetes, weightsVolumeSize: "10Gi" } })).toThrow(
      'kubernetes.weightsVolumeSize: "10Gi" is too small: the weights of MiniMaxAI/MiniMax-M2.7 are about 230 GB; with a 25% margin they need 268 GiB (default 500Gi)',
    );
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

  it("notes what lmcache: rds needs of the servers, which nothing checks: with the preset and with the axis, not without", () => {
    const rds = note(expect.stringMatching(/^lmcache: rds offloads the KV cache to RBLN Direct Storage: every NPU server needs a dedicated NVMe drive /));
    expect(plan(readStackFile("prod").raw).plan.messages).toContainEqual(rds);
    expect(plan({ ...dev(), strategy: "aggregated-pipeline-parallel", target: "Throughput", axes: { lmcache: "rds" } }).plan.messages).toEqual([rds]);
    expect(plan({ ...dev(), strategy: "aggregated-pipeline-parallel", target: "Throughput", axes: { lmcache: "cpu" } }).plan.messages).toEqual([]);
  });

  it("requires host keys for hosts and bastions on platform hosts only, and warns when told to skip them", () => {
    expect(() => parseStackSettings({ ...dev(), hosts: keyless() })).toThrow(/^hosts\[0\]\.hostKey: required/);
    expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], proxy: { address: "10.0.0.1" } }] })).toThrow(
      /^hosts\[0\]\.proxy\.hostKey: required/,
    );
    expect(() => parseStackSettings({ ...dev(), sshProxy: { address: "10.0.0.1" } })).toThrow(/^sshProxy\.hostKey: required/);
    expect(plan({ ...dev(), hosts: keyless(), insecureSkipHostKeyCheck: true }).plan.messages).toContainEqual(
      warning(expect.stringMatching(/^insecureSkipHostKeyCheck: true: SSH host keys are not checked/)),
    );
    expect(plan(dev()).plan.messages).toEqual([]);
    const prod = readStackFile("prod").raw;
    expect(() => parseStackSettings({ ...prod, sshProxy: { address: "10.0.0.1" } })).not.toThrow();
    expect(plan({ ...prod, insecureSkipHostKeyCheck: true }).plan.messages.filter((m) => m.text.startsWith("insecureSkipHostKeyCheck: true: SSH"))).toEqual([]);
  });

  it("places each host behind its own proxy, else the stack's sshProxy", () => {
    const bastion = { address: "10.0.0.1", hostKey: EXAMPLE_HOST_KEY };
    expect(plan({ ...dev(), sshProxy: bastion }).placements[0]!.host.proxy).toMatchObject({ address: "10.0.0.1", user: "root", port: 22 });
    expect(
      plan({ ...dev(), sshProxy: bastion, hosts: [{ ...dev().hosts[0], proxy: { ...bastion, address: "10.0.0.2" } }] }).placements[0]!.host.proxy!.address,
    ).toBe("10.0.0.2");
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
    expect(() => parseStackSettings({ ...dev(), pip: { indexUrl: "https://token@mirror.example.com/simple" } })).toThrow(
      /^pip\.indexUrl: a URL without user:password@/,
    );
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

  it("refuses extras for a role the strategy lacks, a host count that does not fit, per-role replicas and the disaggregated strategy on hosts without router.host", () => {
    expect(() => plan({ ...dev(), extraArgs: { decode: ["--x"] } })).toThrow(
      'extraArgs.decode: strategy "aggregated-data-expert-parallel" has no role "decode"; allowed: "main"',
    );
    expect(() => plan({ ...dev(), extraEnv: { decode: { X: "1" } } })).toThrow(/^extraEnv\.decode: strategy/);
    expect(() => plan({ ...dev(), replicas: 2 })).toThrow(
      'hosts: 1 given; strategy "aggregated-data-expert-parallel" with replicas: 2 needs exactly 2 (1 per replica)',
    );
    expect(() => plan({ ...dev(), prefillReplicas: 2 })).toThrow('prefillReplicas: applies only to a strategy with a "prefill" role; use replicas');
    expect(() =>
      plan({ ...readStackFile("prod").raw, platform: "hosts", hosts: [dev().hosts[0], { ...dev().hosts[0], name: "b", address: "10.20.0.12" }] }),
    ).toThrow(/^router\.host: required: strategy "prefill-decode-disaggregated" routes through the llm-d router's front door/);
    const two = plan({ ...dev(), replicas: 2, hosts: [dev().hosts[0], { ...dev().hosts[0], name: "b", address: "10.20.0.12" }] });
    expect(two.placements.map((p) => [p.replica, p.node, p.host.name])).toEqual([
      [0, 0, "npu-dev-0"],
      [1, 0, "b"],
    ]);
  });

  it("names the value it refuses, or says it is missing, and lists the allowed keys for an unknown one", () => {
    expect(() => parseStackSettings({ ...dev(), replicas: "many" })).toThrow(/^replicas: .*\(got "many"\)$/);
    expect(() => parseStackSettings({ ...dev(), strategy: undefined })).toThrow(/^strategy: .*\(missing\)$/);
    expect(() => parseStackSettings({ ...dev(), compile: { registry: { repository: "registry.example.com/c" } } })).toThrow(
      /^revision: required with compile\.registry: .* it was compiled for \(missing\)$/,
    );
    expect(() => parseStackSettings({ ...dev(), colour: "blue" })).toThrow(
      /^colour: unknown key; allowed: model, revision, strategy, .* and the secrets sshPrivateKey, hfToken, pipPassword, apiKey, registryPassword$/,
    );
    expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], colour: "blue" }] })).toThrow(
      "hosts[0].colour: unknown key; allowed: name, address, user, port, listenAddress, hostKey, proxy",
    );
    expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], proxy: { address: "10.0.0.9", colour: "blue" } }] })).toThrow(
      "hosts[0].proxy.colour: unknown key; allowed: address, user, port, hostKey",
    );
    expect(() => parseStackSettings({ ...dev(), rollout: { max: 1 } })).toThrow("rollout.max: unknown key; allowed: maxUnavailable");
    expect(() => parseStackSettings({ ...dev(), platform: "kubernetes" })).toThrow(/^kubernetes\.image: required with platform: kubernetes/);
    expect(() => parseStackSettings({ ...dev(), hosts: [] })).toThrow(/^hosts: required with platform: hosts/);
    expect(() => parseStackSettings({ ...dev(), hosts: [dev().hosts[0], { ...dev().hosts[0], address: "10.0.0.9" }], replicas: 2 })).toThrow(
      /^hosts\[1\]\.name: duplicate of hosts\[0\]\.name "npu-dev-0"/,
    );
    expect(() => parseStackSettings({ ...dev(), cacheRoot: "/var/lib/../x" })).toThrow(/^cacheRoot: a path without '\.\.'/);
  });

  it("warns about a lookalike namespace whatever the key, and not about keys without one", () => {
    expect(foreignKeyWarnings(["RBLN_Serving:colour", "plain", "aws:region"])).toEqual([
      'RBLN_Serving:colour: not read: the project reads keys under "rbln-serving:" only; did you mean rbln-serving:colour?',
    ]);
  });
});

describe("the one reading of stack config (readConfigEntries)", () => {
  const dev = readStackFile("dev").raw as Record<string, any>;
  const prod = readStackFile("prod").raw as Record<string, any>;
  /** Entries as Pulumi hands them to the program: every value its text. */
  const asPulumi = (raw: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(raw).map(([key, value]) => [`rbln-serving:${key}`, pulumiConfigText(value)]));
  const plain = () => false;
  const read = (raw: Record<string, unknown>) => readConfigEntries(asPulumi(raw), plain).settings;
  // A value for every key that is no text, each valid on its own.
  const jsonValues: Record<string, unknown> = {
    axes: { lmcache: "cpu" },
    versions: { vllmRbln: "0.12.1" },
    replicas: 1,
    prefillReplicas: 2,
    decodeReplicas: 2,
    hosts: dev.hosts,
    sshProxy: { address: "10.0.0.9", hostKey: EXAMPLE_HOST_KEY },
    insecureSkipHostKeyCheck: true,
    pip: { username: "u", extraIndexUrls: ["https://mirror.example.com/simple"] },
    minFreeDiskGb: 600,
    minFreeDiskGbToRestart: 10,
    cache: { shared: "/mnt/rbln-cache" },
    kubernetes: prod.kubernetes,
    extraArgs: { main: ["--max-log-len", "100"] },
    extraEnv: { main: { NOTE: "x" } },
    router: { requestTimeout: "2h" },
    monitoring: { enabled: true },
    rollout: { maxUnavailable: 1 },
    autoscaling: { enabled: true, maxReplicas: 4 },
    compile: { enabled: true, registry: { repository: "registry.example.com/ml/rbln-compile-cache" } },
    models: [{ name: "chat", strategy: "aggregated-data-expert-parallel", target: "Latency", hosts: ["npu-dev-0"] }],
  };

  it("gives every structured key the same value from an object, its JSON text, and a stack file's YAML", () => {
    const textKeys = ["model", "revision", "strategy", "target", "preset", "platform", "installRoot", "cacheRoot"];
    expect(
      Object.keys(StackSettings.shape)
        .filter((key) => !textKeys.includes(key))
        .sort(),
    ).toEqual(Object.keys(jsonValues).sort());
    for (const [key, value] of Object.entries(jsonValues)) {
      const fromYaml = readConfigEntries({ [`rbln-serving:${key}`]: value }, plain).settings[key];
      const fromPulumi = readConfigEntries({ [`rbln-serving:${key}`]: JSON.stringify(value) }, plain).settings[key];
      expect(fromYaml, key).toEqual(value);
      expect(fromPulumi, key).toEqual(value);
    }
  });

  it("keeps a text key's text as it is, though it looks like JSON", () => {
    const digits = "1".repeat(40);
    expect(read({ revision: digits, strategy: 42, target: "true", installRoot: "/srv/x" })).toEqual({
      revision: digits,
      strategy: "42",
      target: "true",
      installRoot: "/srv/x",
    });
  });

  it("shows a refused value as given, also inside a JSON string, for every structured key", () => {
    expect(() => parseStackSettings(read({ ...dev, rollout: '{"maxUnavailable": "200%"}' }))).toThrow(/^rollout\.maxUnavailable: .*\(got "200%"\)$/);
    for (const key of Object.keys(jsonValues)) {
      expect(() => parseStackSettings(read({ ...dev, [key]: "[true]" })), key).toThrow(new RegExp(`^${key}(\\[0\\])?: .*\\(got (\\[true\\]|true)\\)$`));
    }
  });

  it("refuses a secret key in plain text, and an encrypted key that is no secret", () => {
    expect(() => readConfigEntries({ "rbln-serving:hfToken": "hf_x" }, plain)).toThrow(
      /^hfToken: is stored in plain text; set it with: pulumi config set --secret hfToken$/,
    );
    expect(() => readConfigEntries({ "rbln-serving:pip": { indexUrl: { secure: "v1:AAAA" } } }, (_, value) => holdsCiphertext(value))).toThrow(
      /^pip: is encrypted, but only sshPrivateKey, hfToken, pipPassword, apiKey, registryPassword are read as secrets; set it without --secret$/,
    );
    expect(readConfigEntries({ "rbln-serving:hfToken": { secure: "v1:AAAA" }, "rbln-serving:strategy": "s" }, (_, value) => holdsCiphertext(value))).toEqual({
      settings: { strategy: "s" },
      secrets: ["hfToken"],
      warnings: [],
    });
    expect([{ secure: "v1:x" }, [{ a: { secure: "v1:x" } }], { secure: "v1:x", other: 1 }, { secure: 5 }, "secure"].map(holdsCiphertext)).toEqual([
      true,
      true,
      false,
      false,
      false,
    ]);
  });

  it("refuses a structured key nested deeper than any setting goes, as JSON text or as an object, in one line naming the key", () => {
    const deep = (depth: number, open: string, close: string, inner: string) => `${open.repeat(depth)}${inner}${close.repeat(depth)}`;
    for (const [key, text] of [
      ["axes", deep(20_000, "[", "]", "")],
      ["extraEnv", deep(20_000, '{"a":', "}", "1")],
      ["kubernetes", `{"affinity": ${deep(70, '{"a":', "}", "1")}}`],
    ] as const) {
      const refusal = `${key}: nested more than 64 levels deep; allowed: at most 64 levels of maps and lists`;
      expect(() => parseStackSettings(read({ ...dev, [key]: text })), key).toThrow(refusal);
      expect(() => parseStackSettings({ ...dev, [key]: JSON.parse(text) })).toThrow(refusal);
    }
    expect(
      parseStackSettings({ ...prod, kubernetes: { ...prod.kubernetes, affinity: JSON.parse(deep(60, '{"a":', "}", "1")) } }).kubernetes.affinity,
    ).toBeDefined();
  });

  it("refuses a number out of range in JSON text as written, and one a program hands as it is, never as null", () => {
    expect(() => read({ ...dev, replicas: "1e400" })).toThrow(
      new ConfigError("replicas", "1e400 is a number out of range; allowed: numbers within ±9007199254740991 (2^53 - 1), which a 64-bit float holds exactly"),
    );
    expect(() => read({ ...dev, autoscaling: '{"roles": {"prefill": {"target": 2E+999}}}' })).toThrow(
      /^autoscaling\.roles\.prefill\.target: 2E\+999 is a number out of range;/,
    );
    expect(() => read({ ...dev, extraEnv: '{"main": {"X": "1e400"}}', kubernetes: '{"affinity": {"w": [1, -0.1e-999]}}' })).toThrow(
      /^kubernetes\.affinity\.w\[1\]: -0\.1e-999 is a number out of range: closer to 0/,
    );
    for (const [value, shownAs] of [
      [Infinity, "Infinity is a number out of range"],
      [-Infinity, "-Infinity is a number out of range"],
      [NaN, "NaN is not a number"],
      [2 ** 60, "1152921504606847000 is a number out of range"],
    ] as const) {
      expect(() => parseStackSettings({ ...dev, kubernetes: { affinity: { w: value } } }), String(value)).toThrow(`kubernetes.affinity.w: ${shownAs}`);
      expect(() => parseStackSettings({ ...dev, replicas: value })).toThrow(`replicas: ${shownAs}`);
    }
  });

  it("refuses __proto__ keys at any depth instead of applying them through the object prototype", () => {
    const top = readConfigEntries({ "rbln-serving:__proto__": '{"replicas": 2}', "rbln-serving:strategy": "s" }, plain).settings;
    expect(Object.keys(top)).toEqual(["__proto__", "strategy"]);
    expect(top.replicas).toBeUndefined();
    expect(() => parseStackSettings({ ...dev, ...top })).toThrow(/^__proto__: not a key any setting takes \(JavaScript reads it as an object's prototype\)$/);
    expect(() => parseStackSettings(read({ ...dev, extraEnv: '{"main": {"__proto__": "x"}}' }))).toThrow(
      /^extraEnv\.main\.__proto__: not a key any setting takes/,
    );
    expect(() => parseStackSettings(read({ ...dev, hosts: `[${JSON.stringify(dev.hosts[0]).replace("{", '{"__proto__": {"port": 2222},')}]` }))).toThrow(
      /^hosts\[0\]\.__proto__: not a key/,
    );
    expect(() => parseStackSettings(read({ ...dev, axes: '{"__proto__": {"lmcache": "cpu"}}' }))).toThrow(/^axes\.__proto__: not a key/);
  });
});

describe("index URLs: one line, no password, no credentials over http", () => {
  const dev = () => readStackFile("dev").raw as Record<string, any>;
  const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
  const refusal = (raw: Record<string, unknown>): ConfigError => {
    try {
      plan(raw);
    } catch (error) {
      if (error instanceof ConfigError) return error;
      throw error;
    }
    throw new Error("accepted");
  };
  it("refuses an index URL that does not parse, in indexUrl and extraIndexUrls, with a ConfigError", () => {
    for (const url of ["https://host name/", "https://mirror.example.com/simple ", "https://[::1/simple", "mirror.example.com/simple", "file:///srv/simple"]) {
      expect(refusal({ ...dev(), pip: { indexUrl: url } }).message, url).toBe(
        `pip.indexUrl: an http:// or https:// URL such as https://mirror.example.com/simple (got ${JSON.stringify(url)})`,
      );
      expect(refusal({ ...dev(), pip: { extraIndexUrls: ["https://ok.example.com/simple", url] } }).key, url).toBe("pip.extraIndexUrls[1]");
    }
  });

  it("never shows the password of a refused URL: not for a bad URL, a refused scheme, a URL without one, or the wrong type", () => {
    for (const pip of [
      { indexUrl: "https://me:hunter2@host name/" },
      { extraIndexUrls: ["https://me:hunter2@host name/"] },
      { indexUrl: "ftp://me:hunter2@mirror.example.com/simple" },
      { indexUrl: "me:hunter2@mirror.example.com/simple" },
      { indexUrl: "https://me:hunter2@mirror.example.com/simple" },
      { indexUrl: ["https://me:hunter2@mirror.example.com/simple"] },
      { extraIndexUrls: "me:hunter2@mirror.example.com/simple" },
      { indexUrl: `https://me:hunter2${"x".repeat(100)}@mirror.example.com/simple` },
    ]) {
      const error = refusal({ ...dev(), pip });
      expect(error.message, JSON.stringify(pip)).not.toMatch(/hunter2/);
      expect(error.message).toMatch(/^pip\.(indexUrl|extraIndexUrls)/);
    }
    expect(refusal({ ...dev(), pip: { indexUrl: "ftp://me:hunter2@mirror.example.com/simple" } }).message).toContain(
      '(got "ftp://***@mirror.example.com/simple")',
    );
    // Any refusal that quotes a URL masks what comes before its `@`, and stays one line.
    expect(new ConfigError("k", 'got "https://me:pa@ss@host/x"\nand more').message).toBe('k: got "https://***@host/x"\\nand more');
  });

  it("refuses credentials over plain http: pip.indexUrl, and any extra index on a credentialed host, with pip.username set", () => {
    expect(() => plan({ ...dev(), pip: { username: "u", indexUrl: "http://mirror.example.com/simple" } })).toThrow(
      'pip.indexUrl: "http://mirror.example.com/simple" would receive pip.username and the pipPassword secret over plain http, readable on the way; use an https:// index',
    );
    expect(() => plan({ ...dev(), pip: { username: "u", extraIndexUrls: ["http://pypi.rbln.ai/simple"] } })).toThrow(
      /^pip\.extraIndexUrls\[0\]: "http:\/\/pypi\.rbln\.ai\/simple" would receive pip\.username/,
    );
    expect(() =>
      plan({ ...dev(), pip: { username: "u", indexUrl: "https://mirror.example.com/simple", extraIndexUrls: ["http://mirror.example.com/extra"] } }),
    ).toThrow(/^pip\.extraIndexUrls\[0\]: /);
    // The host's own loopback: nothing is on the path. A name that only starts like it is not.
    expect(() => plan({ ...dev(), pip: { username: "u", indexUrl: "http://127.0.0.1:8080/simple", extraIndexUrls: [] } })).not.toThrow();
    expect(() => plan({ ...dev(), pip: { username: "u", indexUrl: "http://[::1]:8080/simple", extraIndexUrls: [] } })).not.toThrow();
    expect(() => plan({ ...dev(), pip: { username: "u", indexUrl: "http://127.0.0.1.example.com/simple", extraIndexUrls: [] } })).toThrow(/^pip\.indexUrl: /);
    // No user, no credentials; and an index on another host gets none.
    expect(() => plan({ ...dev(), pip: { indexUrl: "http://mirror.example.com/simple" } })).not.toThrow();
    expect(() => plan({ ...dev(), pip: { username: "u", extraIndexUrls: ["http://other.example.com/simple"] } })).not.toThrow();
    // The recipe's own index on http, as pip would read it without pip.extraIndexUrls.
    const recipe = { packages: [{ extraIndexUrls: ["http://pypi.rbln.ai/simple"] }], credentialedIndexUrls: ["https://pypi.rbln.ai/simple"] } as never;
    expect(() => checkIndexCredentials({ username: "u" }, pipIndexUrls({ username: "u" }, recipe))).toThrow(
      /^pip\.username: the recipe's index "http:\/\/pypi\.rbln\.ai\/simple" would receive pip\.username/,
    );
    expect(() => checkIndexCredentials({}, pipIndexUrls({}, recipe))).not.toThrow();
  });
});

describe("host key comments", () => {
  const dev = () => readStackFile("dev").raw as Record<string, any>;
  it("refuses control characters in a host key's comment, for hosts and bastions", () => {
    const key = dev().hosts[0].hostKey;
    for (const comment of ["root@npu\u001b[31m", "a\rb", "a\u0000", "a\u0085b", "a\tb"]) {
      expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], hostKey: `${key} ${comment}` }] }), JSON.stringify(comment)).toThrow(
        /^hosts\[0\]\.hostKey: a public host key line/,
      );
      expect(() => parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], proxy: { address: "10.0.0.9", hostKey: `${key} ${comment}` } }] })).toThrow(
        /^hosts\[0\]\.proxy\.hostKey: /,
      );
      expect(() => parseStackSettings({ ...dev(), sshProxy: { address: "10.0.0.9", hostKey: `${key} ${comment}` } })).toThrow(/^sshProxy\.hostKey: /);
    }
    expect(parseStackSettings({ ...dev(), hosts: [{ ...dev().hosts[0], hostKey: `${key} root@npu-0 (rotated 2026) é` }] }).hosts[0]!.hostKey).toBe(
      `${key} root@npu-0 (rotated 2026) é`,
    );
  });
});

describe("kubernetes.image", () => {
  const prod = () => readStackFile("prod").raw as Record<string, any>;
  it("takes kubernetes.image in the OCI distribution reference grammar", () => {
    const image = (value: string) => () => parseStackSettings({ ...prod(), kubernetes: { ...prod().kubernetes, image: value } });
    const digest = `sha256:${"0123456789abcdef".repeat(4)}`;
    for (const ok of [
      "registry.example.com/vllm-rbln:0.12.0-RC1",
      "vllm-rbln",
      "localhost:5000/ml/vllm-rbln:1",
      "[fd00::1]:5000/vllm:1",
      `vllm@${digest}`,
      `registry.example.com/a/b:t@${digest}`,
      "a__b/c--d.e_f:_x",
      `r.example.com/${"a".repeat(230)}`,
    ]) {
      expect(image(ok), ok).not.toThrow();
    }
    for (const bad of [
      "a::::b//c@@",
      "Vllm-rbln",
      "registry.example.com/Vllm",
      "vllm:",
      "vllm:-x",
      `vllm:${"t".repeat(129)}`,
      "vllm@sha256:abc",
      "a//b",
      "-a/b",
      "a/b-",
      "a/b..c",
      "a_/b",
      `r.example.com/${"a".repeat(250)}`,
      "registry:port/x",
      "vllm rbln:1",
      "",
    ]) {
      expect(image(bad), bad).toThrow(/^kubernetes\.image: an image reference such as registry\.example\.com\/vllm-rbln:0\.12\.0 /);
    }
    // No backtracking blow-up on a long near-match.
    expect(image(`${"a-".repeat(20000)}!`)).toThrow(/^kubernetes\.image: /);
  });

  it("takes router.images in the same grammar: valid tags such as 0.12.0-RC1, and no user:password@", () => {
    const dev = readStackFile("dev").raw as Record<string, any>;
    for (const name of ["endpointPicker", "proxy", "sidecar"]) {
      const image = (value: string) => () => parseStackSettings({ ...dev, router: { images: { [name]: value } } });
      expect(image("registry.example.com/llm-d/epp:0.12.0-RC1"), name).not.toThrow();
      for (const bad of ["a::::b//c@@", "me:hunter2@registry.example.com/envoy:1", "Registry.example.com/X:1"]) {
        expect(image(bad), bad).toThrow(new RegExp(`^router\\.images\\.${name}: an image reference such as `));
        expect(image(bad)).not.toThrow(/hunter2/);
      }
    }
  });
});

describe("quantities", () => {
  const prod = () => readStackFile("prod").raw as Record<string, any>;
  it("refuses zero volumes and zero CPU or memory requests and limits, for vLLM, the sidecar and the picker", () => {
    const k8s = (kubernetes: Record<string, unknown>) => ({ ...prod(), kubernetes: { ...prod().kubernetes, ...kubernetes } });
    expect(() => parseStackSettings(k8s({ weightsVolumeSize: "0Gi" }))).toThrow('kubernetes.weightsVolumeSize: more than 0 (got "0Gi")');
    expect(() => parseStackSettings(k8s({ compileCacheVolumeSize: "000Mi" }))).toThrow(/^kubernetes\.compileCacheVolumeSize: more than 0/);
    for (const zero of ["0", "0m", "0.0", "0Gi", "0.000Ki"]) {
      expect(() => parseStackSettings(k8s({ resources: { prefill: { requests: { cpu: zero } } } })), zero).toThrow(
        `kubernetes.resources.prefill.requests.cpu: more than 0 (a zero request reserves nothing) (got "${zero}")`,
      );
      expect(() => parseStackSettings(k8s({ resources: { decode: { limits: { memory: zero } } } }))).toThrow(
        /^kubernetes\.resources\.decode\.limits\.memory: more than 0/,
      );
      expect(() => parseStackSettings(k8s({ sidecarResources: { requests: { memory: zero } } }))).toThrow(
        /^kubernetes\.sidecarResources\.requests\.memory: more than 0/,
      );
      expect(() => parseStackSettings({ ...prod(), router: { pickerResources: { requests: { cpu: zero } } } })).toThrow(
        /^router\.pickerResources\.requests\.cpu: more than 0/,
      );
      expect(() => parseStackSettings(k8s({ shmSizeLimit: zero }))).toThrow(/^kubernetes\.shmSizeLimit: more than 0/);
    }
    expect(
      parseStackSettings(k8s({ resources: { prefill: { requests: { cpu: "1m", memory: "1Ki" } } }, weightsVolumeSize: "1Ti" })).kubernetes.weightsVolumeSize,
    ).toBe("1Ti");
  });
});

describe("versions", () => {
  const dev = () => readStackFile("dev").raw as Record<string, any>;
  const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
  it("takes versions in PEP 440's form, at most 64 characters, so the venv's name stays within 255 bytes", () => {
    const versions = (vllmRbln: string) => () => plan({ ...dev(), versions: { vllmRbln } });
    for (const ok of ["0.12.1", "0.13.0rc1", "1!2.0.post1.dev3+local.7", "1.0_post1", "v1.0", "1".padEnd(64, "0")]) expect(versions(ok), ok).not.toThrow();
    for (const bad of ["1".padEnd(65, "0"), "1".padEnd(260, "0"), "1.0; rm -rf /", "1.0 ", "latest", "1.0\n", ""]) {
      expect(versions(bad), bad).toThrow(/^versions\.vllmRbln: a PEP 440 version such as 0\.12\.1 or 0\.13\.0rc1, at most 64 characters \(got /);
    }
    const longest = plan({
      ...dev(),
      versions: { rebelCompiler: "1".padEnd(64, "0"), vllmRbln: "2".padEnd(64, "0"), arcticInference: "3".padEnd(64, "0") },
      axes: { spec_decode: "suffix" },
    });
    const venvName = renderHost(longest, longest.placements[0]!, "dev").venv.split("/").pop()!;
    expect(longest.plan.packages).toHaveLength(3);
    expect(Buffer.byteLength(venvName)).toBeLessThanOrEqual(255);
  });
});

describe("kubernetes.namespace", () => {
  it("refuse the cluster's own namespaces for kubernetes.namespace, saying why", () => {
    const prod = readStackFile("prod").raw as Record<string, any>;
    for (const namespace of ["default", "kube-system", "kube-public", "kube-node-lease"]) {
      expect(() => parseStackSettings({ ...prod, kubernetes: { ...prod.kubernetes, namespace } }), namespace).toThrow(
        `kubernetes.namespace: a namespace of the deployment's own, such as rbln-serving: default and kube-* belong to the cluster, and the package labels its namespace with Pod Security levels (got "${namespace}")`,
      );
    }
    // Kubernetes reserves the whole prefix.
    for (const namespace of ["kube-systems", "kube-foo"])
      expect(() => parseStackSettings({ ...prod, kubernetes: { ...prod.kubernetes, namespace } }), namespace).toThrow(
        /^kubernetes\.namespace: a namespace of the deployment's own/,
      );
    expect(parseStackSettings({ ...prod, kubernetes: { ...prod.kubernetes, namespace: "kubernetes-serving" } }).kubernetes.namespace).toBe(
      "kubernetes-serving",
    );
  });

  it("refuses the namespace Prometheus runs in, with monitoring on", () => {
    const prod = readStackFile("prod").raw as Record<string, any>;
    const inMonitoring = { ...prod, kubernetes: { ...prod.kubernetes, namespace: "observability" }, monitoring: { enabled: true, namespace: "observability" } };
    expect(() => parseStackSettings(inMonitoring)).toThrow(/^kubernetes\.namespace: "observability" is monitoring\.namespace too, where Prometheus runs; /);
    expect(() => parseStackSettings({ ...inMonitoring, monitoring: { enabled: false, namespace: "observability" } })).not.toThrow();
  });
});

describe("extraEnv over the package's own variables", () => {
  const dev = () => readStackFile("dev").raw as Record<string, any>;
  const prod = () => readStackFile("prod").raw as Record<string, any>;
  const plan = (raw: Record<string, unknown>) => planDeployment(parseStackSettings(raw), shippedCatalog);
  it("refuses extraEnv over a variable the package sets itself, on either platform", () => {
    for (const name of Object.keys(PACKAGE_ENV)) {
      expect(() => parseStackSettings({ ...dev(), extraEnv: { main: { [name]: "/elsewhere" } } }), name).toThrow(
        new RegExp(`^extraEnv\\.main\\.${name}: the package sets it \\(.+\\); choose another name`),
      );
      expect(() => parseStackSettings({ ...prod(), extraEnv: { decode: { [name]: "/elsewhere" } } }), name).toThrow(
        new RegExp(`^extraEnv\\.decode\\.${name}: the package sets it`),
      );
    }
    expect(() => parseStackSettings({ ...dev(), extraEnv: { main: { HF_HOME_EXTRA: "x", home: "x" } } })).not.toThrow();
  });

  it("refuses every variable that moves or switches off a cache, or offline mode, that env.json lists; the rest have a reason to pass", () => {
    const facts = envFixture.facts;
    const listed = [
      ...Object.keys(facts["hf.envs"].value),
      ...Object.keys(facts["hf.transformersCache"].value),
      ...Object.keys(facts["vllm.envs"].value),
      ...Object.keys(facts["rbln.device"].value),
      ...facts["rbln.envs"].value.compile,
    ].filter((name) => /CACHE|OFFLINE|^HF_HOME$|NPU_NAME|TARGET_SOC|USE_VLLM_MODEL/.test(name));
    // Why these pass: they move nothing the package relies on.
    const passes: Record<string, string> = {
      VLLM_ASSETS_CACHE: "downloaded example assets (images, audio), which serving a model offline does not read",
      HF_DATASETS_OFFLINE: "read by the datasets library only (env.json), which serving does not load",
      VLLM_RBLN_USE_DYNAMIC_KV_CACHE: "the KV cache's layout, a compile variable the compile key keys (a change recompiles), not a cache folder",
    };
    expect(listed.length).toBeGreaterThanOrEqual(10);
    for (const name of listed) {
      const attempt = () => parseStackSettings({ ...dev(), extraEnv: { main: { [name]: "0" } } });
      if (Object.hasOwn(passes, name)) expect(attempt, name).not.toThrow();
      else expect(attempt, name).toThrow(new RegExp(`^extraEnv\\.main\\.${name}: the package( sets it|'s caches rely on it)`));
    }
    expect(() => parseStackSettings({ ...dev(), extraEnv: { main: { HF_HUB_CACHE: "/data/hub" } } })).toThrow(
      'extraEnv.main.HF_HUB_CACHE: the package\'s caches rely on it: it moves the hub cache off $HF_HOME/hub, where the package downloads the weights, so the offline ranks would find none; leave it unset (got "/data/hub")',
    );
    expect(() => parseStackSettings({ ...prod(), extraEnv: { decode: { VLLM_DISABLE_COMPILE_CACHE: "1" } } })).toThrow(
      /^extraEnv\.decode\.VLLM_DISABLE_COMPILE_CACHE: the package's caches rely on it: it turns the compiled cache off/,
    );
    // What turns vllm-rbln's warm-up off saves no bundle: the files the compile and unit steps decide by (bundle.skippedWithoutWarmUp).
    for (const name of ["VLLM_RBLN_ENABLE_WARM_UP", "VLLM_RBLN_COMPILE_MODEL"])
      expect(() => parseStackSettings({ ...dev(), extraEnv: { main: { [name]: "0" } } }), name).toThrow(
        `extraEnv.main.${name}: the package's caches rely on it: off, vllm-rbln skips its compile and warm-up and saves no compiled cache, which compile ahead and the unit step read to tell a load from a compile; leave it unset (got "0")`,
      );
    // XDG_CACHE_HOME moves only defaults the package overrides (HF_HOME, VLLM_CACHE_ROOT) and the assets cache.
    expect(() => parseStackSettings({ ...dev(), extraEnv: { main: { XDG_CACHE_HOME: "/tmp/x" } } })).not.toThrow();
  });

  it("lists in PACKAGE_ENV exactly the variables the renderers set beside the recipe's and the secrets'", () => {
    const recipeEnv = (deployment: ReturnType<typeof plan>) =>
      new Set(deployment.plan.roles.flatMap((r) => r.ranks.flatMap((k) => Object.keys(k.env))).filter((name) => !Object.hasOwn(OFFLINE_ENV, name)));
    const hosts = plan(dev());
    const hostNames = renderHost(hosts, hosts.placements[0]!, "dev").ranks.flatMap((r) =>
      r.envText
        .split("\n")
        .filter(Boolean)
        .map((line) => line.slice(0, line.indexOf("="))),
    );
    const kubernetes = plan(prod());
    const workloads = renderKubernetesWorkloads(kubernetes, { instance: "rbln-serving", namespace: "llm-serving" }, ["hfToken", "apiKey"]);
    const podNames = workloads.roles.flatMap((r) => (r.deployment.spec!.template.spec!.containers[0]!.env ?? []).map((e) => e.name));
    const launchNames = kubernetes.plan.roles.flatMap((r) => r.ranks.flatMap((k) => Object.keys(k.env)));
    const secretNames = Object.values(SECRET_ENV);
    const own = (names: string[], recipe: Set<string>) => names.filter((name) => !recipe.has(name) && !secretNames.includes(name));
    expect([...new Set([...own(hostNames, recipeEnv(hosts)), ...own([...podNames, ...launchNames], recipeEnv(kubernetes))])].sort()).toEqual(
      Object.keys(PACKAGE_ENV).sort(),
    );
  });
});

describe("addresses", () => {
  const dev = () => readStackFile("dev").raw as Record<string, any>;
  const host = (extra: Record<string, unknown>) => ({ ...dev().hosts[0], ...extra });
  // A shared cache: no copies between the two, so host names are allowed (grantsNeedAddresses).
  const twoHosts = (a: Record<string, unknown>, b: Record<string, unknown>) => () =>
    planDeployment(
      parseStackSettings({ ...dev(), replicas: 2, cache: { shared: "/mnt/rbln-cache" }, hosts: [host(a), host({ name: "npu-b", ...b })] }),
      shippedCatalog,
    );

  it("refuse two hosts whose ranks would serve on one address and port", () => {
    expect(twoHosts({ address: "10.0.0.1" }, { address: "10.0.0.1", port: 2222 })).toThrow(
      'hosts[1].address: "10.0.0.1" would serve port 8000 on 10.0.0.1, as hosts[0] does; give each host an address of its own (host names compare without case, IP addresses in one form: ::ffff:10.0.0.9 is 10.0.0.9)',
    );
    expect(twoHosts({ address: "npu-0.example.com" }, { address: "NPU-0.Example.COM", port: 2222 })).toThrow(
      /^hosts\[1\]\.address: "NPU-0\.Example\.COM" would serve port 8000 on npu-0\.example\.com, as hosts\[0\] does/,
    );
    // Shown as the package spells the address (canonicalIp), the one form it compares and writes.
    expect(twoHosts({ address: "fd00::5" }, { address: "fd00:0:0:0:0:0:0:5", port: 2222 })).toThrow(
      /^hosts\[1\]\.address: "fd00::5" would serve port 8000 on \[fd00::5\]/,
    );
    expect(twoHosts({ address: "10.0.0.1", listenAddress: "10.9.9.9" }, { address: "10.0.0.2", listenAddress: "10.9.9.9" })).toThrow(
      /^hosts\[1\]\.listenAddress: "10\.9\.9\.9" would serve port 8000 on 10\.9\.9\.9, as hosts\[0\] does/,
    );
    expect(twoHosts({ address: "10.0.0.1" }, { address: "10.0.0.2", listenAddress: "10.0.0.1" })).toThrow(/^hosts\[1\]\.listenAddress: /);
    // A wildcard listenAddress serves on the host's own address.
    expect(twoHosts({ address: "10.0.0.1", listenAddress: "0.0.0.0" }, { address: "10.0.0.2", listenAddress: "::" })).not.toThrow();
    expect(twoHosts({ address: "10.0.0.1", listenAddress: "10.9.9.1" }, { address: "10.0.0.1", port: 2222, listenAddress: "10.9.9.2" })).not.toThrow();
  });

  it("still refuse one SSH server listed twice, however its address is spelled", () => {
    expect(twoHosts({ address: "npu-0.example.com" }, { address: "NPU-0.example.com" })).toThrow(
      'hosts[1].address: duplicate of hosts[0].address "npu-0.example.com:22" (the same SSH server: host names compare without case, IP addresses in one form: ::ffff:10.0.0.9 is 10.0.0.9) (got "NPU-0.example.com")',
    );
    expect(twoHosts({ address: "fd00::5" }, { address: "FD00:0::5" })).toThrow(/^hosts\[1\]\.address: duplicate of hosts\[0\]\.address "\[fd00::5\]:22"/);
  });
});

describe("addresses in one form", () => {
  const dev = () => readStackFile("dev").raw as Record<string, any>;
  const host = (extra: Record<string, unknown>) => ({ ...dev().hosts[0], ...extra });
  const settings = (hosts: Record<string, unknown>[], more: Record<string, unknown> = {}) =>
    parseStackSettings({ ...dev(), replicas: hosts.length, hosts: hosts.map((h, i) => host({ name: `npu-${i}`, ...h })), ...more });
  const twoHosts = (a: Record<string, unknown>, b: Record<string, unknown>) => () => planDeployment(settings([a, b]), shippedCatalog);

  it("read an IPv4-mapped IPv6 address as its IPv4 address, and IPv6 in one spelling, in every comparison", () => {
    const DUPLICATE = 'hosts[1].address: duplicate of hosts[0].address "10.0.0.9:22" (the same SSH server';
    expect(twoHosts({ address: "10.0.0.9" }, { address: "::ffff:10.0.0.9" })).toThrow(DUPLICATE);
    expect(twoHosts({ address: "::FFFF:a00:9" }, { address: "10.0.0.9" })).toThrow(DUPLICATE);
    expect(twoHosts({ address: "0:0:0:0:0:ffff:10.0.0.9" }, { address: "::ffff:0a00:0009" })).toThrow(DUPLICATE);
    expect(twoHosts({ address: "FD00:0::5" }, { address: "fd00::0:5" })).toThrow(/^hosts\[1\]\.address: duplicate of hosts\[0\]\.address "\[fd00::5\]:22"/);
    // Serving on one address and port: by address, or by listenAddress.
    expect(twoHosts({ address: "10.0.0.1" }, { address: "::ffff:10.0.0.1", port: 2222 })).toThrow(/would serve port 8000 on 10\.0\.0\.1, as hosts\[0\] does/);
    expect(twoHosts({ address: "10.0.0.1", listenAddress: "::ffff:10.9.9.9" }, { address: "10.0.0.2", listenAddress: "10.9.9.9" })).toThrow(
      /^hosts\[1\]\.listenAddress: "10\.9\.9\.9" would serve port 8000 on 10\.9\.9\.9/,
    );
    // ::ffff:0.0.0.0 is the IPv4 wildcard: each host serves on its own address.
    expect(twoHosts({ address: "10.0.0.1", listenAddress: "::ffff:0.0.0.0" }, { address: "10.0.0.2", listenAddress: "0:0::0" })).not.toThrow();
    // The compile host is a server of its own.
    expect(() => settings([{ address: "10.0.0.1" }], { compile: { host: { name: "cpu", address: "::ffff:10.0.0.1", hostKey: EXAMPLE_HOST_KEY } } })).toThrow(
      /^compile\.host\.address: the compile host must be a server of its own, but hosts\[0\]\.address is "10\.0\.0\.1:22" too$/,
    );
    // What the scripts and units get is that one form too.
    const parsed = settings(
      [
        { address: "::ffff:10.0.0.1", listenAddress: "::FFFF:10.0.0.1" },
        { address: "10.0.0.2", listenAddress: "FD00:0::5" },
      ],
      {
        sshProxy: { address: "::ffff:10.0.0.99", hostKey: EXAMPLE_HOST_KEY },
      },
    );
    expect([parsed.hosts[0]!.address, parsed.hosts[0]!.listenAddress, parsed.hosts[1]!.listenAddress, parsed.sshProxy!.address]).toEqual([
      "10.0.0.1",
      "10.0.0.1",
      "fd00::5",
      "10.0.0.99",
    ]);
  });

  it("refuse an IPv4 address that tools read in other ways: leading zeros, short forms, hex, and host names ending in a number", () => {
    for (const address of ["010.0.0.9", "10.0.0.010", "10.1", "167772169", "0x0a.0.0.9", "10.0.0.0x9", "npu.123", "1.2.3.4.5", "10.0.0.256"]) {
      expect(() => settings([{ address }]), address).toThrow(
        `hosts[0].address: an IPv4 address as four decimal numbers 0-255 without leading zeros, such as 10.0.0.9 (010.0.0.9, 10.1 and 0x0a.0.0.9 read as other addresses to ssh and others), or a host name whose last label is not a number (got ${JSON.stringify(address)})`,
      );
    }
    for (const address of ["10.0.0.9", "0.0.0.1", "npu-0.example.com", "npu.x1", "1x.example"]) expect(settings([{ address }]).hosts[0]!.address).toBe(address);
    expect(() => settings([{ address: "10.0.0.1", listenAddress: "010.0.0.1" }])).toThrow(
      /^hosts\[0\]\.listenAddress: an IPv4 or IPv6 address \(got "010\.0\.0\.1"\)$/,
    );
  });
});

describe("stack files, read as Pulumi reads them", () => {
  const shown = (dir: string) => path.relative(process.cwd(), path.join(dir, "Pulumi.t.yaml"));
  function stack(body: string | Buffer): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stacks-"));
    fs.writeFileSync(path.join(dir, "Pulumi.t.yaml"), body);
    return dir;
  }

  it("refuse an alias bomb and an alias without its anchor with one line, not a ReferenceError", () => {
    const levels = [
      "a: &a [x, x, x, x, x, x, x, x, x]",
      ...["b", "c", "d", "e", "f", "g", "h", "i"].map(
        (name, i) =>
          `${name}: &${name} [${Array(9)
            .fill(`*${String.fromCharCode(97 + i)}`)
            .join(", ")}]`,
      ),
    ];
    const bomb = stack(`${levels.join("\n")}\nconfig:\n  rbln-serving:axes: *i\n`);
    expect(() => readStackFile("t", bomb)).toThrow(new ConfigError(shown(bomb), "invalid YAML: more than 100 aliases to expand, as in an alias bomb"));
    const dangling = stack("config:\n  rbln-serving:axes: *nope\n");
    expect(() => readStackFile("t", dangling)).toThrow(/^.*Pulumi\.t\.yaml: invalid YAML: .*nope/);
  });

  it("refuse a byte that is not UTF-8, naming the file and line", () => {
    for (const bad of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0x80]]) {
      const dir = stack(Buffer.concat([Buffer.from("config:\n  rbln-serving:strategy: s\n  rbln-serving:target: T"), Buffer.from(bad), Buffer.from("\n")]));
      expect(() => readStackFile("t", dir), bad.join(" ")).toThrow(new ConfigError(`${shown(dir)}:3`, "not UTF-8 text; save the stack file as UTF-8"));
    }
    expect(readStackFile("t", stack("config:\n  rbln-serving:target: Latenc\u00e9 \u{1F680}\n")).raw).toEqual({ target: "Latenc\u00e9 \u{1F680}" });
  });

  it("refuse a number out of range as written, naming the key path, the line and what is allowed, wherever it is", () => {
    const RANGE = "is a number out of range; allowed: numbers within ±9007199254740991 (2^53 - 1), which a 64-bit float holds exactly";
    const head = "config:\n  rbln-serving:strategy: s\n  rbln-serving:target: T\n";
    const cases: [string, string, string][] = [
      ["  rbln-serving:replicas: 1e400\n", "replicas", `1e400 ${RANGE}`],
      // The class: negative, a list inside a map, YAML's own spellings, integers that lose digits, an underflow, a text key, an alias.
      ["  rbln-serving:kubernetes:\n    affinity: {a: [1, -1e400]}\n", "kubernetes.affinity.a[1]", `-1e400 ${RANGE}`],
      ["  rbln-serving:autoscaling:\n    roles: {prefill: {target: .inf}}\n", "autoscaling.roles.prefill.target", `.inf ${RANGE}`],
      ["  rbln-serving:rollout: {maxUnavailable: .NaN}\n", "rollout.maxUnavailable", ".NaN is not a number (NaN); allowed: a finite number"],
      ["  rbln-serving:hosts:\n    - {name: a, address: 10.0.0.1, port: 12345678901234567890}\n", "hosts[0].port", `12345678901234567890 ${RANGE}`],
      [
        "  rbln-serving:kubernetes: {tolerations: [{tolerationSeconds: 1e-400}]}\n",
        "kubernetes.tolerations[0].tolerationSeconds",
        "1e-400 is a number out of range: closer to 0 than a 64-bit float holds, so it would read as 0; allowed: 0, or a magnitude of at least 5e-324",
      ],
      ["  rbln-serving:model: 2e308\n", "model", `2e308 ${RANGE}`],
      ["  rbln-serving:minFreeDiskGb: &big 1E+400\n  rbln-serving:minFreeDiskGbToRestart: *big\n", "minFreeDiskGb", `1E+400 ${RANGE}`],
    ];
    for (const [body, key, refusal] of cases) {
      const dir = stack(head + body);
      // The line of the number: the body's line that holds the value named.
      const line = 4 + body.split("\n").findIndex((l) => l.includes(refusal.split(" ")[0]!));
      expect(() => readStackFile("t", dir), body).toThrow(new ConfigError(key, `${refusal} (${shown(dir)}:${line})`));
    }
    // In range, as written: no refusal.
    const fine = readStackFile(
      "t",
      stack(`${head}  rbln-serving:kubernetes: {affinity: {a: [0, 0.0, 1e-300, 5e-324, 9007199254740991, -9.007199254740991e15]}}\n`),
    );
    expect((fine.raw.kubernetes as any).affinity.a).toEqual([0, 0, 1e-300, 5e-324, 9007199254740991, -9.007199254740991e15]);
  });

  it("refuse tags the engine does not read, and take merge keys and `on` as it does", () => {
    for (const tagged of ["!foo x", "!!binary aGk=", "!!timestamp 2026-01-01"]) {
      const dir = stack(`config:\n  rbln-serving:target: ${tagged}\n`);
      expect(() => readStackFile("t", dir), tagged).toThrow(new RegExp(`^${shown(dir).replace(/[.]/g, "\\.")}:2:\\d+: invalid YAML: `));
    }
    const merged = readStackFile(
      "t",
      stack(
        "base: &base {user: ubuntu, port: 2222}\nconfig:\n  rbln-serving:hosts:\n    - <<: *base\n      name: a\n  rbln-serving:axes: {prefix_caching: on}\n",
      ),
    ).raw;
    expect(merged).toEqual({ hosts: [{ user: "ubuntu", port: 2222, name: "a" }], axes: { prefix_caching: "on" } });
  });
});
