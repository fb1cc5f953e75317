// The stack config's field primitives: the values a key may hold (names, paths, ports, addresses,
// URLs, images, quantities, versions) and the helpers that compare them. The sections
// (schema.ts) are built from them.
import * as net from "node:net";
import * as path from "node:path";
import { valid as isPep440Version } from "@renovatebot/pep440";
import { z } from "zod";
import { canonicalIp } from "../address";
import { maskedUrl } from "../errors";

export const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, "a DNS label: 1-63 lower-case letters, digits or '-', not starting or ending with '-'");
export const absolutePath = z
  .string()
  .regex(/^\/[A-Za-z0-9._/-]*$/, "an absolute path of letters, digits, '.', '_', '-' and '/'")
  .refine((p) => !p.split("/").includes(".."), "a path without '..'")
  .transform((p) => path.posix.normalize(p).replace(/(.)\/$/, "$1"));

/** Directories the system owns: the scripts chown what they use, and destroy keeps cacheRoot, so neither may be one of these. */
const SYSTEM_DIRECTORIES = [
  "/",
  "/bin",
  "/boot",
  "/dev",
  "/etc",
  "/home",
  "/lib",
  "/lib32",
  "/lib64",
  "/media",
  "/mnt",
  "/opt",
  "/proc",
  "/root",
  "/run",
  "/sbin",
  "/snap",
  "/srv",
  "/sys",
  "/tmp",
  "/usr",
  "/usr/bin",
  "/usr/lib",
  "/usr/local",
  "/usr/local/bin",
  "/usr/local/lib",
  "/usr/sbin",
  "/usr/share",
  "/var",
  "/var/cache",
  "/var/lib",
  "/var/log",
  "/var/opt",
  "/var/run",
  "/var/spool",
  "/var/tmp",
];
/** Kernel and runtime file systems: nothing there survives a reboot or is meant for files. */
const VIRTUAL_TREES = ["/dev/", "/proc/", "/run/", "/sys/", "/var/run/"];

/** Why a directory may not be an install or cache root, or undefined when it may. */
export function systemDirectoryRefusal(dir: string): string | undefined {
  if (SYSTEM_DIRECTORIES.includes(dir)) return `"${dir}" is a system directory; give the project a directory of its own, such as /var/lib/rbln-serving`;
  if (VIRTUAL_TREES.some((tree) => dir.startsWith(tree)))
    return `"${dir}" is on a kernel or runtime file system; give a directory on disk, such as /var/lib/rbln-serving`;
  return undefined;
}
/** Whether `inner` is `outer` or a path below it. */
export const within = (inner: string, outer: string) => inner === outer || inner.startsWith(outer === "/" ? "/" : `${outer}/`);
export const port = z.number().int().min(1).max(65535);

/**
 * How many replicas may be down at once during a change: a count, or a percentage of the replicas
 * rounded up. Both platforms share it: host waves and Deployment/PodDisruptionBudget settings.
 */
export const MaxUnavailable = z.union([
  z.number().int().min(1),
  z.string().regex(/^([1-9][0-9]?|100)%$/, "a count such as 1 or a percentage such as 25% (1%-100%)"),
]);
export type MaxUnavailable = z.infer<typeof MaxUnavailable>;

/** A server's public host key as `ssh-keyscan` prints it, without the host name: `ssh-ed25519 AAAA...`. */
export const hostKey = z.string().regex(
  // The comment goes into known_hosts files, scripts and logs: printable text only.
  /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) AAAA[A-Za-z0-9+/]+={0,3}( [^\p{Cc}]*)?$/u,
  'a public host key line such as "ssh-ed25519 AAAAC3..." (ssh-keyscan\'s output without the host name), then an optional comment without control characters',
);
/**
 * Whether WHATWG URLs, glibc's inet_aton (so ssh and curl) and others read a host as an IPv4
 * address: its last label is a number (`10.1`, `010.0.0.9`, `0x0a.0.0.9`, `167772169`), in
 * decimal, octal or hex as each tool sees fit.
 */
const endsInNumber = (host: string) => /^(0x[0-9a-f]*|[0-9]+)$/i.test(host.slice(host.lastIndexOf(".") + 1));

/**
 * A host name, an IPv4 address, or an IPv6 address (`::1`, `fd00::5`), as canonicalIp spells it: so
 * every comparison, grant (`from=`) and command line sees one address in one form. An IPv4 address
 * is four decimal numbers without leading zeros: other forms read as other addresses to some tools.
 */
export const address = z
  .string()
  .max(253)
  .refine((value) => /^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(value) || net.isIPv6(value), "a host name or IP address")
  .refine(
    (value) => net.isIPv6(value) || !endsInNumber(value) || net.isIPv4(value),
    "an IPv4 address as four decimal numbers 0-255 without leading zeros, such as 10.0.0.9 (010.0.0.9, 10.1 and 0x0a.0.0.9 read as other addresses to ssh and others), or a host name whose last label is not a number",
  )
  .transform(canonicalIp);

