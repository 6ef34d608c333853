#!/usr/bin/env bash
# The local cluster's node: kubelet and kube-proxy (built with the other Kubernetes binaries),
# containerd with Debian's runc, CNI bridge + host-local on POD_CIDR, and CoreDNS as a pod. Run
# by hack/control-plane.sh when NODE=kubelet, never on its own: network-up comes before the API
# server (which listens on the node's address), start after it, stop before it and
# network-down after it. docs/local-cluster.md describes the node; hack/lib/node-network.sh
# holds its addresses.
#
# Usage: hack/node.sh network-up     the bridge, the route to the service range, the sysctls,
#                                    and the firewall rules that keep pod traffic on the node
#        hack/node.sh start          containerd, kubelet, kube-proxy, CoreDNS; waits until the
#                                    Node is Ready and CoreDNS answers
#        hack/node.sh stop           every container, mount, cgroup and process of the node
#        hack/node.sh network-down   everything network-up and kube-proxy and kubelet added
#        hack/node.sh status         say what runs
#        hack/node.sh leftovers      list what of a node is left on this machine (its
#                                    processes, container processes, mounts, cgroups,
#                                    interfaces, firewall chains, socket directory); exit 1
#                                    when anything is: `make test` runs it after tests/node
#
# Files under the control plane's state directory (CONTROL_PLANE_DIR, default .local): kubelet-node/
# (containerd's root, kubelet's root, pod logs, CNI configuration and IP allocations, configs),
# logs/{containerd,kubelet,kube-proxy}.log, run/. Sockets in /run/memcached-operator-node.
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
# Machine settings network-up changes and network-down puts back, and the kubelet's own
# (it sets these kernel tunables to what it requires, unless protectKernelDefaults).
SYSCTLS=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables vm/overcommit_memory kernel/panic kernel/panic_on_oops)
SAVED_SYSCTLS="$STATE/node-sysctls"
# Directories of this machine that the kubelet, containerd and CNI use whatever they are told
# (the device plugins' socket, CNI's result cache, the shims' sockets, the kubelet's links to
# pod logs): the ones the node made are listed in MADE_DIRS, and stop removes those.
HOST_DIRS=(/var/lib/kubelet /var/lib/cni /run/containerd /var/log/containers)

# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"

