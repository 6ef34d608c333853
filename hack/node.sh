#!/usr/bin/env bash
# The local cluster's node: kubelet and kube-proxy (built with the other Kubernetes binaries),
# containerd with Debian's runc, CNI bridge + host-local on POD_CIDR, and CoreDNS as a pod. Run
# by hack/control-plane.sh when NODE=kubelet, never on its own: network-up comes before the API
# server (which listens on the node's address), start after it, stop before it and
# network-down after it, all while that cluster holds the machine's node lock
# (hack/lib/node-lock.sh). docs/local-cluster.md describes the node; hack/lib/node-network.sh
# holds its addresses.
#
# Usage: hack/node.sh network-up     the bridge, the route to the service range, the sysctls,
#                                    and the firewall rules that keep pod traffic on the node
#                                    (hack/lib/node-firewall.sh)
#        hack/node.sh start          containerd, kubelet, kube-proxy, CoreDNS; waits until the
#                                    Node is Ready and CoreDNS answers
#        hack/node.sh stop           every container, mount, cgroup and process of the node
#        hack/node.sh restart NAME   containerd, kubelet or kube-proxy stopped and started
#                                    again, as a service manager restarts it; the pods' own
#                                    processes run on
#        hack/node.sh network-down   everything network-up and kube-proxy added
#        hack/node.sh status         say what runs
#        hack/node.sh mirror MODE    the registry mirror's mode, for the pulls from then on:
#                                    by-tag (the default: tags resolve) or by-digest (as a
#                                    disconnected cluster's digest mirror: only images named by
#                                    digest can be pulled)
#        hack/node.sh leftovers      list what the local clusters that no longer run left on
#                                    this machine (hack/lib/leftovers.sh: their processes,
#                                    the node's container processes, mounts, cgroups,
#                                    interfaces, firewall chains and tables, sysctls, host
#                                    directories, the registry, etcd's directories); exit 1
#                                    when anything is: `make test` runs it after every suite.
#                                    A cluster still stopping is waited for (up to
#                                    LEFTOVERS_WAIT seconds, default 300).
#
# Files under the control plane's state directory (CONTROL_PLANE_DIR, default .local): kubelet-node/
# (containerd's root, kubelet's root, pod logs, CNI configuration and IP allocations, configs),
# logs/{containerd,kubelet,kube-proxy}.log, run/. Sockets in /run/memcached-operator-node; the
# pods' cgroups under the cgroup root /memcached-operator-node.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/.tools/bin"
STATE="${CONTROL_PLANE_DIR:-$ROOT/.local}"
NODE_DIR="$STATE/kubelet-node"
RUN="$STATE/run"
LOGS="$STATE/logs"
PKI="$STATE/pki"
KUBECONFIG_FILE="$STATE/kubeconfig"
TIMEOUT="${NODE_TIMEOUT:-180}"
COMPONENTS=(containerd kubelet kube-proxy)
DAEMON_MARK="cluster=$STATE"
DAEMON_HOLDS_NODE=1
# Directories of this machine that the kubelet, containerd and CNI use whatever they are told
# (the device plugins' socket, CNI's result cache, the shims' sockets, the kubelet's links to
# pod logs): the ones the node made are listed in the node's machine record, and stop removes
# those.
HOST_DIRS=(/var/lib/kubelet /var/lib/cni /run/containerd /var/log/containers)

# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"
# shellcheck source=hack/lib/node-lock.sh
source "$ROOT/hack/lib/node-lock.sh"

