# shellcheck shell=bash
# tcp_open ADDRESS PORT: 0 when something takes TCP connections there within 5 s.
tcp_open() {
  python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()' "$1" "$2" 2>/dev/null
}

# http_ok URL [BODY]: 0 when GET URL answers 200 (and its body starts with BODY, if given) within 5 s.
http_ok() {
  python3 - "$1" "${2:-}" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as answer:
        sys.exit(0 if answer.status == 200 and answer.read(4096).decode("utf-8", "replace").startswith(sys.argv[2]) else 1)
except Exception:
    sys.exit(1)
PY
}