/** An address a server listens on, as canonicalIp spells it. */
export const listenAddress = z.union([z.ipv4(), z.ipv6()], { error: "an IPv4 or IPv6 address" }).transform(canonicalIp);

/**
 * An address that moves between servers (keepalived's virtual address): one unicast IPv4 or IPv6
 * address, as canonicalIp spells it; not every interface, loopback, link-local or multicast, which
 * no client reaches across a network.
 */
export const virtualAddress = listenAddress.refine((value) => {
  const block = new net.BlockList();
  for (const [prefix, bits, family] of [
    ["0.0.0.0", 8, "ipv4"],
    ["127.0.0.0", 8, "ipv4"],
    ["169.254.0.0", 16, "ipv4"],
    ["224.0.0.0", 3, "ipv4"],
    ["::", 127, "ipv6"],
    ["fe80::", 10, "ipv6"],
    ["ff00::", 8, "ipv6"],
  ] as const)
    block.addSubnet(prefix, bits, family);
  return !block.check(value, net.isIPv6(value) ? "ipv6" : "ipv4");
}, "a unicast address clients reach across the network: not 0.0.0.0, ::, loopback, link-local or multicast");

/** One spelling per address, to compare two: host names in lower case, IP addresses as canonicalIp writes them (without brackets). */
export function normalAddress(address: string): string {
  return canonicalIp(address).toLowerCase();
}

/** Where a host's ranks serve: its listenAddress, unless that is every interface (then its address). */
export function servingAddress(host: { address: string; listenAddress?: string | undefined }): string {
  const listen = host.listenAddress === undefined ? undefined : normalAddress(host.listenAddress);
  return listen === undefined || listen === "0.0.0.0" || listen === "::" ? normalAddress(host.address) : listen;
}
export const posixUser = z.string().regex(/^[a-z_][a-z0-9_-]{0,31}$/, "a POSIX user name");

/** An http(s) index URL without credentials, which would sit in the stack file in plain text; a refusal shows it masked. */
export const indexUrl = z.string().superRefine((value, ctx) => {
  const parsed = URL.canParse(value) && !/[\s\p{Cc}]/u.test(value) ? new URL(value) : undefined;
  if (parsed === undefined || !["http:", "https:"].includes(parsed.protocol)) {
    ctx.addIssue({
      code: "custom",
      message: `an http:// or https:// URL such as https://mirror.example.com/simple (got ${JSON.stringify(maskedUrl(value))})`,
      params: { hideValue: true },
    });
  } else if (parsed.username !== "" || parsed.password !== "") {
    ctx.addIssue({
      code: "custom",
      message:
        "a URL without user:password@; give the user as pip.username and the password as the pipPassword secret (pulumi config set --secret pipPassword)",
      params: { hideValue: true },
    });
  }
});

