# The real node's network on this machine: the bridge, the route to the service range, the
# sysctls, and the firewall rules that keep pod traffic on the node (network-up), and taking all
# of it back (network-down). Sourced by hack/node.sh (after hack/lib/node-network.sh and
# hack/lib/node-lock.sh), never run; docs/local-cluster.md, "Network safety", says what each
# rule is for and tests/node reads them back.
#
# What network-up changes is written to the node's machine record (NODE_RECORD) before it is
# changed, and only when no record is there yet: a node that crashed left the true original
# values behind, and the next network-down (hack/control-plane.sh start runs one first when the
# record is there) puts them back.

# The node's ports on this machine (the kubelet, kube-proxy's health and metrics), fixed by the
# node's configuration and the machine's node lock: outside the kernel's ephemeral range, no
# port-0 bind is ever given one of them.
NODE_PORTS=(10250 10256 10249)
# Machine settings network-up changes and network-down puts back, and the kubelet's own
# (it sets these kernel tunables to what it requires, unless protectKernelDefaults).
SYSCTLS=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables vm/overcommit_memory kernel/panic kernel/panic_on_oops)

# ipt TABLE ARGS...: iptables in TABLE, waiting for the lock others (kube-proxy) hold;
# ip6t the same for IPv6.
ipt() { iptables -w 5 -t "$@"; }
ip6t() { ip6tables -w 5 -t "$@"; }
# ipv6_present: whether this kernel speaks IPv6 at all (then it is guarded too).
ipv6_present() { [[ -d /proc/sys/net/ipv6 ]]; }

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

# check_ports: the node's fixed ports are outside the kernel's ephemeral range (or reserved
# from it), so no port-0 bind of another process can take one, and nothing listens on them.
check_ports() {
  local low high port reserved listener
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  reserved=",$(</proc/sys/net/ipv4/ip_local_reserved_ports),"
  for port in "${NODE_PORTS[@]}"; do
    if ((port >= low && port <= high)) && [[ "$reserved" != *",$port,"* ]]; then
      die "the node's port $port is inside this machine's ephemeral port range ($low-$high, net.ipv4.ip_local_port_range), where any program's port-0 bind may take it: narrow the range or add $port to net.ipv4.ip_local_reserved_ports"
    fi
    listener="$(ss -Hltnp "sport = :$port" 2>/dev/null | head -n 1)"
    [[ -z "$listener" ]] || die "the node's port $port is taken on this machine: $listener"
  done
}

# check_br_netfilter: bridged packets must pass iptables (kube-proxy translates a Service's
# reply between two pods on the bridge there), which takes the kernel's br_netfilter.
check_br_netfilter() {
  [[ -f /proc/sys/net/bridge/bridge-nf-call-iptables ]] || modprobe br_netfilter 2>/dev/null || true
  [[ -f /proc/sys/net/bridge/bridge-nf-call-iptables ]] ||
    die "this kernel has no br_netfilter (no /proc/sys/net/bridge/bridge-nf-call-iptables, and modprobe br_netfilter failed): the node's Services between two pods on its bridge need it; load the module (modprobe br_netfilter) or use a kernel with it built in"
}

# nft_tables: every nftables table of this machine, "FAMILY NAME" one a line.
nft_tables() { nft list tables 2>/dev/null | awk '$1 == "table" { print $2, $3 }' | sort; }

# kube_chains: the KUBE-* chains of this machine's firewall, "COMMAND TABLE CHAIN" one a line
# (what kube-proxy and the kubelet make).
kube_chains() {
  local cmd
  for cmd in iptables ip6tables; do
    command -v "$cmd-save" >/dev/null || continue
    "$cmd-save" 2>/dev/null | awk -v c="$cmd" '/^\*/ { t = substr($1, 2) } /^:KUBE-/ { print c, t, substr($1, 2) }'
  done
}

# record_machine: the node's machine record, once: the sysctls' values and the nftables tables
# as they are before the node changes anything.
record_machine() {
  local key
  mkdir -p "$NODE_RECORD"
  if [[ ! -f "$NODE_RECORD/sysctls" ]]; then
    for key in "${SYSCTLS[@]}"; do
      [[ ! -f "/proc/sys/$key" ]] || echo "$key $(<"/proc/sys/$key")"
    done >"$NODE_RECORD/sysctls.new"
    mv "$NODE_RECORD/sysctls.new" "$NODE_RECORD/sysctls"
  fi
  [[ -f "$NODE_RECORD/tables" ]] || nft_tables >"$NODE_RECORD/tables"
}

