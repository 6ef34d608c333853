#!/usr/bin/env bash
# Installs the operator on the local control plane (hack/control-plane.sh) the way a cluster
# without OLM does: `kustomize build config/default`, applied, with cert-manager issuing the
# webhooks' certificate and cainjector writing every caBundle. `make deploy` and `make
# undeploy` run it when no cluster is configured (KUBECONFIG unset), and so do the end-to-end
# tests of that install (tests/deploy).
#
# Usage: hack/deploy.sh start     start the control plane if it is not running (with the node
#                                 NODE says: kubelet, or by default the test kit's node agent,
#                                 whose pods run as local processes: docs/local-cluster.md) and
#                                 cert-manager
#                                 (hack/cert-manager.sh); apply config/default (server-side)
#                                 and wait for the CA and serving Certificates to be Ready,
#                                 every caBundle injected, the Deployment's ready replicas and
#                                 the webhooks' answers. Prints what it installed on standard
#                                 output as KEY=VALUE lines (NAMESPACE, DEPLOYMENT,
#                                 CERTIFICATE, SECRET, NODE_STATE, READY_SECONDS).
#        hack/deploy.sh undeploy  delete everything config/default made, wait until it is
#                                 gone, and say what is left of it (see below)
#        hack/deploy.sh stop      stop the node agent (which stops every pod's processes) and
#                                 cert-manager; what was applied stays in the cluster.
#                                 hack/control-plane.sh stop does this too.
#        hack/deploy.sh status    say what runs; exit 0 when all of it runs, else 1
#
# On a real node (NODE=kubelet), the images are built from the shipped Dockerfiles and pushed
# to the local registry first (hack/images.sh), and config/default is applied through the
# overlay hack/node/deploy/, which points RELATED_IMAGE_MEMCACHED at the Debian memcached
# stand-in. With the node agent, the operator's image in config/default is the release's, which
# the agent maps to OPERATOR_BINARY; one node agent runs on a machine at a time: start refuses
# while the OLM install (hack/olm-install.sh, make run) runs one.
#
# Files (under the control plane's state directory, .local/ at the repository root):
#   logs/node-agent.log              kept after stop
#   node/pods/UID/logs/CONTAINER.log each container's output, while its pod runs
#   deploy/run/node-agent.pid        the node agent
#
# Environment:
#   CONTROL_PLANE_DIR  the control plane's state directory (default: .local at the root)
#   NODE               kubelet or none (default none), when start starts the control plane
#   CONFIG             the kustomization to apply (default: config/default, or
#                      hack/node/deploy on a real node)
#   OPERATOR_BINARY    what the operator image runs (default: target/debug/memcached-operator)
#   NODE_AGENT         the node agent binary (default: target/debug/node-agent)
#   DEPLOY_TIMEOUT     seconds each wait may take (default 180)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
DEPLOY_STATE="$STATE/deploy"
BIN="$DEPLOY_STATE/bin"
RUN="$DEPLOY_STATE/run"
LOGS="$STATE/logs"
NODE_STATE="$STATE/node"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${DEPLOY_TIMEOUT:-180}"
COMPONENTS=(node-agent)
CONFIG="${CONFIG:-}"
OPERATOR_BINARY="${OPERATOR_BINARY:-$ROOT/target/debug/memcached-operator}"
NODE_AGENT="${NODE_AGENT:-$ROOT/target/debug/node-agent}"
NODE_NAME=local
POD_IP_RANGE=127.0.100.0/24
# The node agent stops every pod within its grace period (the operator's is 10 s) before it
# exits.
AGENT_STOP_SECONDS=40
# What config/default names (packager/src/config.rs).
NAMESPACE=memcached-operator-system
DEPLOYMENT=memcached-operator-controller-manager
CA_CERTIFICATE=memcached-operator-ca
CERTIFICATE=memcached-operator-serving-cert
SECRET=memcached-operator-webhook-server-cert
CRD=memcacheds.cache.f2367556.dev
MUTATING=memcached-operator-mutating-webhook-configuration
VALIDATING=memcached-operator-validating-webhook-configuration

