/**
 * Completion markers: a file written by rename once what it stands for is complete, so a reader
 * never takes a half-finished download or compile for a finished one.
 */

/**
 * A model's weights marker under HF_HOME, on hosts and on the weights volume alike. It holds the
 * commit that was downloaded; a pinned revision counts only when the marker holds that commit.
 */
export function weightsMarker(hfHome: string, model: string): string {
  return `${hfHome}/rbln-serving-complete/${model.replace(/\//g, "--")}`;
}

/** Where huggingface_hub keeps a model under `$HF_HOME/hub`. */
export function modelCacheDir(model: string): string {
  return `models--${model.replace(/\//g, "--")}`;
}
