#!/usr/bin/env bash
# Measures the operator (`run`, webhooks off) with N Memcached objects (default 1000) in its
# caches, on a local control plane of its own: the time from creating them to every one being
# reconciled (StatefulSet and Service written, status reported), and the resident memory idle
# before, while reconciling (peak), settled (below: every StatefulSet reported on, then no
# request of the operator's for 5 s) and STEADY_SECONDS after that. Objects have 0 replicas, so
# no pods are made (the local control plane's kube-controller-manager still answers each
# StatefulSet and Service). Before the objects, it scrapes the (HTTPS) metrics SCRAPES times
# (default 50) with a token bound to the metrics-reader role: the API calls (TokenReviews,
# SubjectAccessReviews, counted by the API server) of the first scrape and of the cached ones,
# and their latency.
#
# It also counts the operator's API requests per object, by verb, from the API server's audit
# log: the operator runs as a ServiceAccount of its own (bound to the operator's ClusterRole from
# config/rbac, as in a cluster), and the audit policy records that user's requests only, so
# every count is the operator's and nobody else's (`apiserver_request_total` has no user or
# user-agent label: kube-controller-manager's requests, such as the garbage collector's GETs of
# owners it has not seen yet, would count too). Watches are counted when they open. Windows:
# `baseline` (STEADY_SECONDS, default 30, before the objects, the operator idle), `first_pass`
# (from the first create until the cluster has settled: the StatefulSet controller has reported
# on every StatefulSet and the operator has sent nothing for 5 s; at 20 requests/s, the default
# client limit of kube-controller-manager, that report trails the workloads by minutes at
# thousands of objects, and each one is a real change of the Memcached's status) and `steady`
# (STEADY_SECONDS after that). `workloads_reported_seconds` is when the last report came.
# The create burst: `kubectl create` of the N objects next to the operator, against the same
# create into another namespace before the operator starts, on a warm API server (the second of
# two such creates; the first, cold one is reported beside it) (`create_burst_slowdown`).
# `all_workloads_seconds` is when every StatefulSet exists, `all_reconciled_seconds` when every
# status is reported too.
# Writes target/bench/controller.json and prints a summary.
#
# SUBJECT=peer measures operator-sdk's memcached sample instead (hack/tools.sh peer: the
# controller its pinned operator-sdk scaffolds, a Deployment per object), the same way on the
# same kind of control plane, into target/bench/peer-controller.json: the same windows, memory
# and request counts (its ServiceAccount's, from the audit log), the same create burst; not its
# metrics, which it serves off here (hack/lib/bench-subject.sh says what differs).
#
# KEEP_LOGS=DIR keeps the control plane's logs (the audit log among them) and the operator's in
# DIR, for a post-mortem.
#
# Usage: [SUBJECT=operator|peer] [OPERATOR_ARGS="--max-concurrent-reconciles=2"]
#        hack/bench-controller.sh [N]
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
N="${1:-1000}"
SUBJECT="${SUBJECT:-operator}"
SCRAPES="${SCRAPES:-50}"
STEADY_SECONDS="${STEADY_SECONDS:-30}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
KUBECTL="$ROOT/.tools/bin/kubectl"
# shellcheck source=hack/lib/bench-subject.sh
source "$ROOT/hack/lib/bench-subject.sh"
if [[ "$SUBJECT" == operator ]]; then
  OUT="${OUT:-$TARGET/bench/controller.json}"
else
  OUT="${OUT:-$TARGET/bench/$SUBJECT-controller.json}"
fi
[[ -x "$BIN" ]] || { echo "bench-controller: build it first: $BUILD_HINT" >&2; exit 1; }

export CONTROL_PLANE_DIR
CONTROL_PLANE_DIR="$(mktemp -d /tmp/memcached-operator-bench.XXXXXX)"
operator_pid=""
watches=""
# Every step runs whatever the one before returned (the watches may be gone already): a
# cleanup that stopped early would leave the control plane running, to slow down what runs next.
cleanup() {
  set +e
  [[ -n "$watches" ]] && kill $watches 2>/dev/null
  if [[ -n "$operator_pid" ]]; then
    kill -TERM "$operator_pid" 2>/dev/null
    wait "$operator_pid" 2>/dev/null
    echo "bench-controller: the operator exited with status $? on SIGTERM" >&2
  fi
  "$ROOT/hack/control-plane.sh" stop >/dev/null 2>&1
  if [[ -n "${KEEP_LOGS:-}" ]]; then
    mkdir -p "$KEEP_LOGS" && cp -r "$CONTROL_PLANE_DIR/logs" "$CONTROL_PLANE_DIR/operator.log" "$KEEP_LOGS/"
  fi
  rm -rf "$CONTROL_PLANE_DIR"
}
trap cleanup EXIT

