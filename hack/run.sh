#!/usr/bin/env bash
# Runs the operator for `make run`.
#
# Without KUBECONFIG: installs the operator on a local cluster the way a user's cluster does,
# through the real OLM v0 on a real node: it starts the local control plane with its node
# (NODE=kubelet hack/control-plane.sh: kubelet, containerd, CoreDNS) and installs through
# hack/olm-install.sh (the images built from the shipped Dockerfiles and pushed to the local
# registry, OLM's own Deployments, the catalog image as a CatalogSource, a Subscription; it
# waits for a Succeeded CSV and the operator's webhooks), with cert-manager started first
# (hack/cert-manager.sh) so that the operator finds its API. It then applies config/samples
# and the production example config/samples/production (TLS issued by a cert-manager CA
# issuer, credentials, metrics, a NetworkPolicy, warm restarts) after its credentials Secret,
# made with a random password by the example's create-auth-secret.sh (the example ships
# none), waits until every Memcached is
# Available with its servers, prints how to reach one by its DNS name from inside the cluster
# and how to read the production servers' metrics, and follows the operator's logs until
# Ctrl-C, which stops everything it started (the logs under the state directory's logs/ stay).
#
# With KUBECONFIG: runs the operator against that cluster with its webhooks off (the cluster
# cannot call a process on this machine); the CRD must be installed (`make install`).
#
# Environment (local cluster): CONTROL_PLANE_DIR (state directory, default .local),
# RUN_TIMEOUT (seconds each wait may take, default 180).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
KUBECTL="$ROOT/.tools/bin/kubectl"
if [[ -n "${KUBECONFIG:-}" ]]; then
  BIN="$ROOT/target/debug/memcached-operator"
  [[ -x "$BIN" ]] || { echo "run: $BIN is missing: run make build" >&2; exit 1; }
  echo "run: KUBECONFIG is set: running the operator against $("$KUBECTL" config current-context 2>/dev/null || echo that cluster), webhooks off" >&2
  exec "$BIN" run --webhooks=false --leader-elect=false --bind-address 127.0.0.1 --log-format text
fi
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
LOGS="$STATE/logs"
TIMEOUT="${RUN_TIMEOUT:-180}"

say() { printf 'run: %s\n' "$*" >&2; }
T0=$EPOCHREALTIME
since() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

tmp="$(mktemp -d /tmp/memcached-operator-run.XXXXXX)"
follow_pid=""
started=0
# The cluster belongs to this script (CONTROL_PLANE_OWNER): its supervisor stops it when this
# script ends, even by SIGKILL. On Ctrl-C it is stopped here, in sight; a cluster this run did
# not start (the start refuses to carry on with one) is never stopped.
cleanup() {
  trap - EXIT INT TERM
  if [[ -n "$follow_pid" ]]; then
    kill "$follow_pid" 2>/dev/null || true
    wait "$follow_pid" 2>/dev/null || true
  fi
  if ((started)); then
    say "stopping: OLM, the operator, the node and its pods, the control plane"
    CONTROL_PLANE_OWNER=$$ "$ROOT/hack/control-plane.sh" stop || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kubectl() { "$KUBECTL" --kubeconfig "$STATE/kubeconfig" --cache-dir "$tmp/kubectl-cache" "$@"; }
# shellcheck source=hack/lib/samples.sh
source "$ROOT/hack/lib/samples.sh"


started=1
NODE=kubelet CONTROL_PLANE_OWNER=$$ "$ROOT/hack/control-plane.sh" start >/dev/null || {
  started=0
  exit 1
}
export KUBECONFIG="$STATE/kubeconfig"
# Before the operator: it looks for cert-manager's API when it starts.
CONTROL_PLANE_DIR="$STATE" "$ROOT/hack/cert-manager.sh" start >/dev/null
installed="$(CONTROL_PLANE_DIR="$STATE" INSTALL_TIMEOUT="$TIMEOUT" "$ROOT/hack/olm-install.sh" start)"
value() { awk -F= -v k="$1" '$1 == k { print substr($0, length(k) + 2) }' <<<"$installed"; }
csv="$(value CSV)"
namespace="$(value NAMESPACE)"
csv_done="$(since)"

kubectl apply -k "$ROOT/config/samples"
KUBECTL="$KUBECTL" sh "$ROOT/config/samples/production/create-auth-secret.sh" >&2
kubectl apply -k "$ROOT/config/samples/production"

wait_until "every Memcached to be Available with its servers (memcached pods on the node)" \
  memcacheds_available
all_done="$(since)"

servers="$(memcached_servers)"
# The plain sample for the plaintext `stats`; the production one serves TLS to authenticated
# clients, and its metrics in plain HTTP.
first="$(kubectl get memcached memcached-sample -o 'jsonpath={.metadata.namespace} {.status.servers[0]}')"
read -r first_namespace first_server <<<"$first"
production="$(kubectl get memcached memcached-production -o 'jsonpath={.status.servers[0]}')"
client_image="$("$ROOT/hack/images.sh" reference busybox)"

cat >&2 <<MSG

run: installed through OLM on the node: CSV $csv Succeeded at ${csv_done}s, every Memcached Available at ${all_done}s.
In another terminal:
  export KUBECONFIG=$STATE/kubeconfig
  .tools/bin/kubectl get subscriptions,installplans,csv -n $namespace
  .tools/bin/kubectl get deployments,pods -n $namespace -o wide
  .tools/bin/kubectl get memcacheds -A
  .tools/bin/kubectl get statefulsets,services,poddisruptionbudgets,pods -A -l app.kubernetes.io/name=memcached -o wide
Memcacheds and their servers, by the names cluster DNS resolves:
$(sed 's/^/  /' <<<"$servers")
memcached's stats from inside the cluster, by a server's name:
  .tools/bin/kubectl run mc-client -n $first_namespace --rm -i --restart=Never --image=$client_image -- \\
    sh -c 'printf "stats\\r\\nquit\\r\\n" | nc -w 5 ${first_server%:*} ${first_server##*:}'
The production example's password, made at random by config/samples/production/create-auth-secret.sh:
  .tools/bin/kubectl get secret memcached-production-auth -o jsonpath='{.data.authfile}' | base64 -d
The production example's metrics (memcached_exporter beside each TLS, authenticated server):
  .tools/bin/kubectl run mc-metrics -n $first_namespace --rm -i --restart=Never --image=$client_image -- \\
    sh -c 'printf "GET /metrics HTTP/1.0\\r\\n\\r\\n" | nc -w 5 ${production%:*} 9150 | grep -E "^memcached_(up|current_items|version)"'
Logs: $LOGS/ (kubelet.log, containerd.log, control plane); pods': .tools/bin/kubectl logs
Ctrl-C stops everything this started.
The operator's logs follow.

MSG
kubectl logs -f -n "$namespace" -l control-plane=controller-manager --prefix --tail=5 --max-log-requests=4 &
follow_pid=$!
while [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]]; do sleep 2; done
say "the control plane stopped answering; see $LOGS/"
exit 1
