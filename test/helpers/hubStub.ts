/**
 * A stub of huggingface_hub's `snapshot_download`, served from a loopback package index: it writes
 * a hub-style cache under $HF_HOME/hub (blobs named by sha256, a snapshot of links, refs/main) at
 * `revision` or `commit`, appends the repo id to `log` for each download, and takes `seconds`. With
 * `chunks`, each file is written in that many parts over those seconds, as `<blob>.incomplete`
 * first (as huggingface_hub does); `HfApi().model_info(..., files_metadata=True)` lists the files'
 * sizes, as the hub's API answers. With `leak`, it prints the token it was given, as written and
 * URL-encoded: a tool that is careless with it, which the steps' mask must catch.
 */
export function hubStubSource(options: { commit: string; log: string; seconds?: number; chunks?: number; leak?: boolean }): string {
  const chunks = options.chunks ?? 1;
  return [
    "import hashlib, os, pathlib, time, types, urllib.parse",
    "def files(repo_id):",
    "    return (('model.safetensors', b'weights of ' + repo_id.encode() * 1000), ('config.json', b'{}'))",
    "class HfApi:",
    "    def model_info(self, repo_id, revision=None, files_metadata=False, **kwargs):",
    "        return types.SimpleNamespace(siblings=[types.SimpleNamespace(rfilename=n, size=len(d) if files_metadata else None) for n, d in files(repo_id)])",
    "def snapshot_download(repo_id, revision=None, **kwargs):",
    ...(options.leak
      ? [
          "    token = os.environ.get('HF_TOKEN', '')",
          "    print('hub stub: token ' + token + ' in a URL: https://hub.example/x?t=' + urllib.parse.quote(token, safe=''), flush=True)",
        ]
      : []),
    `    time.sleep(${options.seconds ?? 0} if ${chunks} == 1 else 0)`,
    "    repo = pathlib.Path(os.environ['HF_HOME']) / 'hub' / ('models--' + repo_id.replace('/', '--'))",
    `    commit = revision or '${options.commit}'`,
    "    snapshot = repo / 'snapshots' / commit",
    "    for d in (repo / 'blobs', repo / 'refs', snapshot): d.mkdir(parents=True, exist_ok=True)",
    "    for name, data in files(repo_id):",
    "        digest = hashlib.sha256(data).hexdigest() if name.endswith('.safetensors') else hashlib.sha1(data).hexdigest()",
    "        partial = repo / 'blobs' / (digest + '.incomplete')",
    `        step = len(data) // ${chunks} + 1`,
    "        with open(partial, 'wb') as f:",
    "            for at in range(0, len(data), step):",
    "                f.write(data[at:at + step]); f.flush()",
    `                if ${chunks} > 1: time.sleep(${options.seconds ?? 0} / ${chunks})`,
    "        partial.rename(repo / 'blobs' / digest)",
    "        link = snapshot / name",
    "        if not link.is_symlink(): link.symlink_to('../../blobs/' + digest)",
    "    (repo / 'refs' / 'main').write_text(commit)",
    `    with open('${options.log}', 'a') as log: log.write(repo_id + '\\n')`,
    "    return str(snapshot)",
    "",
  ].join("\n");
}