log() { printf 'node: %s\n' "$*" >&2; }
die() { printf 'node: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"
# shellcheck source=hack/lib/node-firewall.sh
source "$ROOT/hack/lib/node-firewall.sh"
# shellcheck source=hack/lib/node-config.sh
source "$ROOT/hack/lib/node-config.sh"

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
ctr_() { "$BIN/ctr" --address "$NODE_SOCKETS/containerd.sock" --namespace k8s.io "$@"; }

# cgroup_roots: the node's cgroup root in every hierarchy of this machine (cgroup v1: one per
# mounted hierarchy; v2: the one), whether it exists or not.
cgroup_roots() {
  local dir
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    echo "/sys/fs/cgroup/$NODE_CGROUP"
    return
  fi
  for dir in /sys/fs/cgroup/*/; do
    [[ -f "$dir/cgroup.procs" ]] && echo "${dir%/}/$NODE_CGROUP"
  done
}

# make_cgroup_root: the kubelet's --cgroup-root, which it wants to exist in every hierarchy. A
# new cpuset cgroup of cgroup v1 starts with no CPU and no memory node: it gets its parent's.
make_cgroup_root() {
  local dir file
  for dir in $(cgroup_roots); do
    mkdir -p "$dir"
    for file in cpuset.cpus cpuset.mems; do
      [[ ! -f "$dir/$file" || -n "$(<"$dir/$file")" ]] || cat "$(dirname "$dir")/$file" >"$dir/$file"
    done
  done
}

# ---------------------------------------------------------------------------------------
# Start and stop

node_ready() { jsonpath_is True node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'; }
coredns_ready() { jsonpath_is 1 --namespace kube-system deployment coredns -o 'jsonpath={.status.readyReplicas}'; }
containerd_up() { ctr_ version; }
postrouting_chain() { ipt nat -S KUBE-POSTROUTING; }

start() {
  [[ -f "$KUBECONFIG_FILE" ]] || die "no control plane (start it with NODE=kubelet hack/control-plane.sh start)"
  "$ROOT/hack/tools.sh" kube containerd node images
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || die "the node's network is not up (hack/node.sh network-up)"
  [[ -d "$NODE_RECORD" ]] || die "the node's machine record $NODE_RECORD is missing (hack/node.sh network-up writes it)"
  "$ROOT/hack/images.sh" build pause coredns busybox
  SECONDS=0
  DEADLINE=$TIMEOUT
  mkdir -p "$RUN" "$LOGS" "$NODE_DIR"
  write_containerd_config
  write_kubelet_config
  local url
  url="$(<"$STATE/apiserver-url")"
  allow_api_server "${url##*:}"

  local dir
  for dir in "${HOST_DIRS[@]}"; do
    [[ -e "$dir" ]] || echo "$dir"
  done >>"$NODE_RECORD/made-dirs"
  make_cgroup_root
  PATH="$BIN:$PATH" launch containerd --config "$NODE_DIR/containerd/config.toml"
  WAITING_ON=containerd step "containerd" containerd_up

  mkdir -p /var/log/containers
  launch kubelet \
    --config="$NODE_DIR/kubelet.yaml" \
    --kubeconfig="$STATE/kubelet.kubeconfig" \
    --root-dir="$NODE_DIR/kubelet" \
    --cert-dir="$NODE_DIR/kubelet/pki" \
    --hostname-override="$NODE_NAME" \
    --node-ip="$NODE_IP"
  launch kube-proxy --config="$NODE_DIR/kube-proxy.yaml"
  WAITING_ON=kube-proxy step "kube-proxy's rules" postrouting_chain
  first_in_postrouting
  WAITING_ON=kubelet step "Node $NODE_NAME Ready" node_ready

  kubectl apply --server-side --field-manager=local-cluster -f - >/dev/null <<EOF
$(sed -e "s|@COREDNS_IMAGE@|$("$ROOT/hack/images.sh" reference coredns)|" \
    -e "s|@DNS_IP@|$NODE_DNS_IP|" -e "s|@CLUSTER_DOMAIN@|$CLUSTER_DOMAIN|" "$ROOT/hack/node/coredns.yaml")
EOF
  WAITING_ON=kubelet step "CoreDNS ready" coredns_ready
  log "node $NODE_NAME ready in ${SECONDS}s (pods $POD_CIDR, DNS $NODE_DNS_IP)"
}

# kubelet_listens: whether the kubelet serves its API (port 10250) on the node's address.
kubelet_listens() { [[ -n "$(ss -Hltn "src $NODE_IP:10250" 2>/dev/null)" ]]; }

# restart COMPONENT: containerd, the kubelet or kube-proxy stopped and started again, as a
# service manager restarts a node daemon (hack/lib/daemons.sh, restart_component); the pods'
# containers run on under their shims meanwhile. Returns once it serves again.
restart() {
  local name="$1"
  [[ " ${COMPONENTS[*]} " == *" $name "* ]] || die "restart: '$name' is not one of ${COMPONENTS[*]}"
  SECONDS=0
  DEADLINE=$TIMEOUT
  restart_component "$name"
  case "$name" in
    containerd) WAITING_ON=containerd wait_for "containerd" containerd_up ;;
    kubelet) WAITING_ON=kubelet wait_for "the kubelet's port 10250" kubelet_listens ;;
    kube-proxy) WAITING_ON=kube-proxy wait_for "kube-proxy's rules" postrouting_chain ;;
  esac
  log "$name restarted and serving after ${SECONDS}s"
}

# kill_pod_processes: SIGKILL to every process in the node's cgroup root, until none is left
# (5 s).
kill_pod_processes() {
  local i pids
  for ((i = 0; i < 50; i++)); do
    pids="$(for dir in $(cgroup_roots); do
      [[ ! -d "$dir" ]] || find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null || true
    done | sort -u)"
    [[ -n "$pids" ]] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  log "processes left in the node's cgroups: $pids"
}

# our_mounts: mount points under the node's directories, deepest first.
our_mounts() {
  awk -v a="$NODE_DIR/" -v b="$NODE_SOCKETS/" '$5 ~ "^" a || $5 ~ "^" b { print $5 }' /proc/self/mountinfo |
    sort -r
}

# our_shims: "PID SOCKET" of every containerd shim serving this node's containerd: the shims
# are found by the containerd address they were started with, and each one's sockets in
# /run/containerd/s are named by the SHA-256 of that address, its namespace and its id (the
# shim's own naming, containerd's pkg/shim).
our_shims() {
  local pid args ns id
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $NODE_SOCKETS/containerd.sock" || true); do
    args="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || continue
    ns="$(awk '{ for (i = 1; i < NF; i++) if ($i == "-namespace") print $(i + 1) }' <<<"$args")"
    id="$(awk '{ for (i = 1; i < NF; i++) if ($i == "-id") print $(i + 1) }' <<<"$args")"
    printf '%s %s %s\n' "$pid" \
      "$(printf '%s' "$NODE_SOCKETS/containerd.sock/$ns/$id" | sha256sum | cut -c1-64)" \
      "$(printf '%s' "$NODE_SOCKETS/containerd.sock/$ns/$id/debug" | sha256sum | cut -c1-64)"
  done
}

stop() {
  local stopped=() pid id mnt dir link socket debug
  # The kubelet first, so that it restarts nothing; then every container, by its task.
  if stop_component kubelet; then stopped+=(kubelet); fi
  if stop_component kube-proxy; then stopped+=(kube-proxy); fi
  if [[ -n "$(pid_of containerd)" ]]; then
    for id in $(ctr_ tasks list -q 2>/dev/null); do
      ctr_ tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr_ tasks list -q 2>/dev/null); do
      ctr_ tasks delete --force "$id" >/dev/null 2>&1 || true
    done
  fi
  if stop_component containerd; then stopped+=(containerd); fi
  # Shims outlive containerd by design: this containerd's are ours to end, with their sockets.
  while read -r pid socket debug; do
    [[ -n "$pid" ]] || continue
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "/run/containerd/s/$socket" "/run/containerd/s/$debug"
  done < <(our_shims)
  for mnt in $(our_mounts); do
    umount -l "$mnt" 2>/dev/null || true
  done
  # Whatever still runs in the node's cgroups (a container whose task containerd no longer
  # knew, after a crash), then the cgroups, deepest first, in every hierarchy.
  kill_pod_processes
  for dir in $(cgroup_roots); do
    [[ ! -d "$dir" ]] || find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # The kubelet's links to our pods' logs, and CNI's cached results of our network.
  for link in /var/log/containers/*.log; do
    [[ -L "$link" && "$(readlink "$link")" == "$NODE_DIR/"* ]] && rm -f "$link"
  done
  rm -f /var/lib/cni/results/memcached-node-* /var/lib/kubelet/device-plugins/kubelet.sock
  rm -rf "$NODE_SOCKETS"
  # What the node made of this machine's directories. containerd's shims put their sockets in
  # /run/containerd/s whatever the configuration says, beside those of any other containerd:
  # there only what is empty now goes.
  if [[ -f "$NODE_RECORD/made-dirs" ]]; then
    while read -r dir; do
      [[ " ${HOST_DIRS[*]} " == *" $dir "* && -d "$dir" ]] || continue
      if [[ "$dir" == /run/containerd ]]; then
        find "$dir" -depth -type d -empty -delete 2>/dev/null || true
      else
        rm -rf -- "$dir"
      fi
    done <"$NODE_RECORD/made-dirs"
    rm -f "$NODE_RECORD/made-dirs"
  fi
  rm -rf "$NODE_DIR"
  report_stopped "${stopped[@]}"
}

status() {
  local all=0
  print_processes 24 "${COMPONENTS[@]}" || all=1
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    printf '%-24s %s\n' network "up ($NODE_BRIDGE $NODE_IP)"
  else
    printf '%-24s %s\n' network down
    all=1
  fi
  return "$all"
}

case "${1:-}" in
  network-up) network_up ;;
  network-down) network_down ;;
  start) start ;;
  stop) stop ;;
  restart) restart "${2:-}" ;;
  status) status ;;
  mirror)
    [[ -d "$NODE_DIR/containerd/certs.d" ]] || die "no node in $STATE: start one first"
    write_registry_hosts "${2:-}"
    log "the registry mirror now pulls ${2#by-}s$([[ "${2:-}" == by-digest ]] && echo " only")"
    ;;
  leftovers)
    # shellcheck source=hack/lib/leftovers.sh
    source "$ROOT/hack/lib/leftovers.sh"
    wait_for_stops
    left="$(leftovers)"
    [[ -z "$left" ]] || { printf '%s\n' "$left"; exit 1; }
    ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 network-up|start|stop|restart COMPONENT|network-down|status|mirror MODE|leftovers (try --help)" ;;
esac
exit
