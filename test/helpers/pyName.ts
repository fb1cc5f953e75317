/**
 * Pulumi's Python names, ported from pulumi/pulumi v3.248.0 (test/fixtures/pulumi-v3.248.0/python-sdk.json
 * cites each): PyName (pkg/codegen/python/python.go), the package name (PyPack, gen.go) and the
 * class of an input type (unqualifiedObjectTypeName, gen.go). Only what the examples' check needs.
 */

/** Names the generator keeps in their older spelling (useLegacyName). */
const LEGACY = new Set(["openXJsonSerDe", "GetPublicIPs", "GetUptimeCheckIPs"]);
const PYTHON_KEYWORDS = new Set(
  "False None True and as assert async await break class continue def del elif else except exec finally for from global if import in is lambda nonlocal not or pass print raise return try while with yield".split(
    " ",
  ),
);

const isUpper = (c: string) => c !== c.toLowerCase() && c === c.toUpperCase();
const isDigit = (c: string) => c >= "0" && c <= "9";

/** PyName: camelCase to snake_case, as the state machine of python.go does it. */
export function pyName(name: string): string {
  const legacy = LEGACY.has(name);
  const components: string[] = [];
  let current = "";
  let state: "first" | "upper" | "acronym" | "lowerOrNumber" = "first";
  for (let char of name) {
    if (!/[A-Za-z0-9_]/.test(char)) char = "_";
    if (state === "first") {
      if (!/[A-Za-z_]/.test(char)) current += "_";
      state = isUpper(char) ? "upper" : "lowerOrNumber";
      current += char.toLowerCase();
    } else if (state === "upper") {
      state = isUpper(char) ? "acronym" : "lowerOrNumber";
      current += isUpper(char) ? char.toLowerCase() : char;
    } else if (state === "acronym") {
      if (isUpper(char)) current += char.toLowerCase();
      else if (isDigit(char) || (char === "s" && !legacy)) {
        state = "lowerOrNumber";
        current += char;
      } else {
        components.push(current.slice(0, -1));
        current = current.slice(-1) + char;
        state = "lowerOrNumber";
      }
    } else if (isUpper(char)) {
      components.push(current);
      current = char.toLowerCase();
      state = "upper";
    } else current += char;
  }
  if (current !== "") components.push(current);
  const result = components.join("_");
  return PYTHON_KEYWORDS.has(result) ? `${result}_` : result;
}

/** PyPack without a namespace: the module a schema package's Python SDK is. */
export const pyPackage = (name: string): string => `pulumi_${name.replace(/-/g, "_")}`;

/** The class of a schema type used as an input: its token's member with `Args` appended. */
export const pyInputClass = (token: string): string => `${token.split(":")[2]}Args`;
