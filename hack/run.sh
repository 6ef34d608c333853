#!/usr/bin/env bash
# Runs the operator for `make run`.
#
# Without KUBECONFIG: installs the operator on a local cluster the way a user's cluster does,
# through the real OLM v0. It starts the local control plane (hack/control-plane.sh), the test
# kit's node agent as its one node (pods run as local processes: docs/local-cluster.md), OLM
# (hack/olm.sh), and `opm serve` of the shipped catalog/; subscribes to the operator's package
# (a CatalogSource in olm, an AllNamespaces OperatorGroup and a Subscription in operators);
# waits for the bundle-unpack Job, the InstallPlan, the CSV and the operator's Deployment,
# with its webhooks on OLM's certificates; applies config/samples and waits until every
# Memcached is Available with its servers. It then follows the operator's logs until Ctrl-C,
# which stops everything it started and removes its temporary files (the logs under the
# state directory's logs/ stay, as they always have).
#
# RUN_OLM=0: the previous, OLM-less local run instead: the operator as a process in the
# foreground, with the webhook wiring OLM would create pointing at it (no memcached runs).
#
# With KUBECONFIG: runs the operator against that cluster with its webhooks off (the cluster
# cannot call a process on this machine); the CRD must be installed (`make install`).
#
# Environment (local cluster): CONTROL_PLANE_DIR (state directory, default .local),
# RUN_TIMEOUT (seconds each wait may take, default 180), OLM_UTIL_IMAGE and OLM_OPM_IMAGE
# (the images catalog names in bundle-unpack Jobs; the node agent maps the same names).
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

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run_direct: the operator as a local process, webhooks wired as OLM would (RUN_OLM=0).
run_direct() {
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

  "$ROOT/hack/control-plane.sh" start >/dev/null
  export KUBECONFIG="$STATE/kubeconfig"
  "$ROOT/hack/dev-certs.sh" "$certs"
  webhook_port=$(free_port)
  probe_port=$(free_port)
  metrics_port=$(free_port)

  POD_NAMESPACE=default "$BIN" --log-format text run \
    --cert-root "$certs" --bind-address 127.0.0.1 \
    --webhook-port "$webhook_port" --probe-port "$probe_port" --metrics-port "$metrics_port" \
    --metrics-secure=false &
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
}

if [[ "${RUN_OLM:-1}" == 0 ]]; then
  run_direct
  exit
fi

# ---------------------------------------------------------------------------------------
# Through OLM.

AGENT="$ROOT/target/debug/node-agent"
OPM="$ROOT/.tools/bin/opm"
NODE_STATE="$STATE/node"
LOGS="$STATE/logs"
TIMEOUT="${RUN_TIMEOUT:-180}"
PACKAGE=memcached-operator
[[ -x "$AGENT" ]] || { echo "run: $AGENT is missing: run make build" >&2; exit 1; }

say() { printf 'run: %s\n' "$*" >&2; }
T0=$EPOCHREALTIME
since() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

"$ROOT/hack/tools.sh" olm opm memcached
pin() { "$ROOT/hack/tools.sh" --print-versions | awk -v t="$1" '$1 == t { print $2 }'; }
# One place for the two image names: catalog puts them in bundle-unpack Jobs (hack/olm.sh
# reads these variables) and the node agent's image table maps them to .tools/bin.
export OLM_UTIL_IMAGE="${OLM_UTIL_IMAGE:-quay.io/operator-framework/olm:$(pin olm)}"
export OLM_OPM_IMAGE="${OLM_OPM_IMAGE:-quay.io/operator-framework/opm:$(pin opm)}"

