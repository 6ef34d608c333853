#!/usr/bin/env bash
# Runs OLM v0 (the olm and catalog operators that `hack/tools.sh olm` builds) on the local
# control plane of hack/control-plane.sh: on a real node (NODE=kubelet) as a cluster runs it,
# its own Deployments from its release manifest; otherwise as two background processes on
# this machine.
#
# Usage: hack/olm.sh start    install OLM's CRDs (server-side apply), the namespaces olm and
#                             operators and the OLMConfig `cluster`, then start olm and
#                             catalog and wait until both are healthy; exits 0 if OLM
#                             already runs. The control plane must be running.
#        hack/olm.sh stop     stop the processes start started (hack/control-plane.sh stop
#                             does this too); what start installed stays in the cluster
#        hack/olm.sh status   say what runs; exit 0 when both run, else 1
#
# On a real node: OLM's release manifest, rendered from the pinned module's chart as its
# release is (deploy/chart with deploy/upstream/values.yaml, copied into .tools/olm/), applied
# after its CRDs, less packageserver's CSV (the packages API) and the operatorhub.io
# CatalogSource (no internet here), with the olm and opm images built here (hack/images.sh)
# named by tag instead of upstream's digests, which a rebuild cannot match. start waits for
# both Deployments; stop deletes nothing (the control plane's stop ends the pods).
#
# As processes: this is OLM as its release manifests install it, less the packageserver (the
# packages.operators.coreos.com API), the global-operators OperatorGroup and the community
# catalog: subscribing takes a CatalogSource and an OperatorGroup of your own. Both
# processes use the control plane's admin kubeconfig, and the namespace olm.
#
# OLM's health and metrics ports are fixed in its code, on every address: olm serves plain
# HTTP on *:8080, and catalog, given a certificate signed by the control plane's CA, serves
# HTTPS on *:8443. So one OLM runs on a machine at a time: start refuses to run when either
# port is taken.
#
# Nothing here runs pods. What OLM creates for a subscription (the Job that unpacks a bundle,
# the operator's Deployment) is scheduled but runs only when something plays the node.
#
# Files (under the control plane's state directory, .local/ at the repository root):
#   logs/olm.log, logs/catalog.log   kept after stop, for post-mortems
#   olm/run/NAME.pid                 the two processes
#   olm/pki/catalog.{crt,key}        catalog's serving certificate (127.0.0.1, localhost)
#
# Environment:
#   CONTROL_PLANE_DIR  the control plane's state directory (default: .local at the root)
#   OLM_OPM_IMAGE      the image catalog names in bundle-unpack Jobs for `opm alpha bundle
#                      extract` (default: operator-registry's image at the opm pin)
#   OLM_UTIL_IMAGE     the image with OLM's `cpb` utility, for the same Jobs (default: OLM's
#                      image at the olm pin)
#   OLM_TIMEOUT        seconds start waits for readiness (default 60)
#   OLM_KEEP_8443_FREE 1: leave port 8443 to pods that run on this machine (the node agent's:
#                      the operator's pods serve metrics on their pod IP's 8443, which
#                      catalog's *:8443 would block). Both then run without TLS, so both
#                      health servers want *:8080; catalog, started first, holds it, olm's
#                      bind fails (OLM only logs it), and olm counts as ready when it runs
#                      and has reconciled the OLMConfig `cluster`. hack/olm-install.sh (and
#                      so `make run`) sets it.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/.tools/bin"
CRDS="$ROOT/.tools/olm/crds"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
OLM_STATE="$STATE/olm"
RUN="$OLM_STATE/run"
PKI="$OLM_STATE/pki"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${OLM_TIMEOUT:-60}"
COMPONENTS=(olm catalog)
NAMESPACE=olm
# The ports OLM's health servers bind (pkg/lib/server: ":8080", or ":8443" with TLS).
OLM_HEALTH_PORT=8080
KEEP_8443_FREE="${OLM_KEEP_8443_FREE:-0}"
CATALOG_HEALTH_PORT=8443
# With OLM_KEEP_8443_FREE=1, catalog serves plain HTTP on the port olm would have used.
[[ "$KEEP_8443_FREE" != 1 ]] || CATALOG_HEALTH_PORT="$OLM_HEALTH_PORT"

