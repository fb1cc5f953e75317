import type { Deployment } from "../../plan/types";
import { HOST_DEFAULTS } from "./defaults";

/** Index settings for the pip.conf the install and weights steps read from stdin. */
export interface PipIndexes {
  indexUrl: string | null;
  extraIndexUrls: string[];
  /** Hosts that receive the username and password. */
  credentialHosts: string[];
  username: string | null;
  retries: number;
  timeoutSeconds: number;
}

/** The stack's indexes (a mirror replaces the recipe's) and which of them take the credentials: the recipe's credentialed ones and the mirror. */
export function pipIndexes(deployment: Deployment, options: { retries?: number; timeoutSeconds?: number } = {}): PipIndexes {
  const { settings, plan } = deployment;
  const recipeIndexes = [...new Set(plan.packages.flatMap((p) => p.extraIndexUrls))];
  const credentialUrls = [...plan.credentialedIndexUrls, ...(settings.pip.indexUrl ? [settings.pip.indexUrl] : [])];
  return {
    indexUrl: settings.pip.indexUrl ?? null,
    extraIndexUrls: settings.pip.extraIndexUrls ?? recipeIndexes,
    credentialHosts: [...new Set(credentialUrls.map((u) => new URL(u).host))],
    username: settings.pip.username ?? null,
    retries: options.retries ?? HOST_DEFAULTS.pip.retries,
    timeoutSeconds: options.timeoutSeconds ?? HOST_DEFAULTS.pip.timeoutSeconds,
  };
}

/** The pip.conf for a host: index URLs, with the credentials only on the hosts that take them. */
export function renderPipConfig(indexes: PipIndexes, password: string | null): string {
  const withAuth = (url: string) => {
    if (!indexes.username || password === null || password === "") return url;
    const parsed = new URL(url);
    if (!indexes.credentialHosts.includes(parsed.host)) return url;
    parsed.username = encodeURIComponent(indexes.username);
    parsed.password = encodeURIComponent(password);
    return parsed.toString();
  };
  const lines = ["[global]"];
  if (indexes.indexUrl) lines.push(`index-url = ${withAuth(indexes.indexUrl)}`);
  if (indexes.extraIndexUrls.length > 0) lines.push("extra-index-url =", ...indexes.extraIndexUrls.map((u) => `    ${withAuth(u)}`));
  lines.push(`retries = ${indexes.retries}`, `timeout = ${indexes.timeoutSeconds}`);
  return `${lines.join("\n")}\n`;
}