tmp="$(mktemp -d /tmp/memcached-operator-run.XXXXXX)"
agent_pid="" opm_pid="" follow_pid=""
# stop_pid PID SECONDS: TERM, wait, then KILL.
stop_pid() {
  local pid="$1" i
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  trap - EXIT INT TERM
  say "stopping: opm serve, the node agent and its pods, OLM, the control plane"
  stop_pid "$follow_pid" 2
  stop_pid "$opm_pid" 10
  # The agent stops every pod's processes (at most their grace period, 10 s) and removes
  # their files.
  stop_pid "$agent_pid" 30
  rm -rf "$NODE_STATE"
  "$ROOT/hack/control-plane.sh" stop || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kubectl() { "$KUBECTL" --kubeconfig "$STATE/kubeconfig" --cache-dir "$tmp/kubectl-cache" "$@"; }

# wait_until WHAT COMMAND...: polls COMMAND (every 0.5 s) until it succeeds, at most TIMEOUT
# seconds; says what it waits for, and what it saw last when it gives up.
wait_until() {
  local what="$1" start=$SECONDS
  shift
  say "waiting for $what"
  until "$@" >"$tmp/last" 2>&1; do
    if ((SECONDS - start >= TIMEOUT)); then
      say "timed out after ${TIMEOUT}s waiting for $what; last check said:"
      sed 's/^/    /' "$tmp/last" >&2
      exit 1
    fi
    [[ -z "$agent_pid" ]] || kill -0 "$agent_pid" 2>/dev/null ||
      { say "the node agent exited; see $LOGS/node-agent.log"; exit 1; }
    sleep 0.5
  done
  say "$what: done at $(since)s"
}

# jsonpath_is EXPECTED KUBECTL-ARGS...: whether `kubectl get ARGS` prints EXPECTED.
jsonpath_is() {
  local want="$1" got
  shift
  got="$(kubectl get "$@")"
  echo "got: ${got:-<nothing>}"
  [[ "$got" == "$want" ]]
}

"$ROOT/hack/control-plane.sh" start >/dev/null
export KUBECONFIG="$STATE/kubeconfig"
mkdir -p "$LOGS"

say "starting the node agent (log: $LOGS/node-agent.log)"
# From the repository root: its image table maps the repository's own images (operator,
# bundle, memcached) and OLM's util and opm images to files here.
(cd "$ROOT" && exec "$AGENT" --kubeconfig "$STATE/kubeconfig" --node-name local \
  --state-dir "$NODE_STATE" --pod-ip-range 127.0.100.0/24 --operator-binary "$BIN" \
  --util-image "$OLM_UTIL_IMAGE" --opm-image "$OLM_OPM_IMAGE" \
  </dev/null >"$LOGS/node-agent.log" 2>&1) &
agent_pid=$!

# The operator's pods serve metrics on their pod IPs' port 8080, which olm's *:8080 would
# block: hack/olm.sh moves olm off it.
OLM_KEEP_8080_FREE=1 "$ROOT/hack/olm.sh" start
wait_until "Node local to be Ready and schedulable" jsonpath_is "True/" node local \
  -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints[*].key}'

opm_port=$(free_port)
pprof_port=$(free_port)
say "serving catalog/ with opm on 127.0.0.1:$opm_port (log: $LOGS/opm.log)"
TMPDIR="$tmp" "$OPM" serve "$ROOT/catalog" -p "$opm_port" --pprof-addr "127.0.0.1:$pprof_port" \
  -t "$tmp/opm-termination.log" </dev/null >"$LOGS/opm.log" 2>&1 &
opm_pid=$!

channel="$(awk '$1 == "defaultChannel:" { print $2; exit }' "$ROOT/catalog/$PACKAGE/package.yaml")"
[[ -n "$channel" ]] || { say "catalog/$PACKAGE/package.yaml names no defaultChannel"; exit 1; }
kubectl apply -f - <<EOF
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: $PACKAGE, namespace: olm}
spec: {sourceType: grpc, address: "127.0.0.1:$opm_port", displayName: memcached-operator (catalog/)}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: global-operators, namespace: operators}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: $PACKAGE, namespace: operators}
spec: {channel: $channel, name: $PACKAGE, source: $PACKAGE, sourceNamespace: olm}
EOF

wait_until "the CatalogSource to be READY" jsonpath_is READY catalogsource -n olm "$PACKAGE" \
  -o 'jsonpath={.status.connectionState.lastObservedState}'
wait_until "the bundle-unpack Job in olm to complete (its pod runs on the node agent)" \
  jsonpath_is True jobs -n olm -l operatorframework.io/bundle-unpack-ref \
  -o 'jsonpath={.items[0].status.conditions[?(@.type=="Complete")].status}'
wait_until "the InstallPlan to be Complete" jsonpath_is Complete installplans -n operators \
  -o 'jsonpath={.items[0].status.phase}'
csv="$(kubectl get subscription -n operators "$PACKAGE" -o 'jsonpath={.status.installedCSV}')"
wait_until "ClusterServiceVersion $csv to be Succeeded (its Deployment's pods run on the node agent)" \
  jsonpath_is Succeeded csv -n operators "$csv" -o 'jsonpath={.status.phase}'
