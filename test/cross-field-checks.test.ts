import { describe, expect, it } from "vitest";
import { parseStackSettings } from "../core/config/stackConfig";
import { ConfigError } from "../core/errors";
import { EXAMPLE_HOST_KEY } from "./helpers/hostKeys";

// The checks across keys (core/config/crossFieldChecks.ts), each by the one line it refuses with:
// the key path, the message, and whether the value is shown (`(got ...)`) or kept out. When a stack
// breaks several, the first in the checks' order is the one shown.
const host = (name: string, address: string, more: Record<string, unknown> = {}) => ({ name, address, hostKey: EXAMPLE_HOST_KEY, ...more });
const hosts = (more: Record<string, unknown> = {}) => ({ strategy: "s", target: "t", hosts: [host("npu-0", "10.0.0.1")], ...more });
const kube = (more: Record<string, unknown> = {}) => ({
  strategy: "s",
  target: "t",
  platform: "kubernetes",
  kubernetes: { image: "registry.example.com/vllm-rbln:1" },
  ...more,
});
const REGISTRY = { registry: { repository: "registry.example.com/ml/cache" } };
/** One stack per check (and per branch of one), each refused by that check alone; the last breaks four at once. */
const CASES: Record<string, Record<string, unknown>> = {
  hostsAreDistinctServers: hosts({ hosts: [host("npu-0", "10.0.0.1"), host("npu-1", "10.0.0.1")] }),
  hostsAreDistinctServersByName: hosts({ hosts: [host("npu-0", "10.0.0.1"), host("npu-0", "10.0.0.2")] }),
  compileHostIsItsOwnServer: hosts({ compile: { host: host("cpu-0", "10.0.0.1") } }),
  registryNeedsPinnedRevision: kube({ compile: REGISTRY }),
  registryNeedsImageDigest: kube({ revision: "0123456789abcdef0123456789abcdef01234567", compile: REGISTRY }),
  kubernetesNeedsImage: { strategy: "s", target: "t", platform: "kubernetes" },
  namespaceIsItsOwn: kube({ kubernetes: { image: "registry.example.com/vllm-rbln:1", namespace: "monitoring" }, monitoring: { enabled: true } }),
  namespaceIsItsOwnGateway: kube({ kubernetes: { image: "registry.example.com/vllm-rbln:1", namespace: "edge", gateway: { name: "g", namespace: "edge" } } }),
  // The default namespace counts: the Gateway's namespace named as the one the deployment gets without kubernetes.namespace.
  namespaceIsItsOwnGatewayDefault: kube({ kubernetes: { image: "registry.example.com/vllm-rbln:1", gateway: { name: "g", namespace: "rbln-serving" } } }),
  hostsPlatformNeedsHosts: { strategy: "s", target: "t" },
  extraEnvPackage: hosts({ extraEnv: { main: { HF_HOME: "/x" } } }),
  extraEnvBash: hosts({ extraEnv: { main: { BASH_ENV: "/x" } } }),
  extraEnvCredential: hosts({ extraEnv: { main: { HF_TOKEN_X: "hf_1" } } }),
  shutdownTimeoutZero: hosts({ router: { requestTimeout: "0s" } }),
  shutdownTimeoutZeroSpelledLong: kube({ router: { requestTimeout: "0h0m" } }),
  shutdownTimeoutOverADay: hosts({ router: { requestTimeout: "25h" } }),
  rootsAreNotSystemDirectories: hosts({ installRoot: "/usr" }),
  sharedCacheSystem: hosts({ cache: { shared: "/proc/x" } }),
  sharedCacheOverlap: hosts({ cache: { shared: "/opt/rbln-serving/shared" } }),
  rootsAreSeparate: hosts({ installRoot: "/srv/rbln", cacheRoot: "/srv/rbln/cache" }),
  routerHostNamesAHost: hosts({ router: { host: "door" } }),
  routerHostIsNotAHostEntry: hosts({ router: { host: host("npu-0", "10.0.0.9") } }),
  hostKeysAreChecked: hosts({ hosts: [{ name: "npu-0", address: "10.0.0.1" }] }),
  peersShareAnAddressFamily: hosts({ router: { host: host("door", "fd00::10") } }),
  grantsNeedAddressesCopy: hosts({ hosts: [host("npu-0", "10.0.0.1"), host("npu-1", "npu-1.example.com")] }),
  grantsNeedAddressesCompile: hosts({ hosts: [host("npu-0", "npu-0.example.com")], compile: { host: host("cpu-0", "10.0.0.9") } }),
  // The serving address (listenAddress) is an IP, but the drain grant and the bind take the SSH address.
  grantsNeedAddressesDrain: hosts({
    hosts: [host("npu-0", "npu-0.example.com", { listenAddress: "10.0.0.1" })],
    router: { host: host("door", "10.0.0.9") },
  }),
  grantsNeedAddressesBoth: hosts({
    hosts: [host("npu-0", "10.0.0.1"), host("npu-1", "npu-1.example.com", { listenAddress: "10.0.0.2" })],
    router: { host: "npu-0" },
  }),
  peersShareAnAddressFamilyCompile: hosts({ hosts: [host("npu-0", "fd00::1"), host("npu-1", "fd00::2")], compile: { host: host("cpu-0", "10.0.0.9") } }),
  firstOfSeveral: {
    strategy: "s",
    target: "t",
    hosts: [
      { name: "npu-0", address: "10.0.0.1" },
      { name: "npu-0", address: "10.0.0.1" },
    ],
    installRoot: "/usr",
    extraEnv: { main: { HOME: "/x" } },
  },
};
const REFUSALS: Record<keyof typeof CASES, string> = {
  hostsAreDistinctServers:
    'hosts[1].address: duplicate of hosts[0].address "10.0.0.1:22" (the same SSH server: host names compare without case, IP addresses in one form: ::ffff:10.0.0.9 is 10.0.0.9) (got "10.0.0.1")',
  hostsAreDistinctServersByName: 'hosts[1].name: duplicate of hosts[0].name "npu-0" (got "npu-0")',
  compileHostIsItsOwnServer: 'compile.host.address: the compile host must be a server of its own, but hosts[0].address is "10.0.0.1:22" too',
  registryNeedsPinnedRevision:
    "revision: required with compile.registry: the compile key names the model's commit, so every stack that pulls a key serves the weights it was compiled for (missing)",
  registryNeedsImageDigest:
    'kubernetes.image: with compile.registry, an image pinned by digest (name@sha256:<64 hex>): the compile key covers the image, and a tag can move (got "registry.example.com/vllm-rbln:1")',
  kubernetesNeedsImage: "kubernetes.image: required with platform: kubernetes (build it from the project's Dockerfile) (missing)",
  namespaceIsItsOwn:
    'kubernetes.namespace: "monitoring" is monitoring.namespace too, where Prometheus runs; the package creates its namespace and labels it with Pod Security levels: give the deployment a namespace of its own',
  namespaceIsItsOwnGateway:
    'kubernetes.namespace: "edge" is kubernetes.gateway.namespace too, where the Gateway runs; the package creates its namespace and labels it with Pod Security levels: give the deployment a namespace of its own',
  namespaceIsItsOwnGatewayDefault:
    'kubernetes.namespace: "rbln-serving" is kubernetes.gateway.namespace too, where the Gateway runs; the package creates its namespace and labels it with Pod Security levels: give the deployment a namespace of its own',
  hostsPlatformNeedsHosts: "hosts: required with platform: hosts: a list of {name, address, user, port, hostKey} (missing)",
  extraEnvPackage: 'extraEnv.main.HF_HOME: the package sets it (the weights cache); choose another name (got "/x")',
  extraEnvBash: 'extraEnv.main.BASH_ENV: a name bash keeps read-only or special, and the hosts\' env files are read by bash; choose another name (got "/x")',
  extraEnvCredential:
    "extraEnv.main.HF_TOKEN_X: holds a credential, which would sit in the stack config in plain text; set the hfToken secret instead: pulumi config set --secret hfToken",
  shutdownTimeoutZero:
    'router.requestTimeout: "0s" lets a request run without limit (no timeout, to Envoy and the Gateway), but a stopping rank\'s --shutdown-timeout derives from it, where 0 aborts every in-flight request; set rollout.shutdownTimeoutSeconds (how long a stopping rank lets its in-flight requests finish), or give requestTimeout a limit such as 1h',
  shutdownTimeoutZeroSpelledLong:
    'router.requestTimeout: "0h0m" lets a request run without limit (no timeout, to Envoy and the Gateway), but a stopping rank\'s --shutdown-timeout derives from it, where 0 aborts every in-flight request; set rollout.shutdownTimeoutSeconds (how long a stopping rank lets its in-flight requests finish), or give requestTimeout a limit such as 1h',
  shutdownTimeoutOverADay:
    'router.requestTimeout: "25h" is 90000 s, and a stopping rank\'s --shutdown-timeout, which derives from it, allows at most 86400 s; set rollout.shutdownTimeoutSeconds (how long a stopping rank lets its in-flight requests finish), or give requestTimeout 24h or less',
  rootsAreNotSystemDirectories: 'installRoot: "/usr" is a system directory; give the project a directory of its own, such as /var/lib/rbln-serving',
  sharedCacheSystem:
    'cache.shared: "/proc/x" is on a kernel or runtime file system; give a directory on disk, such as /mnt/rbln-cache, where the shared filesystem is mounted',
  sharedCacheOverlap:
    'cache.shared: "/opt/rbln-serving/shared" overlaps installRoot "/opt/rbln-serving"; the shared cache must be a folder of its own, apart from the hosts\' local roots',
  rootsAreSeparate:
    'cacheRoot: "/srv/rbln/cache" is inside installRoot "/srv/rbln"; the two must be separate directories (cacheRoot outlives installs and destroy)',
  routerHostNamesAHost: 'router.host: names no entry of hosts; allowed: "npu-0", or a host {name, address, user, port, hostKey} (got "door")',
  routerHostIsNotAHostEntry:
    'router.host.name: "npu-0" is the name of an entry of hosts; to share that server give its name alone (router.host: npu-0), else another name (got "npu-0")',
  hostKeysAreChecked:
    "hosts[0].hostKey: required: the server's public SSH host key, read with ssh-keyscan and checked out of band (or set insecureSkipHostKeyCheck: true to connect to whatever answers) (missing)",
  peersShareAnAddressFamily:
    'router.host.address: "fd00::10" is IPv6, but hosts[0].address "10.0.0.1" is IPv4: the hosts ssh to each other from their own address (drains, cache copies), and one socket cannot bind one family and reach the other; give every server an address of one family',
  grantsNeedAddressesCopy:
    'hosts[1].address: "npu-1.example.com" is a host name, but this host copies caches from another server over SSH, under a grant (from= in authorized_keys) that sshd matches against the address it sees connect and never against a name (UseDNS no, its default); give the host\'s IP address, or share the cache (cache.shared)',
  grantsNeedAddressesCompile:
    'hosts[0].address: "npu-0.example.com" is a host name, but this host copies caches from another server over SSH, under a grant (from= in authorized_keys) that sshd matches against the address it sees connect and never against a name (UseDNS no, its default); give the host\'s IP address, or share the cache (cache.shared)',
  grantsNeedAddressesDrain:
    'hosts[0].address: "npu-0.example.com" is a host name, but this host drains its endpoints at the front door (router.host) over SSH, under a grant (from= in authorized_keys) that sshd matches against the address it sees connect and never against a name (UseDNS no, its default); give the host\'s IP address',
  grantsNeedAddressesBoth:
    'hosts[1].address: "npu-1.example.com" is a host name, but this host drains its endpoints at the front door (router.host) and copies caches from another server over SSH, under a grant (from= in authorized_keys) that sshd matches against the address it sees connect and never against a name (UseDNS no, its default); give the host\'s IP address',
  peersShareAnAddressFamilyCompile:
    'compile.host.address: "10.0.0.9" is IPv4, but hosts[0].address "fd00::1" is IPv6: the hosts ssh to each other from their own address (drains, cache copies), and one socket cannot bind one family and reach the other; give every server an address of one family',
  firstOfSeveral: 'hosts[1].name: duplicate of hosts[0].name "npu-0" (got "npu-0")',
};

/** The one line a stack is refused with. */
function refusal(raw: Record<string, unknown>): string {
  try {
    parseStackSettings(raw);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error("accepted");
}

describe("the stack config's checks across keys", () => {
  it("shutdownTimeoutHasOneMeaning: a requestTimeout of 0 (no limit) passes beside an explicit rollout.shutdownTimeoutSeconds, whose 0 means abort", () => {
    expect(parseStackSettings(hosts({ router: { requestTimeout: "0s" }, rollout: { shutdownTimeoutSeconds: 600 } })).router.requestTimeout).toBe("0s");
    expect(parseStackSettings(hosts({ router: { requestTimeout: "48h" }, rollout: { shutdownTimeoutSeconds: 0 } })).rollout.shutdownTimeoutSeconds).toBe(0);
  });

  for (const [name, raw] of Object.entries(CASES)) {
    it(`${name}: ${REFUSALS[name]}`, () => {
      expect(refusal(raw)).toBe(REFUSALS[name]);
    });
  }
});