log() { printf 'deploy: %s\n' "$*" >&2; }
die() { printf 'deploy: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"

kubectl() { "$ROOT/.tools/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
kustomize() { "$ROOT/.tools/bin/kustomize" "$@"; }

# injected: whether every caBundle (both webhook configurations' entries and the CRD's
# conversion) is the CA in the serving Secret's ca.crt.
injected() {
  local ca bundles bundle
  ca="$(kubectl get secret -n "$NAMESPACE" "$SECRET" -o 'jsonpath={.data.ca\.crt}' 2>/dev/null)"
  [[ -n "$ca" ]] || { echo "no ca.crt in Secret $SECRET yet"; return 1; }
  bundles="$(kubectl get mutatingwebhookconfiguration "$MUTATING" \
    -o 'jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}' 2>&1)
$(kubectl get validatingwebhookconfiguration "$VALIDATING" \
    -o 'jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}' 2>&1)
$(kubectl get crd "$CRD" -o 'jsonpath={.spec.conversion.webhook.clientConfig.caBundle}' 2>&1)"
  while read -r bundle; do
    [[ "$bundle" == "$ca" ]] || { echo "a caBundle is not the issuer's CA yet"; return 1; }
  done <<<"$bundles"
}

node_agent_of_olm_install() { [[ -d "$STATE/install/run" ]]; }
real_node() { [[ -f "$STATE/node-kind" && "$(<"$STATE/node-kind")" == kubelet ]]; }

# start_on_real_node: the images, then cert-manager; the node is the control plane's.
start_on_real_node() {
  local memcached want
  CONFIG="${CONFIG:-$ROOT/hack/node/deploy}"
  "$ROOT/hack/images.sh" build operator memcached
  memcached="$("$ROOT/hack/images.sh" reference memcached)"
  want="$(awk '$1 == "value:" && /memcached/ { print $2 }' "$ROOT/hack/node/deploy/kustomization.yaml")"
  [[ "$CONFIG" != "$ROOT/hack/node/deploy" || "$want" == "$memcached" ]] ||
    die "hack/node/deploy/kustomization.yaml sets RELATED_IMAGE_MEMCACHED to $want, but the memcached image built here is $memcached"
  SECONDS=0
  DEADLINE=$TIMEOUT
  mkdir -p "$RUN" "$LOGS"
  trap 'log "start failed; stopping cert-manager (logs in $LOGS)"; stop >/dev/null 2>&1 || true' EXIT
  "$ROOT/hack/cert-manager.sh" start
}

start() {
  if [[ -n "$(pid_of node-agent)" ]] || [[ -d "$RUN" ]]; then
    log "cleaning up a previous deploy first"
    stop >/dev/null
  fi
  ! node_agent_of_olm_install ||
    die "the OLM install (make run, hack/olm-install.sh) runs a node agent here: stop it first (hack/control-plane.sh stop)"
  "$ROOT/hack/tools.sh" kube etcd kustomize cert-manager
  "$ROOT/hack/control-plane.sh" start >/dev/null
  if real_node; then
    start_on_real_node
  else
    start_node_agent
  fi
  [[ -f "$CONFIG/kustomization.yaml" ]] || die "$CONFIG holds no kustomization.yaml"

  log "applying $(realpath --relative-to="$ROOT" "$CONFIG") (kustomize build | kubectl apply --server-side)"
  kustomize build "$CONFIG" | kubectl apply --server-side --field-manager=make-deploy -f - >&2
  step "Certificate $CA_CERTIFICATE (the CA) to be Ready" jsonpath_is True certificate \
    -n "$NAMESPACE" "$CA_CERTIFICATE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'
  step "Certificate $CERTIFICATE (serving) to be Ready" jsonpath_is True certificate \
    -n "$NAMESPACE" "$CERTIFICATE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'
  step "cainjector to write the CA into every caBundle" injected
  local replicas
  replicas="$(kubectl get deployment -n "$NAMESPACE" "$DEPLOYMENT" -o 'jsonpath={.spec.replicas}')"
  WAITING_ON="$(real_node || echo node-agent)" step "Deployment $DEPLOYMENT to have $replicas ready replicas" \
    jsonpath_is "$replicas" deployment -n "$NAMESPACE" "$DEPLOYMENT" -o 'jsonpath={.status.readyReplicas}'
  step "the operator's webhooks to answer (a server-side dry run of config/samples)" \
    kubectl apply --dry-run=server -k "$ROOT/config/samples"
  trap - EXIT
  log "deployed without OLM: webhooks answering at $(since)s"
  log "try: export KUBECONFIG=$KUBECONFIG_FILE; kubectl apply -k config/samples; kubectl get memcacheds -A"
  printf 'NAMESPACE=%s\nDEPLOYMENT=%s\nCERTIFICATE=%s\nSECRET=%s\nNODE_STATE=%s\nREADY_SECONDS=%s\n' \
    "$NAMESPACE" "$DEPLOYMENT" "$CERTIFICATE" "$SECRET" "$NODE_STATE" "$(since)"
}

# start_node_agent: the node agent as the cluster's node, then cert-manager.
start_node_agent() {
  CONFIG="${CONFIG:-$ROOT/config/default}"
  for built in "$OPERATOR_BINARY" "$NODE_AGENT"; do
    [[ -x "$built" ]] || die "$built is missing: run make build"
  done
  "$ROOT/hack/tools.sh" memcached
  mkdir -p "$BIN" "$RUN" "$LOGS"
  ln -sfn "$NODE_AGENT" "$BIN/node-agent"
  SECONDS=0
  DEADLINE=$TIMEOUT
  # From here on a failure (set -e exits) stops whatever did start.
  trap 'log "start failed; stopping what was started (logs in $LOGS)"; stop >/dev/null 2>&1 || true' EXIT

  log "starting the node agent (log: $LOGS/node-agent.log)"
  # From the repository root: its image table maps the repository's own images (operator,
  # memcached) to files here.
  (cd "$ROOT" && launch node-agent --kubeconfig "$KUBECONFIG_FILE" --node-name "$NODE_NAME" \
    --state-dir "$NODE_STATE" --pod-ip-range "$POD_IP_RANGE" \
    --operator-binary "$OPERATOR_BINARY")
  "$ROOT/hack/cert-manager.sh" start
  WAITING_ON=node-agent step "Node $NODE_NAME to be Ready and schedulable" jsonpath_is "True/" \
    node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints[*].key}'
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
  if [[ -z "$CONFIG" ]]; then
    if real_node; then CONFIG="$ROOT/hack/node/deploy"; else CONFIG="$ROOT/config/default"; fi
  fi
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
  if stop_component node-agent "$AGENT_STOP_SECONDS"; then stopped+=(node-agent); fi
  if [[ -d "$STATE/cert-manager/run" ]]; then
    "$ROOT/hack/cert-manager.sh" stop 2>/dev/null || log "could not stop cert-manager"
    stopped+=(cert-manager)
  fi
  rm -rf "$DEPLOY_STATE" "$NODE_STATE"
  report_stopped "${stopped[@]}"
}

status() {
  local all=0
  print_processes 24 "${COMPONENTS[@]}" || all=1
  "$ROOT/hack/cert-manager.sh" status || all=1
  return "$all"
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