csv_done="$(since)"
deployment="$(kubectl get deployments -n operators -l "olm.owner=$csv" -o 'jsonpath={.items[0].metadata.name}')"
replicas="$(kubectl get deployment -n operators "$deployment" -o 'jsonpath={.spec.replicas}')"
wait_until "Deployment $deployment to have $replicas ready replicas" jsonpath_is "$replicas" \
  deployment -n operators "$deployment" -o 'jsonpath={.status.readyReplicas}'
wait_until "the operator's webhooks to answer (a server-side dry run of config/samples)" \
  kubectl apply --dry-run=server -k "$ROOT/config/samples"
kubectl apply -k "$ROOT/config/samples"

# memcacheds_available: every Memcached has Available=True and status.servers.
memcacheds_available() {
  kubectl get memcacheds -A -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
bad = []
for m in items:
    st = m.get("status") or {}
    ok = any(c.get("type") == "Available" and c.get("status") == "True" for c in st.get("conditions") or [])
    if not (ok and st.get("servers")):
        bad.append("%s/%s" % (m["metadata"]["namespace"], m["metadata"]["name"]))
print("not yet Available with servers: " + (", ".join(bad) or "none"))
sys.exit(1 if bad or not items else 0)'
}
wait_until "every Memcached to be Available with its servers (memcached pods run on the node agent)" \
  memcacheds_available
all_done="$(since)"

# What to look at: the servers by their pod IPs and Services by their ClusterIPs (the
# servers' DNS names do not resolve on this machine).
servers="$(kubectl get memcacheds -A -o json | python3 -c '
import json, subprocess, sys
for m in json.load(sys.stdin)["items"]:
    print("%s/%s: %s" % (m["metadata"]["namespace"], m["metadata"]["name"], " ".join(m["status"]["servers"])))
')"
pods="$(kubectl get pods -A -l app.kubernetes.io/name=memcached \
  -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.podIP}{"\n"}{end}')"
# (The operator's memcached Services are headless: no ClusterIP to print.)
services="$(kubectl get services -A -l app.kubernetes.io/name=memcached \
  -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.clusterIP}:{.spec.ports[0].port}{"\n"}{end}' |
  grep -v ' None:' || true)"
first_ip="$(awk 'NF == 2 { print $2; exit }' <<<"$pods")"
operator_logs=()
for uid in $(kubectl get pods -n operators -o 'jsonpath={.items[*].metadata.uid}'); do
  for f in "$NODE_STATE/pods/$uid/logs/"*.log; do
    [[ -f "$f" ]] && operator_logs+=("$f")
  done
done

cat >&2 <<MSG

run: installed through OLM: CSV $csv Succeeded at ${csv_done}s, every Memcached Available at ${all_done}s.
In another terminal:
  export KUBECONFIG=$STATE/kubeconfig
  .tools/bin/kubectl get subscriptions,installplans,csv -n operators
  .tools/bin/kubectl get deployments,pods -n operators -o wide
  .tools/bin/kubectl get memcacheds -A
  .tools/bin/kubectl get statefulsets,services,poddisruptionbudgets,pods -A -l app.kubernetes.io/name=memcached -o wide
Memcacheds and their servers (DNS names, which do not resolve here):
$(sed 's/^/  /' <<<"$servers")
memcached pods by pod IP$([[ -z "$services" ]] || echo " and Services by ClusterIP"), which do:
$(sed 's/^/  /' <<<"$pods")$([[ -z "$services" ]] || printf '\n%s' "$(sed 's/^/  /' <<<"$services")")
memcached's stats, from one server:
  bash -c 'exec 3<>/dev/tcp/${first_ip:-POD_IP}/11211; printf "stats\\r\\nquit\\r\\n" >&3; cat <&3'
Logs: $LOGS/ (node-agent.log, olm.log, catalog.log, opm.log, control plane);
each pod's containers: $NODE_STATE/pods/UID/logs/CONTAINER.log
Ctrl-C stops everything this started.
The operator's logs follow.

MSG
if ((${#operator_logs[@]})); then
  tail -n 5 -F "${operator_logs[@]}" &
  follow_pid=$!
fi
wait "$agent_pid"
say "the node agent exited; see $LOGS/node-agent.log"
exit 1
