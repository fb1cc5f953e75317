/**
 * A refusal of user input (stack config, CLI flags, a recipe file): one line that names the key,
 * the value and what is allowed. The CLI prints it without a stack trace; the Pulumi program
 * throws it before any resource is registered. Credentials in a URL of the value are masked.
 */
export class ConfigError extends Error {
  readonly key: string;
  readonly detail: string;
  constructor(key: string, detail: string) {
    // Every refusal is one line without a password, whatever input it quotes.
    const [safeKey, safeDetail] = [oneLine(maskUrlCredentials(key)), oneLine(maskUrlCredentials(detail))];
    super(`${safeKey}: ${safeDetail}`);
    this.name = "ConfigError";
    this.key = safeKey;
    this.detail = safeDetail;
  }
}

/**
 * `scheme://user:password@host` as `scheme://***@host`, so a refused value never carries a
 * password into a terminal or a CI log: up to the last `@` before the path, as URL parsers read
 * it. One pass over the text (a regular expression would backtrack over a long refused value).
 */
export function maskUrlCredentials(text: string): string {
  let masked = "";
  let from = 0;
  // The next search starts one back: `b://` may follow a `:` that ended the last authority.
  for (let at = text.indexOf("://"); at >= 0; at = text.indexOf("://", from - 1)) {
    const start = at + 3;
    let end = start;
    let lastAt = -1;
    for (; end < text.length && !AUTHORITY_END.test(text[end]!); end++) if (text[end] === "@") lastAt = end;
    masked += text.slice(from, start) + (lastAt >= 0 ? `***${text.slice(lastAt, end)}` : text.slice(start, end));
    from = end;
  }
  return masked + text.slice(from);
}

/**
 * One value meant as a URL, as a refusal shows it: everything before its last `@` masked, scheme
 * kept. Unlike maskUrlCredentials it needs no `://`, since a refused value may lack one
 * (`user:token@mirror/simple`).
 */
export function maskedUrl(value: string): string {
  const at = value.lastIndexOf("@");
  if (at < 0) return value;
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(value)?.[0] ?? "";
  return `${scheme}***${value.slice(at)}`;
}

/** What ends a URL's authority (user info and host). */
const AUTHORITY_END = /[\s/?#"']/;

/** Control characters (newlines, escapes) written as JSON escapes: the text stays one line and prints as it is. */
function oneLine(text: string): string {
  return text.replace(/\p{Cc}/gu, (c) => JSON.stringify(c).slice(1, -1));
}

/** `"a", "b", "c"` for error messages. */
export function listValues(values: readonly string[]): string {
  return values.length === 0 ? "(none)" : values.map((v) => JSON.stringify(v)).join(", ");
}

/** `strategies[2].options[0].grid` from a zod issue path. */
export function formatPath(parts: readonly PropertyKey[]): string {
  return parts.reduce<string>((acc, part) => (typeof part === "number" ? `${acc}[${part}]` : acc ? `${acc}.${String(part)}` : String(part)), "");
}

/** The most specific message of a zod issue: a bad record key says what keys must look like. */
export function issueMessage(issue: { code: string; message: string; issues?: readonly { message: string }[] }): string {
  return issue.code === "invalid_key" && issue.issues?.[0] ? `invalid key: ${issue.issues[0].message}` : issue.message;
}
