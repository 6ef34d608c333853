#!/usr/bin/env bash
# Runs a one-node Kubernetes cluster on this machine (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, and with NODE=kubelet a real node), for the
# operator's tests, `make run` and OLM (hack/olm.sh). docs/local-cluster.md describes both
# kinds of node.
#
# NODE=kubelet: the node is real (hack/node.sh: kubelet, kube-proxy, containerd, CNI, CoreDNS)
# and the cluster lives on the node's bridge: the API server listens on its address
# (10.244.0.1), Services are 10.96.0.0/24, pods 10.244.0.0/22, no pod packet leaves the
# machine (hack/lib/node-network.sh, docs/local-cluster.md "Network safety"), and Pod Security
# enforces `baseline` on every namespace that does not say otherwise.
#
# NODE=none (default): no node. Pods are created and never run: for the tests that run the
# operator as a process of their own (tests/e2e) and the benchmarks. Everything listens on
# 127.0.0.0/8 only, Services included: the service range is the loopback 127.0.96.0/24 (the
# `kubernetes` Service is 127.0.96.1).
#
# Usage: hack/control-plane.sh start    start it (installs the tools first); exits 0 if it
#                                       already runs (unless CONTROL_PLANE_OWNER is set)
#        hack/control-plane.sh stop     stop every process it started (the node with its
#                                       pods, and cert-manager if hack/deploy.sh runs it
#                                       here), remove its files
#        hack/control-plane.sh restart COMPONENT
#                                       stop etcd, kube-apiserver, kube-controller-manager or
#                                       kube-scheduler and start it again, its data kept
#        hack/control-plane.sh status   say what runs; exit 0 when all of it runs, else 1
#        hack/control-plane.sh env      print `export KUBECONFIG=...`
#
# Its lifetime: every cluster has a supervisor (hack/lib/supervise.py), which holds the API
# server's port, and the machine's node lock when there is a node, for as long as the cluster
# runs. With CONTROL_PLANE_OWNER=PID the cluster belongs to that process (a test, `make run`):
# when it exits, however it exits, the supervisor stops the cluster; such a start refuses to
# carry on with a cluster already running in the state directory, and a stop with an owner
# stops only that owner's cluster. Without an owner the cluster runs until `stop`.
#
# One real node per machine: NODE=kubelet takes the machine's node lock (hack/lib/node-lock.sh)
# and refuses, naming the cluster that holds it, while another cluster has a node; a stop
# acts on the machine's node only while it is this cluster's.
#
# Ports: etcd listens on unix sockets only; kube-apiserver on the port the supervisor holds
# (bound to port 0 by it, so the kernel picked it, and kept bound with SO_REUSEPORT for the
# cluster's life; the API server binds it beside, --permit-port-sharing); the controller
# manager and the scheduler on none. docs/local-cluster.md, "Ports".
#
# Files (under the state directory, .local/ at the repository root):
#   kubeconfig                     admin kubeconfig (client certificate, group system:masters)
#   apiserver-url                  https://ADDRESS:PORT
#   node-kind                      the kind of node it was started with (kubelet or none)
#   admission.yaml                 with a node: Pod Security's defaults (baseline enforced)
#   pki/ca.crt                     the CA that signs every certificate here
#   pki/                           also apiserver, admin, controller-manager and scheduler
#                                  certificates (with NODE=kubelet the kubelet's, kube-proxy's
#                                  and the API server's kubelet client) and the
#                                  service-account key pair (fresh on every start)
#   kube-controller-manager.kubeconfig, kube-scheduler.kubeconfig (kubelet.kubeconfig,
#   kube-proxy.kubeconfig)
#   logs/COMPONENT.log             kept after stop, for post-mortems (supervisor.log too)
#   run/COMPONENT.pid, run/etcd-data-dir, run/supervisor.{pid,port,status}, run/owner
# etcd keeps its data and its sockets in a `mktemp -d` directory that stop removes.
#
# Environment:
#   NODE                   kubelet or none (default none); stop and status read what start used
#   CONTROL_PLANE_DIR      state directory (default: .local at the repository root)
#   CONTROL_PLANE_OWNER    the pid of the process the cluster belongs to (see above)
#   CONTROL_PLANE_DISPOSABLE  1: when the owner's exit stops the cluster, the supervisor also
#                          removes the state directory (a test's temporary one)
#   CONTROL_PLANE_TIMEOUT  seconds start waits for readiness (default 60)
#   AUDIT_POLICY           an audit policy file: the API server then writes its audit log,
#                          as JSON lines, to logs/audit.log
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/.tools/bin"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
PKI="$STATE/pki"
RUN="$STATE/run"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"
KCM_KUBECONFIG="$STATE/kube-controller-manager.kubeconfig"
SCHEDULER_KUBECONFIG="$STATE/kube-scheduler.kubeconfig"
TIMEOUT="${CONTROL_PLANE_TIMEOUT:-60}"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"
# shellcheck source=hack/lib/node-lock.sh
source "$ROOT/hack/lib/node-lock.sh"
# Every daemon carries whose it is; those of a cluster with a node hold the node lock.
DAEMON_MARK="cluster=$STATE"
DAEMON_HOLDS_NODE=1
# set_node_kind KIND: the addresses of a cluster with that kind of node.
set_node_kind() {
  NODE_KIND="$1"
  case "$NODE_KIND" in
    kubelet)
      SERVICE_CIDR=$NODE_SERVICE_CIDR
      SERVICE_IP=$NODE_SERVICE_IP
      API_ADDRESS=$NODE_IP
      ;;
    none)
      # A loopback service range: every ClusterIP is an address of this machine.
      SERVICE_CIDR=127.0.96.0/24
      SERVICE_IP=127.0.96.1 # first address of SERVICE_CIDR: the `kubernetes` Service
      API_ADDRESS=127.0.0.1
      ;;
    *) printf 'control-plane: error: NODE=%s: kubelet or none\n' "$NODE_KIND" >&2 && exit 1 ;;
  esac
}
# started_kind: the kind of node the running (or last) start used.
started_kind() { if [[ -f "$STATE/node-kind" ]]; then cat "$STATE/node-kind"; else echo none; fi; }
# A start without NODE keeps the kind a running (or stale) control plane has.
if [[ "${1:-}" == start ]]; then set_node_kind "${NODE:-$(started_kind)}"; else set_node_kind "$(started_kind)"; fi

