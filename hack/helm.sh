#!/usr/bin/env bash
# Installs the operator on the local control plane with a real node (hack/control-plane.sh,
# NODE=kubelet) the way a Helm user does: the chart (charts/memcached-operator, which
# `memcached-packager generate` writes) packaged, pushed as an OCI artifact to this checkout's
# registry (hack/registry.sh) and installed from there with `helm install oci://...`, with
# cert-manager issuing the webhooks' certificate and cainjector writing every caBundle, as the
# chart requires. `make helm-install` and `make helm-uninstall` run it when no cluster is
# configured (KUBECONFIG unset), and so do the end-to-end tests of that install (tests/helm).
#
# Usage: hack/helm.sh start        start the control plane with a real node if none runs;
#                                  build the operator's, memcached's and the exporter's images
#                                  from the shipped Dockerfiles and push them to the local
#                                  registry (hack/images.sh); start cert-manager
#                                  (hack/cert-manager.sh) unless CERTIFICATES=operator; push
#                                  the chart (as `push` below);
#                                  `helm install` it from the registry into
#                                  memcached-operator-system (--create-namespace), the operand
#                                  image set to the memcached stand-in and the exporter's to
#                                  the rebuilt memcached_exporter through the values
#                                  relatedImages.memcached and .memcachedExporter, as a user
#                                  overrides an image (and certificates.source and HELM_SET
#                                  below); wait for the CA and serving Certificates to be
#                                  Ready (with cert-manager), every caBundle injected (by
#                                  cainjector, or by the operator), the Deployment's ready
#                                  replicas and the
#                                  webhooks' answers. Prints what it installed on standard
#                                  output as KEY=VALUE lines (NAMESPACE, RELEASE, CHART,
#                                  VERSION, DEPLOYMENT, MEMCACHED_IMAGE, READY_SECONDS).
#        hack/helm.sh push [DIR]   `helm package` the chart in DIR (default
#                                  charts/memcached-operator) and `helm push` it to the local
#                                  registry; prints CHART (oci://ADDRESS/charts/memcached-operator)
#                                  and VERSION (the chart's)
#        hack/helm.sh uninstall    `helm uninstall` the release and wait until nothing of the
#                                  operator is left but what Helm keeps by design: the CRD (in
#                                  crds/, never deleted) and so every Memcached and what it
#                                  owns, the Secrets cert-manager or the operator wrote
#                                  (cert-manager leaves them when their Certificates go; Helm
#                                  never made the operator's) and the leader election Lease;
#                                  says what is left
#        hack/helm.sh run ARGS...  the pinned helm with ARGS against the local cluster (its
#                                  kubeconfig; Helm's cache, configuration and data under the
#                                  control plane's state directory)
#        hack/helm.sh stop         stop cert-manager; what was installed stays in the cluster,
#                                  and its pods stop with the node. hack/control-plane.sh stop
#                                  does this too.
#
# Environment:
#   CONTROL_PLANE_DIR  the control plane's state directory (default: .local at the root)
#   RELEASE            the Helm release's name (default memcached-operator)
#   HELM_TIMEOUT       seconds each wait may take (default 180)
#   CERTIFICATES       where the webhooks' certificate comes from, the chart's
#                      certificates.source: certManager (default) or operator (the operator's
#                      self-signed one; cert-manager is not started)
#   HELM_SET           more values for `start`, space-separated KEY=VALUE (each a --set)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${HELM_TIMEOUT:-180}"
# No process of its own on this machine (hack/lib/daemons.sh's waits check these).
COMPONENTS=()
RELEASE="${RELEASE:-memcached-operator}"
CERTIFICATES="${CERTIFICATES:-certManager}"
HELM_SET="${HELM_SET:-}"
CHART_DIR="$ROOT/charts/memcached-operator"
# Where charts are pushed in the local registry.
CHART_REPOSITORY="oci://$REGISTRY/charts"