log() { printf 'olm: %s\n' "$*" >&2; }
die() { printf 'olm: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }

# pin TOOL: the version hack/tools.sh pins TOOL at.
pin() { "$ROOT/hack/tools.sh" --print-versions | awk -v t="$1" '$1 == t { print $2 }'; }

# port_owner PORT: "NAME pid PID" of the process listening on TCP PORT, on any address.
port_owner() {
  ss -Hltnp "sport = :$1" 2>/dev/null |
    sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\),.*/\1 pid \2/p' | head -n 1
}

# healthy NAME PORT CURL-ARGS...: whether daemon NAME itself listens on PORT and its
# /healthz answers.
healthy() {
  local name="$1" port="$2" pid
  shift 2
  pid="$(pid_of "$name")"
  [[ -n "$pid" && "$(port_owner "$port")" == *" pid $pid" ]] || return 1
  curl -fsS -o /dev/null --max-time 2 "$@"
}

olm_healthy() {
  if [[ "$KEEP_8443_FREE" == 1 ]]; then
    # No health server of its own (see OLM_KEEP_8443_FREE): running, and the OLMConfig
    # reconciled.
    [[ -n "$(pid_of olm)" ]] &&
      [[ -n "$(kubectl get olmconfig cluster -o 'jsonpath={.status.conditions[?(@.type=="DisabledCopiedCSVs")].status}' 2>/dev/null)" ]]
    return
  fi
  healthy olm "$OLM_HEALTH_PORT" "http://127.0.0.1:$OLM_HEALTH_PORT/healthz"
}
catalog_healthy() {
  if [[ "$KEEP_8443_FREE" == 1 ]]; then
    healthy catalog "$CATALOG_HEALTH_PORT" "http://127.0.0.1:$CATALOG_HEALTH_PORT/healthz"
    return
  fi
  healthy catalog "$CATALOG_HEALTH_PORT" --cacert "$STATE/pki/ca.crt" \
    "https://127.0.0.1:$CATALOG_HEALTH_PORT/healthz"
}

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
  util_image="$("$ROOT/hack/images.sh" reference olm)"
  opm_image="$("$ROOT/hack/images.sh" reference opm)"
  install_crds
  log "applying OLM's release manifest (its chart rendered with images $util_image and $opm_image)"
  release_manifest "$util_image" "$opm_image" |
    kubectl apply --server-side --field-manager=hack-olm -f - >/dev/null
  wait_for "OLM's olm-operator and catalog-operator Deployments to be available" deployments_available
  local elapsed
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  log "ready in ${elapsed}s: olm-operator and catalog-operator in namespace $NAMESPACE (pods on the node)"
}

