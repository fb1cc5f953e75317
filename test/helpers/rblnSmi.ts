import * as fs from "node:fs";
import * as path from "node:path";

/**
 * The rbln-smi outputs in test/fixtures/rbln-smi/ are made here for 4 × RBLN-CR13 (140 GiB each,
 * KMD 3.5.1 as on docs.rbln.ai v0.12.0), in the shapes public code reads `rbln-smi -j`/`rbln-stat
 * --json` in: `busy.json` and `idle.json` with the field names and JSON types of a captured
 * `rbln-stat` 3.0.0 output (lablup/all-smi `src/device/readers/rebellions.rs` and
 * `tests/fixtures/rbln-stat-loaded.json`: top-level `contexts` of `{ctx_id, npu (number), process,
 * pid (string), memalloc, ...}`); `sdk1-busy.json` with what that reader also accepts from older
 * SDKs (`npu` a string, `cmd` for `process`); `no-contexts.json` with the fields
 * RBLN-SW/rblnlib-go `pkg/rblnsmi/rblnsmi.go` declares (no contexts at all);
 * `per-device-contexts.json` with `devices[].contexts`, as the project notes describe it (unconfirmed).
 */
const FIXTURES = path.join(__dirname, "..", "fixtures", "rbln-smi");

/** A fixture's text with its process ids replaced, by live or impossible ones. */
export const rblnSmiFixture = (name: string, pids: Record<string, string | number> = {}) =>
  Object.entries(pids).reduce((text, [from, to]) => text.replaceAll(from, String(to)), fs.readFileSync(path.join(FIXTURES, name), "utf8"));
/** The fixtures' process ids. */
export const ENGINE_PID = "3100417";
export const OTHER_PID = "3100988";
/** Above the kernel's PID_MAX_LIMIT (2^22): no process has it. */
export const EXITED_PID = 4194304;
