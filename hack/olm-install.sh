#!/usr/bin/env bash
# Installs the operator on the local control plane (hack/control-plane.sh, started with
# NODE=kubelet: a real node) the way a user's cluster does: through the real OLM v0 and a
# Subscription to a catalog image. `make run` and the end-to-end tests through OLM (tests/olm)
# both install this way.
#
# Usage: hack/olm-install.sh start    build and push the images (hack/images.sh), run OLM in
#                                     the cluster (hack/olm.sh) with the shipped catalog's
#                                     image as the CatalogSource's `image`, so that OLM runs
#                                     its registry pod and unpacks the bundle image itself,
#                                     and subscribe: a CatalogSource in olm, an AllNamespaces
#                                     OperatorGroup and a Subscription in operators whose
#                                     `config.env` points RELATED_IMAGE_MEMCACHED at the
#                                     memcached stand-in and
#                                     RELATED_IMAGE_MEMCACHED_EXPORTER at the rebuilt
#                                     memcached_exporter. Then wait for the bundle-unpack
#                                     Job, the InstallPlan, a Succeeded CSV, the Deployment's
#                                     ready replicas and the webhooks' answers. Prints what it
#                                     installed on standard output as KEY=VALUE lines (CSV,
#                                     DEPLOYMENT, NAMESPACE, CSV_SECONDS).
#        hack/olm-install.sh stop     forget the install's state; what was installed stays
#                                     in the cluster, and OLM's pods stop with the node
#                                     (hack/control-plane.sh stop)
#        hack/olm-install.sh status   say what runs; exit 0 when OLM runs, else 1
#
# Environment:
#   CONTROL_PLANE_DIR  the control plane's state directory (default: .local at the root)
#   PACKAGE            the package to subscribe to (default: memcached-operator)
#   INSTALL_TIMEOUT    seconds each wait may take (default 180)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
INSTALL_STATE="$STATE/install"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${INSTALL_TIMEOUT:-180}"
CATALOG="$ROOT/catalog"
PACKAGE="${PACKAGE:-memcached-operator}"
NAMESPACE=operators
# No process of its own on this machine (hack/lib/daemons.sh's waits check these).
COMPONENTS=()

log() { printf 'olm-install: %s\n' "$*" >&2; }
die() { printf 'olm-install: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"

kubectl() { "$ROOT/.tools/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
real_node() { [[ -f "$STATE/node-kind" && "$(<"$STATE/node-kind")" == kubelet ]]; }

# installplan_settled: whether the InstallPlan is Complete or Failed; a Failed one leaves
# its conditions' messages in INSTALL_STATE/installplan-failed.
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

start() {
  real_node ||
    die "the local control plane in $STATE has no real node: start it with NODE=kubelet hack/control-plane.sh start"
  [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]] ||
    die "the local control plane in $STATE is not running: start it with NODE=kubelet hack/control-plane.sh start"
  [[ -f "$CATALOG/$PACKAGE/package.yaml" ]] || die "$CATALOG holds no package $PACKAGE"
  local channel source env
  channel="$(awk '$1 == "defaultChannel:" { print $2; exit }' "$CATALOG/$PACKAGE/package.yaml")"
  [[ -n "$channel" ]] || die "$CATALOG/$PACKAGE/package.yaml names no defaultChannel"
  rm -rf "$INSTALL_STATE"
  mkdir -p "$INSTALL_STATE" "$LOGS"
  "$ROOT/hack/images.sh" build operator bundle catalog memcached memcached-exporter
  SECONDS=0
  DEADLINE=$TIMEOUT
  "$ROOT/hack/olm.sh" start
  source="image: $("$ROOT/hack/images.sh" reference catalog), grpcPodConfig: {securityContextConfig: restricted}"
  env="config: {env: [{name: RELATED_IMAGE_MEMCACHED, value: \"$("$ROOT/hack/images.sh" reference memcached)\"}"
  env+=", {name: RELATED_IMAGE_MEMCACHED_EXPORTER, value: \"$("$ROOT/hack/images.sh" reference memcached-exporter)\"}]}"

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
spec: {channel: $channel, name: $PACKAGE, source: $PACKAGE, sourceNamespace: olm, $env}
EOF

  step "the CatalogSource to be READY (OLM's registry pod for it runs on the node)" \
    jsonpath_is READY catalogsource -n olm \
    "$PACKAGE" -o 'jsonpath={.status.connectionState.lastObservedState}'
  step "the bundle-unpack Job in olm to complete (its pod runs on the node)" \
    jsonpath_is True jobs -n olm -l operatorframework.io/bundle-unpack-ref \
    -o 'jsonpath={.items[0].status.conditions[?(@.type=="Complete")].status}'
  step "the InstallPlan to be Complete" installplan_settled
  [[ ! -f "$INSTALL_STATE/installplan-failed" ]] ||
    die "the InstallPlan Failed: $(cat "$INSTALL_STATE/installplan-failed")"
  local csv deployment replicas csv_done
  csv="$(kubectl get subscription -n "$NAMESPACE" "$PACKAGE" -o 'jsonpath={.status.installedCSV}')"
  [[ -n "$csv" ]] || die "Subscription $PACKAGE names no installedCSV"
  step "ClusterServiceVersion $csv to be Succeeded (its Deployment's pods run on the node)" \
    jsonpath_is Succeeded csv -n "$NAMESPACE" "$csv" -o 'jsonpath={.status.phase}'
  csv_done="$(since)"
  deployment="$(kubectl get deployments -n "$NAMESPACE" -l "olm.owner=$csv" -o 'jsonpath={.items[0].metadata.name}')"
  replicas="$(kubectl get deployment -n "$NAMESPACE" "$deployment" -o 'jsonpath={.spec.replicas}')"
  step "Deployment $deployment to have $replicas ready replicas" \
    jsonpath_is "$replicas" deployment -n "$NAMESPACE" "$deployment" -o 'jsonpath={.status.readyReplicas}'
  step "the operator's webhooks to answer (a server-side dry run of config/samples)" \
    kubectl apply --dry-run=server -k "$ROOT/config/samples"
  log "installed through OLM: CSV $csv Succeeded at ${csv_done}s, webhooks answering at $(since)s"
  printf 'CSV=%s\nDEPLOYMENT=%s\nNAMESPACE=%s\nCSV_SECONDS=%s\n' \
    "$csv" "$deployment" "$NAMESPACE" "$csv_done"
}

stop() {
  rm -rf "$INSTALL_STATE"
  log "forgot the install's state; what OLM installed stops with the node"
}

status() { "$ROOT/hack/olm.sh" status; }

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
