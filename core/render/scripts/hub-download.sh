# shellcheck shell=bash
# The download of one model from the hub, shared by the hosts' weights step and the Kubernetes
# weights Job: before it fetches, it writes the size the hub lists (for the progress lines' bytes of
# total, ETA), then records the commit snapshot_download resolved (its snapshot folder's name) in
# the model's marker, by rename. Runs as whoever runs it, so the files are theirs.
# Usage: python3 -c "$download_py" HOST REPO REVISION MARKER TOTAL_FILE
# shellcheck disable=SC2034 # read by the script that sources this
download_py='import os, sys
from huggingface_hub import snapshot_download
host, repo, revision, marker, total_file = sys.argv[1:6]
at = " at " + revision if revision else ""
print("weights %s: downloading %s%s into %s" % (host, repo, at, os.environ["HF_HOME"]), flush=True)
# The size of what comes, for the progress lines: the sum of the files the hub lists at the revision.
try:
    from huggingface_hub import HfApi
    info = HfApi().model_info(repo, revision=revision or None, files_metadata=True)
    with open(total_file, "w") as f:
        f.write("%d\n" % sum(s.size or 0 for s in info.siblings or []))
except Exception as error:
    print("weights %s: the size of %s is unknown (%s); progress shows bytes only" % (host, repo, type(error).__name__), flush=True)
commit = os.path.basename(snapshot_download(repo_id=repo, revision=revision or None))
os.makedirs(os.path.dirname(marker), exist_ok=True)
with open(marker + ".tmp", "w") as f:
    f.write(commit + "\n")
os.replace(marker + ".tmp", marker)'
