#!/usr/bin/env bash
# Installs the operator on the local control plane (hack/control-plane.sh) the way a user's
# cluster does: through the real OLM v0 and a Subscription to a catalog. `make run` and the
# end-to-end tests through OLM (tests/olm) both install this way.
#
# Usage: hack/olm-install.sh start    on a real node (the control plane started with
#                                     NODE=kubelet): build and push the images (hack/images.sh),
#                                     run OLM in the cluster (hack/olm.sh) with the catalog
#                                     image as the CatalogSource's `image`, so that OLM runs
#                                     its registry pod and unpacks the bundle image itself,
#                                     and point RELATED_IMAGE_MEMCACHED at the memcached
#                                     stand-in through the Subscription's `config.env`;
#                                     otherwise start the test kit's node agent as the
#                                     cluster's one node (pods run as local processes:
#                                     docs/local-cluster.md), OLM (hack/olm.sh), and
#                                     `opm serve` of the catalog. Then subscribe (a CatalogSource in
#                                     olm, an AllNamespaces OperatorGroup and a Subscription in
#                                     operators); wait for the bundle-unpack Job, the
#                                     InstallPlan, a Succeeded CSV, the Deployment's ready
#                                     replicas and the webhooks' answers. Prints what it
#                                     installed on standard output as KEY=VALUE lines (CSV,
#                                     DEPLOYMENT, NAMESPACE, NODE_STATE, CSV_SECONDS,
#                                     IMAGES_DIR: JSON image tables dropped there reach the
#                                     running node agent, for a new release's images).
#        hack/olm-install.sh stop     stop opm, the node agent (which stops every pod's
#                                     processes and removes their files) and OLM; what was
#                                     installed stays in the cluster. hack/control-plane.sh
#                                     stop does this too.
#        hack/olm-install.sh status   say what runs; exit 0 when all of it runs, else 1
#
# Files (under the control plane's state directory, .local/ at the repository root):
#   logs/node-agent.log, logs/opm.log  kept after stop, for post-mortems
#   node/pods/UID/logs/CONTAINER.log   each container's output, while its pod runs
#   install/run/NAME.pid               the node agent and opm
#
# Environment:
#   CONTROL_PLANE_DIR  the control plane's state directory (default: .local at the root)
#   CATALOG            the file-based catalog to serve (default: the shipped catalog/; on a
#                      real node only the shipped one, whose image hack/images.sh builds)
#   PACKAGE            the package to subscribe to (default: memcached-operator)
#   OPERATOR_BINARY    what the operator image runs (default: target/debug/memcached-operator)
#   NODE_AGENT         the node agent binary (default: target/debug/node-agent)
#   INSTALL_TIMEOUT    seconds each wait may take (default 180)
#   OLM_UTIL_IMAGE, OLM_OPM_IMAGE  the images catalog names in bundle-unpack Jobs (defaults:
#                      OLM's and opm's images at their pins); the node agent maps the same
#                      names to .tools/bin
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
INSTALL_STATE="$STATE/install"
# daemons.sh runs BIN/NAME: links to the two programs, which live in different places.
BIN="$INSTALL_STATE/bin"
RUN="$INSTALL_STATE/run"
LOGS="$STATE/logs"
NODE_STATE="$STATE/node"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${INSTALL_TIMEOUT:-180}"
COMPONENTS=(node-agent opm)
CATALOG="${CATALOG:-$ROOT/catalog}"
PACKAGE="${PACKAGE:-memcached-operator}"
OPERATOR_BINARY="${OPERATOR_BINARY:-$ROOT/target/debug/memcached-operator}"
NODE_AGENT="${NODE_AGENT:-$ROOT/target/debug/node-agent}"
NODE_NAME=local
POD_IP_RANGE=127.0.100.0/24
NAMESPACE=operators
# The node agent stops every pod within its grace period (the operator's is 10 s) before it
# exits.
AGENT_STOP_SECONDS=40

