#!/usr/bin/env bash
# The one-shot download of every model a plan needs into the shared weights volume (HF_HOME), each
# at its pinned commit or, unpinned, at the hub's current commit, which it records in the model's
# completion marker, written only after its download finished. A model whose marker counts (it
# exists and, for a pinned revision, holds that commit) is skipped. Every progress_s seconds it
# prints a progress line (docs/progress.md): the pod's name as host, bytes done of the size the hub
# lists, rate and ETA, against the Job's activeDeadlineSeconds; HF_TOKEN (from the stack's Secret)
# is masked in all the download prints.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
models=(MiniMaxAI/MiniMax-M2.7)
revisions=('')
markers=(/var/lib/rbln-serving/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7)
budget_s=28800
progress_s=30
# --- end of settings ---

: "${HF_HOME:?HF_HOME names the weights volume}"
# shellcheck source=../../scripts/progress-run.sh
. ../../scripts/progress-run.sh
# shellcheck source=../../scripts/hub-download.sh
. ../../scripts/hub-download.sh
# The pod's name: kubectl logs job/<name> shows it on each line, as a host's name on the hosts.
host_name=${HOSTNAME:-weights}
progress_secrets=${HF_TOKEN:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The progress lines say how far it is; the hub client's bars would only fill the log.
export HF_HUB_DISABLE_PROGRESS_BARS=1

have() {
  [ -f "${markers[$1]}" ] && { [ -z "${revisions[$1]}" ] || [ "$(cat "${markers[$1]}")" = "${revisions[$1]}" ]; }
}
# Bytes of model i on the volume (its blobs, partial ones included) of its size on the hub, with the
# rate since the last line and the ETA; the size is what the download wrote to $work/total-i.
download_amount() {
  local bytes total previous=-1
  bytes=$(progress_file_bytes "$HF_HOME/hub/models--${models[$i]//\//--}")
  total=$(cat "$work/total-$i" 2>/dev/null || true)
  [ ! -f "$work/done-$i" ] || previous=$(cat "$work/done-$i")
  echo "${bytes:-0}" > "$work/done-$i"
  progress_transfer "${bytes:-0}" "${total:-0}" "$previous" "$progress_s"
}
for i in "${!models[@]}"; do
  if have "$i"; then
    echo "weights: ${models[$i]} already complete ($(cat "${markers[$i]}"))"
    continue
  fi
  # Each line names its model, as the hosts' weights step does: one Job downloads them all.
  HF_HUB_OFFLINE=0 progress_run "$host_name" "${models[$i]}" download "$budget_s" download_amount -- \
    python3 -c "$download_py" "$host_name" "${models[$i]}" "${revisions[$i]}" "${markers[$i]}" "$work/total-$i"
  echo "weights: ${models[$i]} complete at commit $(cat "${markers[$i]}")"
done
