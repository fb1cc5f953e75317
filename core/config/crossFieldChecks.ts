// The stack config's checks across keys, each named, with the reason it exists. They run after
// every key has parsed on its own (stackConfig.ts), in this order; the first refusal is the one shown.
import * as net from "node:net";
import { bracketed } from "../address";
import { ConfigError, formatPath } from "../errors";
import { durationSeconds, MAX_SHUTDOWN_TIMEOUT_SECONDS } from "./defaults";
import { normalAddress, servingAddress, systemDirectoryRefusal, within } from "./fields";
import { routerHostEntries } from "./routerHosts";
import type { Host, Settings } from "./schema";
import { CREDENTIAL_NAME, credentialRefusal } from "./secrets";
import { CACHE_ENV, isBashSpecial, PACKAGE_ENV } from "./vllmOptions";

/** One refusal: the key path and what is wrong; `hideValue` when the message names the value itself or the value may hold a credential. */
export interface CrossFieldIssue {
  path: PropertyKey[];
  message: string;
  hideValue?: true;
}
type Check = (s: Settings) => CrossFieldIssue[];

/** A host's identities as an SSH server, each with how a refusal shows it: its name, and its address (as normalAddress spells it) with the port. */
function sshIdentities(host: Pick<Host, "name" | "address" | "port">) {
  const sshAddress = `${net.isIPv6(host.address) ? `[${host.address}]` : host.address}:${host.port}`;
  return [
    ["name", host.name, host.name],
    ["address", `${normalAddress(host.address)} ${host.port}`, sshAddress],
  ] as const;
}

/** The first entry of `hosts` with each identity, by `field=key`. */
function firstHosts(hosts: readonly Host[]): Map<string, { index: number; shown: string }> {
  const first = new Map<string, { index: number; shown: string }>();
  hosts.forEach((host, i) => {
    for (const [field, key, shown] of sshIdentities(host)) if (!first.has(`${field}=${key}`)) first.set(`${field}=${key}`, { index: i, shown });
  });
  return first;
}

/** One SSH server is one host: two entries would run two sets of steps against one server. */
const hostsAreDistinctServers: Check = (s) => {
  const first = firstHosts(s.hosts);
  return s.hosts.flatMap((host, i) =>
    sshIdentities(host).flatMap(([field, key]) => {
      const earlier = first.get(`${field}=${key}`);
      if (earlier === undefined || earlier.index === i) return [];
      const same = field === "address" ? " (the same SSH server: host names compare without case, IP addresses in one form: ::ffff:10.0.0.9 is 10.0.0.9)" : "";
      return [{ path: ["hosts", i, field], message: `duplicate of hosts[${earlier.index}].${field} "${earlier.shown}"${same}` }];
    }),
  );
};

/** The compile host installs, downloads and compiles beside no NPU host: on one server their steps would collide. */
const compileHostIsItsOwnServer: Check = (s) => {
  const compileHost = s.compile.host;
  if (!compileHost) return [];
  const first = firstHosts(s.hosts);
  return sshIdentities(compileHost).flatMap(([field, key]) => {
    const host = first.get(`${field}=${key}`);
    return host
      ? [
          {
            path: ["compile", "host", field],
            message: `the compile host must be a server of its own, but hosts[${host.index}].${field} is "${host.shown}" too`,
            hideValue: true,
          },
        ]
      : [];
  });
};

/** A compile key names one compiled cache everywhere: an unpinned model resolves whatever the hub has at the time. */
const registryNeedsPinnedRevision: Check = (s) =>
  s.compile.registry && s.revision === undefined
    ? [
        {
          path: ["revision"],
          message:
            "required with compile.registry: the compile key names the model's commit, so every stack that pulls a key serves the weights it was compiled for",
        },
      ]
    : [];

/** The compile key covers the image, and a tag can move to another image. */
const registryNeedsImageDigest: Check = (s) =>
  s.compile.registry && s.platform === "kubernetes" && s.kubernetes.image && !/@sha256:[0-9a-f]{64}$/.test(s.kubernetes.image)
    ? [
        {
          path: ["kubernetes", "image"],
          message: `with compile.registry, an image pinned by digest (name@sha256:<64 hex>): the compile key covers the image, and a tag can move (got ${JSON.stringify(s.kubernetes.image)})`,
          hideValue: true,
        },
      ]
    : [];

/** There is no public vllm-rbln image: the pods run one built from the project's Dockerfile. */
const kubernetesNeedsImage: Check = (s) =>
  s.platform === "kubernetes" && !s.kubernetes.image
    ? [{ path: ["kubernetes", "image"], message: "required with platform: kubernetes (build it from the project's Dockerfile)" }]
    : [];

