#!/usr/bin/env bash
# Runs the operator for `make run`.
#
# Without KUBECONFIG: starts the local control plane (hack/control-plane.sh), writes a serving
# certificate into a temporary root laid out like OLM's mounts, runs the operator in the
# foreground with its webhooks on a free loopback port, installs the CRD and the webhook
# wiring OLM would create (calling that port), and applies config/samples. Ctrl-C stops the
# operator and the control plane and removes the temporary files.
#
# With KUBECONFIG: runs the operator against that cluster with its webhooks off (the cluster
# cannot call a process on this machine); the CRD must be installed (`make install`).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/target/debug/memcached-operator"
PACKAGER="$ROOT/target/debug/memcached-packager"
KUBECTL="$ROOT/.tools/bin/kubectl"
for built in "$BIN" "$PACKAGER"; do
  [[ -x "$built" ]] || { echo "run: $built is missing: run make build" >&2; exit 1; }
done

if [[ -n "${KUBECONFIG:-}" ]]; then
  echo "run: KUBECONFIG is set: running the operator against $("$KUBECTL" config current-context 2>/dev/null || echo that cluster), webhooks off" >&2
  exec "$BIN" run --webhooks=false --leader-elect=false --bind-address 127.0.0.1 --log-format text
fi

STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
certs="$(mktemp -d /tmp/memcached-operator-certs.XXXXXX)"
operator_pid=""
cleanup() {
  trap - EXIT INT TERM
  if [[ -n "$operator_pid" ]] && kill -0 "$operator_pid" 2>/dev/null; then
    kill -TERM "$operator_pid" 2>/dev/null || true
    wait "$operator_pid" 2>/dev/null || true
  fi
  rm -rf "$certs"
  "$ROOT/hack/control-plane.sh" stop || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$ROOT/hack/control-plane.sh" start >/dev/null
export KUBECONFIG="$STATE/kubeconfig"
"$ROOT/hack/dev-certs.sh" "$certs"
webhook_port=$(free_port)
probe_port=$(free_port)
metrics_port=$(free_port)

POD_NAMESPACE=default "$BIN" --log-format text run \
  --cert-root "$certs" --bind-address 127.0.0.1 \
  --webhook-port "$webhook_port" --probe-port "$probe_port" --metrics-port "$metrics_port" &
operator_pid=$!

for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$probe_port/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$operator_pid" 2>/dev/null || { echo "run: the operator exited" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$probe_port/readyz" >/dev/null || { echo "run: the operator never became ready" >&2; exit 1; }

"$PACKAGER" install-webhooks --bundle "$ROOT/bundle/manifests" \
  --url "https://127.0.0.1:$webhook_port" --ca-file "$certs/ca.crt" --namespace default
"$KUBECTL" wait --for condition=Established --timeout 30s crd/memcacheds.cache.f2367556.dev >/dev/null
"$KUBECTL" apply -k "$ROOT/config/samples"

cat >&2 <<MSG

The operator runs (logs below); its webhooks are called by the local kube-apiserver.
In another terminal:
  export KUBECONFIG=$STATE/kubeconfig
  .tools/bin/kubectl get memcacheds
  .tools/bin/kubectl get statefulsets,services,poddisruptionbudgets
Metrics: http://127.0.0.1:$metrics_port/metrics   Probes: http://127.0.0.1:$probe_port/readyz
No kubelet runs here, so memcached pods are created but never start.
Ctrl-C stops the operator and the control plane.

MSG
wait "$operator_pid"