# The operator's identity, and an audit policy that records its requests and nothing else.
OPERATOR_NAMESPACE=bench-operator
OPERATOR_USER="system:serviceaccount:$OPERATOR_NAMESPACE:memcached-operator"
export AUDIT_POLICY="$CONTROL_PLANE_DIR/audit-policy.yaml"
cat >"$AUDIT_POLICY" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: ["$OPERATOR_USER"]
  - level: None
YAML
AUDIT_LOG="$CONTROL_PLANE_DIR/logs/audit.log"
# The control plane belongs to this script: whatever ends it, its supervisor stops the plane.
CONTROL_PLANE_OWNER=$$ "$ROOT/hack/control-plane.sh" start >/dev/null
export KUBECONFIG="$CONTROL_PLANE_DIR/kubeconfig"
kubectl() { "$KUBECTL" "$@"; }
# `follow FILE ARGS...`: `kubectl get ARGS --watch` appending to FILE, started again whenever it
# ends: the API server closes a watch whose reader falls behind (kubectl then exits without a
# word), and a new one lists every object again before it watches. Its process is added to
# `watches`; a TERM stops it and the kubectl it runs.
follow() {
  local file=$1
  shift
  (
    child=""
    trap '[[ -n "$child" ]] && kill "$child" 2>/dev/null; exit 0' TERM
    while true; do
      "$KUBECTL" get "$@" --watch >>"$file" &
      child=$!
      wait "$child" || true
      sleep 0.2
    done
  ) &
  watches="$watches $!"
}
# The operator's requests, from the audit log: `requests quiet SINCE` succeeds when the
# operator sent nothing after SINCE (epoch seconds); `requests summary ...` writes the windows
# as JSON.
cat >"$CONTROL_PLANE_DIR/requests.py" <<'PY'
import json, sys
from datetime import datetime

def requests(path):
    """(time, name) of each request: watches when they open, the rest when they complete."""
    with open(path) as f:
        for line in f:
            event = json.loads(line)
            watch = event["verb"] == "watch"
            if event["stage"] != ("ResponseStarted" if watch else "ResponseComplete"):
                continue
            ref = event.get("objectRef") or {}
            name = f'{event["verb"].upper()} {ref.get("resource", event["requestURI"])}'
            if ref.get("subresource"):
                name += "/" + ref["subresource"]
            at = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
            yield at.timestamp(), name, event.get("userAgent", "")

# The reviews that authorize the bench's own metrics scrapes (one of which reads the reconcile
# count when the first pass ends): the operator's requests, but not about any object.
SCRAPES = {"CREATE tokenreviews", "CREATE subjectaccessreviews"}

command, log = sys.argv[1], sys.argv[2]
if command == "quiet":
    since = float(sys.argv[3])
    sys.exit(1 if any(at > since and not name.startswith("WATCH") for at, name, _ in requests(log)) else 0)
elif command == "summary":
    n, seconds, settled = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "true"
    bounds = [float(t) for t in sys.argv[6:]]
    all_requests = list(requests(log))
    def summary(a, b):
        counts = {}
        for at, name, _ in all_requests:
            if a <= at < b:
                counts[name] = counts.get(name, 0) + 1
        by_verb = {}
        for name, count in counts.items():
            if not name.startswith("WATCH") and name not in SCRAPES:
                by_verb[name.split()[0]] = by_verb.get(name.split()[0], 0) + count
        return {
            "total": sum(by_verb.values()),
            "per_object_by_verb": {v: round(c / n, 2) for v, c in sorted(by_verb.items())},
            "by_request": dict(sorted(counts.items())),
        }
    print(json.dumps({
        "method": "the API server's audit log of the operator's ServiceAccount; watches counted "
                  "when they open, and neither they nor the reviews of the bench's metrics "
                  "scrapes in total or per_object_by_verb; a CREATE of a child is a create, a "
                  "PATCH a server-side apply, an UPDATE a whole object written",
        "user_agents": sorted({agent for _, _, agent in all_requests}),
        "steady_and_baseline_seconds": seconds,
        "baseline": summary(bounds[0], bounds[1]),
        "first_pass": summary(bounds[2], bounds[3]),
        # The window after the first pass: steady once settled; otherwise what the subject
        # still sent after SETTLE_LIMIT.
        ("steady" if settled else "after_settle_limit"): summary(bounds[3], bounds[4]),
    }))