/**
 * The package creates its namespace, labels it with Pod Security levels and deletes it on destroy:
 * never one that another part of the cluster lives in (Prometheus, the Gateway).
 */
const namespaceIsItsOwn: Check = (s) => {
  if (s.platform !== "kubernetes") return [];
  const others: [string, string | undefined, string][] = [
    ["monitoring.namespace", s.monitoring.enabled ? s.monitoring.namespace : undefined, "where Prometheus runs"],
    ["kubernetes.gateway.namespace", s.kubernetes.gateway?.namespace, "where the Gateway runs"],
  ];
  return others.flatMap(([key, namespace, what]) =>
    namespace === s.kubernetes.namespace
      ? [
          {
            path: ["kubernetes", "namespace"],
            message: `"${namespace}" is ${key} too, ${what}; the package creates its namespace and labels it with Pod Security levels: give the deployment a namespace of its own`,
            hideValue: true as const,
          },
        ]
      : [],
  );
};

/** The hosts platform serves on the servers listed: without one there is nowhere to deploy. */
const hostsPlatformNeedsHosts: Check = (s) =>
  s.platform === "hosts" && s.hosts.length === 0
    ? [{ path: ["hosts"], message: "required with platform: hosts: a list of {name, address, user, port, hostKey}" }]
    : [];

/** extraEnv may not override what the package sets, move or switch off its caches, name what bash keeps (the hosts' env files are read by bash), or carry a credential in plain text. */
const extraEnvSetsOnlyFreeNames: Check = (s) =>
  Object.entries(s.extraEnv).flatMap(([role, variables]) =>
    Object.keys(variables).flatMap((name): CrossFieldIssue[] => {
      const path = ["extraEnv", role, name];
      if (Object.hasOwn(PACKAGE_ENV, name)) return [{ path, message: `the package sets it (${PACKAGE_ENV[name]}); choose another name` }];
      if (Object.hasOwn(CACHE_ENV, name)) return [{ path, message: `the package's caches rely on it: ${CACHE_ENV[name]}; leave it unset` }];
      if (isBashSpecial(name))
        return [{ path, message: "a name bash keeps read-only or special, and the hosts' env files are read by bash; choose another name" }];
      if (CREDENTIAL_NAME.test(name)) return [{ path, message: credentialRefusal(name), hideValue: true }];
      return [];
    }),
  );

/**
 * Each zero means one thing. router.requestTimeout 0 means no timeout (to Envoy and the Gateway),
 * and a stopping rank's --shutdown-timeout derives from it when rollout.shutdownTimeoutSeconds is
 * unset, where 0 aborts every in-flight request at once: with no limit to derive from, the stack
 * says how long a stop waits. A derived value keeps rollout.shutdownTimeoutSeconds' bound too.
 */
const shutdownTimeoutHasOneMeaning: Check = (s) => {
  if (s.rollout.shutdownTimeoutSeconds !== undefined) return [];
  const seconds = durationSeconds(s.router.requestTimeout);
  const set = "set rollout.shutdownTimeoutSeconds (how long a stopping rank lets its in-flight requests finish)";
  if (seconds === 0)
    return [
      {
        path: ["router", "requestTimeout"],
        message: `"${s.router.requestTimeout}" lets a request run without limit (no timeout, to Envoy and the Gateway), but a stopping rank's --shutdown-timeout derives from it, where 0 aborts every in-flight request; ${set}, or give requestTimeout a limit such as 1h`,
        hideValue: true,
      },
    ];
  if (seconds > MAX_SHUTDOWN_TIMEOUT_SECONDS)
    return [
      {
        path: ["router", "requestTimeout"],
        message: `"${s.router.requestTimeout}" is ${seconds} s, and a stopping rank's --shutdown-timeout, which derives from it, allows at most ${MAX_SHUTDOWN_TIMEOUT_SECONDS} s; ${set}, or give requestTimeout 24h or less`,
        hideValue: true,
      },
    ];
  return [];
};

/** The scripts chown the roots they use, and destroy keeps cacheRoot: a directory the system owns would be taken over. */
const rootsAreNotSystemDirectories: Check = (s) =>
  (["installRoot", "cacheRoot"] as const).flatMap((key) => {
    const refusal = systemDirectoryRefusal(s[key]);
    return refusal ? [{ path: [key], message: refusal, hideValue: true as const }] : [];
  });