# guard_rules DROP-ALL: the chains that keep pod traffic on the node, first in their hooks.
#   mangle FORWARD -> FORWARD_CHAIN: forwarded packets between two addresses of POD_CIDR on
#     the bridge (pod to pod, and pod to a Service once kube-proxy translated it) go on; any
#     other forwarded packet from or to the bridge is dropped, and so is every other
#     forwarded packet when the node turned forwarding on (DROP-ALL 1). mangle comes before
#     filter, where kube-proxy and the kubelet accept their own, so no later rule can let one
#     out.
#   mangle INPUT -> INPUT_CHAIN: from the bridge, this machine accepts only replies to its own
#     connections, the kubelet's port and (allow_api_server) the API server's port on the
#     node's address: no pod reaches any other listener of this machine.
#   nat POSTROUTING -> NO_MASQ_CHAIN: a packet from POD_CIDR that leaves by any interface but
#     the bridge is never translated (it is dropped above anyway): nothing is masqueraded off
#     the node.
#   IPv6 (when the kernel has it): the bridge carries none (disable_ipv6), and ip6tables drops
#     every forwarded packet from or to it and every packet from it to this machine.
guard_rules() {
  local drop_all="$1"
  ipt mangle -N "$FORWARD_CHAIN" 2>/dev/null || ipt mangle -F "$FORWARD_CHAIN"
  ipt mangle -A "$FORWARD_CHAIN" -i "$NODE_BRIDGE" -o "$NODE_BRIDGE" -s "$POD_CIDR" -d "$POD_CIDR" -j RETURN
  ipt mangle -A "$FORWARD_CHAIN" -i "$NODE_BRIDGE" -j DROP
  ipt mangle -A "$FORWARD_CHAIN" -o "$NODE_BRIDGE" -j DROP
  [[ "$drop_all" != 1 ]] || ipt mangle -A "$FORWARD_CHAIN" -j DROP
  ipt mangle -D FORWARD -j "$FORWARD_CHAIN" 2>/dev/null || true
  ipt mangle -I FORWARD 1 -j "$FORWARD_CHAIN"
  ipt mangle -N "$INPUT_CHAIN" 2>/dev/null || ipt mangle -F "$INPUT_CHAIN"
  ipt mangle -A "$INPUT_CHAIN" -i "$NODE_BRIDGE" -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
  ipt mangle -A "$INPUT_CHAIN" -i "$NODE_BRIDGE" -d "$NODE_IP/32" -p tcp --dport 10250 -j RETURN
  ipt mangle -A "$INPUT_CHAIN" -i "$NODE_BRIDGE" -j DROP
  ipt mangle -D INPUT -j "$INPUT_CHAIN" 2>/dev/null || true
  ipt mangle -I INPUT 1 -j "$INPUT_CHAIN"
  ipt nat -N "$NO_MASQ_CHAIN" 2>/dev/null || ipt nat -F "$NO_MASQ_CHAIN"
  ipt nat -A "$NO_MASQ_CHAIN" -s "$POD_CIDR" ! -o "$NODE_BRIDGE" -j ACCEPT
  first_in_postrouting
  if ipv6_present; then
    echo 1 >"/proc/sys/net/ipv6/conf/$NODE_BRIDGE/disable_ipv6"
    ip6t mangle -N "$FORWARD_CHAIN" 2>/dev/null || ip6t mangle -F "$FORWARD_CHAIN"
    ip6t mangle -A "$FORWARD_CHAIN" -i "$NODE_BRIDGE" -j DROP
    ip6t mangle -A "$FORWARD_CHAIN" -o "$NODE_BRIDGE" -j DROP
    ip6t mangle -D FORWARD -j "$FORWARD_CHAIN" 2>/dev/null || true
    ip6t mangle -I FORWARD 1 -j "$FORWARD_CHAIN"
    ip6t mangle -N "$INPUT_CHAIN" 2>/dev/null || ip6t mangle -F "$INPUT_CHAIN"
    ip6t mangle -A "$INPUT_CHAIN" -i "$NODE_BRIDGE" -j DROP
    ip6t mangle -D INPUT -j "$INPUT_CHAIN" 2>/dev/null || true
    ip6t mangle -I INPUT 1 -j "$INPUT_CHAIN"
  fi
}

# allow_api_server PORT: pods may reach the API server on the node's address (through the
# `kubernetes` Service, which kube-proxy translates to it).
allow_api_server() {
  local rule=(-i "$NODE_BRIDGE" -d "$NODE_IP/32" -p tcp --dport "$1" -j RETURN)
  ipt mangle -C "$INPUT_CHAIN" "${rule[@]}" 2>/dev/null || ipt mangle -I "$INPUT_CHAIN" 2 "${rule[@]}"
}