# The controllers a one-node cluster needs (names as kube-controller-manager 1.35 spells
# them): the pods of StatefulSets, Deployments (through ReplicaSets) and Jobs (OLM unpacks
# bundles with Jobs); Endpoints and EndpointSlices of Services; cascading deletion;
# namespace deletion; and the `default` ServiceAccount (plus its kube-root-ca.crt ConfigMap)
# that ServiceAccount admission wants, with the tokens of ServiceAccount token Secrets; and
# the node lifecycle controller, which lifts the `node.kubernetes.io/not-ready:NoSchedule`
# taint the API server puts on every new Node once the Node reports Ready (without it the
# scheduler never places a pod on the node). Taint-based eviction (taint-eviction-controller)
# stays off: with one node there is nowhere else for a pod to go.
CONTROLLERS=node-lifecycle-controller,garbage-collector-controller,statefulset-controller,deployment-controller,replicaset-controller,job-controller,endpoints-controller,endpointslice-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller
# A real node's pods also end: terminated pods are collected, and PodDisruptionBudgets get a
# status that evictions are checked against.
[[ "$NODE_KIND" != kubelet ]] || CONTROLLERS+=,pod-garbage-collector-controller,disruption-controller

log() { printf 'control-plane: %s\n' "$*" >&2; }
die() { printf 'control-plane: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"

# kubectl from .tools, never one from PATH, with its discovery cache kept in the state dir.
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }

# ---------------------------------------------------------------------------------------
# PKI: an ECDSA P-256 CA and leaf certificates, made with openssl.

# sign NAME SUBJECT EXTENSIONS...: a key NAME.key and a certificate NAME.crt signed by the CA.
sign() {
  local name="$1" subject="$2"
  shift 2
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/$name.key"
  printf '%s\n' basicConstraints=critical,CA:FALSE subjectKeyIdentifier=hash \
    authorityKeyIdentifier=keyid "$@" >"$PKI/$name.ext"
  openssl req -new -key "$PKI/$name.key" -subj "$subject" -config "$PKI/openssl.cnf" |
    openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 365 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.ext"
}

