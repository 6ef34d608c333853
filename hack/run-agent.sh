#!/usr/bin/env bash
# `NODE=none make run` (hack/run.sh runs it): the operator on a local cluster whose node is the
# test kit's node agent.
#
# Installs the operator on a local cluster the way a user's cluster does,
# through the real OLM v0: it starts the local control plane (hack/control-plane.sh) and
# installs through hack/olm-install.sh (the test kit's node agent as the one node, OLM,
# `opm serve` of the shipped catalog/, a Subscription; it waits for a Succeeded CSV and the
# operator's webhooks). It then applies config/samples and waits until every Memcached is
# Available with its servers, and follows the operator's logs until Ctrl-C, which stops
# everything it started and removes its temporary files (the logs under the state
# directory's logs/ stay, as they always have).
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
KUBECTL="$ROOT/.tools/bin/kubectl"
[[ -x "$BIN" ]] || { echo "run: $BIN is missing: run make build" >&2; exit 1; }

if [[ -n "${KUBECONFIG:-}" ]]; then
  echo "run: KUBECONFIG is set: running the operator against $("$KUBECTL" config current-context 2>/dev/null || echo that cluster), webhooks off" >&2
  exec "$BIN" run --webhooks=false --leader-elect=false --bind-address 127.0.0.1 --log-format text
fi

STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"

LOGS="$STATE/logs"
TIMEOUT="${RUN_TIMEOUT:-180}"
AGENT="$ROOT/target/debug/node-agent"
[[ -x "$AGENT" ]] || { echo "run: $AGENT is missing: run make build" >&2; exit 1; }

say() { printf 'run: %s\n' "$*" >&2; }
T0=$EPOCHREALTIME
since() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

tmp="$(mktemp -d /tmp/memcached-operator-run.XXXXXX)"
follow_pid=""
cleanup() {
  trap - EXIT INT TERM
  say "stopping: opm serve, the node agent and its pods, OLM, the control plane"
  if [[ -n "$follow_pid" ]]; then
    kill "$follow_pid" 2>/dev/null || true
    wait "$follow_pid" 2>/dev/null || true
  fi
  # Stops the node agent (which stops every pod's processes and removes their files), opm
  # and OLM first.
  "$ROOT/hack/control-plane.sh" stop || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kubectl() { "$KUBECTL" --kubeconfig "$STATE/kubeconfig" --cache-dir "$tmp/kubectl-cache" "$@"; }
# shellcheck source=hack/lib/samples.sh
source "$ROOT/hack/lib/samples.sh"

# agent_runs: whether hack/olm-install.sh's node agent still runs.
# (Its pid file, not `olm-install.sh status`, which also asks OLM and the API server: this
# runs every second.)
agent_runs() {
  local pid
  pid="$(cat "$STATE/install/run/node-agent.pid" 2>/dev/null)" && kill -0 "$pid" 2>/dev/null
}
still_running() { agent_runs || { say "the node agent exited; see $LOGS/node-agent.log"; return 1; }; }


"$ROOT/hack/control-plane.sh" start >/dev/null
export KUBECONFIG="$STATE/kubeconfig"
installed="$(CONTROL_PLANE_DIR="$STATE" INSTALL_TIMEOUT="$TIMEOUT" OPERATOR_BINARY="$BIN" \
  NODE_AGENT="$AGENT" "$ROOT/hack/olm-install.sh" start)"
value() { awk -F= -v k="$1" '$1 == k { print substr($0, length(k) + 2) }' <<<"$installed"; }
csv="$(value CSV)"
NODE_STATE="$(value NODE_STATE)"
csv_done="$(since)"
kubectl apply -k "$ROOT/config/samples"

wait_until "every Memcached to be Available with its servers (memcached pods run on the node agent)" \
  memcacheds_available
all_done="$(since)"

# What to look at: the servers by their pod IPs and Services by their ClusterIPs (the
# servers' DNS names do not resolve on this machine).
servers="$(memcached_servers)"
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
while agent_runs; do sleep 1; done
say "the node agent exited; see $LOGS/node-agent.log"
exit 1