/** The shared cache is one folder on a filesystem every host mounts: not a system directory, and apart from each host's local roots. */
const sharedCacheStandsApart: Check = (s) => {
  const shared = s.cache.shared;
  if (shared === undefined) return [];
  const refusal = systemDirectoryRefusal(shared);
  if (refusal)
    return [
      {
        path: ["cache", "shared"],
        message: refusal.replace("such as /var/lib/rbln-serving", "such as /mnt/rbln-cache, where the shared filesystem is mounted"),
        hideValue: true,
      },
    ];
  const overlaps = (["installRoot", "cacheRoot"] as const).find((key) => within(shared, s[key]) || within(s[key], shared));
  return overlaps
    ? [
        {
          path: ["cache", "shared"],
          message: `"${shared}" overlaps ${overlaps} "${s[overlaps]}"; the shared cache must be a folder of its own, apart from the hosts' local roots`,
          hideValue: true,
        },
      ]
    : [];
};

/** cacheRoot outlives installs and destroy: inside or around installRoot, removing one would remove the other. */
const rootsAreSeparate: Check = (s) => {
  if (!within(s.cacheRoot, s.installRoot) && !within(s.installRoot, s.cacheRoot)) return [];
  const relation = s.cacheRoot === s.installRoot ? "the same directory as" : within(s.cacheRoot, s.installRoot) ? "inside" : "around";
  return [
    {
      path: ["cacheRoot"],
      message: `"${s.cacheRoot}" is ${relation} installRoot "${s.installRoot}"; the two must be separate directories (cacheRoot outlives installs and destroy)`,
      hideValue: true,
    },
  ];
};

/** A router host given as a name shares that entry's server: the name must be one of hosts. */
const routerHostNamesAHost: Check = (s) =>
  s.platform !== "hosts"
    ? []
    : routerHostEntries(s.router).flatMap(({ host, path }) =>
        typeof host === "string" && !s.hosts.some((h) => h.name === host)
          ? [
              {
                path,
                message: `names no entry of hosts; allowed: ${s.hosts.map((h) => JSON.stringify(h.name)).join(", ") || "(none)"}, or a host {name, address, user, port, hostKey}`,
              },
            ]
          : [],
      );

/** A router host written out under a hosts entry's name would be two servers of one name. */
const routerHostIsNotAHostEntry: Check = (s) =>
  routerHostEntries(s.router).flatMap(({ host, path }) =>
    typeof host === "object" && s.hosts.some((h) => h.name === host.name)
      ? [
          {
            path: [...path, "name"],
            message: `"${host.name}" is the name of an entry of hosts; to share that server give its name alone (${formatPath(path)}: ${host.name}), else another name`,
          },
        ]
      : [],
  );

/** router.host is router.hosts of one: both would say twice where the front door runs. */
const routerHostOrHosts: Check = (s) =>
  s.router.host !== undefined && s.router.hosts !== undefined
    ? [
        {
          path: ["router", "hosts"],
          message: "set router.host or router.hosts, not both (router.host is router.hosts with one entry)",
          hideValue: true as const,
        },
      ]
    : [];

/** Each router host is one server, named once: two entries would run two front doors on one server, or name two servers alike. */
const routerHostsAreDistinct: Check = (s) => {
  const seen = new Map<string, string>();
  return routerHostEntries(s.router).flatMap(({ host, path }) => {
    const keys: [string, string, PropertyKey[]][] = [
      [`name=${typeof host === "string" ? host : host.name}`, "name", typeof host === "string" ? path : [...path, "name"]],
    ];
    if (typeof host === "object") keys.push([`address=${normalAddress(host.address)} ${host.port}`, "address", [...path, "address"]]);
    return keys.flatMap(([key, field, at]) => {
      const earlier = seen.get(key);
      if (earlier === undefined) seen.set(key, formatPath(path));
      return earlier === undefined ? [] : [{ path: at, message: `duplicate of ${earlier}'s ${field}: each router host is a server of its own` }];
    });
  });
};

/** Every address a server of the stack has, with its key path: the virtual address must be none of them. */
function serverAddresses(s: Settings): [PropertyKey[], string][] {
  const of = (path: PropertyKey[], host: { address: string; listenAddress?: string | undefined }): [PropertyKey[], string][] => [
    [[...path, "address"], host.address],
    ...(host.listenAddress ? [[[...path, "listenAddress"], host.listenAddress] as [PropertyKey[], string]] : []),
  ];
  return [
    ...s.hosts.flatMap((h, i) => of(["hosts", i], h)),
    ...routerHostEntries(s.router).flatMap(({ host, path }) => (typeof host === "object" ? of(path, host) : [])),
    ...(s.compile.host ? of(["compile", "host"], s.compile.host) : []),
  ];
}