/** A URL as a refusal shows it when it may carry a credential: no user info, nothing after `?` or `#`. */
const withoutCredentials = (value: string) => maskedUrl(value.replace(/([?#]).*$/s, "$1***"));

/**
 * The Prometheus KEDA's prometheus trigger queries: an http(s) URL of printable characters, a host,
 * an optional port and path. KEDA appends `/api/v1/query?query=...` to it, so a query string or a
 * fragment of its own breaks the request; and the URL sits in the ScaledObject in plain text, so
 * it may carry no credential (user info, or a token in the query). A refusal never shows either.
 */
export const prometheusUrl = z.string().superRefine((value, ctx) => {
  const refuse = (message: string) => ctx.addIssue({ code: "custom", message, params: { hideValue: true } });
  // As written, not as WHATWG reads it: `http:///x` is `http://x/` to it, and a request without a host to Go.
  const parsed = /^https?:\/\/[^/?#]/i.test(value) && /^[!-~]+$/.test(value) && URL.canParse(value) ? new URL(value) : undefined;
  if (parsed === undefined) {
    refuse(
      `an http:// or https:// URL of printable characters, such as http://prometheus-operated.monitoring.svc:9090 (got ${JSON.stringify(withoutCredentials(value))})`,
    );
  } else if (parsed.username !== "" || parsed.password !== "" || /[?#]/.test(value)) {
    refuse(
      "a URL without user:password@, ?query or #fragment (got " +
        `${JSON.stringify(withoutCredentials(value))}): KEDA appends /api/v1/query?query=... to it, and the ScaledObject holds it in plain text; ` +
        "give KEDA its credentials through a TriggerAuthentication of your own",
    );
  }
});

/** A user name for an index's or registry's basic auth; a refusal masks what follows a ':', most likely the password typed with it. */
export const userName = (pattern: RegExp, wanted: string) =>
  z.string().superRefine((value, ctx) => {
    if (!pattern.test(value))
      ctx.addIssue({ code: "custom", message: `${wanted} (got ${JSON.stringify(value.replace(/:.*/s, ":***"))})`, params: { hideValue: true } });
  });
export const labelKey = z.string().regex(/^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/, "a Kubernetes label key");
export const labelValue = z.string().regex(/^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$/, "a Kubernetes label value");
export const roleName = z.string().regex(/^[a-z][a-z0-9-]*$/, "a role name such as main, prefill or decode");
const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$/;
/** Zero reserves nothing: a container without a real request makes its pod BestEffort, the first evicted. */
const notZero = (quantity: string) => !QUANTITY.test(quantity) || quantityValue(quantity) > 0;
export const quantity = z
  .string()
  .regex(QUANTITY, "a Kubernetes quantity such as 8, 500m or 64Gi")
  .refine(notZero, "more than 0 (a zero request reserves nothing)");
export const volumeSize = (example: string) =>
  z
    .string()
    .regex(/^[0-9]+(Ki|Mi|Gi|Ti)$/, `a quantity such as ${example}`)
    .refine(notZero, "more than 0");
export const dnsSubdomain = z.string().regex(/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/, "a DNS subdomain name: lower-case letters, digits, '-' and '.'");
const QUANTITY_SUFFIX: Record<string, number> = { "": 1, m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
/** A quantity's value (cores or bytes), to compare requests with limits. */
export function quantityValue(quantity: string): number {
  const [, number, suffix] = /^([0-9.]+)(.*)$/.exec(quantity)!;
  return Number(number) * QUANTITY_SUFFIX[suffix!]!;
}
export const unixId = z.number().int().min(0).max(2147483647);

/**
 * An image reference in the grammar of the OCI distribution reference (distribution/reference's
 * regexp.go): an optional registry host[:port] (a DNS name, or an IPv6 address in brackets), name
 * components of lower-case letters and digits joined by '.', '_', '__' or dashes, an optional tag
 * and an optional digest; the name at most 255 characters.
 */
const IMAGE_REFERENCE = (() => {
  const component = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
  const domainLabel = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
  const registry = `(?:${domainLabel}(?:\\.${domainLabel})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
  const tag = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}";
  const digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
  return new RegExp(`^(?<name>(?:${registry}/)?${component}(?:/${component})*)(?::${tag})?(?:@${digest})?$`);
})();
// Longer than any reference can be (a 255-character name, a tag, a long digest), checked before the pattern runs.
const MAX_IMAGE_REFERENCE = 1024;
export const imageReference = z.string().superRefine((value, ctx) => {
  if (value.length <= MAX_IMAGE_REFERENCE && (IMAGE_REFERENCE.exec(value)?.groups?.name?.length ?? Infinity) <= 255) return;
  // `user:password@registry/...` is no reference; a refusal does not repeat the password.
  const shown = value.replace(/^[^/@]*:[^/@]*@/, "***@").slice(0, 80);
  ctx.addIssue({
    code: "custom",
    message: `an image reference such as registry.example.com/vllm-rbln:0.12.0 ([registry[:port]/]name[:tag][@digest], the name in lower case) (got ${JSON.stringify(shown)})`,
    params: { hideValue: true },
  });
});
/** A Gateway API duration: `1h`, `90m`, `3600s`, `500ms`, or several joined (`1h30m`). */
export const duration = z.string().regex(/^([0-9]{1,5}(h|m|s|ms)){1,4}$/, "a Gateway API duration such as 1h, 90m or 3600s");
export const replicaLimit = z.number().int().min(0).max(1024);

/** A compiled-cache registry's repository: `host[:port]/path`, no scheme, no tag (the tags are the compile keys). */
export const ociRepository = z
  .string()
  .regex(
    /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(\/[a-z0-9]+([._-][a-z0-9]+)*)+$/,
    "an OCI repository such as registry.example.com/ml/rbln-compile-cache: host[:port]/path, no scheme, no tag",
  )
  .refine((repository) => {
    const port = Number(/^[^/:]+:(\d+)\//.exec(repository)?.[1] ?? 443);
    return port >= 1 && port <= 65535;
  }, "a registry port from 1 to 65535");

/** The longest version a stack may pin: the venv's folder name joins every package's name and version, and a name is at most 255 bytes. */
const MAX_VERSION_LENGTH = 64;
/** A version pip reads as one exact version (PEP 440), short enough for the venv's name. */
export function isPackageVersion(version: string): boolean {
  return version.length <= MAX_VERSION_LENGTH && isPep440Version(version) !== null;
}
export const packageVersion = z.string().refine(isPackageVersion, `a PEP 440 version such as 0.12.1 or 0.13.0rc1, at most ${MAX_VERSION_LENGTH} characters`);
