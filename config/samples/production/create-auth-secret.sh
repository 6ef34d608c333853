#!/bin/sh
# Creates the Secret memcached-production-auth, whose authfile key memcached-production's servers
# read their credentials from, with a random password, unless it exists. The example
# ships no password. Read it back with:
#   kubectl get secret memcached-production-auth -o jsonpath='{.data.authfile}' | base64 -d
# Written by memcached-packager generate.
set -eu
kubectl="${KUBECTL:-kubectl}"
if "$kubectl" get secret memcached-production-auth >/dev/null 2>&1; then
  echo "secret/memcached-production-auth exists: kept"
  exit 0
fi
printf 'app:%s\n' "$(openssl rand -hex 24)" |
  "$kubectl" create secret generic memcached-production-auth --from-file=authfile=/dev/stdin
