"""rbln-serving's health probe: GET every path on every port of a host; exit 0 when each answers 200.

  python3 probe.py HOST TIMEOUT PORTS PATHS [PID]

HOST is an address (IPv6 without brackets); TIMEOUT the seconds one request may take; PORTS and
PATHS are comma-separated (8000,8001 and /health,/v1/models). The API key, for vLLM's guarded
paths: $VLLM_API_KEY, or with PID the VLLM_API_KEY systemd gave that process (/proc/PID/environ),
byte for byte what vLLM got; PID 0 sends none. Hosts' unit steps, the Kubernetes exec probes and the
compile lock's readiness check all run this one text.
"""
import os, sys, urllib.request

host, timeout, ports, paths = sys.argv[1:5]
pid = sys.argv[5] if len(sys.argv) > 5 else ""
address = f"[{host}]" if ":" in host else host
try:
    key = os.environ.get("VLLM_API_KEY", "").encode()
    if pid:
        key = b""
        if pid != "0":
            # The process may have just ended: then this probe fails, as its rank does not serve.
            with open(f"/proc/{pid}/environ", "rb") as environ:
                for entry in environ.read().split(b"\0"):
                    name, _, value = entry.partition(b"=")
                    if name == b"VLLM_API_KEY":
                        key = value
    headers = {"Authorization": b"Bearer " + key} if key else {}
    for port in ports.split(","):
        for path in paths.split(","):
            request = urllib.request.Request(f"http://{address}:{port}{path}", headers=headers)
            with urllib.request.urlopen(request, timeout=float(timeout)) as answer:
                if answer.status != 200:
                    sys.exit(1)
except Exception:
    sys.exit(1)
