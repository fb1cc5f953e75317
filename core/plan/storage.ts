import { ConfigError } from "../errors";
import type { StackSettings } from "../config/stackConfig";
import { DEFAULT_WEIGHTS_STORAGE_GIB } from "../config/defaults";

/**
 * Published weight sizes (GB, 10^9 bytes) of the models the recipes serve: the recipe format has no
 * size field, so this table is the one place it is kept. A model missing here is not checked.
 */
export const MODEL_WEIGHTS_GB: Readonly<Record<string, number>> = { "MiniMaxAI/MiniMax-M2.7": 230 };

/** Room above the weights: the Hugging Face cache's partial downloads and metadata, and a release that grows. */
export const WEIGHTS_MARGIN = 0.25;

const GIB = 2 ** 30;
const QUANTITY_GIB: Readonly<Record<string, number>> = { Ki: 1 / 2 ** 20, Mi: 1 / 2 ** 10, Gi: 1, Ti: 2 ** 10 };

/** The GiB a model's weights need with the margin, or undefined for a model of unknown size. */
export function weightsStorageGib(model: string): number | undefined {
  const gb = MODEL_WEIGHTS_GB[model];
  return gb === undefined ? undefined : Math.ceil((gb * 1e9 * (1 + WEIGHTS_MARGIN)) / GIB);
}

/** `500Gi` → 500. */
export function quantityGib(quantity: string): number {
  const [, amount, unit] = /^([0-9]+)(Ki|Mi|Gi|Ti)$/.exec(quantity)!;
  return Number(amount) * QUANTITY_GIB[unit!]!;
}

/** Refuses storage the chosen platform gives the weights that cannot hold them. */
export function checkWeightsStorage(settings: StackSettings): void {
  const need = weightsStorageGib(settings.model);
  if (need === undefined) return;
  const why = `the weights of ${settings.model} are about ${MODEL_WEIGHTS_GB[settings.model]} GB; with a ${WEIGHTS_MARGIN * 100}% margin they need ${need} GiB`;
  if (settings.platform === "hosts" && settings.minFreeDiskGb < need) {
    throw new ConfigError("minFreeDiskGb", `${settings.minFreeDiskGb} is too small: ${why} (default ${DEFAULT_WEIGHTS_STORAGE_GIB})`);
  }
  if (settings.platform === "kubernetes" && quantityGib(settings.kubernetes.weightsVolumeSize) < need) {
    throw new ConfigError(
      "kubernetes.weightsVolumeSize",
      `"${settings.kubernetes.weightsVolumeSize}" is too small: ${why} (default ${DEFAULT_WEIGHTS_STORAGE_GIB}Gi)`,
    );
  }
}
