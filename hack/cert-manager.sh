#!/usr/bin/env bash
# Runs cert-manager (the controller and cainjector that `hack/tools.sh cert-manager` builds) on
# the local control plane of hack/control-plane.sh, as two background processes on this
# machine: what `make deploy` installs the operator with when no cluster is configured.
#
# Usage: hack/cert-manager.sh start    apply cert-manager's CRDs (rendered from its release's
#                                      chart) and wait until they are Established, create the
#                                      namespace cert-manager, start the controller and
#                                      cainjector, and wait until the controller serves its
#                                      metrics; exits 0 if both already run. The control
#                                      plane must be running.
#        hack/cert-manager.sh stop     stop both (hack/control-plane.sh stop does this too);
#                                      the CRDs and what cert-manager issued stay
#        hack/cert-manager.sh status   say what runs; exit 0 when both run, else 1
#
# This is cert-manager as its release manifests install it, less its own webhook (which only
# validates and defaults cert-manager's resources) and the startupapicheck Job. Both processes
# use the control plane's admin kubeconfig, without leader election (one instance each), and
# listen on loopback only: the controller's metrics on a port the kernel picks when it binds
# port 0 (read back from the kernel's socket table), cainjector on none.
#
# Files (under the control plane's state directory, .local/ at the repository root):
#   logs/cert-manager-controller.log, logs/cert-manager-cainjector.log   kept after stop
#   cert-manager/run/NAME.pid                                            the two processes
#   cert-manager/run/metrics-address                                     the controller's metrics
#
# Environment:
#   CONTROL_PLANE_DIR      the control plane's state directory (default: .local at the root)
#   CERT_MANAGER_TIMEOUT   seconds start waits for readiness (default 60)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/.tools/bin"
CRDS="$ROOT/.tools/cert-manager/crds"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
CM_STATE="$STATE/cert-manager"
RUN="$CM_STATE/run"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${CERT_MANAGER_TIMEOUT:-60}"
COMPONENTS=(cert-manager-controller cert-manager-cainjector)
NAMESPACE=cert-manager
DAEMON_MARK="cluster=$STATE"

log() { printf 'cert-manager: %s\n' "$*" >&2; }
die() { printf 'cert-manager: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
control_plane_ready() { [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]]; }

# metrics_address: where the controller, told to bind 127.0.0.1:0, serves its metrics (its
# only listener), recorded in RUN/metrics-address once the kernel shows it.
metrics_address() {
  local pid address
  if [[ ! -s "$RUN/metrics-address" ]]; then
    pid="$(pid_of cert-manager-controller)"
    [[ -n "$pid" ]] || return 1
    address="$(tcp_listeners "$pid" | head -n 1)"
    [[ -n "$address" ]] || return 1
    echo "$address" >"$RUN/metrics-address"
  fi
  cat "$RUN/metrics-address"
}

# controller_ready: the controller runs and serves its metrics (it has no health endpoint in
# this release).
controller_ready() {
  local address
  [[ -n "$(pid_of cert-manager-controller)" ]] && address="$(metrics_address)" &&
    curl -fsS -o /dev/null --max-time 2 "http://$address/metrics"
}

start() {
  local name running=() t0=$EPOCHREALTIME
  for name in "${COMPONENTS[@]}"; do
    [[ -z "$(pid_of "$name")" ]] || running+=("$name")
  done
  SECONDS=0
  DEADLINE=$TIMEOUT
  if ((${#running[@]} == ${#COMPONENTS[@]})); then
    log "already running"
    WAITING_ON=cert-manager-controller wait_for "the controller's metrics" controller_ready
    return 0
  fi
  if ((${#running[@]})) || [[ -d "$RUN" ]]; then
    log "cleaning up a partial or stale cert-manager first"
    stop >/dev/null
  fi
  control_plane_ready ||
    die "the local control plane in $STATE is not running: start it with hack/control-plane.sh start"
  "$ROOT/hack/tools.sh" cert-manager
  command -v curl >/dev/null || die "curl is not installed (needed to check cert-manager's metrics)"

  mkdir -p "$RUN" "$LOGS"
  # From here on a failure (set -e exits) stops whatever did start.
  trap 'log "start failed; stopping what was started"; stop >/dev/null 2>&1 || true' EXIT
  log "applying cert-manager's CRDs from $CRDS"
  kubectl apply --server-side --field-manager=hack-cert-manager -f "$CRDS" >/dev/null
  wait_for "cert-manager's CRDs to be Established" \
    kubectl wait --for=condition=Established --timeout=1s -f "$CRDS"
  kubectl apply --server-side --field-manager=hack-cert-manager -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $NAMESPACE
EOF
  # POD_NAMESPACE: where the release's Deployment runs them; both read it for their own
  # namespace.
  POD_NAMESPACE="$NAMESPACE" launch cert-manager-controller --kubeconfig "$KUBECONFIG_FILE" \
    --leader-elect=false --cluster-resource-namespace="$NAMESPACE" \
    --metrics-listen-address=127.0.0.1:0 --v=2
  POD_NAMESPACE="$NAMESPACE" launch cert-manager-cainjector --kubeconfig "$KUBECONFIG_FILE" \
    --leader-elect=false --v=2
  WAITING_ON=cert-manager-controller wait_for "the controller's metrics" controller_ready
  trap - EXIT
  local elapsed
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  log "ready in ${elapsed}s: controller and cainjector $("$ROOT/hack/tools.sh" --print-versions |
    awk '$1 == "cert-manager" { print $2 }'), logs in $LOGS"
}

stop() {
  local stopped=() i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    if stop_component "${COMPONENTS[i]}"; then stopped+=("${COMPONENTS[i]}"); fi
  done
  rm -rf "$RUN"
  rmdir "$CM_STATE" 2>/dev/null || true
  report_stopped "${stopped[@]}"
}

status() {
  local all=0
  print_processes 24 "${COMPONENTS[@]}" || all=1
  return "$all"
}

# The whole dispatch is one compound command ending in exit, so that bash never reads
# this file past it (safe against the file changing while a start runs).
case "${1:-}" in
  start) lock_state "$STATE/.cert-manager.lock" && start ;;
  stop) lock_state "$STATE/.cert-manager.lock" && stop ;;
  status) status ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|stop|status (try --help)" ;;
esac
exit
