import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

// Checks of rendered artifacts by real tools: what systemd makes of our quoting, systemd-analyze verify, shellcheck.

/**
 * Reads back what real systemd made of our quoting. systemd prints words in its own format
 * (shell_maybe_quote: double quotes, backslash before `"\`$`, C escapes for control characters);
 * this undoes that format and nothing else.
 */
export function splitSystemdPrinted(line: string): string[] {
  const escapes: Record<string, string> = { a: "\x07", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v" };
  const words: string[] = [];
  let i = 0;
  while (i < line.length) {
    if (line[i] === " ") {
      i++;
      continue;
    }
    let word = "";
    if (line[i] === '"') {
      i++;
      while (line[i] !== '"') {
        if (line[i] === "\\") {
          const next = line[i + 1]!;
          if (next === "x") {
            word += String.fromCharCode(parseInt(line.slice(i + 2, i + 4), 16));
            i += 4;
          } else {
            word += escapes[next] ?? next;
            i += 2;
          }
        } else word += line[i++];
      }
      i++;
    } else {
      while (i < line.length && line[i] !== " ") word += line[i++];
    }
    words.push(word);
  }
  return words;
}

/**
 * What systemd does to a loaded ExecStart word when it runs it: `$$` becomes `$`, and `$NAME` or
 * `${NAME}` would become a variable's value, which no word of ours may ask for.
 */
function substituteAtExec(word: string): string {
  return word.replace(/\$(\$|\{|[A-Za-z_])?/g, (match, next: string | undefined) => {
    if (next === "$") return "$";
    if (next !== undefined) throw new Error(`systemd would expand a variable in ${JSON.stringify(word)}`);
    return match;
  });
}

/** The argv systemd runs for a unit's ExecStart: `systemd --test` (as nobody) dumps the parsed unit. */
export function systemdExecArgv(unitText: string): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "units-"));
  fs.chmodSync(dir, 0o755);
  const unit = "rbln-quoting-probe.service";
  fs.writeFileSync(path.join(dir, unit), unitText, { mode: 0o644 });
  const dump = spawnSync(
    "runuser",
    ["-u", "nobody", "--", "env", `SYSTEMD_UNIT_PATH=${dir}:`, "/lib/systemd/systemd", "--test", "--system", `--unit=${unit}`, "--no-pager"],
    {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  fs.rmSync(dir, { recursive: true, force: true });
  const section = dump.stdout.split(`-> Unit ${unit}:`)[1];
  if (!section) throw new Error(`systemd --test printed no ${unit}: ${dump.stderr}`);
  // The dump lists each Exec*= setting under its own header; take ExecStart's, not ExecStartPre's.
  const line = /^\t+-> ExecStart:\n\t+Command Line: (.*)$/m.exec(section)![1]!;
  return splitSystemdPrinted(line).map(substituteAtExec);
}

/** What systemd reads from an env file: its environment.d generator uses the same env-file parser. */
export function systemdEnvFile(envText: string): Record<string, string> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "envd-"));
  fs.mkdirSync(path.join(home, "environment.d"));
  fs.writeFileSync(path.join(home, "environment.d", "50-probe.conf"), envText);
  const result = spawnSync("/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator", [], {
    encoding: "utf8",
    env: { PATH: process.env.PATH, XDG_CONFIG_HOME: home },
  });
  fs.rmSync(home, { recursive: true, force: true });
  const parsed: Record<string, string> = {};
  for (const line of result.stdout.split("\n")) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (match) parsed[match[1]!] = splitSystemdPrinted(match[2]!).join(" ");
  }
  return parsed;
}

/**
 * `systemd-analyze verify` of unit files, each written under its own base name in a folder of its
 * own: its complaints, one a line, but those that `expected` matches (a binary this machine lacks).
 */
export function unitComplaints(units: readonly (readonly [string, string])[], expected: RegExp): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "verify-"));
  try {
    const names = units.map(([name, text]) => {
      fs.writeFileSync(path.join(dir, path.basename(name)), text);
      return path.basename(name);
    });
    const result = spawnSync("systemd-analyze", ["verify", "--man=no", ...names], { cwd: dir, encoding: "utf8" });
    return (result.stdout + result.stderr).split("\n").filter((line) => line.trim() && !expected.test(line));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** shellcheck (style and up) of rendered scripts, each under its path with `/` made `_`, in a folder of its own: its findings, "" when none. */
export function shellcheckFindings(scripts: readonly (readonly [string, string])[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "shellcheck-"));
  try {
    const names = scripts.map(([name, text]) => {
      fs.writeFileSync(path.join(dir, name.replace(/\//g, "_")), text);
      return name.replace(/\//g, "_");
    });
    const check = spawnSync("shellcheck", ["--severity=style", "--shell=bash", ...names], { cwd: dir, encoding: "utf8" });
    return check.status === 0 ? "" : check.stdout + check.stderr || `shellcheck exited ${check.status}`;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