# first_in_postrouting: NO_MASQ_CHAIN's jump as the first rule of nat POSTROUTING (again after
# kube-proxy put its own jump first).
first_in_postrouting() {
  ipt nat -D POSTROUTING -j "$NO_MASQ_CHAIN" 2>/dev/null || true
  ipt nat -I POSTROUTING 1 -j "$NO_MASQ_CHAIN"
}

network_up() {
  command -v iptables >/dev/null && command -v nft >/dev/null || "$ROOT/hack/tools.sh" node
  check_ranges
  check_ports
  check_br_netfilter
  local chains
  chains="$(kube_chains)"
  [[ -z "$chains" ]] || die "this machine's firewall already has KUBE-* chains that no node of this project left (a node's record would say so):
$(sed 's/^/  /' <<<"$chains")
Another Kubernetes node (kube-proxy, kubelet) runs in this network namespace: the local node cannot share the firewall with it. If they are a leftover nobody needs, remove them (iptables -t TABLE -F CHAIN; iptables -t TABLE -X CHAIN)."
  record_machine
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODE_BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  ip route replace "$NODE_SERVICE_CIDR" dev "$NODE_BRIDGE" src "$NODE_IP"
  # Forwarding was off: then the guard drops every forwarded packet but the pods' own.
  local drop_all=0
  [[ "$(awk '$1 == "net/ipv4/ip_forward" { print $2 }' "$NODE_RECORD/sysctls")" == 1 ]] || drop_all=1
  guard_rules "$drop_all"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  # Bridged packets pass through iptables, so that a Service's reply between two pods on the
  # bridge is translated back (what kube-proxy requires of a bridge network).
  echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  log "network up: $NODE_BRIDGE $NODE_IP, pods $POD_CIDR, services $NODE_SERVICE_CIDR"
}

# remove_chains COMMAND TABLE PATTERN: the chains of TABLE whose names match PATTERN (an awk
# regular expression), with every jump to them from another chain.
remove_chains() {
  local cmd="$1" table="$2" pattern="$3" chains chain
  chains="$("$cmd" -w 5 -t "$table" -S 2>/dev/null | awk -v p="$pattern" '$1 == "-N" && $2 ~ p { print $2 }')"
  [[ -n "$chains" ]] || return 0
  # The jumps from other chains: each rule as -S prints it, deleted by the same words
  # (xargs reads the quotes of a comment as the shell would).
  "$cmd" -w 5 -t "$table" -S | awk -v p="$pattern" '$1 == "-A" && $2 !~ p && $NF ~ p && $(NF-1) == "-j"' |
    sed 's/^-A /-D /' | xargs -r -L 1 "$cmd" -w 5 -t "$table"
  for chain in $chains; do "$cmd" -w 5 -t "$table" -F "$chain"; done
  for chain in $chains; do "$cmd" -w 5 -t "$table" -X "$chain"; done
}

# empty_new_tables: nftables tables that were not there before the node (its record) and hold
# no rule: those the node's iptables calls made. "FAMILY NAME" one a line.
empty_new_tables() {
  command -v nft >/dev/null || return 0
  nft -j list ruleset 2>/dev/null | python3 -c '
import json, sys
before = set(open(sys.argv[1]).read().split("\n")) if len(sys.argv) > 1 else set()
items = json.load(sys.stdin).get("nftables", [])
tables = {(i["table"]["family"], i["table"]["name"]) for i in items if "table" in i}
full = {(i["rule"]["family"], i["rule"]["table"]) for i in items if "rule" in i}
for family, name in sorted(tables - full):
    if f"{family} {name}" not in before:
        print(family, name)' ${1:+"$1"}
}

network_down() {
  local cmd table key value
  # The chains: the node's own, and kube-proxy's (KUBE-*), which are this node's alone:
  # network-up refuses to start beside any it did not make. The kubelet makes none
  # (makeIPTablesUtilChains: false).
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    for table in mangle nat filter raw; do
      "$cmd" -w 5 -t "$table" -S >/dev/null 2>&1 || continue
      remove_chains "$cmd" "$table" '^(KUBE-|MEMCACHED-NODE-)'
    done
  done
  ip route del "$NODE_SERVICE_CIDR" dev "$NODE_BRIDGE" 2>/dev/null || true
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
  # The tables the chains' commands made, now empty, unless they were there before.
  if [[ -f "$NODE_RECORD/tables" ]]; then
    empty_new_tables "$NODE_RECORD/tables" | while read -r family table; do
      nft delete table "$family" "$table"
    done
  fi
  if [[ -f "$NODE_RECORD/sysctls" ]]; then
    while read -r key value; do
      [[ ! -f "/proc/sys/$key" ]] || echo "$value" >"/proc/sys/$key"
    done <"$NODE_RECORD/sysctls"
  fi
  rm -rf "$NODE_RECORD"
  log "network down"
}
