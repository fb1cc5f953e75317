/**
 * Deliberate breakages of the product, each with the tests that must catch it (`npm run
 * test:sabotage`, test/sabotage/run.ts). A breakage is data: exact search/replace edits of files of
 * the product, each of which must match exactly once (an edit that no longer applies is an error,
 * never "caught"; test/sabotage.test.ts checks that in the fast tier), the tests to run per tier,
 * and why it matters. `awaiting` names the work that should catch a breakage the tests miss today.
 */

export interface Edit {
  file: string;
  search: string;
  replace: string;
}

export interface Breakage {
  /** Short and unique: `npm run test:sabotage -- <name>` runs only that one. */
  name: string;
  /** What goes wrong for a user when the product breaks this way. */
  why: string;
  edits: Edit[];
  /** Test files per tier. The fast tier runs first; the host tier (root, fake hosts) only when the fast tier misses it. */
  tests: { fast?: string[]; hosts?: string[] };
  /** While missed: the work expected to catch it. */
  awaiting?: string;
}

const UNIT_APPLY = "core/render/hosts/scripts/unit-apply.sh";
const FRONT_DOOR_AGENT = "core/render/hosts/scripts/front-door.py";
const REGISTRY = "core/render/scripts/registry.sh";
const COMPILE_FLOW = "core/render/scripts/compile-flow.sh";
const COMPILE_KEY_SCRIPT = "core/render/hosts/scripts/compile-key.sh";
const FRONT_DOOR_SH = "core/render/hosts/scripts/front-door.sh";
const FRONT_DOOR_APPLY = "core/render/hosts/scripts/front-door-apply.sh";
const ENVOY_TS = "core/render/hosts/frontDoor/envoy.ts";
const MODELS_FRONT_DOOR = "core/render/hosts/frontDoor/modelsFrontDoor.ts";
const COMPILE_JOB_SCRIPT = "core/render/kubernetes/scripts/compile-job.sh";
const CACHE_FILES = "core/render/scripts/cache-files.sh";