/**
 * keepalived moves router.virtualAddress between the router hosts over VRRP: it needs two of them,
 * each with an IP address of the virtual address's family (its unicast peers and source are IP
 * addresses, and VRRP v2 carries IPv4, v3 IPv6), an address no server has, and Envoy listening on
 * all interfaces, so the address reaches it on whichever host holds it.
 */
const virtualAddressFits: Check = (s) => {
  const vip = s.router.virtualAddress;
  if (vip === undefined || s.platform !== "hosts") return [];
  const entries = routerHostEntries(s.router);
  if (entries.length < 2)
    return [
      {
        path: ["router", "virtualAddress"],
        message: `needs two router hosts (router.hosts) to move between, but ${entries.length === 0 ? "none is set" : `${formatPath(entries[0]!.path)} is the only one`}; add a second router host, or leave virtualAddress unset`,
      },
    ];
  const family = net.isIP(vip);
  for (const { host, path } of entries) {
    const index = typeof host === "string" ? s.hosts.findIndex((h) => h.name === host) : -1;
    const [at, address] = typeof host === "string" ? [["hosts", index, "address"], s.hosts[index]?.address ?? ""] : [[...path, "address"], host.address];
    if (net.isIP(address) !== family)
      return [
        {
          path: at,
          message: `"${address}" is ${net.isIP(address) === 0 ? "a host name" : `IPv${net.isIP(address)}`}, but router.virtualAddress ${vip} is IPv${family}: keepalived's VRRP peers are the router hosts' IP addresses, of the virtual address's family; give the router host its IPv${family} address`,
          hideValue: true,
        },
      ];
    if (typeof host === "object" && host.listenAddress !== undefined)
      return [
        {
          path: [...path, "listenAddress"],
          message: `with router.virtualAddress the front door listens on all interfaces, so the virtual address reaches it on whichever router host holds it; leave listenAddress unset`,
        },
      ];
  }
  const taken = serverAddresses(s).find(([, address]) => normalAddress(address) === normalAddress(vip));
  return taken
    ? [
        {
          path: ["router", "virtualAddress"],
          message: `${vip} is ${formatPath(taken[0])} too; the virtual address must be one no server of the stack has (keepalived adds it to the holder and removes it from the others)`,
          hideValue: true,
        },
      ]
    : [];
};

/**
 * The hosts reach each other over SSH from their own address (the drains to the router host, the
 * cache copies between hosts: ssh's BindAddress, which the peer's `from=` grant matches), and a
 * socket bound to an IPv4 address cannot reach an IPv6 one: the servers' literal addresses share
 * one family.
 */
const peersShareAnAddressFamily: Check = (s) => {
  if (s.platform !== "hosts") return [];
  const servers: [PropertyKey[], string][] = [
    ...s.hosts.map((h, i): [PropertyKey[], string] => [["hosts", i, "address"], h.address]),
    ...routerHostEntries(s.router).flatMap(({ host, path }) =>
      typeof host === "object" ? [[[...path, "address"], host.address] as [PropertyKey[], string]] : [],
    ),
    ...(s.compile.host ? [[["compile", "host", "address"], s.compile.host.address] as [PropertyKey[], string]] : []),
  ].filter(([, address]) => net.isIP(address) !== 0);
  const [first] = servers;
  const other = servers.find(([, address]) => net.isIP(address) !== net.isIP(first?.[1] ?? ""));
  if (!first || !other) return [];
  const family = (address: string) => `IPv${net.isIP(address)}`;
  return [
    {
      path: other[0],
      message: `"${other[1]}" is ${family(other[1])}, but ${formatPath(first[0])} "${first[1]}" is ${family(first[1])}: the hosts ssh to each other from their own address (drains, cache copies), and one socket cannot bind one family and reach the other; give every server an address of one family`,
      hideValue: true,
    },
  ];
};

/**
 * Where a host connects to another over SSH, the other grants it by `from="<address>"` in
 * authorized_keys (and the host binds that address, ssh's BindAddress), which sshd matches against
 * the address it sees connect: with its default `UseDNS no` a host name there never matches. Every
 * NPU host connects out under such a grant: to each router host to drain its endpoints (router.host
 * or router.hosts; each host's drain key is granted from its own address), and to another server to copy caches (no cache.shared, and a
 * second host or a compile host). So each of them has an IP address: its `address`, whatever its
 * `listenAddress` (the grants take the SSH address, not the serving one). The compile host and a
 * router host of its own only hold grants and are connected to (ssh resolves a name there); a
 * router host named from `hosts` is one of the hosts.
 */