make_pki() {
  rm -rf "$PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  cat >"$PKI/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
EOF
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/ca.key"
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=memcached-operator-local-ca" -days 365 \
    -config "$PKI/openssl.cnf" -extensions ca -out "$PKI/ca.crt"
  sign apiserver "/CN=kube-apiserver" keyUsage=critical,digitalSignature extendedKeyUsage=serverAuth \
    "subjectAltName=IP:127.0.0.1,IP:$API_ADDRESS,DNS:localhost,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign admin "/O=system:masters/CN=admin" keyUsage=critical,digitalSignature extendedKeyUsage=clientAuth
  # With --use-service-account-credentials=false every controller acts as this user, and the
  # role RBAC bootstraps for system:kube-controller-manager alone cannot, e.g., create the
  # pods of a StatefulSet: so it is also in system:masters.
  sign kube-controller-manager "/O=system:masters/CN=system:kube-controller-manager" \
    keyUsage=critical,digitalSignature extendedKeyUsage=clientAuth
  # The scheduler needs no more than the roles RBAC bootstraps for this user.
  sign kube-scheduler "/CN=system:kube-scheduler" keyUsage=critical,digitalSignature \
    extendedKeyUsage=clientAuth
  if [[ "$NODE_KIND" == kubelet ]]; then
    # The kubelet's client (the Node authorizer and NodeRestriction know it by this name),
    # its serving certificate (the API server checks it against this CA), kube-proxy's
    # client, and the API server's client for the kubelet (logs, exec, port-forward).
    sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" keyUsage=critical,digitalSignature \
      extendedKeyUsage=clientAuth
    sign kubelet-serving "/CN=$NODE_NAME" keyUsage=critical,digitalSignature extendedKeyUsage=serverAuth \
      "subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
    sign kube-proxy "/CN=system:kube-proxy" keyUsage=critical,digitalSignature extendedKeyUsage=clientAuth
    sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      keyUsage=critical,digitalSignature extendedKeyUsage=clientAuth
  fi
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/service-account.key"
  openssl pkey -in "$PKI/service-account.key" -pubout -out "$PKI/service-account.pub"
}

# write_kubeconfig FILE URL USER: a self-contained kubeconfig (certificates embedded).
write_kubeconfig() {
  local file="$1" url="$2" user="$3"
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $url
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$user.crt")
    client-key-data: $(base64 -w0 "$PKI/$user.key")
contexts:
- name: local
  context:
    cluster: local
    user: $user
    namespace: default
current-context: local
EOF
  chmod 600 "$file"
}

# ---------------------------------------------------------------------------------------

is_ready() { [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]]; }

# supervisor_pid: the pid of this state directory's supervisor (hack/lib/supervise.py), while it
# runs, or nothing.
supervisor_pid() {
  local pid
  [[ -f "$RUN/supervisor.pid" ]] || return 0
  pid="$(<"$RUN/supervisor.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "supervise.py --state $STATE " || return 0
  echo "$pid"
}

# owner_of_running: who the running cluster belongs to, as RUN/owner says.
owner_of_running() { if [[ -s "$RUN/owner" ]]; then echo "pid $(<"$RUN/owner")"; else echo "nobody (it runs until stop)"; fi; }

# node_is_ours: whether this state directory's cluster may act on the machine's node: no
# cluster holds the node lock, or the one holding it runs from this state directory.
node_is_ours() { node_lock_free || [[ "$(holder_value state)" == "$STATE" ]]; }

