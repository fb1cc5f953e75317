import { LEASE_DEFAULTS } from "../../cache/leaseLock";

/** How long a starting unit waits for its NPU device nodes (the driver loads late after a reboot). */
const DEVICE_WAIT_SECONDS = 300;

/**
 * Every operational default of the hosts platform, in one place (as an Ansible role keeps its
 * defaults/main.yml): who runs the units, how they start, stop and restart, how long each step may
 * take, the locks on a host, the copy grants and the shared cache's lease lock. Settings a stack may
 * change are in the config schema instead; `HostRenderOptions` lets tests shorten the timings.
 */
export const HOST_DEFAULTS = {
  /** The system user every rank runs as. */
  serviceUser: "rbln-serving",
  /** The Hugging Face downloader the weights step installs into its own venv, apart from the serving stack. */
  downloaderRequirement: "huggingface_hub==0.35.3",
  /** The first line of every unit the package writes: how a unit step knows a unit is the package's. */
  managedMarker: "# Managed by rbln-serving (Pulumi); local edits are overwritten.",
  unit: {
    deviceWaitSeconds: DEVICE_WAIT_SECONDS,
    /** systemd's TimeoutStopSec is vLLM's --shutdown-timeout (rollout.shutdownTimeoutSeconds) and this much more, for the engine processes to end after the drain. */
    stopMarginSeconds: 120,
    /**
     * With Type=exec the start timeout bounds only ExecStartPre and the exec, not vLLM's readiness
     * (vLLM does not notify systemd; the unit step polls the rank instead): enough for the device
     * wait, which systemd's 90 s default would cut short.
     */
    startTimeoutSeconds: DEVICE_WAIT_SECONDS + 60,
    /** systemd's RestartSec for a rank that exited; a data-parallel group's restart waits as long between stopping its ranks and starting them. */
    restartSeconds: 30,
    /** A data-parallel group's restart: its peers' SIGTERM, then SIGKILL after this (hung in the group's collectives, they would drain in vain). */
    groupStopGraceSeconds: 10,
    /** Crash-loop bounds: 3 starts in 30 minutes. A compile takes hours, so a rank that crashes after one restarts; one that crashes at once is failed within minutes. */
    startLimitBurst: 3,
    startLimitIntervalSeconds: 1800,
    limitNofile: 1048576,
  },
  /** How often a step asks a starting rank whether it serves (and prints a progress line, docs/progress.md). */
  readinessIntervalSeconds: 30,
  /** How often the install, download and copy steps print a progress line (docs/progress.md). */
  progressIntervalSeconds: 30,
  pip: { retries: 5, timeoutSeconds: 60 },
  /**
   * The bounds the host steps' Pulumi timeouts are summed from (stepTimeouts.ts), in seconds: the
   * budgets of work nothing else bounds (pip, a download, a copy, an image pull, a registry
   * transfer), and the fixed waits of the scripts and of systemd.
   */
  steps: {
    /** A step's own commands (files, systemctl, a probe's answer). */
    commandSeconds: 300,
    installSeconds: 2 * 3600,
    downloadSeconds: 8 * 3600,
    copySeconds: 8 * 3600,
    /** One attempt of a container image pull (images.sh tries three times). */
    imagePullSeconds: 1200,
    /** A compiled cache pulled from or pushed to the registry. */
    registryTransferSeconds: 2 * 3600,
    /** What core/probe.py gives one request (serving.sh, compile-key.sh, http.sh: 10 s or less). */
    probeTimeoutSeconds: 10,
    /** systemd's DefaultTimeoutStartSec and DefaultTimeoutStopSec, for units that set none (containers, compile-only runs). */
    systemdStartSeconds: 90,
    systemdStopSeconds: 90,
    /** A call to the router host over peer-ssh.sh: its ConnectTimeout, and a dead link's ServerAliveInterval × ServerAliveCountMax (ssh's 3). */
    peerSsh: { connectSeconds: 30, deadLinkSeconds: 3 * 30 },
  },
  /** A rebooting host refuses connections for a while: keep dialing. */
  ssh: { dialErrorLimit: 60, perDialTimeout: 30 },
  locks: {
    /** Host-wide: every deployment on the host, whatever its install root, switches units under it. */
    units: "/run/rbln-serving-units.lock",
    /** The service account and the cache folders are set up under it (install and weights run side by side). */
    setup: "/run/rbln-serving-setup.lock",
  },
  copy: {
    /** root's authorized_keys on a source host, where a one-time grant goes. */
    authorizedKeys: "/root/.ssh/authorized_keys",
    /** A grant left behind by a failed copy stops working after this many hours: longer than a copy step may take (its timeout, stepTimeouts.ts). */
    grantExpiryHours: 12,
  },
  /** Where the units go on the hosts. */
  systemdUnitDir: "/etc/systemd/system",
  /** Python versions vllm-rbln 0.12 supports with the kv_connectors extra (lmcache stops at 3.13). */
  pythonVersions: ["3.10", "3.11", "3.12", "3.13"],
  /** The vLLM 0.30 CPU wheel that vllm-rbln 0.12 pulls in is built for glibc 2.39. */
  minGlibc: "2.39",
  /** The front door on a router host (core/render/hosts/frontDoor): the EPP, Envoy, the agent, and the sidecars. */
  frontDoor: {
    runtimes: { podman: "/usr/bin/podman", docker: "/usr/bin/docker" },
    /** The EPP's pool (`--pool-namespace`; `--pool-name` is the deployment id) and its endpoints' namespace. */
    poolNamespace: "rbln-serving",
    /** How often the agent asks every endpoint whether it serves, and how long one answer may take. */
    intervalSeconds: 1,
    probeTimeoutSeconds: 2,
    /** After a drain's rename: the EPP's reload, and the requests it placed just before reaching their rank. */
    settleSeconds: 3,
    /**
     * A drain ends by its step's rejoin, or when its lease runs out: the step renews it every
     * drainRenewSeconds while it runs, so one that died leaves its endpoint out for a lease at most,
     * and four renewals may fail (an SSH connect waits 30 s) before a running step loses it.
     */
    drainLeaseSeconds: 300,
    drainRenewSeconds: 60,
    /** A container's stop: SIGTERM, then this long before the runtime kills it. */
    containerStopSeconds: 30,
    /** How long the front door's step waits for Envoy and the EPP to answer, image pulls excluded. */
    readyTimeoutSeconds: 600,
    /** How long a sidecar's step waits for it to answer on every port. */
    sidecarReadyTimeoutSeconds: 300,
    /** nftables' nft on a decode host: the sidecar's unit loads its guard with it (sidecarFirewall.ts). */
    firewall: "/usr/sbin/nft",
    /**
     * The user the distroless Envoy image runs as (distroless nonroot), who alone may read the API
     * key filter's config and, with several router hosts, its TLS key
     * (test/fixtures/front-door-trust/exposure.json, envoy.distrolessUser).
     */
    envoyUid: 65532,
    /** A front door of several router hosts (router.hosts; core/render/hosts/frontDoor/keepalived.ts, tls.ts). */
    failover: {
      /** Envoy's --drain-time-s: after /drain_listeners?graceful it discourages requests this long, then its listeners close. */
      envoyDrainSeconds: 10,
      /** How long the stack's TLS certificates for the router hosts stay valid, in days. */
      tlsDays: 3650,
      /** keepalived's binary, where Debian and RHEL install it. */
      keepalived: "/usr/sbin/keepalived",
      /** How long a changing router host waits for a peer to answer at the virtual address it gave up. */
      takeoverSeconds: 15,
    },
  },
  /** The compile host (compile.host, compileHost.ts). */
  compile: {
    /**
     * Memory a compile wants, GiB: not published by Rebellions; the figure the serving pods get for
     * the same model (kubernetes/defaults.ts), which covers the weights in host memory and the
     * compiler. Below it preflight warns, it does not refuse.
     */
    minMemoryGib: 384,
    /** Free disk under cacheRoot: the weights' (minFreeDiskGb) plus room for compiled caches (minFreeDiskGbToRestart's 50 GiB). */
    cacheRoomGib: 50,
  },
  /** The shared cache's leases and completion markers: a folder of its own on the shared filesystem. */
  sharedLockDir: "rbln-serving-locks",
  sharedLease: LEASE_DEFAULTS,
} as const;