const grantsNeedAddresses: Check = (s) => {
  if (s.platform !== "hosts") return [];
  const router = routerHostEntries(s.router).length > 0;
  const uses = [
    ...(router ? [`drains its endpoints at the front door (${s.router.hosts !== undefined ? "router.hosts" : "router.host"})`] : []),
    ...(s.cache.shared === undefined && (s.hosts.length > 1 || s.compile.host) ? ["copies caches from another server"] : []),
  ];
  const index = s.hosts.findIndex((h) => net.isIP(h.address) === 0);
  const named = s.hosts[index];
  if (uses.length === 0 || !named) return [];
  const shareCache = uses.length === 1 && !router ? ", or share the cache (cache.shared)" : "";
  return [
    {
      path: ["hosts", index, "address"],
      message: `"${named.address}" is a host name, but this host ${uses.join(" and ")} over SSH, under a grant (from= in authorized_keys) that sshd matches against the address it sees connect and never against a name (UseDNS no, its default); give the host's IP address${shareCache}`,
      hideValue: true,
    },
  ];
};

/** Without a server's host key the connection trusts whatever answers at its address, unless the stack says so (insecureSkipHostKeyCheck). */
const hostKeysAreChecked: Check = (s) => {
  if (s.platform !== "hosts" || s.insecureSkipHostKeyCheck) return [];
  const unchecked: PropertyKey[][] = [
    ...s.hosts.flatMap((host, i) => [
      ...(host.hostKey ? [] : [["hosts", i, "hostKey"]]),
      ...(host.proxy && !host.proxy.hostKey ? [["hosts", i, "proxy", "hostKey"]] : []),
    ]),
    ...(s.sshProxy && !s.sshProxy.hostKey ? [["sshProxy", "hostKey"]] : []),
    ...routerHostEntries(s.router).flatMap(({ host, path }) =>
      typeof host === "object"
        ? [...(host.hostKey ? [] : [[...path, "hostKey"]]), ...(host.proxy && !host.proxy.hostKey ? [[...path, "proxy", "hostKey"]] : [])]
        : [],
    ),
    ...(s.compile.host && !s.compile.host.hostKey ? [["compile", "host", "hostKey"]] : []),
    ...(s.compile.host?.proxy && !s.compile.host.proxy.hostKey ? [["compile", "host", "proxy", "hostKey"]] : []),
  ];
  return unchecked.map((path) => ({
    path,
    message:
      "required: the server's public SSH host key, read with ssh-keyscan and checked out of band (or set insecureSkipHostKeyCheck: true to connect to whatever answers)",
  }));
};

const CROSS_FIELD_CHECKS: readonly Check[] = [
  hostsAreDistinctServers,
  compileHostIsItsOwnServer,
  registryNeedsPinnedRevision,
  registryNeedsImageDigest,
  kubernetesNeedsImage,
  namespaceIsItsOwn,
  hostsPlatformNeedsHosts,
  extraEnvSetsOnlyFreeNames,
  shutdownTimeoutHasOneMeaning,
  rootsAreNotSystemDirectories,
  sharedCacheStandsApart,
  rootsAreSeparate,
  routerHostOrHosts,
  routerHostNamesAHost,
  routerHostIsNotAHostEntry,
  routerHostsAreDistinct,
  virtualAddressFits,
  hostKeysAreChecked,
  peersShareAnAddressFamily,
  grantsNeedAddresses,
];

/** What every check refuses in settings whose keys each parsed, in the checks' order. */
export function crossFieldIssues(settings: Settings): CrossFieldIssue[] {
  return CROSS_FIELD_CHECKS.flatMap((check) => check(settings));
}

/**
 * Refuses two hosts whose ranks would serve on one address and port (servingAddress): their rank
 * URLs would be one, and the second rank could not bind. `ports[i]` are hosts[i]'s rank ports.
 * The plan calls it once it knows the ports.
 */
export function checkServingAddresses(hosts: readonly Host[], ports: readonly (readonly number[])[]): void {
  const claimed = new Map<string, number>();
  hosts.forEach((host, i) => {
    const address = servingAddress(host);
    const field = host.listenAddress !== undefined && normalAddress(host.listenAddress) === address ? "listenAddress" : "address";
    for (const port of ports[i] ?? []) {
      const earlier = claimed.get(`${address} ${port}`);
      if (earlier !== undefined) {
        throw new ConfigError(
          `hosts[${i}].${field}`,
          `"${host[field]}" would serve port ${port} on ${bracketed(address)}, as hosts[${earlier}] does; give each host an address of its own (host names compare without case, IP addresses in one form: ::ffff:10.0.0.9 is 10.0.0.9)`,
        );
      }
      claimed.set(`${address} ${port}`, i);
    }
  });
}
