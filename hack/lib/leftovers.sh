# What the local clusters that no longer run left on this machine, for `hack/node.sh
# leftovers` (which `make test` runs after every suite). Sourced by hack/node.sh, after
# hack/lib/node-network.sh, hack/lib/node-lock.sh and hack/lib/node-firewall.sh; never run.
#
# A cluster runs while its supervisor (hack/lib/supervise.py) runs and says `running`: what it
# holds is not a leftover, whichever checkout it belongs to (it is named on standard error).
# Anything else of a cluster is: its daemons (each carries MEMCACHED_OPERATOR_DAEMON in its
# environment, hack/lib/daemons.sh), an etcd directory no etcd uses, and, while no running
# cluster holds the machine's node, every trace of a node: its programs (marked or not),
# container processes and cgroups under the node's cgroup root, mounts, the bridge and its
# ports, the service route, KUBE-* and MEMCACHED-NODE-* chains, empty nftables tables, the
# node's socket directory, a node lock record or machine record that no stop cleared (with the
# sysctls and host directories it says the node changed), and what the kubelet and CNI leave
# in /var/lib. A running registry of this checkout is one when no cluster of this checkout has
# a node.

# supervisors: "PID STATE-DIRECTORY STATUS" for every cluster supervisor on this machine.
supervisors() {
  local pid args state
  for pid in $(pgrep -f 'hack/lib/supervise.py --state ' || true); do
    args="$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline")" || continue
    state="$(awk 'prev == "--state" { print; exit } { prev = $0 }' <<<"$args")"
    [[ -n "$state" ]] || continue
    printf '%s %s %s\n' "$pid" "$state" "$(cat "$state/run/supervisor.status" 2>/dev/null || echo starting)"
  done
}

# wait_for_stops: waits (up to LEFTOVERS_WAIT seconds, default 300) while a cluster is being
# started or stopped: a supervisor stopping its cluster, or a hack/control-plane.sh start or
# stop at work (a start that fails stops what it started).
wait_for_stops() {
  local limit="${LEFTOVERS_WAIT:-300}" said=0
  SECONDS=0
  while ((SECONDS < limit)); do
    if ! supervisors | awk '$3 != "running" { found = 1 } END { exit !found }' &&
      ! pgrep -f 'hack/control-plane.sh (start|stop)' >/dev/null; then
      return 0
    fi
    ((said)) || log "waiting for the clusters being started or stopped on this machine (at most ${limit}s)"
    said=1
    sleep 1
  done
  log "still starting or stopping after ${limit}s: judging what is there now"
}

# daemon_mark PID: the MEMCACHED_OPERATOR_DAEMON of process PID (cluster=DIR, registry=DIR).
daemon_mark() { tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | sed -n 's/^MEMCACHED_OPERATOR_DAEMON=//p'; }

# node_traces: every trace of a node on this machine, one line each.
node_traces() {
  local dir cmd
  for dir in $(cgroup_roots); do
    [[ ! -d "$dir" ]] || echo "cgroup: $dir"
  done
  for dir in $(cgroup_roots); do
    [[ ! -d "$dir" ]] || find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -un | while read -r pid; do
    echo "process in the node's cgroups: $pid ($(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-80))"
  done
  awk -v s="$NODE_SOCKETS/" '$5 ~ /\/kubelet-node(\/|$)/ || index($5, s) == 1 { print "mount: " $5 }' /proc/self/mountinfo
  ip -o link show "$NODE_BRIDGE" 2>/dev/null | awk '{ print "interface: " $2 }'
  ip -o link show master "$NODE_BRIDGE" 2>/dev/null | awk '{ print "interface: " $2 }'
  ip route show "$NODE_SERVICE_CIDR" 2>/dev/null | sed 's/^/route: /'
  for cmd in iptables ip6tables; do
    command -v "$cmd-save" >/dev/null || continue
    "$cmd-save" 2>/dev/null | awk -v c="$cmd" '/^\*/ { t = substr($1, 2) } /^:(KUBE-|MEMCACHED-NODE-)/ { print c " chain: " t " " substr($1, 2) }'
  done
  # Tables with no rule at all are what iptables' nftables backend leaves once its chains are
  # gone.
  command -v nft >/dev/null && empty_new_tables | sed 's/^/empty nftables table: /'
  [[ ! -e "$NODE_SOCKETS" ]] || echo "directory: $NODE_SOCKETS"
  [[ ! -e /var/lib/kubelet/device-plugins/kubelet.sock ]] || echo "socket: /var/lib/kubelet/device-plugins/kubelet.sock"
  compgen -G '/var/lib/cni/results/memcached-node-*' | sed 's/^/file: /' || true
  if [[ -s "$NODE_LOCK" ]]; then
    echo "node lock record of a cluster that never finished stopping: $(describe_holder)"
  fi
  if [[ -d "$NODE_RECORD" ]]; then
    echo "node machine record of a node that was never taken down: $NODE_RECORD"
    local key value
    while read -r key value; do
      [[ -f "/proc/sys/$key" && "$(<"/proc/sys/$key")" != "$value" ]] &&
        echo "sysctl: ${key//\//.} is $(<"/proc/sys/$key"), was $value before the node"
    done <"$NODE_RECORD/sysctls" 2>/dev/null || true
    while read -r dir; do
      [[ ! -e "$dir" ]] || echo "directory the node made: $dir"
    done <"$NODE_RECORD/made-dirs" 2>/dev/null || true
  fi
}

leftovers() {
  local live=() pid state status mark exe name node_live=0 dir
  while read -r pid state status; do
    [[ "$status" == running ]] || continue
    live+=("$state")
    log "running (not a leftover): the cluster in $state (supervisor pid $pid)"
  done < <(supervisors)
  is_live() { [[ " ${live[*]} " == *" $1 "* ]]; }
  if ! node_lock_free && is_live "$(holder_value state)"; then
    node_live=1
    log "the machine's node belongs to $(describe_holder)"
  fi

  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || continue
    mark="$(daemon_mark "$pid")"
    exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || continue
    case "$mark" in
      cluster=*) is_live "${mark#cluster=}" || echo "process $pid ($exe) of the cluster in ${mark#cluster=}, which no longer runs" ;;
      registry=*)
        # A registry serves a node; this checkout's registry with none is left over.
        [[ "${mark#registry=}" == "$ROOT" ]] || continue
        ((node_live)) && [[ "$(holder_value checkout)" == "$ROOT" ]] ||
          echo "process $pid ($exe): this checkout's registry, and no cluster of it has a node"
        ;;
      *)
        # Unmarked: a node's program of this checkout's tools, while no cluster has the node.
        ((node_live)) && continue
        for name in kubelet kube-proxy containerd containerd-shim-runc-v2; do
          [[ "$exe" != "$(readlink -f "$BIN/$name")" ]] || echo "process $pid: $exe"
        done
        ;;
    esac
  done
  ((node_live)) || node_traces
  # etcd's directories that no running etcd uses.
  local in_use
  in_use="$(for pid in $(pgrep -x etcd || true); do tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline"; echo; done)"
  for dir in /tmp/memcached-operator-etcd.*; do
    [[ -d "$dir" && "$in_use" != *"--data-dir=$dir"* ]] || continue
    echo "etcd's directory of a cluster that no longer runs: $dir"
  done
}
