#!/usr/bin/env bash
# Runs a local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) on
# loopback, for the operator's tests and `make run`. There is no kubelet: pods are created
# but never run, unless the test kit's node agent plays one (docs/local-cluster.md).
#
# Usage: hack/control-plane.sh start    start it (installs the tools first); exits 0 if it
#                                       already runs
#        hack/control-plane.sh stop     stop every process it started, remove its files
#        hack/control-plane.sh status   say what runs; exit 0 when all of it runs, else 1
#        hack/control-plane.sh env      print `export KUBECONFIG=...`
#
# Files (under the state directory, .local/ at the repository root):
#   kubeconfig                     admin kubeconfig (client certificate, group system:masters)
#   apiserver-url                  https://127.0.0.1:PORT
#   pki/ca.crt                     the CA that signs every certificate here
#   pki/                           also apiserver, admin and controller-manager certificates
#                                  and the service-account key pair (fresh on every start)
#   kube-controller-manager.kubeconfig
#   logs/COMPONENT.log             kept after stop, for post-mortems
#   run/COMPONENT.pid, run/etcd-data-dir
# etcd keeps its data in a `mktemp -d` directory that stop removes.
#
# Environment:
#   CONTROL_PLANE_DIR      state directory (default: .local at the repository root)
#   CONTROL_PLANE_TIMEOUT  seconds start waits for readiness (default 60)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/.tools/bin"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
PKI="$STATE/pki"
RUN="$STATE/run"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"
KCM_KUBECONFIG="$STATE/kube-controller-manager.kubeconfig"
TIMEOUT="${CONTROL_PLANE_TIMEOUT:-60}"
COMPONENTS=(etcd kube-apiserver kube-controller-manager)
# A loopback service range: every ClusterIP is an address of this machine, where the test
# kit's node agent (or a test) can listen for the Service.
SERVICE_CIDR=127.0.96.0/24
SERVICE_IP=127.0.96.1 # first address of SERVICE_CIDR: the `kubernetes` Service
# The controllers tests rely on (names as kube-controller-manager 1.35 spells them):
# pods of StatefulSets, cascading deletion, namespace deletion, and the `default`
# ServiceAccount (plus its kube-root-ca.crt ConfigMap) that ServiceAccount admission wants.
CONTROLLERS=garbage-collector-controller,statefulset-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller

log() { printf 'control-plane: %s\n' "$*" >&2; }
die() { printf 'control-plane: error: %s\n' "$*" >&2; exit 1; }

# kubectl from .tools, never one from PATH, with its discovery cache kept in the state dir.
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }

# runs_binary PID BINARY: whether process PID runs the program file BINARY, however either
# path is spelled. The kernel gives /proc/PID/exe fully resolved, while BINARY may pass
# through symbolic links (.tools itself is often one, to a shared tool cache), so both sides
# are resolved before they are compared; the same file reached another way (a bind mount, a
# hard link) matches by device and inode.
runs_binary() {
  local pid="$1" binary="$2" exe want
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  want="$(readlink -f -- "$binary" 2>/dev/null)" || return 1
  # " (deleted)": the binary was rebuilt or reinstalled while it ran; the path still says
  # which program it was.
  [[ "$exe" == "$want" || "$exe" == "$want (deleted)" ]] && return 0
  [[ -e "$binary" ]] || return 1
  [[ "$(stat -L -c %d:%i -- "/proc/$pid/exe" 2>/dev/null)" == "$(stat -L -c %d:%i -- "$binary")" ]]
}

