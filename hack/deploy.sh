#!/usr/bin/env bash
# Installs the operator on the local control plane with a real node (hack/control-plane.sh,
# NODE=kubelet) the way a cluster without OLM does: `kustomize build config/default`, applied,
# with cert-manager issuing the webhooks' certificate and cainjector writing every caBundle.
# `make deploy` and `make undeploy` run it when no cluster is configured (KUBECONFIG unset),
# and so do the end-to-end tests of that install (tests/deploy).
#
# Usage: hack/deploy.sh start     start the control plane with a real node if none runs; build
#                                 the operator's and memcached's images from the shipped
#                                 Dockerfiles and push them to the local registry
#                                 (hack/images.sh); start cert-manager (hack/cert-manager.sh);
#                                 apply config/default (server-side) through the overlay
#                                 hack/node/deploy, which points RELATED_IMAGE_MEMCACHED at the
#                                 Debian memcached stand-in; wait for the CA and serving
#                                 Certificates to be Ready, every caBundle injected, the
#                                 Deployment's ready replicas and the webhooks' answers.
#                                 Prints what it installed on standard output as KEY=VALUE
#                                 lines (NAMESPACE, DEPLOYMENT, CERTIFICATE, SECRET,
#                                 READY_SECONDS).
#        hack/deploy.sh undeploy  delete everything config/default made, wait until it is
#                                 gone, and say what is left of it (see below)
#        hack/deploy.sh stop      stop cert-manager; what was applied stays in the cluster,
#                                 and its pods stop with the node. hack/control-plane.sh stop
#                                 does this too.
#        hack/deploy.sh status    say what runs; exit 0 when all of it runs, else 1
#
# Environment:
#   CONTROL_PLANE_DIR  the control plane's state directory (default: .local at the root)
#   CONFIG             the kustomization to apply (default: hack/node/deploy)
#   DEPLOY_TIMEOUT     seconds each wait may take (default 180)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
DEPLOY_STATE="$STATE/deploy"
RUN="$DEPLOY_STATE/run"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${DEPLOY_TIMEOUT:-180}"
# No process of its own on this machine (hack/lib/daemons.sh's waits check these).
COMPONENTS=()
CONFIG="${CONFIG:-$ROOT/hack/node/deploy}"

log() { printf 'deploy: %s\n' "$*" >&2; }
die() { printf 'deploy: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"
# shellcheck source=hack/lib/cert-manager-install.sh
source "$ROOT/hack/lib/cert-manager-install.sh"

kubectl() { "$ROOT/.tools/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
kustomize() { "$ROOT/.tools/bin/kustomize" "$@"; }

real_node() { [[ -f "$STATE/node-kind" && "$(<"$STATE/node-kind")" == kubelet ]]; }

start() {
  if [[ -d "$RUN" ]]; then
    log "cleaning up a previous deploy first"
    stop >/dev/null
  fi
  "$ROOT/hack/tools.sh" kube etcd kustomize cert-manager
  NODE=kubelet "$ROOT/hack/control-plane.sh" start >/dev/null
  real_node ||
    die "the local control plane in $STATE runs without a node: stop it (hack/control-plane.sh stop) and deploy again"
  [[ -f "$CONFIG/kustomization.yaml" ]] || die "$CONFIG holds no kustomization.yaml"
  local image variable built want
  "$ROOT/hack/images.sh" build operator memcached memcached-exporter
  if [[ "$CONFIG" == "$ROOT/hack/node/deploy" ]]; then
    for image in memcached memcached-exporter; do
      variable="RELATED_IMAGE_$(tr a-z- A-Z_ <<<"$image")"
      built="$("$ROOT/hack/images.sh" reference "$image")"
      want="$(awk -v v="$variable" '$3 == v { getline; print $2 }' "$CONFIG/kustomization.yaml")"
      [[ "$want" == "$built" ]] ||
        die "hack/node/deploy/kustomization.yaml sets $variable to ${want:-nothing}, but the $image image built here is $built"
    done
  fi
  SECONDS=0
  DEADLINE=$TIMEOUT
  mkdir -p "$RUN" "$LOGS"
  trap 'log "start failed; stopping cert-manager (logs in $LOGS)"; stop >/dev/null 2>&1 || true' EXIT
  "$ROOT/hack/cert-manager.sh" start

  log "applying $(realpath --relative-to="$ROOT" "$CONFIG") (kustomize build | kubectl apply --server-side)"
  kustomize build "$CONFIG" | kubectl apply --server-side --field-manager=make-deploy -f - >&2
  wait_until_serving
  trap - EXIT
  log "deployed without OLM: webhooks answering at $(since)s"
  log "try: export KUBECONFIG=$KUBECONFIG_FILE; kubectl apply -k config/samples; kubectl get memcacheds -A"
  printf 'NAMESPACE=%s\nDEPLOYMENT=%s\nCERTIFICATE=%s\nSECRET=%s\nREADY_SECONDS=%s\n' \
    "$NAMESPACE" "$DEPLOYMENT" "$CERTIFICATE" "$SECRET" "$(since)"
}

# leftovers: every object that still names the operator after an undeploy, one a line:
# cluster-scoped kinds by name, namespaced ones in any namespace.
leftovers() {
  {
    kubectl get crd "$CRD" -o name 2>/dev/null || true
    kubectl get namespace "$NAMESPACE" -o name 2>/dev/null || true
    kubectl get clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations \
      -o name 2>/dev/null | grep memcached-operator || true
    kubectl get statefulsets,services,poddisruptionbudgets,pods,secrets,configmaps,leases -A \
      -l app.kubernetes.io/managed-by=memcached-operator -o name 2>/dev/null || true
  } | sed '/^$/d'
}

# nothing_left: whether leftovers finds nothing; prints what it found.
nothing_left() {
  local left
  left="$(leftovers)"
  echo "${left:-nothing left}"
  [[ -z "$left" ]]
}

undeploy() {
  [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]] ||
    die "the local control plane in $STATE is not running: nothing to undeploy"
  SECONDS=0
  DEADLINE=$TIMEOUT
  log "deleting what $(realpath --relative-to="$ROOT" "$CONFIG") made (kustomize build | kubectl delete)"
  kustomize build "$CONFIG" | kubectl delete --ignore-not-found --wait=false -f - >&2
  step "everything it made to be gone (the namespace $NAMESPACE, the CRD and what they held)" \
    nothing_left
  local events
  events="$(kubectl get events -A --field-selector involvedObject.kind=Memcached -o name 2>/dev/null | wc -l)"
  log "undeployed at $(since)s; left: cert-manager and its CRDs (not ours), and $events Event(s)" \
    "about deleted Memcacheds in their namespaces, which the API server expires after an hour"
}

stop() {
  local stopped=()
  if [[ -d "$STATE/cert-manager/run" ]]; then
    "$ROOT/hack/cert-manager.sh" stop 2>/dev/null || log "could not stop cert-manager"
    stopped+=(cert-manager)
  fi
  rm -rf "$DEPLOY_STATE"
  report_stopped "${stopped[@]}"
}

status() {
  "$ROOT/hack/cert-manager.sh" status
}

# The whole dispatch is one compound command ending in exit, so that bash never reads
# this file past it (safe against the file changing while a start runs).
case "${1:-}" in
  start) lock_state "$STATE/.deploy.lock" && start ;;
  undeploy) lock_state "$STATE/.deploy.lock" && undeploy ;;
  stop) lock_state "$STATE/.deploy.lock" && stop ;;
  status) status ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|undeploy|stop|status (try --help)" ;;
esac
exit
