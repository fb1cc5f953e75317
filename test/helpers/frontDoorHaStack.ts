import type { ModelServingArgs } from "../../components/modelServing";
import { DEFAULT_INSTANCE, deploymentId } from "../../core/render/hosts/names";
import type { UpResult } from "./engine";
import { startHosts, type TestHost } from "./hostNamespace";
import { startNetwork, type TestNetwork } from "./hostNetwork";
import { fakeHostsEngine, fakeHostsSettings, servingUnderMocks } from "./hostStack";
import { outputValue } from "./pulumiHarness";
import { installStandIns } from "./standIns";
import { prepareStandInServer } from "./standInServer";

/**
 * A hosts stack behind a front door of two router hosts (router.hosts, router.virtualAddress; issue
 * 28), for real: two fake NPU hosts and two router hosts, each with its own network namespace on one
 * test network (test/helpers/hostNetwork.ts), so VRRP runs, an address can move and a host can be cut
 * off. Real systemd, sshd, keepalived and openssl; stand-ins replace vLLM, the container runtime, the
 * EPP and Envoy (test/fixtures/stand-ins). The program's commands run over SSH in graph order
 * (test/helpers/engine.ts).
 */
const INSTALL_ROOT = "/opt/rbln-ha-test";
const CACHE_ROOT = "/var/lib/rbln-ha-test";
const STAND_INS = "/opt/rbln-ha-stand-ins";
const VENV = `${INSTALL_ROOT}/venvs/test/rebel-compiler-0.12.0_vllm-rbln-0.12.0`;
const FAKE_DEV = `${INSTALL_ROOT}/dev`;
/** The front door's port on the router hosts. */
export const HA_FRONT_DOOR_PORT = 18080;
/** The deployment's id under the engine (stack `test`): it names units and folders. */
const ID = deploymentId("test", DEFAULT_INSTANCE);
export const haUnit = (part: string) => `rbln-serving-${ID}.front-door-${part}.service`;
const ROUTER_DIR = `${INSTALL_ROOT}/router/${ID}`;
/** The EPP's endpoints file on a router host (the agent keeps it). */
export const HA_ENDPOINTS_FILE = `${ROUTER_DIR}/epp/endpoints.yaml`;

type Settings = ModelServingArgs["settings"];

export interface HaStack {
  network: TestNetwork;
  /** door-a (the first, keepalived's highest priority) and door-b. */
  routers: [TestHost, TestHost];
  npuHosts: [TestHost, TestHost];
  virtualAddress: string;
  /** The front door at the virtual address: what clients use. */
  url: string;
  /** The stack's settings, with top-level settings over them. */
  settings(more?: Record<string, unknown>): Settings;
  /** A deploy, and the stack's `endpoints` output. */
  up(settings: Settings): Promise<UpResult & { endpoints: string[] }>;
  /** The router host that holds the virtual address now (read on its console), or null. */
  holder(): Promise<TestHost | null>;
  /** The endpoints file the holder's EPP reads (the first router host's while none holds the address). */
  endpointsFile(): Promise<string>;
  /** The pid of the EPP's program on a router host (the stand-in runtime's record of its container). */
  eppPid(router: TestHost): Promise<number>;
  stop(): Promise<void>;
}

async function sh(host: TestHost, command: string): Promise<string> {
  const result = await host.console(command);
  if (result.status !== 0) throw new Error(`${host.name}: ${command}: ${result.stderr}`);
  return result.stdout;
}

/** Boots the four hosts and puts the stand-ins on them; nothing deployed yet. */
export async function startHaStack(): Promise<HaStack> {
  const network = await startNetwork();
  let hosts: TestHost[] = [];
  try {
    hosts = await startHosts(4, { network, privatePaths: [INSTALL_ROOT, CACHE_ROOT, STAND_INS] });
    const runtime = (await Promise.all(hosts.map((host) => installStandIns(host, STAND_INS, { ownNetwork: true }))))[0]!;
    const [routers, npuHosts] = [hosts.slice(0, 2) as [TestHost, TestHost], hosts.slice(2) as [TestHost, TestHost]];
    const marker = `${CACHE_ROOT}/huggingface/rbln-serving-complete/MiniMaxAI--MiniMax-M2.7`;
    for (const host of npuHosts) {
      await prepareStandInServer(host, { venv: VENV, devRoot: FAKE_DEV });
      await sh(host, `install -d $(dirname ${marker}) && touch ${marker}`);
    }
    const virtualAddress = network.spareAddress(0);
    const router = (host: TestHost, name: string) => ({ name, address: host.address, port: host.port, hostKey: host.hostPublicKey });
    const stack = {
      ...fakeHostsSettings(npuHosts, { installRoot: INSTALL_ROOT, cacheRoot: CACHE_ROOT }),
      router: { hosts: [router(routers[0], "door-a"), router(routers[1], "door-b")], virtualAddress, port: HA_FRONT_DOOR_PORT },
      // In-flight requests finish within a second; the stops need not wait an hour.
      rollout: { shutdownTimeoutSeconds: 30 },
      extraEnv: { main: { FAKE_VLLM_READY_AFTER: "2", FAKE_VLLM_REQUEST_SECONDS: "0.3" } },
    };
    const engine = fakeHostsEngine(hosts);
    const holder = async () => {
      for (const host of routers) if ((await host.console("ip -o address show dev eth0")).stdout.includes(` ${virtualAddress}/`)) return host;
      return null;
    };
    return {
      network,
      routers,
      npuHosts,
      virtualAddress,
      url: `http://${virtualAddress}:${HA_FRONT_DOOR_PORT}`,
      settings: (more = {}) => ({ ...stack, ...more }),
      up: async (config) => {
        const { registrations, serving } = await servingUnderMocks(config, {
          hostOptions: {
            readinessIntervalSeconds: 1,
            restartSeconds: 1,
            startLimitBurst: 3,
            startLimitIntervalSeconds: 120,
            devRoot: FAKE_DEV,
            containerRuntime: runtime,
          },
          copyOptions: { authorizedKeysFile: "/run/rbln-host/ssh/authorized_keys" },
        });
        const endpoints = await outputValue(serving.endpoints);
        return { ...(await engine.up(registrations)), endpoints };
      },
      holder,
      endpointsFile: async () => sh((await holder()) ?? routers[0], `cat ${HA_ENDPOINTS_FILE}`),
      eppPid: async (host) => {
        const record = await sh(host, `cat ${STAND_INS}/stand-ins/container-runtime-stand-in.state/containers/rbln-serving-${ID}-epp.json`);
        return (JSON.parse(record) as { pid: number }).pid;
      },
      stop: async () => {
        await Promise.all(hosts.map((h) => h.stop()));
        await network.stop();
      },
    };
  } catch (error) {
    await Promise.all(hosts.map((h) => h.stop()));
    await network.stop();
    throw error;
  }
}
