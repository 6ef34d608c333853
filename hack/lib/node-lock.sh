# The machine's one real node: the lock a cluster with NODE=kubelet holds for its whole life,
# the record that names the holder, and the node's machine record of what it changed. Sourced,
# never run, by hack/control-plane.sh, hack/node.sh and hack/registry.sh (after
# hack/lib/node-network.sh). docs/local-cluster.md, "One node per machine", describes them.
#
# The node's bridge, its ports (the kubelet's 10250, kube-proxy's 10256 and 10249), containerd's
# shim socket directory, the node name and the node's cgroup root are the machine's, whatever
# checkout or state directory a cluster runs from. NODE_LOCK is flock(1)ed by the start script
# on descriptor 7 and inherited by the cluster's supervisor and daemons (hack/lib/daemons.sh,
# launch), so it is free only once every process of the node is gone; it is never deleted
# (a lock file that is deleted can be held twice). While held it holds KEY=VALUE lines: the
# holder's checkout, state directory, owner, supervisor, start time and status.
#
# NODE_RECORD: what the node's network-up changed on this machine, written before the change
# and removed by network-down once it is undone (hack/lib/node-firewall.sh), so that it
# survives a crash: the sysctls' values before the first node, the host directories the node
# made, the firewall tables that were there before. In /run: a reboot clears it together with
# what it describes.

NODE_MACHINE_DIR=/run/memcached-operator
NODE_LOCK=$NODE_MACHINE_DIR/node.lock
NODE_RECORD=$NODE_MACHINE_DIR/node

# node_lock_free: whether no process holds the node lock.
node_lock_free() { [[ ! -e "$NODE_LOCK" ]] || flock -n -s "$NODE_LOCK" true; }

# holder_value KEY: KEY's value in the holder's record (empty when there is none).
holder_value() { [[ -f "$NODE_LOCK" ]] && awk -F= -v k="$1" '$1 == k { print substr($0, length(k) + 2); exit }' "$NODE_LOCK"; }

# describe_holder: one paragraph naming the cluster the holder's record describes.
describe_holder() {
  local supervisor alive=""
  supervisor="$(holder_value supervisor)"
  if [[ -n "$supervisor" ]] &&
    ! tr '\0' ' ' 2>/dev/null <"/proc/$supervisor/cmdline" | grep -qF "supervise.py --state $(holder_value state) "; then
    alive=" (no longer running)"
  fi
  printf 'the cluster of checkout %s (state directory %s), started %s, owner %s, supervisor pid %s%s, status %s' \
    "$(holder_value checkout)" "$(holder_value state)" "$(holder_value started)" "$(holder_value owner)" \
    "${supervisor:-none yet}" "$alive" "$(holder_value status)"
}

# write_holder_record STATUS SUPERVISOR-PID: the record of the cluster this script starts, into
# the lock file it holds on descriptor 7 (in place: the file must stay the same inode).
write_holder_record() {
  local owner="${CONTROL_PLANE_OWNER:-}" command=""
  [[ -z "$owner" ]] || command="$(tr '\0' ' ' 2>/dev/null <"/proc/$owner/cmdline" | sed 's/ $//' | cut -c1-160)"
  {
    printf 'checkout=%s\nstate=%s\n' "$ROOT" "$STATE"
    if [[ -n "$owner" ]]; then
      printf 'owner=pid %s (%s)\n' "$owner" "$command"
    else
      printf 'owner=none (it runs until hack/control-plane.sh stop)\n'
    fi
    printf 'supervisor=%s\nstarted=%s\nstatus=%s\n' "$2" "${NODE_STARTED:=$(date -Is)}" "$1"
  } >"$NODE_LOCK"
}

# acquire_node_lock: takes the node lock on descriptor 7 or fails with a refusal that names
# the cluster holding it.
acquire_node_lock() {
  mkdir -p "$NODE_MACHINE_DIR"
  exec 7>>"$NODE_LOCK"
  if ! flock -n 7; then
    exec 7>&-
    die "this machine's real node is in use by $(describe_holder).
Only one cluster with NODE=kubelet runs on a machine at a time: its bridge $NODE_BRIDGE, the
kubelet's port 10250, kube-proxy's 10256 and 10249, containerd's shim sockets and the node name
$NODE_NAME are the machine's. Stop that cluster first (CONTROL_PLANE_DIR=$(holder_value state) $(holder_value checkout)/hack/control-plane.sh stop), or wait until it ends."
  fi
}

# release_node_lock: forgets the holder's record and closes descriptor 7 (the supervisor and
# the daemons hold their own copies until they end).
release_node_lock() {
  : >"$NODE_LOCK"
  exec 7>&-
}