log() { printf 'node: %s\n' "$*" >&2; }
die() { printf 'node: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"
# shellcheck source=hack/lib/steps.sh
source "$ROOT/hack/lib/steps.sh"

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$STATE/kubectl-cache" "$@"; }
ctr_() { "$BIN/ctr" --address "$NODE_SOCKETS/containerd.sock" --namespace k8s.io "$@"; }

# ---------------------------------------------------------------------------------------
# Network

# check_ranges: the node's ranges must be nobody else's on this machine: no address, route
# or resolver in them but the node's own bridge.
check_ranges() {
  local cidr line resolver
  for cidr in "$POD_CIDR" "$NODE_SERVICE_CIDR"; do
    line="$(ip -4 route show to match "${cidr%/*}" | grep -v "dev $NODE_BRIDGE" | grep -v '^default' || true)"
    [[ -z "$line" ]] || die "$cidr is already routed on this machine ($line): the node cannot use it"
    line="$(ip -4 -o addr show | grep -v " $NODE_BRIDGE " | awk '{ print $4 }' |
      python3 -c 'import ipaddress,sys
net = ipaddress.ip_network(sys.argv[1])
print(" ".join(a for a in sys.stdin.read().split() if ipaddress.ip_interface(a).ip in net))' "$cidr")"
    [[ -z "$line" ]] || die "$cidr holds this machine's address $line: the node cannot use it"
    for resolver in $(awk '$1 == "nameserver" { print $2 }' /etc/resolv.conf); do
      python3 -c 'import ipaddress,sys
sys.exit(0 if ipaddress.ip_address(sys.argv[2]) in ipaddress.ip_network(sys.argv[1]) else 1)' \
        "$cidr" "$resolver" 2>/dev/null && die "$cidr holds this machine's resolver $resolver"
    done
  done
  return 0
}

# ipt TABLE ARGS...: iptables in TABLE, waiting for the lock others (kube-proxy) hold.
ipt() { iptables -w 5 -t "$@"; }

# guard_rules: the chains that keep pod traffic on the node, first in their hooks.
#   mangle FORWARD -> FORWARD_CHAIN: forwarded packets between two addresses of POD_CIDR on
#     the bridge (pod to pod, and pod to a Service once kube-proxy translated it) go on; any
#     other forwarded packet from or to the bridge is dropped, and so is every other
#     forwarded packet when the node turned forwarding on. mangle comes before filter, where
#     kube-proxy and the kubelet accept their own, so no later rule can let one out.
#   nat POSTROUTING -> NO_MASQ_CHAIN: a packet from POD_CIDR that leaves by any interface but
#     the bridge is never translated (it is dropped above anyway): nothing is masqueraded off
#     the node.
guard_rules() {
  local drop_all="$1"
  ipt mangle -N "$FORWARD_CHAIN" 2>/dev/null || ipt mangle -F "$FORWARD_CHAIN"
  ipt mangle -A "$FORWARD_CHAIN" -i "$NODE_BRIDGE" -o "$NODE_BRIDGE" -s "$POD_CIDR" -d "$POD_CIDR" -j RETURN
  ipt mangle -A "$FORWARD_CHAIN" -i "$NODE_BRIDGE" -j DROP
  ipt mangle -A "$FORWARD_CHAIN" -o "$NODE_BRIDGE" -j DROP
  [[ "$drop_all" != 1 ]] || ipt mangle -A "$FORWARD_CHAIN" -j DROP
  ipt mangle -D FORWARD -j "$FORWARD_CHAIN" 2>/dev/null || true
  ipt mangle -I FORWARD 1 -j "$FORWARD_CHAIN"
  ipt nat -N "$NO_MASQ_CHAIN" 2>/dev/null || ipt nat -F "$NO_MASQ_CHAIN"
  ipt nat -A "$NO_MASQ_CHAIN" -s "$POD_CIDR" ! -o "$NODE_BRIDGE" -j ACCEPT
  first_in_postrouting
}

# first_in_postrouting: NO_MASQ_CHAIN's jump as the first rule of nat POSTROUTING (again after
# kube-proxy put its own jump first).
first_in_postrouting() {
  ipt nat -D POSTROUTING -j "$NO_MASQ_CHAIN" 2>/dev/null || true
  ipt nat -I POSTROUTING 1 -j "$NO_MASQ_CHAIN"
}

network_up() {
  [[ -x "$(command -v iptables)" ]] || "$ROOT/hack/tools.sh" node
  check_ranges
  mkdir -p "$STATE"
  if [[ ! -f "$SAVED_SYSCTLS" ]]; then
    local key
    for key in "${SYSCTLS[@]}"; do
      [[ ! -f "/proc/sys/$key" ]] || echo "$key $(<"/proc/sys/$key")"
    done >"$SAVED_SYSCTLS"
  fi
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODE_BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  ip route replace "$NODE_SERVICE_CIDR" dev "$NODE_BRIDGE" src "$NODE_IP"
  # Forwarding was off: then the guard drops every forwarded packet but the pods' own.
  local drop_all=0
  [[ "$(awk '$1 == "net/ipv4/ip_forward" { print $2 }' "$SAVED_SYSCTLS")" == 1 ]] || drop_all=1
  guard_rules "$drop_all"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  # Bridged packets pass through iptables, so that a Service's reply between two pods on the
  # bridge is translated back (what kube-proxy requires of a bridge network).
  [[ ! -f /proc/sys/net/bridge/bridge-nf-call-iptables ]] || echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  log "network up: $NODE_BRIDGE $NODE_IP, pods $POD_CIDR, services $NODE_SERVICE_CIDR"
}

# remove_chain FAMILY TABLE HOOK CHAIN: the hook's jumps to CHAIN, then CHAIN.
remove_chain() {
  local cmd="$1" table="$2" hook="$3" chain="$4"
  while "$cmd" -w 5 -t "$table" -D "$hook" -j "$chain" 2>/dev/null; do :; done
  "$cmd" -w 5 -t "$table" -F "$chain" 2>/dev/null || true
  "$cmd" -w 5 -t "$table" -X "$chain" 2>/dev/null || true
}

network_down() {
  local cmd table chain hook key value
  mkdir -p "$LOGS"
  # What kube-proxy added (its own clean-up), then the kubelet's chains, then ours.
  if [[ -x "$BIN/kube-proxy" ]]; then
    "$BIN/kube-proxy" --cleanup --proxy-mode=iptables >"$LOGS/kube-proxy-cleanup.log" 2>&1 || true
  fi
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    for table in mangle nat filter; do
      for hook in INPUT OUTPUT FORWARD PREROUTING POSTROUTING; do
        for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-PROXY-CANARY KUBE-FORWARD; do
          remove_chain "$cmd" "$table" "$hook" "$chain"
        done
      done
    done
    for table in mangle nat filter; do
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-PROXY-CANARY KUBE-IPTABLES-HINT; do
        "$cmd" -w 5 -t "$table" -F "$chain" 2>/dev/null || true
        "$cmd" -w 5 -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  remove_chain iptables mangle FORWARD "$FORWARD_CHAIN"
  remove_chain iptables nat POSTROUTING "$NO_MASQ_CHAIN"
  ip route del "$NODE_SERVICE_CIDR" dev "$NODE_BRIDGE" 2>/dev/null || true
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
  if [[ -f "$SAVED_SYSCTLS" ]]; then
    while read -r key value; do
      [[ ! -f "/proc/sys/$key" ]] || echo "$value" >"/proc/sys/$key"
    done <"$SAVED_SYSCTLS"
    rm -f "$SAVED_SYSCTLS"
  fi
  log "network down"
}

# ---------------------------------------------------------------------------------------
# Configuration

write_containerd_config() {
  local host dir pause
  pause="$("$ROOT/hack/images.sh" reference pause)"
  mkdir -p "$NODE_DIR/containerd" "$NODE_DIR/cni" "$NODE_SOCKETS"
  for host in "${MIRRORED_REGISTRIES[@]}" "$REGISTRY"; do
    dir="$NODE_DIR/containerd/certs.d/$host"
    mkdir -p "$dir"
    cat >"$dir/hosts.toml" <<EOF
# $host is pulled from the local registry alone: no fallback to $host itself.
server = "http://$REGISTRY"

[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
  done
  cat >"$NODE_DIR/containerd/config.toml" <<EOF
version = 3
root = "$NODE_DIR/containerd/root"
state = "$NODE_SOCKETS/containerd"
# NRI would listen on /var/run/nri; nothing here uses it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$NODE_SOCKETS/containerd.sock"

[ttrpc]
  address = "$NODE_SOCKETS/containerd.sock.ttrpc"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "$NODE_DIR/containerd/opt"

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$pause"
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "$NODE_DIR/containerd/certs.d"

  [plugins.'io.containerd.cri.v1.runtime']
    # This VM withholds CAP_SYS_RESOURCE: a sandbox asking for oom_score_adj -998 fails
    # unless containerd clamps it to what it may set.
    restrict_oom_score_adj = true
    # Network namespaces under containerd's state directory, not /var/run/netns.
    netns_mounts_under_state_dir = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$NODE_DIR/cni"
      max_conf_num = 1
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$NODE_SOCKETS/runc"
          SystemdCgroup = false
EOF
  cat >"$NODE_DIR/cni/10-memcached-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "memcached-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$NODE_IP" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$NODE_DIR/cni-ipam"
      }
    }
  ]
}
EOF
}

write_kubelet_config() {
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs"
  cat >"$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this machine: kubelet 1.35 refuses it unless told (KEP-5573); no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$NODE_SOCKETS/containerd.sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
clusterDomain: $CLUSTER_DOMAIN
clusterDNS:
- $NODE_DNS_IP
# Pods inherit no resolver of this machine: cluster names only.
resolvConf: ""
podCIDR: $POD_CIDR
podLogsDir: $NODE_DIR/pod-logs
volumePluginDir: $NODE_DIR/kubelet/volume-plugins
# No image or disk eviction on a shared development machine's disk.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
serializeImagePulls: false
EOF
  cat >"$NODE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $STATE/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: $NODE_IP:10256
metricsBindAddress: 127.0.0.1:10249
# NodePorts on the node's bridge address only, never on this machine's other interfaces or
# loopback.
nodePortAddresses:
- $NODE_IP/32
iptables:
  masqueradeAll: false
  localhostNodePorts: false
# 0: leave the machine's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
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
  "$ROOT/hack/images.sh" build pause coredns busybox
  SECONDS=0
  DEADLINE=$TIMEOUT
  mkdir -p "$RUN" "$LOGS" "$NODE_DIR"
  write_containerd_config
  write_kubelet_config

  local dir
  for dir in "${HOST_DIRS[@]}"; do
    [[ -e "$dir" ]] || echo "$dir"
  done >>"$STATE/node-made-dirs"
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

# containerd_runs: whether a containerd (a live one, not a zombie nobody reaped) runs here.
containerd_runs() {
  local pid
  for pid in $(pgrep -x containerd); do
    [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" == Z ]] || return 0
  done
  return 1
}

# kill_pod_processes: SIGKILL to every process in a kubepods cgroup, until none is left (5 s).
kill_pod_processes() {
  local i pids
  for ((i = 0; i < 50; i++)); do
    pids="$({ find /sys/fs/cgroup/*/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null || true; } | sort -u)"
    [[ -n "$pids" ]] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  log "processes left in kubepods cgroups: $pids"
}

