import { quoteShellWord } from "./shell";
import { packageFile } from "./template";

/** The one health probe (core/probe.py): hosts' unit steps, the Kubernetes exec probes and the compile lock's check run this text. */
export const PROBE_SCRIPT = packageFile("core/probe.py");

/** `python3 -c PROBE HOST TIMEOUT PORTS PATHS`: every path on every port of the host answers 200 (with $VLLM_API_KEY if set). */
export function probeCommand(host: string, timeoutSeconds: number, ports: readonly number[], paths: readonly string[]): string[] {
  return ["python3", "-c", PROBE_SCRIPT, host, String(timeoutSeconds), ports.join(","), paths.join(",")];
}

/** The probe command as shell text, for `bash -c` (the lease lock's readiness check). */
export function probeShellText(host: string, timeoutSeconds: number, ports: readonly number[], paths: readonly string[]): string {
  return probeCommand(host, timeoutSeconds, ports, paths).map(quoteShellWord).join(" ");
}
