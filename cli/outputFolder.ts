import * as fs from "node:fs";
import * as path from "node:path";
import { ConfigError } from "../core/errors";

/** The list of files `render` wrote into a folder: the next render replaces exactly these. */
export const RENDER_MANIFEST = ".rbln-serving-render";

/** A file's kind without following it: a link is a link, not what it points at. */
function kindAt(file: string): "missing" | "directory" | "file" | "link" | "other" {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "missing";
    throw error;
  }
  return stat.isSymbolicLink() ? "link" : stat.isDirectory() ? "directory" : stat.isFile() ? "file" : "other";
}

/**
 * `relative` under the real folder `root`, checked on the real file system: every folder on the
 * way is a folder (never a link, which would lead outside), and the file itself is a plain file or
 * missing. So nothing under `--out` is ever written, replaced or removed through a link.
 */
function inside(root: string, relative: string, shown: string): string {
  const parts = relative.split("/");
  if (path.isAbsolute(relative) || parts.some((p) => p === "" || p === "." || p === ".."))
    throw new ConfigError(
      "--out",
      `"${shown}" lists ${JSON.stringify(relative)}, which is not a path inside it; remove ${RENDER_MANIFEST} and render into an empty folder`,
    );
  let at = root;
  for (const [i, part] of parts.entries()) {
    at = path.join(at, part);
    const kind = kindAt(at);
    const last = i === parts.length - 1;
    if (kind === "missing") return path.join(at, ...parts.slice(i + 1));
    if (kind === "link")
      throw new ConfigError("--out", `"${path.join(shown, ...parts.slice(0, i + 1))}" is a symbolic link; render writes nothing through links: remove it`);
    if (!last && kind !== "directory") throw new ConfigError("--out", `"${path.join(shown, ...parts.slice(0, i + 1))}" is not a folder; remove it`);
    if (last && kind !== "file") throw new ConfigError("--out", `"${path.join(shown, relative)}" is not a plain file; remove it`);
  }
  return at;
}

/**
 * Writes `files` (by path under the folder) into `out`: a new or empty folder, or one an earlier
 * render wrote, whose listed files go first, so no host of another stack's render stays behind.
 * Every path is checked on the real file system before anything changes; files are created new
 * (never opened through a link that appeared meanwhile).
 */
export function writeRenderFolder(out: string, files: Readonly<Record<string, string>>): void {
  if (out.trim() === "") throw new ConfigError("--out", "empty; give a folder such as --out rendered/");
  const outKind = kindAt(out);
  if (outKind !== "missing" && !fs.statSync(out).isDirectory())
    throw new ConfigError("--out", `"${out}" is a file; give a folder (new, empty, or written by an earlier render)`);
  fs.mkdirSync(out, { recursive: true });
  // The folder itself may be reached through a link the user made; what is under it may not.
  const root = fs.realpathSync(out);
  const manifest = inside(root, RENDER_MANIFEST, out);
  const earlier = kindAt(manifest) === "file" ? fs.readFileSync(manifest, "utf8").split("\n").filter(Boolean) : [];
  if (earlier.length === 0 && fs.readdirSync(root).some((name) => name !== RENDER_MANIFEST))
    throw new ConfigError("--out", `"${out}" holds files render did not write; give a new or empty folder`);
  const stale = earlier.map((relative) => inside(root, relative, out));
  const fresh = Object.keys(files).map((relative) => inside(root, relative, out));
  for (const file of [...stale, manifest]) fs.rmSync(file, { force: true });
  for (const file of stale)
    for (let dir = path.dirname(file); dir !== root && kindAt(dir) === "directory" && fs.readdirSync(dir).length === 0; dir = path.dirname(dir))
      fs.rmdirSync(dir);
  const noFollow = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;
  Object.entries(files).forEach(([relative, content], i) => {
    const target = fresh[i]!;
    for (let dir = path.dirname(target), pending: string[] = []; ; dir = path.dirname(dir)) {
      if (kindAt(dir) === "directory") {
        for (const missing of pending.reverse()) fs.mkdirSync(missing);
        break;
      }
      pending.push(dir);
    }
    const fd = fs.openSync(target, noFollow, relative.endsWith(".sh") ? 0o755 : 0o644);
    try {
      fs.writeFileSync(fd, content);
    } finally {
      fs.closeSync(fd);
    }
  });
  fs.writeFileSync(manifest, `${Object.keys(files).join("\n")}\n`, { flag: "wx" });
}
