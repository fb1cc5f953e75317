#!/usr/bin/env bash
# The front door's TLS between its router hosts: a CA of the stack's own and a certificate per router
# host (its name as the DNS name, for serving its EPP to the peers and for reaching theirs), made on
# the first router host and kept there, so a run again prints the same ones and the CA's key never
# leaves this host. One step per router host (routers names it): stdout, a secret (it holds the key),
# `ca <base64 PEM>` and `<name> <base64 certificate PEM> <base64 key PEM>`, which that host's apply
# step reads on stdin.
set -euo pipefail
# --- settings (the renderer writes the real values here) ---
host_name=router-0
state_dir=/opt/rbln-serving/router/dev
id=dev
routers=(router-0 router-1)
days=3650
# --- end of settings ---

fail() { echo "front door ${host_name}: $*" >&2; exit 1; }
command -v openssl >/dev/null || fail "openssl not found: install it (it makes the front door's TLS certificates)"
umask 077
dir="$state_dir/tls-issuer"
install -d -m 0700 "$state_dir" "$dir"
exec 9> "$dir/lock"
flock 9
# openssl's output says nothing the step needs unless it fails: then it goes to stderr.
quiet() { local out; out=$("$@" 2>&1) || { printf '%s\n' "$out" >&2; fail "openssl failed: $*"; }; }

if [ ! -s "$dir/ca.key" ] || [ ! -s "$dir/ca.crt" ]; then
  quiet openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/ca.key.new" -out "$dir/ca.crt.new" \
    -days "$days" -subj "/O=rbln-serving/CN=rbln-serving front door ${id} CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
  mv -f "$dir/ca.key.new" "$dir/ca.key"
  mv -f "$dir/ca.crt.new" "$dir/ca.crt"
  # A new CA: every certificate is made again under it.
  rm -f "$dir"/host-*.crt
fi
for name in "${routers[@]}"; do
  crt="$dir/host-$name.crt" key="$dir/host-$name.key"
  [ -s "$crt" ] && [ -s "$key" ] && openssl verify -CAfile "$dir/ca.crt" "$crt" >/dev/null 2>&1 && continue
  quiet openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$key.new" -out "$dir/host-$name.csr" -subj "/O=rbln-serving/CN=$name"
  printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n' "$name" > "$dir/host-$name.ext"
  quiet openssl x509 -req -in "$dir/host-$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days "$days" -extfile "$dir/host-$name.ext" -out "$crt.new"
  mv -f "$key.new" "$key"
  mv -f "$crt.new" "$crt"
  rm -f "$dir/host-$name.csr" "$dir/host-$name.ext"
done
printf 'ca %s\n' "$(base64 -w0 "$dir/ca.crt")"
for name in "${routers[@]}"; do
  printf '%s %s %s\n' "$name" "$(base64 -w0 "$dir/host-$name.crt")" "$(base64 -w0 "$dir/host-$name.key")"
done
