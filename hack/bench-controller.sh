#!/usr/bin/env bash
# Measures the operator (`run`, webhooks off) with N Memcached objects (default 1000) in its
# caches, on a local control plane of its own: the time from creating them to every one being
# reconciled (StatefulSet and Service written, status reported), and the resident memory idle
# before, while reconciling (peak) and settled after. Objects have 0 replicas, so no pods are
# made. Writes target/bench/controller.json and prints a summary.
#
# Usage: hack/bench-controller.sh [N]
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
N="${1:-1000}"
BIN="$ROOT/target/release/memcached-operator"
KUBECTL="$ROOT/.tools/bin/kubectl"
OUT="$ROOT/target/bench/controller.json"
[[ -x "$BIN" ]] || { echo "bench-controller: build it first: cargo build --release" >&2; exit 1; }

export CONTROL_PLANE_DIR
CONTROL_PLANE_DIR="$(mktemp -d /tmp/memcached-operator-bench.XXXXXX)"
operator_pid=""
cleanup() {
  [[ -n "$operator_pid" ]] && kill -TERM "$operator_pid" 2>/dev/null && wait "$operator_pid" 2>/dev/null
  "$ROOT/hack/control-plane.sh" stop >/dev/null 2>&1 || true
  rm -rf "$CONTROL_PLANE_DIR"
}
trap cleanup EXIT

"$ROOT/hack/control-plane.sh" start >/dev/null
export KUBECONFIG="$CONTROL_PLANE_DIR/kubeconfig"
kubectl() { "$KUBECTL" "$@"; }
kubectl apply --server-side -f "$ROOT/bundle/manifests/cache.f2367556.dev_memcacheds.yaml" >/dev/null
kubectl wait --for condition=Established --timeout 30s crd/memcacheds.cache.f2367556.dev >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
metrics_port=$(free_port)
probe_port=$(free_port)
"$BIN" --log-format json --log-level warn run --webhooks=false --leader-elect=false \
  --bind-address 127.0.0.1 --probe-port "$probe_port" --metrics-port "$metrics_port" \
  >"$CONTROL_PLANE_DIR/operator.log" 2>&1 &
operator_pid=$!
until curl -fsS "http://127.0.0.1:$probe_port/readyz" >/dev/null 2>&1; do sleep 0.1; done

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$operator_pid/status"; }
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$operator_pid/status"; }
sleep 2
idle_rss=$(rss)

python3 - "$N" >"$CONTROL_PLANE_DIR/objects.json" <<'PY'
import json, sys
n = int(sys.argv[1])
items = [{"apiVersion": "cache.f2367556.dev/v1beta1", "kind": "Memcached",
          "metadata": {"name": f"cache-{i:04d}", "namespace": "default"},
          "spec": {"replicas": 0}} for i in range(n)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
start=$(date +%s.%N)
kubectl create -f "$CONTROL_PLANE_DIR/objects.json" >/dev/null
created=$(date +%s.%N)
peak=$idle_rss
while true; do
  current=$(rss); (( current > peak )) && peak=$current
  reported=$(kubectl get memcacheds -n default -o jsonpath='{range .items[*]}{.status.observedGeneration}{"\n"}{end}' | grep -c . || true)
  statefulsets=$(kubectl get statefulsets -n default --no-headers 2>/dev/null | wc -l)
  (( reported >= N && statefulsets >= N )) && break
  sleep 0.5
done
done_at=$(date +%s.%N)
sleep 5
settled_rss=$(rss)
peak_hwm=$(hwm)
reconciliations=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics" | awk '/^memcached_operator_controller_reconciliations_total/ {print $2}')
cpu_ticks=$(awk '{print $14 + $15}' "/proc/$operator_pid/stat")
ticks_per_second=$(getconf CLK_TCK)

mkdir -p "$(dirname "$OUT")"
python3 - "$N" "$start" "$created" "$done_at" "$idle_rss" "$peak" "$peak_hwm" "$settled_rss" \
  "$reconciliations" "$cpu_ticks" "$ticks_per_second" >"$OUT" <<'PY'
import json, sys
n, start, created, done, idle, peak, hwm, settled, recs, ticks, hz = sys.argv[1:]
print(json.dumps({
    "objects": int(n),
    "create_seconds": round(float(created) - float(start), 2),
    "all_reconciled_seconds": round(float(done) - float(start), 2),
    "rss_idle_mib": round(int(idle) / 1024, 1),
    "rss_peak_sampled_mib": round(int(peak) / 1024, 1),
    "rss_high_water_mib": round(int(hwm) / 1024, 1),
    "rss_settled_mib": round(int(settled) / 1024, 1),
    "reconciliations": int(float(recs or 0)),
    "cpu_seconds": round(int(ticks) / int(hz), 2),
}, indent=2))
PY
cat "$OUT"
