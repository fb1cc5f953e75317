// The stack's secrets: the keys set with `pulumi config set --secret`, the variables vLLM gets them
// as, where a credential goes instead of the plain-text config, and the settings each goes with.
import { ConfigError, maskUrlCredentials } from "../errors";
import type { Settings } from "./schema";

/** Keys that must be set with `pulumi config set --secret`; they never pass through the plain schema. */
export const SECRET_KEYS = ["sshPrivateKey", "hfToken", "pipPassword", "apiKey", "registryPassword"] as const;
export type SecretKey = (typeof SECRET_KEYS)[number];

/** What each secret is, for people who set it (the component package's descriptions, Pulumi.yaml's comment). */
export const SECRET_DESCRIPTIONS: Readonly<Record<SecretKey, string>> = {
  sshPrivateKey:
    "Hosts: the private SSH key (OpenSSH format, such as the file ~/.ssh/id_ed25519 given on stdin) for every server, bastion, router host and compile host; required with platform hosts.",
  hfToken: "A Hugging Face token, for the weights download and vLLM: needed for a gated or private model.",
  pipPassword: "Hosts: the password of pip.username on the credentialed package indexes; required with pip.username, refused without it.",
  apiKey: "The API key vLLM asks of every API request: clients send it as `Authorization: Bearer <key>`. Unset, the API is open.",
  registryPassword: "The password of compile.registry.username on the compiled-cache registry; required with it, refused without it.",
};

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

/**
 * Whether a value carries credentials in a URL (`scheme://user:password@host`, `scheme://token@host`):
 * such a variable (an extraEnv proxy with a password, say) is treated as a secret wherever it goes:
 * masked in what the commands print, on stdin to the hosts' steps, in a Secret on Kubernetes.
 */
export function holdsUrlCredentials(value: string): boolean {
  return maskUrlCredentials(value) !== value;
}

/** The variables of `env` whose values carry URL credentials (holdsUrlCredentials), and the others. */
export function splitCredentialEnv(env: Readonly<Record<string, string>>): { plain: Record<string, string>; credentials: Record<string, string> } {
  const entries = Object.entries(env);
  return {
    plain: Object.fromEntries(entries.filter(([, value]) => !holdsUrlCredentials(value))),
    credentials: Object.fromEntries(entries.filter(([, value]) => holdsUrlCredentials(value))),
  };
}

/** What offline output shows in place of a variable whose value carries URL credentials. */
export function credentialPlaceholder(name: string): string {
  return `<secret:${name}>`;
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

/**
 * The secrets that go with settings, checked in one place: the SSH key on hosts, and each password
 * with its user (pip's, the compile registry's). The component refuses a broken pairing before
 * anything is registered; the offline commands, which see only which secrets a stack file holds,
 * warn about it.
 */
export function secretPairingErrors(settings: Settings, has: (key: SecretKey) => boolean): ConfigError[] {
  const errors: ConfigError[] = [];
  const registry = settings.compile.registry;
  if (registry?.username !== undefined && !has("registryPassword")) {
    errors.push(
      new ConfigError("registryPassword", "required when compile.registry.username is set; set it with: pulumi config set --secret registryPassword"),
    );
  }
  if (has("registryPassword") && registry?.username === undefined) {
    errors.push(new ConfigError("compile.registry.username", "required when the registryPassword secret is set (the registry's user name)"));
  }
  if (settings.platform !== "hosts") return errors;
  if (!has("sshPrivateKey")) {
    errors.push(new ConfigError("sshPrivateKey", "required with platform: hosts; set it with: pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519"));
  }
  if (settings.pip.username !== undefined && !has("pipPassword")) {
    errors.push(new ConfigError("pipPassword", "required when pip.username is set; set it with: pulumi config set --secret pipPassword"));
  }
  if (has("pipPassword") && settings.pip.username === undefined) {
    errors.push(new ConfigError("pip.username", "required when the pipPassword secret is set (the package index's user name)"));
  }
  return errors;
}

/** Refuses the first broken pairing of settings and secrets. */
export function checkSecretPairings(settings: Settings, has: (key: SecretKey) => boolean): void {
  const [first] = secretPairingErrors(settings, has);
  if (first) throw first;
}
