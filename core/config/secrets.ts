// The stack's secrets: the keys set with `pulumi config set --secret`, the variables vLLM gets them
// as, and where a credential goes instead of the plain-text config.

/** Keys that must be set with `pulumi config set --secret`; they never pass through the plain schema. */
export const SECRET_KEYS = ["sshPrivateKey", "hfToken", "pipPassword", "apiKey", "registryPassword"] as const;
export type SecretKey = (typeof SECRET_KEYS)[number];

/** Secrets that reach vLLM as environment variables (EnvironmentFile on hosts, a Secret on Kubernetes). */
export const SECRET_ENV: Readonly<Partial<Record<SecretKey, string>>> = { hfToken: "HF_TOKEN", apiKey: "VLLM_API_KEY" };

/** The environment variables of the secrets that are set (in SECRET_ENV's order), each with `value(key)`. */
export function secretEnvironment<K extends SecretKey, T>(present: readonly K[], value: (key: K) => T): Record<string, T> {
  return Object.fromEntries((Object.keys(SECRET_ENV) as K[]).filter((key) => present.includes(key)).map((key) => [SECRET_ENV[key]!, value(key)]));
}

/** What offline output shows in place of a secret's value. */
export function secretPlaceholder(key: SecretKey): string {
  return `<secret:${key}>`;
}

/** Variable names that hold credentials (`HUGGING_FACE_HUB_TOKEN`, `*_PASSWORD`, `*_SECRET*`, `AWS_SECRET_ACCESS_KEY`, ...). */
export const CREDENTIAL_NAME = /(^|_)(TOKEN|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)(_|$)|(^|_)SECRET/i;

/** Why a credential variable may not be set in plain text, and the secret that carries it instead. */
export function credentialRefusal(name: string): string {
  const secret = /HF|HUGGING/i.test(name) ? "hfToken" : /API_?KEY/i.test(name) ? "apiKey" : /PIP|PYPI|INDEX/i.test(name) ? "pipPassword" : undefined;
  const instead = secret
    ? `set the ${secret} secret instead: pulumi config set --secret ${secret}`
    : `the project's secrets are ${SECRET_KEYS.filter((k) => k !== "sshPrivateKey").join(", ")} (pulumi config set --secret); keep other credentials in the host's or cluster's own secret store`;
  return `holds a credential, which would sit in the stack config in plain text; ${instead}`;
}