# pid_of COMPONENT: the pid of the running COMPONENT started by this script, or nothing.
# The pid must still run our binary (guards against a recycled pid) and not be a zombie.
pid_of() {
  local pidfile="$RUN/$1.pid" pid
  [[ -f "$pidfile" ]] || return 0
  pid="$(<"$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  runs_binary "$pid" "$BIN/$1" || return 0
  [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || return 0
  echo "$pid"
}

# group_alive PGID: whether any live (non-zombie) process remains in process group PGID.
group_alive() {
  local p
  for p in $(pgrep -g "$1" 2>/dev/null); do
    [[ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" == Z ]] || return 0
  done
  return 1
}

# free_ports N: N distinct loopback TCP ports that are free right now.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

tail_log() {
  local file="$LOGS/$1.log"
  if [[ -s "$file" ]]; then
    printf -- '--- last 20 lines of %s ---\n' "$file" >&2
    tail -n 20 "$file" >&2
    printf -- '---\n' >&2
  else
    printf '(%s is empty)\n' "$file" >&2
  fi
}

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
    "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign admin "/O=system:masters/CN=admin" keyUsage=critical,digitalSignature extendedKeyUsage=clientAuth
  # With --use-service-account-credentials=false every controller acts as this user, and the
  # role RBAC bootstraps for system:kube-controller-manager alone cannot, e.g., create the
  # pods of a StatefulSet: so it is also in system:masters.
  sign kube-controller-manager "/O=system:masters/CN=system:kube-controller-manager" \
    keyUsage=critical,digitalSignature extendedKeyUsage=clientAuth
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

# launch COMPONENT ARGS...: runs .tools/bin/COMPONENT in a session (and process group) of
# its own, detached from the caller's terminal and pipes, and records its pid.
launch() {
  local name="$1"
  shift
  # 8>&-: the daemon must not hold the state lock (see the end of this file).
  setsid "$BIN/$name" "$@" </dev/null >"$LOGS/$name.log" 2>&1 8>&- &
  echo "$!" >"$RUN/$name.pid"
}

# check_alive: fails, naming the component and showing its log, if one has died.
check_alive() {
  local name
  for name in "${COMPONENTS[@]}"; do
    [[ -f "$RUN/$name.pid" ]] || continue
    if [[ -z "$(pid_of "$name")" ]]; then
      log "$name exited during start (log: $LOGS/$name.log)"
      tail_log "$name"
      return 1
    fi
  done
}

# wait_for WHAT COMMAND...: polls COMMAND until it succeeds, a component dies, or the
# start deadline passes.
wait_for() {
  local what="$1"
  shift
  until "$@" >/dev/null 2>&1; do
    check_alive || return 1
    if ((SECONDS >= DEADLINE)); then
      log "timed out after ${TIMEOUT}s waiting for $what"
      tail_log "${WAITING_ON:-kube-apiserver}"
      return 1
    fi
    sleep 0.2
  done
}

is_ready() { [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]]; }

start() {
  local running=() name pid
  for name in "${COMPONENTS[@]}"; do
    pid="$(pid_of "$name")"
    [[ -z "$pid" ]] || running+=("$name")
  done
  if ((${#running[@]} == ${#COMPONENTS[@]})); then
    log "already running: kube-apiserver $(<"$STATE/apiserver-url")"
    SECONDS=0
    DEADLINE=$TIMEOUT
    wait_for "kube-apiserver /readyz" is_ready
    print_env
    return 0
  fi
  if ((${#running[@]})) || [[ -d "$RUN" ]]; then
    log "cleaning up a partial or stale control plane first"
    stop >/dev/null
  fi

  "$ROOT/hack/tools.sh" kube etcd
  command -v openssl >/dev/null || die "openssl is not installed (Debian: apt-get install openssl)"
  command -v python3 >/dev/null || die "python3 is not installed (needed to pick free ports)"

  local t0=$EPOCHREALTIME etcd_port peer_port api_port url data_dir
  SECONDS=0
  DEADLINE=$TIMEOUT
  mkdir -p "$RUN" "$LOGS"
  rm -rf "$STATE/kubectl-cache"
  # From here on a failure (set -e exits) stops whatever did start.
  trap 'log "start failed; stopping what was started"; stop >/dev/null 2>&1 || true' EXIT
  make_pki
  read -r etcd_port peer_port api_port <<<"$(free_ports 3)"
  url="https://127.0.0.1:$api_port"

  data_dir="$(mktemp -d -t memcached-operator-etcd.XXXXXX)"
  echo "$data_dir" >"$RUN/etcd-data-dir"
  # --unsafe-no-fsync: the data is thrown away on stop, so durability buys nothing here.
  launch etcd \
    --name=local \
    --data-dir="$data_dir" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="local=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync=true

  # --endpoint-reconciler-type=none: the default (lease) reconciler would publish
  # 127.0.0.1 as the endpoint of the `kubernetes` Service, which Endpoints validation
  # refuses (loopback), and log the failure forever.
  launch kube-apiserver \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$api_port" \
    --tls-cert-file="$PKI/apiserver.crt" \
    --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/service-account.pub" \
    --service-account-signing-key-file="$PKI/service-account.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --allow-privileged=true \
    --endpoint-reconciler-type=none \
    --enable-priority-and-fairness=true

  write_kubeconfig "$KUBECONFIG_FILE" "$url" admin
  write_kubeconfig "$KCM_KUBECONFIG" "$url" kube-controller-manager
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

  WAITING_ON=kube-controller-manager wait_for "the default ServiceAccount in namespace default" \
    kubectl get serviceaccount default --namespace default
  trap - EXIT

  local elapsed
  elapsed="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  log "ready in ${elapsed}s: kube-apiserver $url, logs in $LOGS"
  print_env
}

# stop_component NAME: TERM its process group, wait up to 15 s, then KILL.
stop_component() {
  local name="$1" pid i
  pid="$(pid_of "$name")"
  rm -f "$RUN/$name.pid"
  [[ -n "$pid" ]] || return 1
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    group_alive "$pid" || return 0
    sleep 0.1
  done
  log "$name (pid $pid) did not exit after SIGTERM; sending SIGKILL"
  kill -KILL -- "-$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    group_alive "$pid" || return 0
    sleep 0.1
  done
  die "$name (pid $pid) survived SIGKILL"
}

stop() {
  local stopped=() name i data_dir
  # Reverse order: clients first, etcd last.
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    name="${COMPONENTS[i]}"
    if stop_component "$name"; then stopped+=("$name"); fi
  done
  if [[ -f "$RUN/etcd-data-dir" ]]; then
    data_dir="$(<"$RUN/etcd-data-dir")"
    # Only ever remove a directory this script made.
    if [[ "$data_dir" == */memcached-operator-etcd.* && -d "$data_dir" ]]; then
      rm -rf -- "$data_dir"
    fi
  fi
  rm -rf "$RUN" "$PKI" "$STATE/kubectl-cache"
  rm -f "$KUBECONFIG_FILE" "$KCM_KUBECONFIG" "$STATE/apiserver-url"
  if ((${#stopped[@]})); then
    log "stopped ${stopped[*]}"
  else
    log "not running"
  fi
}

status() {
  local name pid all=0
  for name in "${COMPONENTS[@]}"; do
    pid="$(pid_of "$name")"
    if [[ -n "$pid" ]]; then
      printf '%-24s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-24s not running\n' "$name"
      all=1
    fi
  done
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

# start and stop hold a lock on the state directory, so that concurrent callers (say, two
# test binaries) take turns: the second start finds the control plane running.
lock_state() {
  mkdir -p "$STATE"
  exec 8>"$STATE/.lock"
  if ! flock -n 8; then
    log "waiting for another hack/control-plane.sh start/stop to finish..."
    flock 8
  fi
}

# The whole dispatch is one compound command ending in exit, so that bash never reads
# this file past it (safe against the file changing while a start runs).
case "${1:-}" in
  start) lock_state && start ;;
  stop) lock_state && stop ;;
  status) status ;;
  env) print_env ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|stop|status|env (try --help)" ;;
esac
exit