export const BREAKAGES: readonly Breakage[] = [
  {
    name: "model-route-cache-kept",
    why: "the front door of several models sets the model header after Envoy chose the route: every request goes where the client's own header (or none) said, and most get 404",
    edits: [{ file: "core/render/hosts/frontDoor/modelRoutes.ts", search: "        clear_route_cache: true,\n", replace: "" }],
    tests: { fast: ["test/models-hosts-routing.test.ts"] },
  },
  {
    name: "model-route-default-epp",
    why: "every model's requests ask the first model's endpoint picker, which sends them to the first model's servers",
    edits: [
      {
        file: "core/render/hosts/frontDoor/modelRoutes.ts",
        search: "      typed_per_filter_config: { [EXT_PROC]: eppOverride(model, retry) },\n",
        replace: "",
      },
    ],
    tests: { fast: ["test/models-hosts-routing.test.ts"] },
  },
  {
    name: "models-epp-of-first-model",
    why: "on hosts, the Envoy of a stack of models reaches the first model's endpoint picker for every model: another model's requests land on the first model's servers",
    edits: [{ file: MODELS_FRONT_DOOR, search: "    eppGrpcPort: door.ports.eppGrpc,\n", replace: "    eppGrpcPort: doors[0]!.ports.eppGrpc,\n" }],
    tests: { fast: ["test/models-hosts.test.ts"], hosts: ["test/hosts/front-door-models-hosts.test.ts"] },
  },
  {
    name: "models-epp-ports-shared",
    why: "on hosts, every model's endpoint picker takes the first one's ports on the router host: the second cannot start, and the front door never serves",
    edits: [
      {
        file: MODELS_FRONT_DOOR,
        search: "doorContext(deployment, { ...options, id, eppSlot: slots[i]! })",
        replace: "doorContext(deployment, { ...options, id })",
      },
    ],
    tests: { fast: ["test/models-hosts.test.ts"], hosts: ["test/hosts/front-door-models-hosts.test.ts"] },
  },
  {
    name: "models-hosts-not-behind-door",
    why: "on hosts, the models' unit steps do not wait for the one front door nor drain through it: a rank restarts while the front door still sends it requests",
    edits: [
      {
        file: "components/modelServing.ts",
        search: "        ? hostResources(modelName, model.hosts, model.deployment, secrets, child, doors)",
        replace: "        ? hostResources(modelName, model.hosts, model.deployment, secrets, child)",
      },
    ],
    tests: { fast: ["test/models-hosts.test.ts"] },
  },
  {
    name: "drain-removed",
    why: "a rank restarts while the front door still routes to it: its in-flight and new requests fail",
    edits: [{ file: UNIT_APPLY, search: "  front_door_drain $front_door_endpoint || {", replace: "  true || {" }],
    tests: { fast: ["test/unit-apply.test.ts"], hosts: ["test/hosts/front-door-hosts.test.ts"] },
  },
  {
    name: "plan-ignores-platform",
    why: "plan on a hosts stack shows the recipe's <POD_IP> and <EPP_HOST> and no host, unit or front door: the commands cannot be pasted",
    edits: [
      {
        file: "cli/commands.ts",
        search:
          "  return renderStackPlanText(renderDeployment(read.plan.models[0]!, { stack: options.stack!, instance: DEFAULT_INSTANCE, secrets: read.secrets }));",
        replace: "  return renderPlanText(read.plan.models[0]!.plan);",
      },
    ],
    tests: { fast: ["test/cli.test.ts"] },
  },
  {
    name: "recipe-notes-as-warnings",
    why: "the shipped stacks warn about the recipe's own router settings, which no one can act on, and real warnings drown",
    edits: [
      {
        file: "core/plan/routerIntent.ts",
        search: 'import { note, type PlanMessage } from "./messages";',
        replace: 'import { warning as note, type PlanMessage } from "./messages";',
      },
    ],
    tests: { fast: ["test/cli.test.ts"] },
  },
  {
    name: "diff-cost-misses-env-restart",
    why: "diff says an environment change restarts nothing, and the unit step restarts the rank: an unannounced outage",
    edits: [
      {
        file: "core/render/changeCost.ts",
        search: "old.unitText !== rank.unitText || old.envText !== rank.envText",
        replace: "old.unitText !== rank.unitText",
      },
    ],
    tests: { fast: ["test/change-cost.test.ts"] },
  },
  {
    name: "shutdown-timeout-0",
    why: "vLLM aborts every in-flight request at SIGTERM instead of letting it finish",
    edits: [
      {
        file: "core/plan/deployment.ts",
        search: 'const packageFlags = [{ name: "--shutdown-timeout", values: [String(shutdownTimeoutSeconds)] }, ...servedNameFlags(entry)];',
        replace: 'const packageFlags = [{ name: "--shutdown-timeout", values: ["0"] }, ...servedNameFlags(entry)];',
      },
    ],
    tests: { hosts: ["test/hosts/front-door-hosts.test.ts"] },
  },
  {
    name: "unit-skips-compile-copy",
    why: "an NPU unit starts before its key's compiled cache has arrived and compiles on the NPUs for hours",
    edits: [
      {
        file: "components/hosts/npuHost.ts",
        search: "            ...copies,\n",
        replace: '            ...copies.filter((_, i) => args.copies![i]!.rendered.kind === "weights"),\n',
      },
    ],
    tests: { fast: ["test/program.test.ts", "test/compile-ahead.test.ts"], hosts: ["test/hosts/copy-hosts.test.ts"] },
  },
  {
    name: "compile-copy-before-compile",
    why: "the first wave copies the compile host's cache before its compile is done: the units start without it and compile on the NPUs",
    edits: [
      {
        file: "components/modelServing.ts",
        search: 'after: copy.kind === "weights" ? [source.weights!] : source.unitCommands };',
        replace: 'after: copy.kind === "weights" ? [source.weights!] : source instanceof CompileHost ? [] : source.unitCommands };',
      },
    ],
    tests: { fast: ["test/program.test.ts", "test/compile-ahead.test.ts"], hosts: ["test/hosts/compile-registry-hosts.test.ts"] },
  },
  {
    name: "unit-skips-registry-pull",
    why: "an NPU unit starts before its pull of the key's cache from the registry is done, and compiles on the NPUs",
    edits: [{ file: "components/hosts/npuHost.ts", search: "            ...this.pullCommands,\n", replace: "" }],
    tests: { fast: ["test/program.test.ts", "test/compile-ahead.test.ts"], hosts: ["test/hosts/compile-registry-hosts.test.ts"] },
  },
  {
    name: "compile-env-differs",
    why: "the compile host compiles with VLLM_RBLN_USE_VLLM_MODEL=1 and the units run without it: vllm-rbln's signature differs, every unit misses the cache and compiles on the NPUs",
    edits: [
      {
        file: "core/plan/deployment.ts",
        search: "  const aheadEnv = loadsCompiledAhead(settings, base.packages) ? COMPILE_AHEAD_SERVING_ENV : {};",
        replace: "  const aheadEnv = loadsCompiledAhead(settings, base.packages) ? {} : COMPILE_AHEAD_SERVING_ENV;",
      },
      {
        file: "core/render/compileCache.ts",
        search: '    VLLM_RBLN_COMPILE_ONLY: "1",\n',
        replace: '    VLLM_RBLN_COMPILE_ONLY: "1",\n    VLLM_RBLN_USE_VLLM_MODEL: "1",\n',
      },
    ],
    tests: { fast: ["test/compile-ahead.test.ts"], hosts: ["test/hosts/compile-registry-hosts.test.ts"] },
  },
  {
    name: "misspelt-package-flag",
    why: "a flag the package adds is one vLLM does not know: every rank refuses to start",
    edits: [
      {
        file: "core/plan/modelRefs.ts",
        search: 'export const REVISION_FLAGS = ["--revision", "--tokenizer-revision"] as const;',
        replace: 'export const REVISION_FLAGS = ["--revision", "--tokenizer-revison"] as const;',
      },
    ],
    tests: { fast: ["test/cache-compile-key.test.ts", "test/vllm-flags.test.ts"] },
  },
  {
    name: "rollback-without-drain",
    why: "the way back restarts a rank the front door lists again: the requests it took are cut",
    edits: [{ file: UNIT_APPLY, search: "  going_back_for=$1\n  phase=back\n", replace: "  going_back_for=$1\n  phase=back\n  front_door_rejoin\n" }],
    tests: { fast: ["test/unit-apply.test.ts"], hosts: ["test/hosts/front-door-hosts.test.ts"] },
  },
  {
    name: "agent-probe-always-serving",
    why: "the front door lists endpoints that do not serve: requests go to ranks that are down",
    edits: [{ file: FRONT_DOOR_AGENT, search: 'results[endpoint["name"]] = self.serves(endpoint)', replace: 'results[endpoint["name"]] = True' }],
    tests: { fast: ["test/front-door-agent.test.ts"] },
  },
  {
    name: "registry-digest-not-verified",
    why: "a pull takes whatever the key's tag points to now, unchecked: a replaced or tampered artifact is loaded",
    edits: [
      {
        file: REGISTRY,
        search: '"docker://${repository}@${digest}" "oci:${layout}:${key}"',
        replace: '"docker://${repository}:${key}" "oci:${layout}:${key}"',
      },
      {
        file: REGISTRY,
        search: '[ "$(sha256sum "$blob" | cut -d \' \' -f 1)" = "$(basename "$blob")" ] || registry_fail',
        replace: "true || registry_fail",
      },
      {
        file: REGISTRY,
        search: 'manifest="$layout/blobs/sha256/${digest#sha256:}"',
        replace:
          'manifest="$layout/blobs/sha256/$(python3 -c \'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"][7:])\' "$layout/index.json")"',
      },
    ],
    tests: { fast: ["test/compile-registry.test.ts"], hosts: ["test/hosts/compile-registry-hosts.test.ts"] },
  },
  {
    name: "registry-absent-by-text",
    why: "a registry that fails (a /v2/ that answers 404, a 5xx) reads as 'key absent': the stack compiles on its NPUs for hours instead of failing",
    edits: [{ file: REGISTRY, search: "    *\"$unknown\"'manifest unknown' | ", replace: "    *404* | *'not found'* | *\"$unknown\"'manifest unknown' | " }],
    tests: { fast: ["test/compile-registry.test.ts"] },
  },
  {
    name: "artifact-replaces-other-key",
    why: "a pulled artifact overwrites another key's bundle: the other key's ranks load a cache compiled for something else",
    edits: [
      { file: CACHE_FILES, search: '      { [ -f "$dest" ] && [ ! -L "$dest" ] && cmp -s "$from/$rel" "$dest"; } ||', replace: "      true ||" },
      { file: CACHE_FILES, search: '    [ -e "$dest" ] && continue\n', replace: '    rm -f "$dest"\n' },
    ],
    tests: { fast: ["test/compile-registry.test.ts"] },
  },
  {
    name: "compile-job-password-in-compile",
    why: "the compile-only container, which runs the model's own code, gets the registry password",
    edits: [
      {
        file: "core/render/kubernetes/compileJob.ts",
        search: "    env: [...roleEnvironment(context), ...Object.entries(compileOnlyEnv(",
        replace: "    env: [...registryEnv.slice(2), ...roleEnvironment(context), ...Object.entries(compileOnlyEnv(",
      },
    ],
    tests: { fast: ["test/compile-ahead.test.ts"] },
  },
  {
    name: "compile-key-misses-keyed-flag",
    why: "a change of --max-num-seqs keeps the compile key: ranks load a cache compiled for another batch size, or recompile unannounced",
    edits: [
      {
        file: "core/plan/compileKey.ts",
        search: '  "--max-log-len": "logging",\n',
        replace: '  "--max-log-len": "logging",\n  "--max-num-seqs": "sabotage: left out of the key",\n',
      },
    ],
    tests: { fast: ["test/cache-compile-key.test.ts"] },
  },
  {
    name: "scaledobject-compile-key-gate-removed",
    why: "while a change compiles, the scaler reads the old pods' load: it adds pods that wait hours for the compile, or removes the compiling one",
    edits: [
      {
        file: "core/monitoring/queries.ts",
        search: "const perReplica = `((${q.load}) or vector(0)) / ${servingReplicas} and on() ${compiledKeyServes}`;",
        replace: "const perReplica = `((${q.load}) or vector(0)) / ${servingReplicas}`;",
      },
    ],
    tests: { fast: ["test/autoscaling.test.ts"] },
  },
  {
    name: "secret-logged-unit-step",
    why: "the unit step echoes the secrets it reads from stdin (the API key, the hub token): they land in Pulumi's log and state",
    edits: [{ file: UNIT_APPLY, search: 'cat >> "$env_new"\n', replace: 'tee -a "$env_new"\n' }],
    tests: { fast: ["test/unit-apply.test.ts"], hosts: ["test/hosts/unit-step-hosts.test.ts"] },
  },
  {
    name: "secret-logged-copy-grant",
    why: "the one-time grant's private key, the step's stdout, is printed in Pulumi's log",
    edits: [
      {
        file: "components/hosts/npuHost.ts",
        search: '      { logging: "none" },\n      { dependsOn: after, additionalSecretOutputs: ["stdout"], customTimeouts: copy.timeouts.allow },',
        replace: '      { logging: "stdoutAndStderr" },\n      { dependsOn: after, additionalSecretOutputs: ["stdout"], customTimeouts: copy.timeouts.allow },',
      },
    ],
    tests: { fast: ["test/secrets.test.ts"] },
  },
  {
    name: "removed-server-not-drained",
    why: "a server removed from the stack is stopped while the EPP may still route to it: the requests it is sent then fail",
    edits: [{ file: "core/render/hosts/scripts/front-door-wait.sh", search: '  [ -n "$1" ] || return 0\n', replace: "  return 0\n" }],
    tests: { hosts: ["test/hosts/front-door-hosts.test.ts"] },
  },
  {
    name: "removed-role-ranks-left-running",
    why: "after a strategy change the old roles' ranks keep their ports and NPUs until Pulumi deletes them last: the new ranks cannot start",
    edits: [{ file: UNIT_APPLY, search: '[ "$mode" = none ] || strays_stop\n', replace: "" }],
    tests: { fast: ["test/unit-apply.test.ts"] },
  },
  // The host scripts' other decisions (issue 26: nothing mutates the bash and Python).
  {
    name: "unit-step-does-not-wait",
    why: "the unit step reports success before the rank serves: the next wave starts while this one is still down",
    edits: [
      { file: UNIT_APPLY, search: 'if wait_serving "$unit" "$label" "$port" "$started"; then\n  phase=served', replace: "if true; then\n  phase=served" },
    ],
    tests: { fast: ["test/unit-apply.test.ts"] },
  },
  {
    name: "rollback-keeps-new-files",
    why: "a change that does not serve is 'rolled back' onto the same broken files",
    edits: [{ file: UNIT_APPLY, search: '    cp -p "$previous_env" "$env_path"\n', replace: "    : no restore of the env file\n" }],
    tests: { fast: ["test/unit-apply.test.ts"] },
  },
  {
    name: "unit-step-lock-ignored",
    why: "two deploys change one unit at once and leave it half-switched",
    edits: [{ file: UNIT_APPLY, search: "flock -n 8 || {", replace: "true || {" }],
    tests: { fast: ["test/unit-apply.test.ts"] },
  },
  {
    name: "cache-miss-not-checked",
    why: "a rank that compiles although its key's cache was placed ahead passes: hours of NPU compile go unnoticed",
    edits: [
      {
        file: "core/render/hosts/scripts/cache-hit.sh",
        search: '[ -n "$compile_marker" ] && [ -f "$compile_marker" ] && expect_cache_hit=yes',
        replace: ": no cache-hit check",
      },
    ],
    tests: { fast: ["test/unit-apply.test.ts"] },
  },
  {
    name: "drain-empties-role",
    why: "the front door drains a role's last listed endpoint: the role has no server until the restart is over",
    edits: [{ file: FRONT_DOOR_AGENT, search: 'if name not in self.listed() or self.others_listed(name) or self.desired["allowEmpty"]:', replace: "if True:" }],
    tests: { fast: ["test/front-door-agent.test.ts"] },
  },
  {
    name: "rejoin-keeps-drain",
    why: "a rank whose step is done stays out of the front door until the switch bound: capacity lost",
    edits: [{ file: FRONT_DOOR_AGENT, search: '            self.end_drain(name, "its unit step is done")\n', replace: "            pass\n" }],
    tests: { fast: ["test/front-door-agent.test.ts"] },
  },
  {
    name: "agent-drain-unchecked",
    why: "a drain file with wrong types or missing keys stops every pass of the endpoints agent: the endpoints file freezes",
    edits: [{ file: FRONT_DOOR_AGENT, search: "            return check_drain(read_json(path))\n", replace: "            return read_json(path)\n" }],
    tests: { fast: ["test/front-door-agent.test.ts"] },
  },
  {
    name: "drain-key-any-host",
    why: "root on any host of the stack can take any other host's ranks out of the front door",
    edits: [{ file: FRONT_DOOR_AGENT, search: '    if host is not None and door.endpoints[name]["host"] != host:', replace: "    if False:" }],
    tests: { fast: ["test/front-door-agent.test.ts"], hosts: ["test/hosts/front-door-keys.test.ts"] },
  },
  {
    name: "sidecar-unguarded",
    why: "any host can reach a decode host's routing sidecar and have it send prefill requests to an address of its choosing",
    edits: [{ file: "core/render/hosts/frontDoor/frontDoor.ts", search: "    { before: [door.firewall, firewall.ruleset] },\n", replace: "    {},\n" }],
    tests: { hosts: ["test/hosts/sidecar-guard-hosts.test.ts"] },
  },
  {
    name: "front-door-passes-prefill-header",
    why: "a client's x-prefiller-host-port reaches the sidecar through the front door whenever the EPP does not disaggregate: a prefill request to any address",
    edits: [{ file: "core/render/hosts/frontDoor/envoy.ts", search: "[DESTINATION_HEADER, PREFILL_HEADER].map(", replace: "[DESTINATION_HEADER].map(" }],
    tests: { fast: ["test/front-door.test.ts"], hosts: ["test/hosts/stand-ins.test.ts"] },
  },
  {
    name: "api-key-left-to-vllm",
    why: "apiKey guards only the paths vLLM guards: /invocations answers anyone through the front door",
    edits: [
      {
        file: "core/render/hosts/frontDoor/envoy.ts",
        search: "  return [...(input.apiKeyConfigPath ? [apiKeyFilter(input.apiKeyConfigPath)] : []), eppOnlyHeaders()];",
        replace: "  return [eppOnlyHeaders()];",
      },
    ],
    tests: { fast: ["test/front-door.test.ts"], hosts: ["test/hosts/front-door-api-key-hosts.test.ts"] },
  },
  {
    name: "forced-command-any-action",
    why: "the unit steps' SSH key runs any front-door command, not only drain and rejoin",
    edits: [{ file: FRONT_DOOR_AGENT, search: "if len(words) != 2 or words[0] not in STEP_COMMANDS:", replace: "if len(words) != 2:" }],
    tests: { fast: ["test/front-door-agent.test.ts"] },
  },
  {
    name: "registry-hit-compiles-anyway",
    why: "a key the registry has is compiled again on the compile host: hours instead of a pull",
    edits: [{ file: COMPILE_FLOW, search: '  [ -n "$remote" ] || return 0\n  registry_pull "$remote"', replace: '  return 0\n  registry_pull "$remote"' }],
    tests: { fast: ["test/compile-registry.test.ts"], hosts: ["test/hosts/compile-registry-hosts.test.ts"] },
  },
  {
    name: "registry-accepts-links",
    why: "a pulled artifact's links, devices or sparse files are taken: a link may point out of the cache, a sparse file fill the disk",
    edits: [{ file: CACHE_FILES, search: "            if not (m.isreg() or m.isdir()) or m.issparse():", replace: "            if False:" }],
    tests: { fast: ["test/compile-registry.test.ts"], hosts: ["test/hosts/compile-registry-hosts.test.ts"] },
  },
  {
    name: "compile-done-without-save",
    why: "a compile is called done before vllm-rbln saved the cache: an empty or partial cache is pushed",
    edits: [{ file: COMPILE_JOB_SCRIPT, search: '      bundle_saved && [ "$status" = 0 ] && break\n', replace: '      [ "$status" = 0 ] && break\n' }],
    tests: { fast: ["test/compile-ahead.test.ts"] },
  },
  {
    name: "compile-host-done-without-save",
    why: "the compile host calls a compile done before vllm-rbln saved the cache: an empty or partial cache is pushed",
    edits: [{ file: COMPILE_KEY_SCRIPT, search: "  if bundle_saved; then\n", replace: "  if true; then\n" }],
    tests: { hosts: ["test/hosts/compile-ranks-hosts.test.ts", "test/hosts/compile-registry-hosts.test.ts"] },
  },
  {
    name: "compile-in-shared-folder",
    why: "the compile-only run writes into the cache every key shares: two compiles on one host mix their files, and another key's save lands in this key's artifact",
    edits: [{ file: COMPILE_KEY_SCRIPT, search: '    --property=BindPaths="$compile_dir:$cache_dir" -- "${words[@]}"', replace: '    -- "${words[@]}"' }],
    tests: { hosts: ["test/hosts/compile-registry-hosts.test.ts"] },
  },
  // Issue 31, config hardening: grants with host names, the compile step's ranks, step timeouts.
  {
    name: "grant-takes-host-names",
    why: "a host given by DNS name behind a front door is accepted: its drain grant holds the name, which sshd never matches, so every drain fails",
    edits: [
      {
        file: "core/config/crossFieldChecks.ts",
        search: '  if (s.platform !== "hosts") return [];\n  const router = routerHostEntries(s.router).length > 0;',
        replace: '  if (s.platform !== "hosts" || s.router.host !== undefined) return [];\n  const router = routerHostEntries(s.router).length > 0;',
      },
    ],
    tests: { fast: ["test/front-door.test.ts", "test/cross-field-checks.test.ts"] },
  },
  {
    name: "compile-first-rank-only",
    why: "the compile host runs decode's first data-parallel rank alone, whose warm-up waits for peers that never come",
    edits: [
      {
        file: "core/render/hosts/compileHost.ts",
        search: '  const bound = role.ranks.map((planned) => bindRank(planned, hostPlaceholders(deployment, placement.host), "hosts"));',
        replace: '  const bound = role.ranks.slice(0, 1).map((planned) => bindRank(planned, hostPlaceholders(deployment, placement.host), "hosts"));',
      },
    ],
    tests: { fast: ["test/compile-ahead.test.ts"], hosts: ["test/hosts/compile-ranks-hosts.test.ts"] },
  },
  {
    name: "unit-delete-cut-short",
    why: "Pulumi cuts a unit step's delete before the rank's stop (--shutdown-timeout + 120 s) ends",
    edits: [
      {
        file: "core/render/hosts/stepTimeouts.ts",
        search: "    remove: [connection(p.host), commands, stop],",
        replace: "    remove: [connection(p.host), commands],",
      },
    ],
    tests: { fast: ["test/step-timeouts.test.ts"] },
  },
  {
    name: "ha-drain-one-router-host",
    why: "with two router hosts a unit step drains only the first: the other's EPP keeps routing to a stopping rank",
    edits: [{ file: FRONT_DOOR_SH, search: '  for i in "${!router_ssh_address[@]}"; do\n', replace: "  for i in 0; do\n" }],
    tests: { fast: ["test/unit-apply.test.ts"] },
  },
  {
    name: "ha-no-ext-proc-retry",
    why: "a stream the stopping EPP refuses is not tried on the peer's: a planned EPP change fails requests",
    edits: [
      {
        file: ENVOY_TS,
        search: 'retry_on: "connect-failure,refused-stream,reset", num_retries: 1',
        replace: 'retry_on: "connect-failure,refused-stream,reset", num_retries: 0',
      },
    ],
    tests: { hosts: ["test/hosts/front-door-ha-hosts.test.ts"] },
  },
  {
    name: "ha-envoy-restart-keeps-address",
    why: "a router host restarts Envoy while it holds the virtual address: new requests are refused until it is back",
    edits: [
      { file: FRONT_DOOR_APPLY, search: '[ -z "$tls_name" ] || [ "${restart[1]}$restart_vrrp" = nono ] || leave_service "${restart[1]}"\n', replace: "true\n" },
    ],
    tests: { hosts: ["test/hosts/front-door-ha-hosts.test.ts"] },
  },
  {
    name: "group-rank-restarts-alone",
    why: "a killed decode rank restarts alone: its peers hang in the group's collectives, and the group never serves again",
    edits: [{ file: "core/render/hosts/rank.ts", search: 'restart: grouped ? "no" : "on-failure",', replace: 'restart: "on-failure",' }],
    tests: { hosts: ["test/hosts/faults-hosts.test.ts"] },
  },
  {
    name: "group-listed-rank-by-rank",
    why: "the front door keeps routing to a failed rank's peers, which answer /health while their requests hang",
    edits: [{ file: FRONT_DOOR_AGENT, search: "            self.write(self.whole_groups([n for n", replace: "            self.write(([n for n" }],
    tests: { fast: ["test/front-door-agent.test.ts"], hosts: ["test/hosts/faults-hosts.test.ts"] },
  },
  {
    name: "group-rejoin-over-drained-rank",
    why: "one rank's rejoin lists its data-parallel group while another rank of it is still drained (or its drain file is cut): requests reach a group that is restarting",
    edits: [
      {
        file: FRONT_DOOR_AGENT,
        search: "all(self.read_drain(m) is None and self.serves(self.endpoints[m]) for m in group)",
        replace: "all(self.serves(self.endpoints[m]) for m in group)",
      },
    ],
    tests: { fast: ["test/front-door-agent.test.ts"] },
  },
  {
    name: "group-across-hosts",
    why: "a desired.json whose group spans hosts lets one host's drain key take another host's endpoints out with its own",
    edits: [{ file: FRONT_DOOR_AGENT, search: ' and group_hosts.setdefault(e["group"], e["host"]) == e["host"])', replace: ")" }],
    tests: { fast: ["test/front-door-agent.test.ts"] },
  },
  {
    name: "group-stopped-before-leaving",
    why: "a failed rank's peers are stopped while the front door still lists them: the requests sent to them meanwhile fail",
    edits: [{ file: "core/render/hosts/scripts/group-restart.sh", search: '  sleep "$leave_s"\n', replace: "  true\n" }],
    tests: { hosts: ["test/hosts/faults-hosts.test.ts"] },
  },
  {
    name: "sidecar-outside-waves",
    why: "a sidecar change restarts every decode host at once, outside the rollout waves",
    edits: [
      {
        file: "components/hosts/npuHost.ts",
        search: "{ dependsOn: [preflight, ...frontDoor.after, ...(args.afterUnits ?? [])], customTimeouts: frontDoor.sidecar.timeouts }",
        replace: "{ dependsOn: [preflight, ...frontDoor.after], customTimeouts: frontDoor.sidecar.timeouts }",
      },
    ],
    tests: { fast: ["test/program.test.ts"], hosts: ["test/hosts/faults-hosts.test.ts"] },
  },
  {
    name: "status-compiling-as-down",
    why: "status calls a rank that compiles for hours DOWN (exit 3), as it did before states: the user restarts a healthy first start",
    edits: [{ file: "core/status/hostRank.ts", search: "  if (ACTIVE.has(unit.active)) return starting(host);\n", replace: "" }],
    tests: { fast: ["test/status-states.test.ts"], hosts: ["test/hosts/status-hosts.test.ts"] },
  },
  {
    name: "status-reader-blind-to-install",
    why: "status calls a host whose install runs DOWN: the host reader does not see the install step's processes",
    edits: [
      {
        file: "core/render/hosts/scripts/status-read.py",
        search: '    return any(a == venv or a.startswith(venv + "/") for a in argv)\n',
        replace: "    return False\n",
      },
    ],
    tests: { hosts: ["test/hosts/status-hosts.test.ts"] },
  },
  {
    name: "progress-unmasked",
    why: "pip's and the hub client's output reaches Pulumi's logs unmasked: a tool that prints the token or the index password leaks it",
    edits: [
      {
        file: "core/render/scripts/progress-run.sh",
        search: '  { progress_mask < "$fifos/out" | tee -a "${progress_log:-/dev/null}"; } &',
        replace: '  { cat < "$fifos/out" | tee -a "${progress_log:-/dev/null}"; } &',
      },
    ],
    tests: { fast: ["test/progress.test.ts"], hosts: ["test/hosts/progress-hosts.test.ts"] },
  },
  {
    name: "progress-load-called-compile",
    why: "a rank that loads its compiled cache is reported as compiling for hours: the user cannot tell a 15-minute load from a 160-minute compile",
    edits: [
      {
        file: "core/render/hosts/scripts/serving.sh",
        search:
          '  if [ -n "${cache_bundle_dir:-}" ] && [ -z "$(find "$cache_bundle_dir" -name mega_cache.bin -type f ! -newermt "@$1" -print -quit 2>/dev/null)" ]; then',
        replace: '  if [ -n "${cache_bundle_dir:-}" ]; then',
      },
    ],
    tests: { hosts: ["test/hosts/progress-hosts.test.ts"] },
  },
  {
    name: "model-route-without-base-model",
    why: "every model's HTTPRoute matches every request: one model's pool takes the other models' requests, which its vLLM refuses",
    edits: [
      {
        file: "core/render/kubernetes/modelRouting.ts",
        search: "  values.httpRoute = { ...values.httpRoute, baseModel: deployment.entry.servedNames[0] };",
        replace: "  values.httpRoute = { ...values.httpRoute };",
      },
    ],
    tests: { fast: ["test/models-kubernetes.test.ts"] },
  },
  {
    name: "served-names-outside-payload-processor-namespace",
    why: "the payload processor sees no model's names: every request gets an empty base-model header and the answers' 404",
    edits: [
      {
        file: "core/render/kubernetes/modelRouting.ts",
        search: "servedNamesConfigMap(plan, m, payload.namespace)",
        replace: "servedNamesConfigMap(plan, m, plan.settings.kubernetes.namespace)",
      },
    ],
    tests: { fast: ["test/models-kubernetes.test.ts"] },
  },
  {
    name: "front-door-roll-untimed",
    why: "a router host's apply step of several router hosts is cut by Pulumi while Envoy still drains its in-flight requests",
    edits: [
      {
        file: "core/render/hosts/stepTimeouts.ts",
        search: "seconds: failover.envoyDrainSeconds + ADMIN_CALLS * 5",
        replace: "seconds: ADMIN_CALLS * 5",
      },
    ],
    tests: { fast: ["test/step-timeouts.test.ts"] },
  },
  {
    name: "tls-read-swallows-api-key",
    why: "with several router hosts and apiKey, reading the TLS lines eats the API key filter's config: the apply step fails, and no router host takes the key",
    edits: [{ file: "core/render/hosts/scripts/front-door-roll.sh", search: '    [ -z "$tls_crt" ] || [ -z "$tls_ca" ] || break\n', replace: "    true\n" }],
    tests: { fast: ["test/front-door-ha.test.ts"] },
  },
  {
    name: "k8s-weights-token-unmasked",
    why: "the Kubernetes weights Job prints the HF token in kubectl logs whenever the hub client prints it",
    edits: [{ file: "core/render/kubernetes/scripts/fetch-weights.sh", search: "progress_secrets=${HF_TOKEN:-}\n", replace: "progress_secrets=\n" }],
    tests: { fast: ["test/cache-weights-job.test.ts"] },
  },
  {
    name: "status-reads-unbounded",
    why: "status on a large cluster opens one ssh per host and one kubectl logs per pod at once: a bastion's MaxStartups refuses most of them, the API server throttles",
    edits: [{ file: "cli/boundedRun.ts", search: "    if (running < limit) running++;", replace: "    if (running < Infinity) running++;" }],
    tests: { fast: ["test/bounded-run.test.ts"] },
  },
  {
    name: "status-models-one-instance",
    why: "status of a stack of several models reads every model's pods and units under the stack's own instance: it finds none, or another model's, and calls a serving model down",
    edits: [{ file: "cli/status.ts", search: "const instance = modelInstance(DEFAULT_INSTANCE, deployment);", replace: "const instance = DEFAULT_INSTANCE;" }],
    tests: { fast: ["test/status-kubernetes.test.ts"] },
  },
  {
    name: "models-front-door-untimed",
    why: "the router host's apply step of a stack of many models is timed for one model's restarts: Pulumi cuts it while it restarts the later models' EPPs and agents",
    edits: [
      {
        file: "core/render/hosts/frontDoor/modelsFrontDoor.ts",
        search: "frontDoorApplyWaits(host, failover ? failoverWaits(stack) : null, {\n          models: doors.length,",
        replace: "frontDoorApplyWaits(host, failover ? failoverWaits(stack) : null, {\n          models: 1,",
      },
    ],
    tests: { fast: ["test/step-timeouts.test.ts"] },
  },
  {
    name: "models-envoy-restarts-on-model-change",
    why: "on hosts, adding or removing a model restarts the router host's Envoy: every other model's requests in flight there fail, and new ones are refused until it listens again",
    edits: [
      {
        file: "core/render/hosts/scripts/front-door-models-apply.sh",
        search: "envoy_restarts=${restart[proxy]}\n",
        replace: "envoy_restarts=yes\n",
      },
    ],
    tests: { hosts: ["test/hosts/front-door-models-hosts.test.ts"] },
  },
  {
    name: "models-bootstrap-names-models",
    why: "on hosts, Envoy's bootstrap of a stack of models carries its models: adding or removing one changes it, and the apply step restarts Envoy under every other model's requests",
    edits: [
      {
        file: ENVOY_TS,
        search: "    bootstrap: stringify(bootstrap, { lineWidth: 0 }),\n",
        replace:
          '    bootstrap: stringify({ ...bootstrap, node: { id: input.models.map((m) => m.name).join("+"), cluster: "rbln-serving" } }, { lineWidth: 0 }),\n',
      },
    ],
    tests: { fast: ["test/models-hosts-routing.test.ts"] },
  },
  {
    name: "models-removed-cluster-before-routes",
    why: "on hosts, a model taken out loses its EPP's cluster while its routes still send requests there: its requests in flight and new ones fail with 500 instead of ending and getting the 404 JSON",
    edits: [
      {
        file: "core/render/hosts/scripts/front-door-models-apply.sh",
        search: '  if [ -n "$dropped" ]; then\n',
        replace: "  if false; then\n",
      },
    ],
    tests: { hosts: ["test/hosts/front-door-models-hosts.test.ts"] },
    awaiting:
      "a request of the removed model sent between its cluster's removal and its routes' (the test's streams in flight end either way: the EPP's own stop lets them finish, as v0.10.0's gracefulStop does), or a stream longer than the EPP's stop time",
  },
  {
    name: "models-peer-routes-by-port",
    why: "with several router hosts, a model's stream to a peer names no model the peer routes by: when one router host's EPP of a model dies, that model's requests fail instead of going to the peer's EPP of that model",
    edits: [
      {
        file: "core/render/hosts/frontDoor/modelRoutes.ts",
        search: "envoy_grpc: { cluster_name: model.eppCluster, authority: model.eppCluster }",
        replace: "envoy_grpc: { cluster_name: model.eppCluster, authority: `localhost:${model.eppGrpcPort}` }",
      },
    ],
    tests: { fast: ["test/models-hosts.test.ts"], hosts: ["test/hosts/stand-ins.test.ts"] },
  },
  {
    name: "status-models-bound-each",
    why: "status of a stack of several models reads them at once with a bound per model: N models open N times 8 ssh or kubectl clients, which a bastion's MaxStartups refuses",
    edits: [
      {
        file: "cli/status.ts",
        search: "(await readModelStatus(source, options, interval, processes))",
        replace: "(await readModelStatus(source, options, interval, bound(PROCESSES_AT_ONCE)))",
      },
    ],
    tests: { fast: ["test/bounded-run.test.ts"] },
  },
  {
    name: "models-epp-ports-unclaimed",
    why: "a stack of models on hosts claims only the first model's EPP ports on the router host: a port there that a later model's EPP takes passes the plan, and that EPP cannot bind at deploy",
    edits: [
      {
        file: "core/plan/ports.ts",
        search: "for (const model of models) claimModelPorts(claims, model, eppModels);",
        replace: "for (const model of models) claimModelPorts(claims, model, [null]);",
      },
    ],
    tests: { fast: ["test/models-hosts.test.ts"] },
  },
  {
    name: "models-ha-keepalived-never-started",
    why: "a stack of models behind several router hosts: no router host takes the virtual address, and clients reach no front door",
    edits: [
      {
        file: "core/render/hosts/scripts/front-door-models-apply.sh",
        search: '[ -z "$keepalived_unit_name" ] || start_vrrp "$restart_vrrp"\n',
        replace: "",
      },
    ],
    tests: { hosts: ["test/hosts/front-door-models-ha-hosts.test.ts"] },
  },
  {
    name: "models-epp-ports-by-place",
    why: "on hosts, a model's EPP ports follow its place in models: taking out a model restarts the EPP of every model after it, and their requests in flight fail",
    edits: [
      {
        file: "core/plan/ports.ts",
        search: '    let slot = Number.parseInt(createHash("sha256").update(name).digest("hex").slice(0, 8), 16) % MODEL_EPP_SLOTS;\n',
        replace: "    let slot = taken.size;\n    void createHash;\n",
      },
    ],
    tests: { fast: ["test/models-hosts.test.ts"] },
  },
];