log() { printf 'olm-install: %s\n' "$*" >&2; }
die() { printf 'olm-install: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"

kubectl() { "$ROOT/.tools/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
pin() { "$ROOT/hack/tools.sh" --print-versions | awk -v t="$1" '$1 == t { print $2 }'; }

# installplan_settled: whether the InstallPlan is Complete or Failed; a Failed one leaves
# its conditions' messages in INSTALL_STATE/installplan-failed.
real_node() { [[ -f "$STATE/node-kind" && "$(<"$STATE/node-kind")" == kubelet ]]; }

installplan_settled() {
  local phase
  phase="$(kubectl get installplans -n "$NAMESPACE" -o 'jsonpath={.items[0].status.phase}' 2>&1)" || true
  echo "got: ${phase:-<nothing>}"
  if [[ "$phase" == Failed ]]; then
    kubectl get installplans -n "$NAMESPACE" \
      -o 'jsonpath={range .items[0].status.conditions[*]}{.reason}: {.message}{"\n"}{end}' \
      >"$INSTALL_STATE/installplan-failed" 2>&1 || true
    return 0
  fi
  [[ "$phase" == Complete ]]
}

# start_node_agent_and_opm: the node agent as the cluster's node, OLM as processes, and
# `opm serve` of CATALOG on a free port (OPM_PORT).
start_node_agent_and_opm() {
  for built in "$OPERATOR_BINARY" "$NODE_AGENT"; do
    [[ -x "$built" ]] || die "$built is missing: run make build"
  done
  "$ROOT/hack/tools.sh" olm opm memcached
  # One place for the two image names: catalog puts them in bundle-unpack Jobs (hack/olm.sh
  # reads these variables) and the node agent's image table maps them to .tools/bin.
  export OLM_UTIL_IMAGE="${OLM_UTIL_IMAGE:-quay.io/operator-framework/olm:$(pin olm)}"
  export OLM_OPM_IMAGE="${OLM_OPM_IMAGE:-quay.io/operator-framework/opm:$(pin opm)}"

  ln -sfn "$NODE_AGENT" "$BIN/node-agent"
  ln -sfn "$ROOT/.tools/bin/opm" "$BIN/opm"
  SECONDS=0
  DEADLINE=$TIMEOUT
  # From here on a failure (set -e exits) stops whatever did start.
  trap 'log "start failed; stopping what was started (logs in $LOGS)"; stop >/dev/null 2>&1 || true' EXIT

  log "starting the node agent (log: $LOGS/node-agent.log)"
  # From the repository root: its image table maps the repository's own images (operator,
  # bundle, memcached) and OLM's util and opm images to files here.
  (cd "$ROOT" && launch node-agent --kubeconfig "$KUBECONFIG_FILE" --node-name "$NODE_NAME" \
    --state-dir "$NODE_STATE" --pod-ip-range "$POD_IP_RANGE" \
    --operator-binary "$OPERATOR_BINARY" --images-dir "$INSTALL_STATE/images.d" \
    --util-image "$OLM_UTIL_IMAGE" --opm-image "$OLM_OPM_IMAGE")

  # The operator's pods serve metrics on their pod IPs' port 8443, which catalog's *:8443
  # would block: hack/olm.sh moves catalog off it.
  OLM_KEEP_8443_FREE=1 "$ROOT/hack/olm.sh" start
  WAITING_ON=node-agent step "Node $NODE_NAME to be Ready and schedulable" jsonpath_is "True/" \
    node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints[*].key}'

  local pprof_port
  OPM_PORT="$(free_port)"
  pprof_port="$(free_port)"
  log "serving $CATALOG with opm on 127.0.0.1:$OPM_PORT (log: $LOGS/opm.log)"
  mkdir -p "$INSTALL_STATE/opm-tmp"
  TMPDIR="$INSTALL_STATE/opm-tmp" launch opm serve "$CATALOG" -p "$OPM_PORT" \
    --pprof-addr "127.0.0.1:$pprof_port" -t "$INSTALL_STATE/opm-termination.log"
}

start() {
  local name running=()
  for name in "${COMPONENTS[@]}"; do
    [[ -z "$(pid_of "$name")" ]] || running+=("$name")
  done
  if ((${#running[@]})) || [[ -d "$RUN" ]]; then
    log "cleaning up a previous install's processes first"
    stop >/dev/null
  fi
  [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]] ||
    die "the local control plane in $STATE is not running: start it with hack/control-plane.sh start"
  [[ -f "$CATALOG/$PACKAGE/package.yaml" ]] || die "$CATALOG holds no package $PACKAGE"
  local channel source env=""
  channel="$(awk '$1 == "defaultChannel:" { print $2; exit }' "$CATALOG/$PACKAGE/package.yaml")"
  [[ -n "$channel" ]] || die "$CATALOG/$PACKAGE/package.yaml names no defaultChannel"
  mkdir -p "$BIN" "$RUN" "$LOGS" "$INSTALL_STATE/images.d"
  if real_node; then
    [[ "$(realpath "$CATALOG")" == "$ROOT/catalog" ]] ||
      die "on a real node the catalog is the image of the shipped catalog/, not $CATALOG"
    "$ROOT/hack/images.sh" build operator bundle catalog memcached
    SECONDS=0
    DEADLINE=$TIMEOUT
    # From here on a failure (set -e exits) stops whatever did start.
    trap 'log "start failed; stopping what was started (logs in $LOGS)"; stop >/dev/null 2>&1 || true' EXIT
    "$ROOT/hack/olm.sh" start
    source="image: $("$ROOT/hack/images.sh" reference catalog), grpcPodConfig: {securityContextConfig: restricted}"
    env="config: {env: [{name: RELATED_IMAGE_MEMCACHED, value: \"$("$ROOT/hack/images.sh" reference memcached)\"}]}"
  else
    start_node_agent_and_opm
    source="address: \"127.0.0.1:$OPM_PORT\""
  fi

  kubectl apply -f - >&2 <<EOF
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: $PACKAGE, namespace: olm}
spec: {sourceType: grpc, $source, displayName: "$PACKAGE ($(basename "$CATALOG")/)"}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: global-operators, namespace: $NAMESPACE}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: $PACKAGE, namespace: $NAMESPACE}
spec: {channel: $channel, name: $PACKAGE, source: $PACKAGE, sourceNamespace: olm${env:+, $env}}
EOF

  WAITING_ON=opm step "the CatalogSource to be READY" jsonpath_is READY catalogsource -n olm \
    "$PACKAGE" -o 'jsonpath={.status.connectionState.lastObservedState}'
  WAITING_ON=node-agent step "the bundle-unpack Job in olm to complete (its pod runs on the node)" \
    jsonpath_is True jobs -n olm -l operatorframework.io/bundle-unpack-ref \
    -o 'jsonpath={.items[0].status.conditions[?(@.type=="Complete")].status}'
  step "the InstallPlan to be Complete" installplan_settled
  [[ ! -f "$INSTALL_STATE/installplan-failed" ]] ||
    die "the InstallPlan Failed: $(cat "$INSTALL_STATE/installplan-failed")"
  local csv deployment replicas csv_done
  csv="$(kubectl get subscription -n "$NAMESPACE" "$PACKAGE" -o 'jsonpath={.status.installedCSV}')"
  [[ -n "$csv" ]] || die "Subscription $PACKAGE names no installedCSV"
  WAITING_ON=node-agent step "ClusterServiceVersion $csv to be Succeeded (its Deployment's pods run on the node)" \
    jsonpath_is Succeeded csv -n "$NAMESPACE" "$csv" -o 'jsonpath={.status.phase}'
  csv_done="$(since)"
  deployment="$(kubectl get deployments -n "$NAMESPACE" -l "olm.owner=$csv" -o 'jsonpath={.items[0].metadata.name}')"
  replicas="$(kubectl get deployment -n "$NAMESPACE" "$deployment" -o 'jsonpath={.spec.replicas}')"
  WAITING_ON=node-agent step "Deployment $deployment to have $replicas ready replicas" \
    jsonpath_is "$replicas" deployment -n "$NAMESPACE" "$deployment" -o 'jsonpath={.status.readyReplicas}'
  step "the operator's webhooks to answer (a server-side dry run of config/samples)" \
    kubectl apply --dry-run=server -k "$ROOT/config/samples"
  trap - EXIT
  log "installed through OLM: CSV $csv Succeeded at ${csv_done}s, webhooks answering at $(since)s"
  printf 'CSV=%s\nDEPLOYMENT=%s\nNAMESPACE=%s\nNODE_STATE=%s\nCSV_SECONDS=%s\nIMAGES_DIR=%s\n' \
    "$csv" "$deployment" "$NAMESPACE" "$NODE_STATE" "$csv_done" "$INSTALL_STATE/images.d"
}

stop() {
  local stopped=()
  if stop_component opm; then stopped+=(opm); fi
  if stop_component node-agent "$AGENT_STOP_SECONDS"; then stopped+=(node-agent); fi
  if [[ -d "$STATE/olm/run" ]]; then
    "$ROOT/hack/olm.sh" stop || log "could not stop OLM"
  fi
  rm -rf "$INSTALL_STATE" "$NODE_STATE"
  report_stopped "${stopped[@]}"
}

status() {
  local all=0
  print_processes 12 "${COMPONENTS[@]}" || all=1
  OLM_KEEP_8443_FREE=1 "$ROOT/hack/olm.sh" status || all=1
  return "$all"
}

# The whole dispatch is one compound command ending in exit, so that bash never reads
# this file past it (safe against the file changing while a start runs).
case "${1:-}" in
  start) lock_state "$STATE/.install.lock" && start ;;
  stop) lock_state "$STATE/.install.lock" && stop ;;
  status) status ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|stop|status (try --help)" ;;
esac
exit
