import type { StackSettings } from "../config/stackConfig";
import { ConfigError } from "../errors";
import type { LaunchPlan } from "./types";

/** The indexes pip reads on hosts, and where the credentials go. */
export interface PipIndexUrls {
  indexUrl: string | null;
  extraIndexUrls: string[];
  /** Hosts (host:port) that receive pip.username and the pipPassword secret: the recipe's credentialed indexes' and pip.indexUrl's. */
  credentialHosts: string[];
}

export function pipIndexUrls(pip: StackSettings["pip"], plan: Pick<LaunchPlan, "packages" | "credentialedIndexUrls">): PipIndexUrls {
  const recipeIndexes = [...new Set(plan.packages.flatMap((p) => p.extraIndexUrls))];
  const credentialUrls = [...plan.credentialedIndexUrls, ...(pip.indexUrl ? [pip.indexUrl] : [])];
  return {
    indexUrl: pip.indexUrl ?? null,
    extraIndexUrls: pip.extraIndexUrls ?? recipeIndexes,
    credentialHosts: [...new Set(credentialUrls.map((u) => new URL(u).host))],
  };
}

/**
 * With pip.username set, pip sends it and the pipPassword secret (basic auth, plain to anyone on
 * the path without TLS) to every listed index on a credential host: refuses one on http://,
 * unless it is the host's own loopback (a local mirror), where nothing is on the path.
 */
export function checkIndexCredentials(pip: StackSettings["pip"], indexes: PipIndexUrls): void {
  if (pip.username === undefined) return;
  const listed: [key: string, url: string][] = [
    ...(indexes.indexUrl ? [["pip.indexUrl", indexes.indexUrl] as [string, string]] : []),
    // Without pip.extraIndexUrls the list is the recipe's.
    ...indexes.extraIndexUrls.map((url, i): [string, string] => [pip.extraIndexUrls ? `pip.extraIndexUrls[${i}]` : "pip.username", url]),
  ];
  for (const [key, url] of listed) {
    const { protocol, host } = new URL(url);
    if (protocol === "http:" && indexes.credentialHosts.includes(host) && !isLoopback(new URL(url).hostname)) {
      const whose = key === "pip.username" ? `the recipe's index "${url}"` : `"${url}"`;
      throw new ConfigError(key, `${whose} would receive pip.username and the pipPassword secret over plain http, readable on the way; use an https:// index`);
    }
  }
}

function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}