# sign_catalog_certificate: catalog's serving certificate, signed by the control plane's CA.
sign_catalog_certificate() {
  rm -rf "$PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/catalog.key"
  printf '%s\n' basicConstraints=critical,CA:FALSE keyUsage=critical,digitalSignature \
    extendedKeyUsage=serverAuth subjectAltName=IP:127.0.0.1,DNS:localhost >"$PKI/catalog.ext"
  openssl req -new -key "$PKI/catalog.key" -subj "/CN=catalog-operator" |
    openssl x509 -req -CA "$STATE/pki/ca.crt" -CAkey "$STATE/pki/ca.key" \
      -set_serial "0x$(openssl rand -hex 16)" -days 365 -extfile "$PKI/catalog.ext" \
      -out "$PKI/catalog.crt" 2>/dev/null
  rm -f "$PKI/catalog.ext"
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

# install_objects: OLM's CRDs, then its namespaces and the OLMConfig (which the release
# manifest holds on a real node).
install_objects() {
  install_crds
  kubectl apply --server-side --field-manager=hack-olm -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $NAMESPACE
---
apiVersion: v1
kind: Namespace
metadata:
  name: operators
---
apiVersion: operators.coreos.com/v1
kind: OLMConfig
metadata:
  name: cluster
EOF
}

launch_catalog() {
  local tls=(--tls-cert "$PKI/catalog.crt" --tls-key "$PKI/catalog.key")
  [[ "$KEEP_8443_FREE" != 1 ]] || tls=()
  launch catalog \
    --kubeconfig "$KUBECONFIG_FILE" \
    --namespace "$NAMESPACE" \
    --opmImage "$opm_image" \
    --util-image "$util_image" \
    --set-workload-user-id=false \
    "${tls[@]}"
}

start() {
  if real_node; then
    start_in_cluster
    return
  fi
  local name running=() owner port t0=$EPOCHREALTIME
  for name in "${COMPONENTS[@]}"; do
    [[ -z "$(pid_of "$name")" ]] || running+=("$name")
  done
  SECONDS=0
  DEADLINE=$TIMEOUT
  if ((${#running[@]} == ${#COMPONENTS[@]})); then
    log "already running"
    WAITING_ON=olm wait_for "olm /healthz" olm_healthy
    WAITING_ON=catalog wait_for "catalog /healthz" catalog_healthy
    return 0
  fi
  if ((${#running[@]})) || [[ -d "$RUN" ]]; then
    log "cleaning up a partial or stale OLM first"
    stop >/dev/null
  fi

  control_plane_ready ||
    die "the local control plane in $STATE is not running: start it with hack/control-plane.sh start"
  "$ROOT/hack/tools.sh" olm
  command -v curl >/dev/null || die "curl is not installed (needed to check OLM's health)"
  local ports=("$OLM_HEALTH_PORT" "$CATALOG_HEALTH_PORT")
  [[ "$KEEP_8443_FREE" != 1 ]] || ports=("$OLM_HEALTH_PORT")
  for port in "${ports[@]}"; do
    owner="$(port_owner "$port")"
    [[ -z "$owner" && -z "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]] ||
      die "port $port is taken (${owner:-by a process this user cannot see}): OLM serves its health there; is another OLM running?"
  done
  local opm_image util_image
  opm_image="${OLM_OPM_IMAGE:-quay.io/operator-framework/opm:$(pin opm)}"
  util_image="${OLM_UTIL_IMAGE:-quay.io/operator-framework/olm:$(pin olm)}"

  mkdir -p "$RUN" "$LOGS"
  # From here on a failure (set -e exits) stops whatever did start.
  trap 'log "start failed; stopping what was started"; stop >/dev/null 2>&1 || true' EXIT
  install_objects
  sign_catalog_certificate

  if [[ "$KEEP_8443_FREE" == 1 ]]; then
    # catalog first, so that it holds 8080 and olm's bind there is the one that fails.
    launch_catalog
    WAITING_ON=catalog wait_for "catalog /healthz on port $CATALOG_HEALTH_PORT" catalog_healthy
  fi
  # olm reads its kubeconfig from KUBECONFIG only; OPERATOR_NAMESPACE and OPERATOR_NAME are
  # what its Deployment sets.
  KUBECONFIG="$KUBECONFIG_FILE" OPERATOR_NAMESPACE="$NAMESPACE" OPERATOR_NAME=olm-operator \
    launch olm --namespace "$NAMESPACE"
  if [[ "$KEEP_8443_FREE" == 1 ]]; then
    WAITING_ON=olm wait_for "olm to run and reconcile the OLMConfig cluster (port 8443 left free)" olm_healthy
  else
    launch_catalog
    WAITING_ON=olm wait_for "olm /healthz on port $OLM_HEALTH_PORT" olm_healthy
    WAITING_ON=catalog wait_for "catalog /healthz on port $CATALOG_HEALTH_PORT" catalog_healthy
  fi
  trap - EXIT

  local elapsed
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  log "ready in ${elapsed}s: olm and catalog in namespace $NAMESPACE, logs in $LOGS"
  log "bundle-unpack images: opm $opm_image, util $util_image"
}

stop() {
  local stopped=() i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    if stop_component "${COMPONENTS[i]}"; then stopped+=("${COMPONENTS[i]}"); fi
  done
  rm -rf "$RUN" "$PKI"
  rmdir "$OLM_STATE" 2>/dev/null || true
  report_stopped "${stopped[@]}"
}

status() {
  local all=0
  print_processes 10 "${COMPONENTS[@]}" || all=1
  if ((all == 0)); then
    olm_healthy && catalog_healthy && printf '%-10s ok\n' healthz || {
      printf '%-10s not answering\n' healthz
      all=1
    }
  fi
  return "$all"
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