# our_mounts: mount points under the node's directories, deepest first.
our_mounts() {
  awk -v a="$NODE_DIR/" -v b="$NODE_SOCKETS/" '$5 ~ "^" a || $5 ~ "^" b { print $5 }' /proc/self/mountinfo |
    sort -r
}

stop() {
  local stopped=() pid id mnt dir link
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
  # Shims outlive containerd by design: theirs are ours to end.
  for pid in $(pgrep -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $NODE_SOCKETS/containerd.sock" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for mnt in $(our_mounts); do
    umount -l "$mnt" 2>/dev/null || true
  done
  # Whatever still runs in a pod's cgroup (a container whose task containerd no longer knew,
  # after a crash), then the pods' cgroups, deepest first, in every hierarchy.
  kill_pod_processes
  # The pods' cgroups, deepest first, in every hierarchy.
  for dir in /sys/fs/cgroup/*/kubepods; do
    [[ -d "$dir" ]] || continue
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # The kubelet's links to our pods' logs, and CNI's cached results of our network.
  for link in /var/log/containers/*.log; do
    [[ -L "$link" && "$(readlink "$link")" == "$NODE_DIR/"* ]] && rm -f "$link"
  done
  rm -f /var/lib/cni/results/memcached-node-* /var/lib/kubelet/device-plugins/kubelet.sock
  rm -rf "$NODE_SOCKETS"
  # What the node made of this machine's directories. containerd's shims put their sockets in
  # /run/containerd/s whatever the configuration says: ours, unless another containerd runs.
  if [[ -f "$STATE/node-made-dirs" ]]; then
    while read -r dir; do
      [[ "$dir" != /run/containerd ]] || ! containerd_runs || continue
      [[ " ${HOST_DIRS[*]} " == *" $dir "* ]] && rm -rf -- "$dir"
    done <"$STATE/node-made-dirs"
    rm -f "$STATE/node-made-dirs"
  fi
  rm -rf "$NODE_DIR"
  report_stopped "${stopped[@]}"
}

# leftovers: what any node of this project left on the machine, one line each.
leftovers() {
  local pid exe name
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || continue
    [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || continue
    for name in kubelet kube-proxy containerd containerd-shim-runc-v2; do
      [[ "$exe" != "$(readlink -f "$BIN/$name")" ]] || echo "process $pid: $exe"
    done
  done
  find /sys/fs/cgroup/*/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u |
    sed 's/^/process in a kubepods cgroup: /'
  find /sys/fs/cgroup/*/kubepods -maxdepth 0 -type d 2>/dev/null | sed 's/^/cgroup: /'
  awk '$5 ~ /kubelet-node|memcached-operator-node/ { print "mount: " $5 }' /proc/self/mountinfo
  ip -o link show "$NODE_BRIDGE" 2>/dev/null | awk '{ print "interface: " $2 }'
  ip -o link show master "$NODE_BRIDGE" 2>/dev/null | awk '{ print "interface: " $2 }'
  for cmd in iptables ip6tables; do
    command -v "$cmd-save" >/dev/null || continue
    "$cmd-save" 2>/dev/null | awk -v c="$cmd" '/^:(KUBE-|MEMCACHED-)/ { print c " chain: " substr($1, 2) }'
  done
  [[ ! -e "$NODE_SOCKETS" ]] || echo "directory: $NODE_SOCKETS"
  ip route show "$NODE_SERVICE_CIDR" 2>/dev/null | sed 's/^/route: /'
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
  status) status ;;
  leftovers)
    left="$(leftovers)"
    [[ -z "$left" ]] || { printf '%s\n' "$left"; exit 1; }
    ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 network-up|start|stop|network-down|status|leftovers (try --help)" ;;
esac
exit
