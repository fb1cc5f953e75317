import { RecipeCatalog } from "../core/recipe/catalog";
import { EXAMPLE_HOST_KEY } from "../test/helpers/hostKeys";

/** The recipe, secrets and configs the bench's parts share. */
export const recipe = RecipeCatalog.load().get("MiniMaxAI/MiniMax-M2.7");
export const secrets = { sshPrivateKey: "bench-key", pipPassword: "bench-pw", hfToken: "bench-token" };

export function configFor(platform: "hosts" | "kubernetes", replicas: number): Record<string, unknown> {
  if (platform === "hosts") {
    return {
      strategy: "aggregated-data-expert-parallel",
      target: "Throughput",
      platform,
      replicas,
      // Addresses are only data here: the mock runtime connects nowhere.
      hosts: Array.from({ length: replicas }, (_, i) => ({ name: `npu-${i}`, address: `10.${(i >> 8) & 255}.${i & 255}.10`, hostKey: EXAMPLE_HOST_KEY })),
      pip: { username: "bench" },
    };
  }
  return {
    strategy: "prefill-decode-disaggregated",
    target: "Throughput",
    platform,
    prefillReplicas: replicas,
    decodeReplicas: replicas,
    kubernetes: { image: "registry.example.com/vllm-rbln:0.12.0", gateway: { name: "gw" } },
  };
}
