#!/usr/bin/env bash
# The one-shot download of every model a plan needs into the shared weights volume (HF_HOME), each
# at its pinned commit or, unpinned, at the hub's current commit, which it records in the model's
# completion marker, written only after its download finished. A model whose marker counts (it
# exists and, for a pinned revision, holds that commit) is skipped.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
models=(MiniMaxAI/MiniMax-M2.7)
revisions=('')
markers=(/var/lib/rbln-serving/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7)
# --- end of settings ---

: "${HF_HOME:?HF_HOME names the weights volume}"
have() {
  [ -f "${markers[$1]}" ] && { [ -z "${revisions[$1]}" ] || [ "$(cat "${markers[$1]}")" = "${revisions[$1]}" ]; }
}
for i in "${!models[@]}"; do
  if have "$i"; then
    echo "weights: ${models[$i]} already complete ($(cat "${markers[$i]}"))"
    continue
  fi
  echo "weights: downloading ${models[$i]} ${revisions[$i]:-at the hub current commit} into $HF_HOME"
  # snapshot_download returns .../snapshots/<commit>: the commit this download is pinned to.
  commit=$(HF_HUB_OFFLINE=0 python3 -c 'import os, sys
from huggingface_hub import snapshot_download
path = snapshot_download(repo_id=sys.argv[1], revision=sys.argv[2] or None)
print(os.path.basename(path))' "${models[$i]}" "${revisions[$i]}")
  mkdir -p "$(dirname "${markers[$i]}")"
  printf '%s\n' "$commit" > "${markers[$i]}.partial"
  mv -f "${markers[$i]}.partial" "${markers[$i]}"
  echo "weights: ${models[$i]} complete at commit $commit"
done
