#!/usr/bin/env bash
# The pretest step of `npm test` and `npm run test:hosts`: the real tools the suites check rendered artifacts with, from Debian.
# As root it installs what is missing; otherwise it prints the one apt-get line to run and fails.
set -euo pipefail

need=()
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v shellcheck >/dev/null || need+=(shellcheck)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
# runuser, and unshare and setpriv for the fake NPU hosts (test/helpers/hostNamespace.ts).
{ command -v runuser && command -v unshare && command -v setpriv && command -v nsenter; } >/dev/null || need+=(util-linux)
# ip for the fake hosts on networks of their own: a bridge, veths, addresses (test/helpers/hostNetwork.ts).
command -v ip >/dev/null || need+=(iproute2)
# promtool checks and unit-tests the alert rules and parses the dashboard's queries; a real prometheus scrapes fake ranks.
{ command -v promtool && command -v prometheus; } >/dev/null || need+=(prometheus)
# Host-to-host copies: rsync, and rrsync (Debian ships it in the rsync package) on the source.
[ -x /usr/bin/rrsync ] || need+=(rsync)
# The compiled-cache registry (compile.registry): a real OCI registry on loopback (distribution 2.8)
# and skopeo, which the compile host and NPU hosts push and pull with.
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v skopeo >/dev/null || need+=(skopeo)
# The host scripts run over SSH with the system python3; its venv module is a separate package.
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
# The front door's stand-ins (test/fixtures/stand-ins) read the EPP's and Envoy's YAML with PyYAML.
/usr/bin/python3 -c 'import yaml' 2>/dev/null || need+=(python3-yaml)
# The HA front door: keepalived (VRRP) on fake router hosts, and its -t checks rendered configs; the test pair's
# vrrp_script probes readiness with curl (test/helpers/keepalived.ts).
command -v curl >/dev/null || need+=(curl)
[ -x /usr/sbin/keepalived ] || need+=(keepalived)
# The routing sidecar's guard: its unit loads an nftables table (real nft on hosts with networks of their own, and a
# check-only nft where hosts share this machine's network: test/fixtures/stand-ins/nft-check-only-stand-in).
[ -x /usr/sbin/nft ] || need+=(nftables)
# LuaJIT, Envoy's Lua: the front door's body-to-header script runs under it (test/models-hosts-routing.test.ts).
command -v luajit >/dev/null || need+=(luajit)

[ "${#need[@]}" -eq 0 ] && exit 0

line="apt-get install -y --no-install-recommends ${need[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "npm test needs: ${need[*]}; run as root: apt-get update && $line" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
