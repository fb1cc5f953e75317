/**
 * A refusal of user input (stack config, CLI flags, a recipe file): one line that names the key,
 * the value and what is allowed. The CLI prints it without a stack trace; the Pulumi program
 * throws it before any resource is registered.
 */
export class ConfigError extends Error {
  readonly key: string;
  readonly detail: string;
  constructor(key: string, detail: string) {
    // Every refusal is one line without a password, whatever input it quotes.
    const [safeKey, safeDetail] = [oneLine(maskCredentials(key)), oneLine(maskCredentials(detail))];
    super(`${safeKey}: ${safeDetail}`);
    this.name = "ConfigError";
    this.key = safeKey;
    this.detail = safeDetail;
  }
}

/** Text with whatever comes before the last `@` of a URL's authority (a user, a password, a token) masked: `https://***@host/`. */
export function maskCredentials(text: string): string {
  return text.replace(/([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^\s"']*@/g, "$1***@");
}

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
