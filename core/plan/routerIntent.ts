import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { ConfigError } from "../errors";
import { splitShellWords } from "../shell";
import { note, type PlanMessage } from "./messages";
import type { RecipeRouterBlock, RecipeRouterValues as RecipeRouterValuesType, RolePlan, RouterIntent } from "./types";

/**
 * The recipe's router block is a shell transcript: a `router-values.yaml` heredoc whose keys
 * (endpoint_picker, inference_pool, ...) are not keys of the llm-d-router-gateway chart, and a
 * `helm install`. The resolver reads the intent from it once; the plan carries it.
 */

export const RecipeRouterValues = z.strictObject({
  endpoint_picker: z.strictObject({
    image: z.string().regex(/^[^:\s]+\/[^:/\s]+:[^:\s]+$/, "an image like registry/repository:tag"),
    ext_proc_port: z.number().int().positive(),
    plugins: z.array(z.looseObject({ type: z.string(), name: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() })).min(1),
    scheduling_profiles: z
      .array(z.strictObject({ name: z.string(), plugins: z.array(z.strictObject({ ref: z.string(), weight: z.number().optional() })).min(1) }))
      .min(1),
  }),
  inference_pool: z.strictObject({
    failure_mode: z.enum(["FailOpen", "FailClose"]),
    match_labels: z.record(z.string(), z.string()),
    target_ports: z.array(z.number().int().min(1).max(65535)).min(1).max(8),
  }),
}) satisfies z.ZodType<RecipeRouterValuesType>;

/** Reads the release, chart, version and values out of the recipe's router block. */
export function readRouterIntent(router: RecipeRouterBlock): RouterIntent {
  const valuesStep = router.nodes.find((n) => /<<'?EOF'?\n/.test(n.cmd));
  const helmStep = router.nodes.find((n) => /^helm\s+(install|upgrade)\b/.test(n.cmd));
  if (!valuesStep || !helmStep) throw new ConfigError("recipe router", "needs a values heredoc step and a helm install step");
  const heredoc = /<<'?EOF'?\n([\s\S]*?)\nEOF\s*$/.exec(valuesStep.cmd);
  const parsed = RecipeRouterValues.safeParse(parseYaml(heredoc?.[1] ?? ""));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError("recipe router values", `${issue.path.join(".")}: ${issue.message}`);
  }
  // `\` + newline continues a shell line.
  const words = splitShellWords(helmStep.cmd.replace(/\\\n/g, " "));
  const positional = words.filter((w, i) => !w.startsWith("-") && !words[i - 1]?.startsWith("--"));
  const version = words[words.indexOf("--version") + 1];
  const [, , release, chart] = positional;
  if (!release || !chart || !version || !words.includes("--version"))
    throw new ConfigError("recipe router", `cannot read release, chart and --version from ${JSON.stringify(helmStep.cmd)}`);
  return { release, chart, version, values: parsed.data };
}

/**
 * Where the recipe's own router settings do nothing, so people are not misled by them. Notes: the
 * stack cannot change the recipe's picker config, and nothing is lost by them.
 */
export function routerNotes(intent: RouterIntent, plan: { roles: readonly RolePlan[] }): PlanMessage[] {
  const notes: PlanMessage[] = [];
  const plugins = intent.values.endpoint_picker.plugins;
  const approx = plugins.find((p) => p.type === "approx-prefix-cache-producer");
  const publishers = plan.roles.filter((r) => r.ranks.some((k) => k.flags.some((f) => f.name === "--kv-events-config"))).map((r) => r.role);
  if (approx && publishers.length > 0 && !plugins.some((p) => p.type === "precise-prefix-cache-producer")) {
    notes.push(
      note(
        `router: the recipe's ranks of ${publishers.join(", ")} publish KV events (--kv-events-config) that its approx-prefix-cache-producer does not read (only precise-prefix-cache-producer does), so the events go unread`,
      ),
    );
  }
  if (approx?.parameters && "lruCapacityPerServer" in approx.parameters && approx.parameters.autoTune !== false) {
    notes.push(
      note(
        `router: the recipe's approx-prefix-cache-producer lruCapacityPerServer: ${String(approx.parameters.lruCapacityPerServer)} is ignored while autoTune is on (the default); it applies only with autoTune: false`,
      ),
    );
  }
  const cachingOff = plan.roles
    .filter((r) => publishers.includes(r.role) && r.ranks.some((k) => k.flags.some((f) => f.name === "--no-enable-prefix-caching")))
    .map((r) => r.role);
  if (cachingOff.length > 0) {
    notes.push(
      note(`vllm: ${cachingOff.join(", ")} publish KV cache events with prefix caching off (--no-enable-prefix-caching), so no block events are produced`),
    );
  }
  return notes;
}