PY
requests() { python3 "$CONTROL_PLANE_DIR/requests.py" "$1" "$AUDIT_LOG" "${@:2}"; }
kubectl apply --server-side -f "$CRD_FILE" >/dev/null
# Retried: `kubectl wait` fails at once, rather than waiting, on a CRD whose status has no
# conditions yet.
for try in $(seq 30); do
  kubectl wait --for condition=Established --timeout 1s "crd/$CRD_NAME" >/dev/null 2>&1 && break
  ((try < 30)) || { echo "bench-controller: the Memcached CRD was not Established in 30 s" >&2; exit 1; }
  sleep 1
done

# The same N objects for a namespace: `objects NAMESPACE > FILE`.
objects() {
  python3 - "$N" "$1" "$OBJECT_API_VERSION" "$OBJECT_SPEC" <<'PY'
import json, sys
n, namespace, api_version, spec = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
items = [{"apiVersion": api_version, "kind": "Memcached",
          "metadata": {"name": f"cache-{i:04d}", "namespace": namespace},
          "spec": json.loads(spec)} for i in range(n)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}
objects default >"$CONTROL_PLANE_DIR/objects.json"

# The create burst with no operator running: what `kubectl create` of the N objects takes on
# this API server alone, the yardstick of the slowdown next to the operator. The first create
# of a new CRD's objects is slower (about 2.5x at 1,000 objects: the API server is still
# setting up the new kind), and the operator's burst comes on a warm API server; so the same
# create runs twice, the second is the yardstick, and the first is reported as the cold one.
# `timed_create NAMESPACE` prints the seconds, measured with the same two watches running as
# next to the operator (below), on that namespace; one deletecollection request (`kubectl
# delete --all` sends one DELETE per object) then removes them, and it waits until none is
# left, so that the operator never sees them.
timed_create() {
  local start end watching
  kubectl create namespace "$1" >/dev/null
  objects "$1" >"$CONTROL_PLANE_DIR/$1-objects.json"
  "$KUBECTL" get memcacheds -n "$1" --watch --no-headers \
    -o "custom-columns=NAME:.metadata.name,REPORTED:$REPORTED_COLUMN" >/dev/null &
  watching=$!
  "$KUBECTL" get "$WORKLOAD" -n "$1" --watch -o name >/dev/null &
  watching="$watching $!"
  sleep 1
  start=$(date +%s.%N)
  kubectl create -f "$CONTROL_PLANE_DIR/$1-objects.json" >/dev/null
  end=$(date +%s.%N)
  kill $watching 2>/dev/null || true
  kubectl delete --raw "$API_PATH/namespaces/$1/memcacheds" >/dev/null
  until [[ -z "$(kubectl get memcacheds -n "$1" -o name 2>/dev/null | head -n 1)" ]]; do sleep 0.2; done
  python3 -c "print($end - $start)"
}
cold_create_seconds=$(timed_create create-cold)
baseline_seconds=$(timed_create create-baseline)

# The operator runs as a ServiceAccount with the operator's ClusterRole, as in a cluster.
kubectl apply --server-side -f "$ROLE_FILE" >/dev/null
kubectl create namespace "$OPERATOR_NAMESPACE" >/dev/null
kubectl create serviceaccount memcached-operator -n "$OPERATOR_NAMESPACE" >/dev/null
kubectl create clusterrolebinding bench-operator --clusterrole "$ROLE_NAME" \
  --serviceaccount "$OPERATOR_NAMESPACE:memcached-operator" >/dev/null
operator_token=$(kubectl create token memcached-operator -n "$OPERATOR_NAMESPACE" --duration 6h)
OPERATOR_KUBECONFIG="$CONTROL_PLANE_DIR/operator.kubeconfig"
"$KUBECTL" config set-cluster local --server "$(cat "$CONTROL_PLANE_DIR/apiserver-url")" \
  --certificate-authority "$CONTROL_PLANE_DIR/pki/ca.crt" --embed-certs --kubeconfig "$OPERATOR_KUBECONFIG" >/dev/null
"$KUBECTL" config set-credentials operator --token "$operator_token" --kubeconfig "$OPERATOR_KUBECONFIG" >/dev/null
"$KUBECTL" config set-context operator --cluster local --user operator --kubeconfig "$OPERATOR_KUBECONFIG" >/dev/null
"$KUBECTL" config use-context operator --kubeconfig "$OPERATOR_KUBECONFIG" >/dev/null

start_subject "$CONTROL_PLANE_DIR/operator.log" "$OPERATOR_KUBECONFIG"
operator_pid=$subject_pid
alive() {
  kill -0 "$operator_pid" 2>/dev/null && return
  echo "bench-controller: the $SUBJECT exited:" >&2
  tail -n 20 "$CONTROL_PLANE_DIR/operator.log" >&2
  exit 1
}
if [[ "$SUBJECT" == operator ]]; then
  # listening SERVER: the address the operator's SERVER listens on, once it logged it.
  listening() {
    python3 - "$CONTROL_PLANE_DIR/operator.log" "$1" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    if record.get("message") == "listening" and record.get("server") == sys.argv[2]:
        print(record["address"])
        break
PY
  }
  until probe_address=$(listening probes) && [[ -n "$probe_address" ]] &&
    metrics_address=$(listening metrics) && [[ -n "$metrics_address" ]]; do
    alive
    sleep 0.1
  done
  until curl -fsS "http://$probe_address/readyz" >/dev/null 2>&1; do sleep 0.1; done
else
  # Ready once its controller's workers have started (its caches are synced by then).
  until grep -q '"Starting workers"' "$CONTROL_PLANE_DIR/operator.log"; do
    alive
    sleep 0.1
  done
fi

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$operator_pid/status"; }
# CPU ticks (user + system) a process has used so far: the operator's, or the API server's.
ticks_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
apiserver_pid=$(cat "$CONTROL_PLANE_DIR/run/kube-apiserver.pid")
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$operator_pid/status"; }
# What the resident memory is made of: anonymous (heap, stacks), file-backed (the binary's own
# pages) in KiB, and the operator's threads, as JSON.
parts() {
  awk '/^RssAnon:/ {a=$2} /^RssFile:/ {f=$2} /^Threads:/ {t=$2}
       END {printf "{\"anon_mib\": %.1f, \"file_mib\": %.1f, \"threads\": %d}", a/1024, f/1024, t}' \
    "/proc/$operator_pid/status"
}
sleep 2
idle_rss=$(rss)
idle_parts=$(parts)

# Metrics scrapes (the operator only: the peer serves its metrics with controller-runtime's
# own filters, not measured here), as Prometheus makes them: HTTPS (the certificate is
# self-signed here, so not verified), the bearer token of a ServiceAccount bound to the
# metrics-reader role.
scrape_summary=null
if [[ "$SUBJECT" == operator ]]; then
  kubectl apply --server-side -f "$ROOT/config/rbac/metrics_reader_role.yaml" >/dev/null
  kubectl create serviceaccount bench-scraper -n default >/dev/null
  kubectl create clusterrolebinding bench-scraper --clusterrole memcached-operator-metrics-reader \
    --serviceaccount default:bench-scraper >/dev/null
  token=$(kubectl create token bench-scraper -n default --duration 1h)
  until [[ "$(kubectl auth can-i get /metrics --as system:serviceaccount:default:bench-scraper)" == yes ]]; do sleep 0.2; done
  metrics_url="https://$metrics_address/metrics"
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
fi

# What the objects have reached, as it happens: one watch of the Memcacheds' REPORTED_COLUMN
# and one of the workloads' names, one line per object and event ("<none>" for a field not set
# yet: custom columns, not jsonpath, which prints the list a restarted watch
# begins with as one empty line). (Listing every object twice a second instead put load on the
# API server that slowed what it measured; docs/performance.md.)
follow "$CONTROL_PLANE_DIR/reported.watch" memcacheds -n default --no-headers \
  -o "custom-columns=NAME:.metadata.name,REPORTED:$REPORTED_COLUMN"
follow "$CONTROL_PLANE_DIR/workloads.watch" "$WORKLOAD" -n default -o name

# The baseline: nothing but the idle operator and the API server's own housekeeping.
baseline_from=$(date +%s.%N)
sleep "$STEADY_SECONDS"
baseline_to=$(date +%s.%N)

start=$(date +%s.%N)
apiserver_ticks_start=$(ticks_of "$apiserver_pid")
# Past SETTLE_LIMIT (default 3600 s) after the create, the bench fails (below).
settle_deadline=$(( ${start%.*} + ${SETTLE_LIMIT:-3600} ))
kubectl create -f "$CONTROL_PLANE_DIR/objects.json" >/dev/null
created=$(date +%s.%N)
peak=$idle_rss
# Reconciled: the status says so (REPORTED_PATTERN: an observedGeneration for the operator, an
# Available condition that is True for the peer) and the workload exists; the watches, started
# before the baseline window, have seen both of every object. The workloads alone (every
# StatefulSet, or the peer's every Deployment, exists) are `all_workloads_seconds`; the time is
# taken when the loop first sees them all.
workloads_at=""
reconciled() {
  local reported workloads
  reported=$(awk -v pattern="$REPORTED_PATTERN" '$2 ~ pattern {print $1}' "$CONTROL_PLANE_DIR/reported.watch" | sort -u | wc -l)
  workloads=$(sort -u "$CONTROL_PLANE_DIR/workloads.watch" | wc -l)
  if [[ -z "$workloads_at" ]] && (( workloads >= N )); then
    workloads_at=$(date +%s.%N)
    apiserver_ticks_workloads=$(ticks_of "$apiserver_pid")
  fi
  (( reported >= N && workloads >= N ))
}
until reconciled; do
  current=$(rss); (( current > peak )) && peak=$current
  sleep 0.1
  if (( EPOCHSECONDS > settle_deadline )); then
    echo "bench-controller: not every object reconciled ${SETTLE_LIMIT:-3600} s after the create" >&2
    exit 1
  fi
done
done_at=$(date +%s.%N)
# Settled: the workloads' controller has reported on every workload's generation (a list
# every 5 s, once the workloads are measured, so that it weighs on nothing measured before),
# then the subject has sent no request for 5 s. Steady state is only steady once nothing
# upstream still changes. SETTLE_LIMIT (default 3600 s from the create) bounds the wait. Past
# it, the JSON says `"settled": false`: the first pass ends at the limit, the window after it
# is `after_settle_limit` (not `steady`), and every other figure is written as measured. The
# operator that has not settled fails the bench once its figures are written (its goal is a
# steady state); a peer that has not settled is a finding about the peer.
all_reported() {
  "$KUBECTL" get "$WORKLOAD" -n default --no-headers \
    -o custom-columns=NAME:.metadata.name,GENERATION:.metadata.generation,REPORTED:.status.observedGeneration |
    awk -v n="$N" '$3 != "<none>" && $2 == $3 { ok++ } END { exit !(ok >= n) }'
}
reported_at=""
settled=true
while true; do
  sleep 5
  if [[ -z "$reported_at" ]]; then
    all_reported && reported_at=$(date +%s.%N)
  else
    requests quiet "$(python3 -c 'import time; print(time.time() - 5)')" && break
  fi
  if (( EPOCHSECONDS > settle_deadline )); then
    echo "bench-controller: the $SUBJECT has not settled ${SETTLE_LIMIT:-3600} s after the create (every workload reported: ${reported_at:+yes}${reported_at:-no}); the first pass ends here, and the window after it is not a steady one" >&2
    settled=false
    break
  fi
done
kill $watches 2>/dev/null || true
quiet_at=$(date +%s.%N)
apiserver_ticks_quiet=$(ticks_of "$apiserver_pid")
operator_ticks_quiet=$(ticks_of "$operator_pid")
# The operator's reconciliations, from its metrics (none for the peer, whose metrics are off).
reconciliations() {
  [[ "$SUBJECT" == operator ]] || return 0
  curl -fsS -k -H "Authorization: Bearer $token" "$metrics_url" | awk '/^memcached_operator_controller_reconciliations_total/ {print $2}'
}
first_pass_reconciliations=$(reconciliations)
settled_rss=$(rss)
settled_parts=$(parts)
sleep "$STEADY_SECONDS"
steady_to=$(date +%s.%N)
steady_rss=$(rss)
peak_hwm=$(hwm)
requests_summary=$(requests summary "$N" "$STEADY_SECONDS" "$settled" "$baseline_from" "$baseline_to" "$start" "$quiet_at" "$steady_to")
reconciliations=$(reconciliations)
cpu_ticks=$(ticks_of "$operator_pid")
ticks_per_second=$(getconf CLK_TCK)

mkdir -p "$(dirname "$OUT")"
python3 - "$N" "$start" "$created" "$done_at" "$idle_rss" "$peak" "$peak_hwm" "$settled_rss" \
  "$reconciliations" "$cpu_ticks" "$ticks_per_second" "$scrape_summary" "$steady_rss" \
  "$requests_summary" "$quiet_at" "$first_pass_reconciliations" "$cold_create_seconds" \
  "$baseline_seconds" "$idle_parts" "$settled_parts" "$workloads_at" "$reported_at" \
  "$operator_ticks_quiet" "$apiserver_ticks_start" "$apiserver_ticks_workloads" \
  "$apiserver_ticks_quiet" "$STEADY_SECONDS" "$SUBJECT" "$settled" "${SETTLE_LIMIT:-3600}" >"$OUT" <<'PY'
import json, sys
(n, start, created, done, idle, peak, hwm, settled, recs, ticks, hz, scrapes, steady, requests,
 quiet, first_recs, cold_alone, alone, idle_parts, settled_parts,
 workloads, reported, ticks_quiet, api_start, api_workloads, api_quiet,
 steady_seconds, subject, was_settled, settle_limit) = sys.argv[1:]
# The reconciliations, from the operator's metrics; None where they were not read (the peer).
count = lambda value: int(float(value)) if value else None
seconds = lambda since, until: round((int(until) - int(since)) / int(hz), 2)
create = float(created) - float(start)
alone = float(alone)
# A time after the start, or None for a moment that never came (every workload reported, in
# a run that did not settle).
after_start = lambda at: round(float(at) - float(start), 2) if at else None
print(json.dumps({
    "subject": subject,
    "objects": int(n),
    # False when SETTLE_LIMIT passed first: then the first pass ends at the limit, and the
    # steady figures are of the window after it.
    "settled": was_settled == "true",
    "settle_limit_seconds": int(settle_limit),
    "create_seconds": round(create, 2),
    "create_seconds_without_operator": round(alone, 2),
    "create_seconds_without_operator_cold": round(float(cold_alone), 2),
    "create_burst_slowdown": round(create / alone, 2),
    "all_workloads_seconds": round(float(workloads) - float(start), 2),
    "all_reconciled_seconds": round(float(done) - float(start), 2),
    "workloads_reported_seconds": after_start(reported),
    "first_pass_seconds": round(float(quiet) - float(start), 2),
    "first_pass_reconciliations": count(first_recs),
    "rss_idle_mib": round(int(idle) / 1024, 1),
    "rss_peak_sampled_mib": round(int(peak) / 1024, 1),
    "rss_high_water_mib": round(int(hwm) / 1024, 1),
    "rss_settled_mib": round(int(settled) / 1024, 1),
    "rss_after_steady_window_mib": round(int(steady) / 1024, 1),
    "rss_parts": {"idle": json.loads(idle_parts), "settled": json.loads(settled_parts)},
    "reconciliations": count(recs),
    "cpu_seconds": round(int(ticks) / int(hz), 2),
    # The steady window: what the periodic resync costs (it wakes every object once per
    # 300 s, reading caches only) when the window is at least that long.
    "steady_seconds": int(steady_seconds),
    "steady_reconciliations": count(recs) - count(first_recs) if recs and first_recs else None,
    "steady_cpu_seconds": seconds(ticks_quiet, ticks),
    # The API server's CPU, everyone's requests included, from the first create until every
    # workload exists, and until the first pass has settled.
    "apiserver_cpu_seconds_to_workloads": seconds(api_start, api_workloads),
    "apiserver_cpu_seconds_first_pass": seconds(api_start, api_quiet),
    "metrics_scrapes": json.loads(scrapes),
    "api_requests": json.loads(requests),
}, indent=2))
PY
cat "$OUT"
if [[ "$settled" != true && "$SUBJECT" == operator ]]; then
  echo "bench-controller: the operator did not settle within ${SETTLE_LIMIT:-3600} s (figures in $OUT)" >&2
  exit 1
fi
