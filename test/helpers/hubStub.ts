/**
 * A stub of huggingface_hub's `snapshot_download`, served from a loopback package index: it writes
 * a hub-style cache under $HF_HOME/hub (blobs named by sha256, a snapshot of links, refs/main) at
 * `revision` or `commit`, appends the repo id to `log` for each download, and takes `seconds`.
 */
export function hubStubSource(options: { commit: string; log: string; seconds?: number }): string {
  return [
    "import hashlib, os, pathlib, time",
    "def snapshot_download(repo_id, revision=None, **kwargs):",
    `    time.sleep(${options.seconds ?? 0})`,
    "    repo = pathlib.Path(os.environ['HF_HOME']) / 'hub' / ('models--' + repo_id.replace('/', '--'))",
    `    commit = revision or '${options.commit}'`,
    "    snapshot = repo / 'snapshots' / commit",
    "    for d in (repo / 'blobs', repo / 'refs', snapshot): d.mkdir(parents=True, exist_ok=True)",
    "    for name, data in (('model.safetensors', b'weights of ' + repo_id.encode() * 1000), ('config.json', b'{}')):",
    "        digest = hashlib.sha256(data).hexdigest() if name.endswith('.safetensors') else hashlib.sha1(data).hexdigest()",
    "        (repo / 'blobs' / digest).write_bytes(data)",
    "        link = snapshot / name",
    "        if not link.is_symlink(): link.symlink_to('../../blobs/' + digest)",
    "    (repo / 'refs' / 'main').write_text(commit)",
    `    with open('${options.log}', 'a') as log: log.write(repo_id + '\\n')`,
    "    return str(snapshot)",
    "",
  ].join("\n");
}