# start_supervisor: starts this cluster's supervisor, which holds the API server's port (and,
# inherited, the node lock) and stops the cluster when its owner, CONTROL_PLANE_OWNER, exits.
start_supervisor() {
  local args=(--state "$STATE" --script "$ROOT/hack/control-plane.sh" --reserve "$API_ADDRESS") started
  if [[ -n "${CONTROL_PLANE_OWNER:-}" ]]; then
    started="$(awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$CONTROL_PLANE_OWNER/stat" 2>/dev/null)" ||
      die "CONTROL_PLANE_OWNER=$CONTROL_PLANE_OWNER is no running process"
    args+=(--owner "$CONTROL_PLANE_OWNER:$started")
    printf '%s (%s)\n' "$CONTROL_PLANE_OWNER" \
      "$(tr '\0' ' ' 2>/dev/null <"/proc/$CONTROL_PLANE_OWNER/cmdline" | sed 's/ $//' | cut -c1-160)" >"$RUN/owner"
  fi
  [[ "$NODE_KIND" != kubelet ]] || args+=(--record "$NODE_LOCK")
  [[ "${CONTROL_PLANE_DISPOSABLE:-0}" != 1 ]] || args+=(--discard-state)
  # In a session of its own, so that a Ctrl-C meant for the owner does not reach it, and
  # without the state lock (8, 9); with the node lock (7) when there is a node.
  MEMCACHED_OPERATOR_DAEMON="$DAEMON_MARK" setsid python3 "$ROOT/hack/lib/supervise.py" "${args[@]}" \
    </dev/null >"$LOGS/supervisor.log" 2>&1 8>&- 9>&- &
  local pid=$!
  echo "$pid" >"$RUN/supervisor.pid"
  until [[ -s "$RUN/supervisor.port" ]]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail_log supervisor
      die "the supervisor exited (log: $LOGS/supervisor.log)"
    fi
    ((SECONDS < DEADLINE)) ||
      die "the supervisor did not reserve a port within ${TIMEOUT}s (log: $LOGS/supervisor.log)"
    sleep 0.1
  done
}

# admission_config: the API server's admission configuration: Pod Security's `baseline` level
# enforced on every namespace that does not say otherwise with a pod-security.kubernetes.io
# label (a scenario that needs more opts out with enforce=privileged on its namespace).
admission_config() {
  cat >"$STATE/admission.yaml" <<'EOF'
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      enforce-version: latest
      warn: baseline
      warn-version: latest
    exemptions: {}
EOF
  echo "$STATE/admission.yaml"
}