log() { printf 'helm: %s\n' "$*" >&2; }
die() { printf 'helm: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"
# shellcheck source=hack/lib/cert-manager-install.sh
source "$ROOT/hack/lib/cert-manager-install.sh"

kubectl() { "$ROOT/.tools/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
helm() {
  HELM_CACHE_HOME="$STATE/helm/cache" HELM_CONFIG_HOME="$STATE/helm/config" \
    HELM_DATA_HOME="$STATE/helm/data" "$ROOT/.tools/bin/helm" --kubeconfig "$KUBECONFIG_FILE" "$@"
}

real_node() { [[ -f "$STATE/node-kind" && "$(<"$STATE/node-kind")" == kubelet ]]; }

# chart_field DIR FIELD: a top-level field of DIR's Chart.yaml (name, version), unquoted.
chart_field() {
  sed -n "s/^$2: *\"\{0,1\}\([^\"]*\)\"\{0,1\} *$/\1/p" "$1/Chart.yaml" | head -n 1
}

# push DIR: package the chart in DIR and push it to the local registry; prints CHART and
# VERSION lines.
push() {
  local dir="${1:-$CHART_DIR}" name version package
  dir="$(cd -- "$dir" && pwd -P)" || die "no chart directory $1"
  [[ -f "$dir/Chart.yaml" ]] || die "$dir holds no Chart.yaml"
  name="$(chart_field "$dir" name)"
  version="$(chart_field "$dir" version)"
  [[ -n "$name" && -n "$version" ]] || die "$dir/Chart.yaml names no name or version"
  "$ROOT/hack/tools.sh" helm
  "$ROOT/hack/registry.sh" start
  package="$(mktemp -d)"
  # shellcheck disable=SC2064 # the directory is known now
  trap "rm -rf '$package'" RETURN
  helm package "$dir" --destination "$package" >&2
  helm push "$package/$name-$version.tgz" "$CHART_REPOSITORY" --plain-http >&2
  printf 'CHART=%s\nVERSION=%s\n' "$CHART_REPOSITORY/$name" "$version"
}

start() {
  [[ "$CERTIFICATES" == certManager || "$CERTIFICATES" == operator ]] ||
    die "CERTIFICATES=$CERTIFICATES: certManager or operator"
  "$ROOT/hack/tools.sh" kube etcd helm cert-manager
  NODE=kubelet "$ROOT/hack/control-plane.sh" start >/dev/null
  real_node ||
    die "the local control plane in $STATE runs without a node: stop it (hack/control-plane.sh stop) and install again"
  local memcached exporter pushed chart version
  "$ROOT/hack/images.sh" build operator memcached memcached-exporter
  memcached="$("$ROOT/hack/images.sh" reference memcached)"
  exporter="$("$ROOT/hack/images.sh" reference memcached-exporter)"
  SECONDS=0
  DEADLINE=$TIMEOUT
  mkdir -p "$LOGS"
  [[ "$CERTIFICATES" == operator ]] || "$ROOT/hack/cert-manager.sh" start
  pushed="$(push "$CHART_DIR")"
  local values=(--set "relatedImages.memcached=$memcached" --set "relatedImages.memcachedExporter=$exporter"
    --set "certificates.source=$CERTIFICATES")
  local value
  for value in $HELM_SET; do values+=(--set "$value"); done
  chart="$(sed -n 's/^CHART=//p' <<<"$pushed")"
  version="$(sed -n 's/^VERSION=//p' <<<"$pushed")"
  log "helm install $RELEASE $chart --version $version (into $NAMESPACE) ${values[*]}"
  helm install "$RELEASE" "$chart" --version "$version" --plain-http \
    --namespace "$NAMESPACE" --create-namespace "${values[@]}" >&2
  if [[ "$CERTIFICATES" == operator ]]; then wait_until_serving operator; else wait_until_serving; fi
  log "installed with Helm: webhooks answering at $(since)s"
  log "try: export KUBECONFIG=$KUBECONFIG_FILE; kubectl apply -k config/samples; kubectl get memcacheds -A"
  printf 'NAMESPACE=%s\nRELEASE=%s\nCHART=%s\nVERSION=%s\nDEPLOYMENT=%s\nMEMCACHED_IMAGE=%s\nREADY_SECONDS=%s\n' \
    "$NAMESPACE" "$RELEASE" "$chart" "$version" "$DEPLOYMENT" "$memcached" "$(since)"
}

# leftovers: every object of the operator's that is still there after an uninstall, one a
# line, but the CRD, the Memcacheds and what they own, and the Secrets cert-manager wrote or
# the operator wrote (its self-signed certificate's, labelled managed-by it).
leftovers() {
  {
    kubectl get deployments,services,serviceaccounts,roles,rolebindings,networkpolicies,certificates,issuers,configmaps,pods \
      -n "$NAMESPACE" -o name 2>/dev/null | grep -v '^configmap/kube-root-ca.crt$' | grep -v '^serviceaccount/default$' || true
    kubectl get clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations \
      -o name 2>/dev/null | grep memcached-operator || true
    kubectl get secrets -n "$NAMESPACE" -o 'jsonpath={range .items[*]}{.metadata.name},{.metadata.annotations.cert-manager\.io/certificate-name},{.metadata.labels.app\.kubernetes\.io/managed-by}{"\n"}{end}' 2>/dev/null |
      awk -F, '$1 != "" && $2 == "" && $3 != "memcached-operator" { print "secret/" $1 " (neither cert-manager'"'"'s nor the operator'"'"'s)" }' || true
  } | sed '/^$/d'
}

nothing_left() {
  local left
  left="$(leftovers)"
  echo "${left:-nothing left}"
  [[ -z "$left" ]]
}

uninstall() {
  [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]] ||
    die "the local control plane in $STATE is not running: nothing to uninstall"
  SECONDS=0
  DEADLINE=$TIMEOUT
  log "helm uninstall $RELEASE (in $NAMESPACE)"
  helm uninstall "$RELEASE" --namespace "$NAMESPACE" --wait --timeout "${TIMEOUT}s" >&2
  step "everything of the operator but the CRD, the Memcacheds and cert-manager's Secrets to be gone" \
    nothing_left
  local kept
  kept="$(kubectl get secrets -n "$NAMESPACE" -o name 2>/dev/null | tr '\n' ' ')"
  log "uninstalled at $(since)s; kept: the CRD $CRD (Helm never deletes crds/), every Memcached," \
    "the namespace $NAMESPACE, the leader election Lease and the Secrets cert-manager or the operator wrote in it: ${kept:-none}"
}

stop() {
  local stopped=()
  if [[ -d "$STATE/cert-manager/run" ]]; then
    "$ROOT/hack/cert-manager.sh" stop 2>/dev/null || log "could not stop cert-manager"
    stopped+=(cert-manager)
  fi
  report_stopped "${stopped[@]}"
}

# The whole dispatch is one compound command ending in exit, so that bash never reads
# this file past it (safe against the file changing while a start runs).
case "${1:-}" in
  start) lock_state "$STATE/.helm.lock" && start ;;
  push) push "${2:-$CHART_DIR}" ;;
  run) shift && helm "$@" ;;
  uninstall) lock_state "$STATE/.helm.lock" && uninstall ;;
  stop) lock_state "$STATE/.helm.lock" && stop ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|push [DIR]|run ARGS...|uninstall|stop (try --help)" ;;
esac
exit
