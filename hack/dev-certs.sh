#!/usr/bin/env bash
# Writes a throwaway CA and a serving certificate for localhost/127.0.0.1 into DIR, laid out
# exactly as OLM mounts a webhook certificate into the operator's pod, so that
#   memcached-operator webhooks --cert-root DIR
# serves without a cluster. The CA is DIR/ca.crt (for curl --cacert). Requires openssl.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir=$1
serving="$dir/tmp/k8s-webhook-server/serving-certs"
apiserver="$dir/apiserver.local.config/certificates"
mkdir -p "$serving" "$apiserver"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 730 \
  -subj "/CN=memcached-operator dev CA" \
  -keyout "$work/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/CN=localhost" -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
cat >"$work/ext.cnf" <<EXT
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
EXT
openssl x509 -req -in "$work/tls.csr" -CA "$dir/ca.crt" -CAkey "$work/ca.key" \
  -CAcreateserial -days 365 -extfile "$work/ext.cnf" -out "$work/tls.crt" 2>/dev/null

install -m 0644 "$work/tls.crt" "$serving/tls.crt"
install -m 0600 "$work/tls.key" "$serving/tls.key"
install -m 0644 "$work/tls.crt" "$apiserver/apiserver.crt"
install -m 0600 "$work/tls.key" "$apiserver/apiserver.key"
echo "wrote $serving/tls.{crt,key}, $apiserver/apiserver.{crt,key} and $dir/ca.crt"
