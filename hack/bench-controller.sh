#!/usr/bin/env bash
# Measures the operator (`run`, webhooks off) with N Memcached objects (default 1000) in its
# caches, on a local control plane of its own: the time from creating them to every one being
# reconciled (StatefulSet and Service written, status reported), and the resident memory idle
# before, while reconciling (peak) and settled after. Objects have 0 replicas, so no pods are
# made. Before the objects, it scrapes the (HTTPS) metrics SCRAPES times (default 50) with a
# token bound to the metrics-reader role: the API calls (TokenReviews, SubjectAccessReviews,
# counted by the API server) of the first scrape and of the cached ones, and their latency.
# Writes target/bench/controller.json and prints a summary.
#
# Usage: hack/bench-controller.sh [N]
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
N="${1:-1000}"
SCRAPES="${SCRAPES:-50}"
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

# Metrics scrapes, as Prometheus makes them: HTTPS (the certificate is self-signed here, so not
# verified), the bearer token of a ServiceAccount bound to the metrics-reader role.
kubectl apply --server-side -f "$ROOT/config/rbac/metrics_reader_role.yaml" >/dev/null
kubectl create serviceaccount bench-scraper -n default >/dev/null
kubectl create clusterrolebinding bench-scraper --clusterrole memcached-operator-metrics-reader \
  --serviceaccount default:bench-scraper >/dev/null
token=$(kubectl create token bench-scraper -n default --duration 1h)
until [[ "$(kubectl auth can-i get /metrics --as system:serviceaccount:default:bench-scraper)" == yes ]]; do sleep 0.2; done
metrics_url="https://127.0.0.1:$metrics_port/metrics"
scrape() { curl -sS -k -o /dev/null -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $token" "$metrics_url"; }
# Reviews the API server has served: TokenReviews and SubjectAccessReviews.
reviews_served() {
  kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="(tokenreviews|subjectaccessreviews)"/ {n += $NF} END {print n + 0}'
}
before_first=$(reviews_served)
first_seconds=$(scrape)
after_first=$(reviews_served)
cached_seconds=$(for _ in $(seq 1 "$SCRAPES"); do scrape; done)
after_cached=$(reviews_served)
unauthenticated=$(curl -sS -k -o /dev/null -w '%{http_code}' "$metrics_url")
scrape_summary=$(python3 - "$SCRAPES" "$first_seconds" "$before_first" "$after_first" "$after_cached" \
  "$unauthenticated" <<PY
import json, statistics, sys
scrapes, first, before, after_first, after_cached, unauthenticated = sys.argv[1:]
answers = [line.split() for line in """$first_seconds
$cached_seconds""".splitlines() if line.strip()]
if any(code != "200" for code, _ in answers):
    sys.exit(f"bench-controller: a scrape with the metrics-reader token was refused: {answers}")
first = answers[0][1]
cached = sorted(float(seconds) * 1000 for _, seconds in answers[1:])
print(json.dumps({
    "scrapes": int(scrapes),
    "first_scrape_api_calls": int(after_first) - int(before),
    "cached_scrapes_api_calls": int(after_cached) - int(after_first),
    "first_scrape_ms": round(float(first) * 1000, 2),
    "cached_scrape_ms_median": round(statistics.median(cached), 2),
    "cached_scrape_ms_max": round(cached[-1], 2),
    "without_token_status": int(unauthenticated),
}))
PY
)

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
reconciliations=$(curl -fsS -k -H "Authorization: Bearer $token" "$metrics_url" | awk '/^memcached_operator_controller_reconciliations_total/ {print $2}')
cpu_ticks=$(awk '{print $14 + $15}' "/proc/$operator_pid/stat")
ticks_per_second=$(getconf CLK_TCK)

mkdir -p "$(dirname "$OUT")"
python3 - "$N" "$start" "$created" "$done_at" "$idle_rss" "$peak" "$peak_hwm" "$settled_rss" \
  "$reconciliations" "$cpu_ticks" "$ticks_per_second" "$scrape_summary" >"$OUT" <<'PY'
import json, sys
n, start, created, done, idle, peak, hwm, settled, recs, ticks, hz, scrapes = sys.argv[1:]
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
    "metrics_scrapes": json.loads(scrapes),
}, indent=2))
PY
cat "$OUT"
