import { ConfigError } from "../errors";
import type { SecretKey, StackSettings } from "./stackConfig";

/**
 * The secrets that go with settings, checked in one place: the SSH key on hosts, and each password
 * with its user (pip's, the compile registry's). The component refuses a broken pairing before
 * anything is registered; the offline commands, which see only which secrets a stack file holds,
 * warn about it.
 */
export function secretPairingErrors(settings: StackSettings, has: (key: SecretKey) => boolean): ConfigError[] {
  const errors: ConfigError[] = [];
  const registry = settings.compile.registry;
  if (registry?.username !== undefined && !has("registryPassword")) {
    errors.push(new ConfigError("registryPassword", "required when compile.registry.username is set; set it with: pulumi config set --secret registryPassword"));
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
export function checkSecretPairings(settings: StackSettings, has: (key: SecretKey) => boolean): void {
  const [first] = secretPairingErrors(settings, has);
  if (first) throw first;
}
