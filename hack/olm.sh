#!/usr/bin/env bash
# Runs OLM v0 on the local control plane of hack/control-plane.sh, whose node is a real one
# (NODE=kubelet), as a cluster runs it: its own Deployments (olm-operator, catalog-operator)
# from its release manifest, with the olm and opm images built here (hack/images.sh).
#
# Usage: hack/olm.sh start    install OLM's CRDs (server-side apply, each waited for until
#                             Established), then the release manifest (its namespaces olm
#                             and operators, the OLMConfig `cluster`, RBAC, Deployments), and
#                             wait until both Deployments are available; harmless when OLM
#                             already runs. The control plane must be running.
#        hack/olm.sh stop     nothing to stop on this machine: OLM's pods stop with the node
#                             (hack/control-plane.sh stop); what start installed stays
#        hack/olm.sh status   say whether both Deployments are available; exit 0 when they
#                             are, else 1
#
# The release manifest is rendered from the pinned module's chart as its release is
# (scripts/package_release.sh: deploy/chart with deploy/upstream/values.yaml, copied into
# .tools/olm/), less packageserver's CSV (the packages API) and the operatorhub.io
# CatalogSource (no internet here), with the images those of the OLM and opm rebuilt here
# (registry.invalid/rebuilt/), named by their own digests as upstream's release names its
# images by digest. Subscribing takes a CatalogSource and an
# OperatorGroup of your own (hack/olm-install.sh).
#
# Environment:
#   CONTROL_PLANE_DIR  the control plane's state directory (default: .local at the root)
#   OLM_TIMEOUT        seconds start waits for readiness (default 60)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/.tools/bin"
CRDS="$ROOT/.tools/olm/crds"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
OLM_STATE="$STATE/olm"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${OLM_TIMEOUT:-60}"
# No process of its own on this machine (hack/lib/daemons.sh's waits check these).
COMPONENTS=()
NAMESPACE=olm

log() { printf 'olm: %s\n' "$*" >&2; }
die() { printf 'olm: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }

control_plane_ready() { [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]]; }
real_node() { [[ -f "$STATE/node-kind" && "$(<"$STATE/node-kind")" == kubelet ]]; }

# release_manifest OLM-IMAGE OPM-IMAGE: OLM's release manifest as its release renders it
# (scripts/package_release.sh: `helm template` of deploy/chart with deploy/upstream/values.yaml,
# the olm image for olm, catalog and packageserver, catalog's --opmImage), less
# packageserver's ClusterServiceVersion and the operatorhub.io CatalogSource.
release_manifest() {
  cat >"$OLM_STATE/values.yaml" <<EOF
olm: {image: {ref: "$1"}}
catalog: {image: {ref: "$1"}, opmImageArgs: "--opmImage=$2"}
package: {image: {ref: "$1"}}
EOF
  "$BIN/helm" template olm "$ROOT/.tools/olm/chart" -f "$ROOT/.tools/olm/values.yaml" \
    -f "$OLM_STATE/values.yaml" | python3 -c '
import re, sys
docs = re.split(r"^---[^\n]*$", sys.stdin.read(), flags=re.M)
drop = ("ClusterServiceVersion", "CatalogSource")
kept = [d for d in docs if d.strip() and not any(re.search(r"^kind:\s*%s\s*$" % k, d, flags=re.M) for k in drop)]
print("\n---".join(kept))'
}

deployments_available() {
  [[ "$(kubectl get deployments -n "$NAMESPACE" olm-operator catalog-operator \
    -o 'jsonpath={.items[*].status.availableReplicas}' 2>/dev/null)" == "1 1" ]]
}

start_in_cluster() {
  local t0=$EPOCHREALTIME util_image opm_image
  SECONDS=0
  DEADLINE=$TIMEOUT
  control_plane_ready ||
    die "the local control plane in $STATE is not running: start it with NODE=kubelet hack/control-plane.sh start"
  "$ROOT/hack/tools.sh" olm helm
  "$ROOT/hack/images.sh" build olm opm
  mkdir -p "$OLM_STATE"
  # By digest, as OLM's release manifest names its images: OLM pulls an image named by tag
  # every time (its bundle unpacker's util and opm containers), which a disconnected
  # cluster's digest mirror cannot serve.
  util_image="$("$ROOT/hack/images.sh" pinned olm)"
  opm_image="$("$ROOT/hack/images.sh" pinned opm)"
  install_crds
  log "applying OLM's release manifest (its chart rendered with images $util_image and $opm_image)"
  release_manifest "$util_image" "$opm_image" |
    kubectl apply --server-side --field-manager=hack-olm -f - >/dev/null
  wait_for "OLM's olm-operator and catalog-operator Deployments to be available" deployments_available
  local elapsed
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  log "ready in ${elapsed}s: olm-operator and catalog-operator in namespace $NAMESPACE (pods on the node)"
}

# install_crds: OLM's CRDs, applied and established.
install_crds() {
  local crd count
  count="$(find "$CRDS" -name '*.yaml' | wc -l)"
  log "applying OLM's $count CRDs from $CRDS"
  kubectl apply --server-side --field-manager=hack-olm -f "$CRDS" >/dev/null
  for crd in "$CRDS"/*.yaml; do
    wait_for "CRD $(basename "$crd") to be Established" \
      kubectl wait --for=condition=Established --timeout=1s -f "$crd"
  done
}

start() {
  real_node ||
    die "the local control plane in $STATE has no real node: start it with NODE=kubelet hack/control-plane.sh start"
  start_in_cluster
}

stop() { log "OLM's pods stop with the node (hack/control-plane.sh stop)"; }

status() {
  if deployments_available; then
    printf '%-18s available\n' olm-operator catalog-operator
  else
    printf 'OLM                not available\n'
    return 1
  fi
}

# The whole dispatch is one compound command ending in exit, so that bash never reads
# this file past it (safe against the file changing while a start runs).
case "${1:-}" in
  start) lock_state "$STATE/.olm.lock" && start ;;
  stop) lock_state "$STATE/.olm.lock" && stop ;;
  status) status ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|stop|status (try --help)" ;;
esac
exit