start() {
  local running=() name pid
  for name in "${COMPONENTS[@]}"; do
    pid="$(pid_of "$name")"
    [[ -z "$pid" ]] || running+=("$name")
  done
  if ((${#running[@]} == ${#COMPONENTS[@]})) && [[ -n "$(supervisor_pid)" ]]; then
    [[ "$(started_kind)" == "$NODE_KIND" ]] ||
      die "already running with NODE=$(started_kind), not NODE=$NODE_KIND: stop it first"
    # A start that would own the cluster (make run, a test) must not carry on with one that
    # someone else started: its end would stop that cluster.
    [[ -z "${CONTROL_PLANE_OWNER:-}" ]] ||
      die "a cluster already runs in $STATE (it belongs to $(owner_of_running); log: $LOGS/supervisor.log): stop it first with hack/control-plane.sh stop"
    log "already running: kube-apiserver $(<"$STATE/apiserver-url")"
    SECONDS=0
    DEADLINE=$TIMEOUT
    WAITING_ON=kube-apiserver wait_for "kube-apiserver /readyz" is_ready
    print_env
    return 0
  fi
  if ((${#running[@]})) || [[ -d "$RUN" ]]; then
    log "cleaning up a partial or stale control plane first"
    set_node_kind "$(started_kind)"
    stop >/dev/null
    set_node_kind "${NODE:-$NODE_KIND}"
  fi

  if [[ "$NODE_KIND" == kubelet ]]; then
    "$ROOT/hack/tools.sh" kube etcd containerd node images
  else
    "$ROOT/hack/tools.sh" kube etcd
  fi
  command -v openssl >/dev/null || die "openssl is not installed (Debian: apt-get install openssl)"
  command -v python3 >/dev/null || die "python3 is not installed (the supervisor, hack/lib/supervise.py, runs on it)"

  local t0=$EPOCHREALTIME api_port url etcd_dir
  SECONDS=0
  DEADLINE=$TIMEOUT
  if [[ "$NODE_KIND" == kubelet ]]; then
    acquire_node_lock
    reclaim_dead_node
    write_holder_record starting "$$"
  fi
  mkdir -p "$RUN" "$LOGS"
  rm -rf "$STATE/kubectl-cache"
  # From here on a failure (set -e exits) stops whatever did start.
  trap 'log "start failed; stopping what was started"; stop >/dev/null 2>&1 || true' EXIT
  echo "$NODE_KIND" >"$STATE/node-kind"
  [[ "$NODE_KIND" != kubelet ]] || "$ROOT/hack/node.sh" network-up
  make_pki
  start_supervisor
  [[ "$NODE_KIND" != kubelet ]] || write_holder_record starting "$(supervisor_pid)"
  api_port="$(<"$RUN/supervisor.port")"
  url="https://$API_ADDRESS:$api_port"

  # etcd listens on unix sockets only, in its temporary directory beside its data (etcd names a
  # unix socket by HOST:PORT, relative to its working directory: the "port" is part of the
  # file's name), so it takes no TCP port at all. --unsafe-no-fsync: the data is thrown away on
  # stop, so durability buys nothing here.
  etcd_dir="$(mktemp -d -t memcached-operator-etcd.XXXXXX)"
  echo "$etcd_dir" >"$RUN/etcd-data-dir"
  (
    cd "$etcd_dir"
    launch etcd \
      --name=local \
      --data-dir="$etcd_dir/data" \
      --listen-client-urls=unix://client:2379 \
      --advertise-client-urls=unix://client:2379 \
      --listen-peer-urls=unix://peer:2380 \
      --initial-advertise-peer-urls=unix://peer:2380 \
      --initial-cluster=local=unix://peer:2380 \
      --unsafe-no-fsync=true
  )

  local node_flags=()
  if [[ "$NODE_KIND" == kubelet ]]; then
    # The node's address is the `kubernetes` Service's endpoint (the lease reconciler
    # publishes it); the Node authorizer and NodeRestriction confine the kubelet to its own
    # node; the kubelet is reached by its InternalIP (its name resolves nowhere); Pod Security
    # enforces `baseline` wherever a namespace does not say otherwise.
    node_flags=(
      --endpoint-reconciler-type=lease
      --authorization-mode=Node,RBAC
      --enable-admission-plugins=NodeRestriction
      --admission-control-config-file="$(admission_config)"
      --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt"
      --kubelet-client-key="$PKI/apiserver-kubelet-client.key"
      --kubelet-certificate-authority="$PKI/ca.crt"
      --kubelet-preferred-address-types=InternalIP
    )
  else
    # --endpoint-reconciler-type=none: the default (lease) reconciler would publish
    # 127.0.0.1 as the endpoint of the `kubernetes` Service, which Endpoints validation
    # refuses (loopback), and log the failure forever.
    node_flags=(--endpoint-reconciler-type=none --authorization-mode=RBAC)
  fi
  # The port is the one the supervisor holds (a socket bound with SO_REUSEPORT, never
  # listened on): --permit-port-sharing lets the API server bind it beside that socket.
  launch kube-apiserver \
    --etcd-servers="unix://$etcd_dir/client:2379" \
    --bind-address="$API_ADDRESS" \
    --advertise-address="$API_ADDRESS" \
    --secure-port="$api_port" \
    --permit-port-sharing=true \
    --tls-cert-file="$PKI/apiserver.crt" \
    --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/service-account.pub" \
    --service-account-signing-key-file="$PKI/service-account.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --allow-privileged=true \
    "${node_flags[@]}" \
    --enable-priority-and-fairness=true \
    ${AUDIT_POLICY:+--audit-policy-file="$AUDIT_POLICY" --audit-log-path="$STATE/logs/audit.log" --audit-log-format=json}

  write_kubeconfig "$KUBECONFIG_FILE" "$url" admin
  write_kubeconfig "$KCM_KUBECONFIG" "$url" kube-controller-manager
  write_kubeconfig "$SCHEDULER_KUBECONFIG" "$url" kube-scheduler
  if [[ "$NODE_KIND" == kubelet ]]; then
    write_kubeconfig "$STATE/kubelet.kubeconfig" "$url" kubelet
    write_kubeconfig "$STATE/kube-proxy.kubeconfig" "$url" kube-proxy
  fi
  echo "$url" >"$STATE/apiserver-url"

  WAITING_ON=kube-apiserver wait_for "kube-apiserver /readyz at $url" is_ready

  launch kube-controller-manager \
    --kubeconfig="$KCM_KUBECONFIG" \
    --controllers="$CONTROLLERS" \
    --leader-elect=false \
    --use-service-account-credentials=false \
    --service-account-private-key-file="$PKI/service-account.key" \
    --root-ca-file="$PKI/ca.crt" \
    --secure-port=0

  # --secure-port=0: no health or metrics server, so nothing listens beyond the API server.
  launch kube-scheduler \
    --kubeconfig="$SCHEDULER_KUBECONFIG" \
    --leader-elect=false \
    --secure-port=0

  WAITING_ON=kube-controller-manager wait_for "the default ServiceAccount in namespace default" \
    kubectl get serviceaccount default --namespace default
  [[ "$NODE_KIND" != kubelet ]] || "$ROOT/hack/node.sh" start
  [[ "$NODE_KIND" != kubelet ]] || write_holder_record running "$(supervisor_pid)"
  trap - EXIT

  local elapsed
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  log "ready in ${elapsed}s: kube-apiserver $url, logs in $LOGS"
  print_env
}

# reclaim_dead_node: with the node lock just taken, what a node that was never stopped left
# on this machine (its holder's record, or the node's machine record, says there was one):
# its pods' processes, mounts, cgroups, chains, bridge and sysctls. Its daemons are gone, or
# the lock would not have been free.
reclaim_dead_node() {
  local dead_state
  dead_state="$(holder_value state)"
  [[ -n "$dead_state" || -e "$NODE_RECORD" ]] || return 0
  log "the node of $(describe_holder) was never stopped: cleaning up what it left on this machine"
  CONTROL_PLANE_DIR="${dead_state:-$STATE}" "$ROOT/hack/node.sh" stop || true
  "$ROOT/hack/node.sh" network-down
}

# stop_supervisor: ends the supervisor once the cluster is stopped, unless it is the one
# stopping it (this stop, or one waiting for this one to finish: it exits after its own);
# waits until it is gone, so that what it held (the node lock, the API server's port) is free
# when stop returns.
stop_supervisor() {
  local pid i
  pid="$(supervisor_pid)"
  [[ -n "$pid" && "${CONTROL_PLANE_TEARDOWN:-0}" != 1 ]] || return 0
  [[ "$(cat "$RUN/supervisor.status" 2>/dev/null)" != stopping ]] || return 0
  kill -USR1 "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  log "the supervisor (pid $pid) did not exit after SIGUSR1; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local stopped=() name i data_dir owner node=0
  # A stop on behalf of an owner (make run's end) stops only the cluster that owner started.
  if [[ -n "${CONTROL_PLANE_OWNER:-}" && -s "$RUN/owner" && -n "$(supervisor_pid)" ]]; then
    owner="$(<"$RUN/owner")"
    [[ "${owner%% *}" == "$CONTROL_PLANE_OWNER" ]] ||
      die "not stopping the cluster in $STATE: it belongs to pid $owner, not to pid $CONTROL_PLANE_OWNER"
  fi
  # The machine's node is this cluster's to stop only while no other cluster holds it.
  if [[ "$NODE_KIND" == kubelet ]]; then
    if node_is_ours; then
      node=1
    else
      log "the machine's node belongs to $(describe_holder): leaving it alone"
    fi
  fi
  # cert-manager (hack/deploy.sh, hack/cert-manager.sh) is a client of this control plane
  # on this machine: it goes first. OLM's pods stop with the node.
  if [[ -d "$STATE/deploy/run" || -d "$STATE/cert-manager/run" ]]; then
    "$ROOT/hack/deploy.sh" stop || log "could not stop cert-manager; stopping the control plane anyway"
  fi
  rm -rf "$STATE/install" "$STATE/olm"
  # The node, whatever part of it started; its network goes after the API server, which
  # listens on the node's address.
  ((node == 0)) || "$ROOT/hack/node.sh" stop || log "could not stop the node; stopping the control plane anyway"
  # Reverse order: clients first, etcd last.
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    name="${COMPONENTS[i]}"
    if stop_component "$name"; then stopped+=("$name"); fi
  done
  if ((node == 1)); then
    "$ROOT/hack/node.sh" network-down
    # The registry serves the node: this checkout's stops with it.
    "$ROOT/hack/registry.sh" stop >/dev/null || log "could not stop the registry"
    [[ "$(holder_value state)" != "$STATE" ]] || : >"$NODE_LOCK"
  fi
  if [[ -f "$RUN/etcd-data-dir" ]]; then
    data_dir="$(<"$RUN/etcd-data-dir")"
    # Only ever remove a directory this script made.
    if [[ "$data_dir" == */memcached-operator-etcd.* && -d "$data_dir" ]]; then
      rm -rf -- "$data_dir"
    fi
  fi
  stop_supervisor
  rm -rf "$RUN" "$PKI" "$STATE/kubectl-cache"
  rm -f "$KUBECONFIG_FILE" "$KCM_KUBECONFIG" "$SCHEDULER_KUBECONFIG" "$STATE/apiserver-url" \
    "$STATE/kubelet.kubeconfig" "$STATE/kube-proxy.kubeconfig" "$STATE/node-kind" "$STATE/admission.yaml"
  report_stopped "${stopped[@]}"
}

status() {
  local all=0 pid
  pid="$(supervisor_pid)"
  if [[ -n "$pid" ]]; then
    printf '%-24s running (pid %s, %s), owner %s\n' supervisor "$pid" \
      "$(cat "$RUN/supervisor.status" 2>/dev/null)" "$(owner_of_running)"
  else
    printf '%-24s not running\n' supervisor
    all=1
  fi
  print_processes 24 "${COMPONENTS[@]}" || all=1
  [[ "$NODE_KIND" != kubelet ]] || "$ROOT/hack/node.sh" status || all=1
  if [[ -f "$STATE/apiserver-url" ]]; then
    printf '%-24s %s\n' "apiserver url" "$(<"$STATE/apiserver-url")"
    if ((all == 0)); then
      if is_ready; then
        printf '%-24s ok\n' "readyz"
      else
        printf '%-24s not ready\n' "readyz"
        all=1
      fi
    fi
  fi
  [[ ! -f "$KUBECONFIG_FILE" ]] || printf '%-24s %s\n' kubeconfig "$KUBECONFIG_FILE"
  return "$all"
}

print_env() { printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_FILE"; }

# restart COMPONENT: one daemon of the running cluster stopped and started again, its data
# kept (hack/lib/daemons.sh, restart_component), as an upgrade or a crash and a service
# manager would; returns once the API server is ready again (etcd's check included). A node
# daemon is restarted by hack/node.sh restart.
restart() {
  local name="$1"
  [[ " ${COMPONENTS[*]} " == *" $name "* ]] ||
    die "restart: '$name' is not one of ${COMPONENTS[*]} (the node's: hack/node.sh restart)"
  SECONDS=0
  DEADLINE=$TIMEOUT
  restart_component "$name"
  WAITING_ON=$name wait_for "kube-apiserver /readyz after restarting $name" is_ready
  log "$name restarted; the API server ready again after ${SECONDS}s"
}

# start and stop hold a lock on the state directory, so that concurrent callers (say, two
# test binaries) take turns: the second start finds the control plane running.
#
# The whole dispatch is one compound command ending in exit, so that bash never reads
# this file past it (safe against the file changing while a start runs).
case "${1:-}" in
  start) lock_state "$STATE/.lock" && start ;;
  stop)
    # A state directory that is gone (a test's, removed by its supervisor) has nothing to stop.
    [[ -d "$STATE" ]] || { log "nothing to stop: $STATE does not exist"; exit 0; }
    lock_state "$STATE/.lock" && stop
    ;;
  restart) lock_state "$STATE/.lock" && restart "${2:-}" ;;
  status) status ;;
  env) print_env ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|stop|restart COMPONENT|status|env (try --help)" ;;
esac
exit
