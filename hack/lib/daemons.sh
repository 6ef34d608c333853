# Starts, recognises, waits for and stops the background processes of hack/control-plane.sh
# and hack/olm.sh. Sourced, never run.
#
# A daemon is a program from .tools/bin run in a session of its own, with its pid in
# RUN/NAME.pid and its output in LOGS/NAME.log. A pid file is trusted only while its process
# still runs that program, so a recycled pid is never signalled, and stopping a daemon stops
# its whole process group and nothing else.
#
# The sourcing script sets BIN, RUN, LOGS, COMPONENTS (its daemons, in start order) and
# DAEMON_MARK (whose they are: cluster=STATE-DIRECTORY or registry=CHECKOUT, which every
# daemon carries in its environment as MEMCACHED_OPERATOR_DAEMON, so that a leftover check
# finds them and who they belonged to) and defines log; wait_for also reads DEADLINE and
# TIMEOUT, and WAITING_ON when it is set. A script whose daemons are part of the real node
# sets DAEMON_HOLDS_NODE=1: they then inherit the node lock (descriptor 7,
# hack/lib/node-lock.sh), which stays held until the last of them ends.

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

# pid_of NAME: the pid of the running daemon NAME started by the sourcing script, or nothing.
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

# tcp_listeners PID: the addresses (ADDRESS:PORT) process PID listens on for TCP, one a line,
# as the kernel reports them: how a daemon told to bind port 0 is found.
tcp_listeners() { ss -Hltnp 2>/dev/null | awk -v p="pid=$1," 'index($0, p) { print $4 }'; }

# launch NAME ARGS...: runs .tools/bin/NAME in a session (and process group) of its own,
# detached from the caller's terminal and pipes, and records its pid. The environment is the
# caller's: `VAR=value launch ...` passes VAR to the daemon.
launch() {
  local name="$1"
  shift
  : "${DAEMON_MARK:?the sourcing script sets DAEMON_MARK}"
  # 8>&- 9>&-: the daemon must not hold the scripts' state locks; 7, the node lock, only when
  # it is a part of the node.
  if [[ "${DAEMON_HOLDS_NODE:-0}" == 1 ]]; then
    MEMCACHED_OPERATOR_DAEMON="$DAEMON_MARK" setsid "$BIN/$name" "$@" </dev/null >"$LOGS/$name.log" 2>&1 8>&- 9>&- &
  else
    MEMCACHED_OPERATOR_DAEMON="$DAEMON_MARK" setsid "$BIN/$name" "$@" </dev/null >"$LOGS/$name.log" 2>&1 7>&- 8>&- 9>&- &
  fi
  local pid=$! i
  echo "$pid" >"$RUN/$name.pid"
  # $! is the shell forked to run it until that shell has exec'd the program (pid_of would say
  # it is not running): wait for the exec, or for the end of a daemon that failed at once.
  for ((i = 0; i < 600; i++)); do
    runs_binary "$pid" "$BIN/$name" && return 0
    [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null || echo gone)" != @(Z|gone) ]] || return 0
    sleep 0.05
  done
}

# check_alive: fails, naming the daemon and showing its log, if one that was started has died.
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

# wait_for WHAT COMMAND...: polls COMMAND until it succeeds, a daemon dies, or the start
# deadline (DEADLINE, in bash SECONDS) passes; then shows the log of WAITING_ON.
wait_for() {
  local what="$1"
  shift
  until "$@" >/dev/null 2>&1; do
    check_alive || return 1
    if ((SECONDS >= DEADLINE)); then
      log "timed out after ${TIMEOUT}s waiting for $what"
      [[ -z "${WAITING_ON:-}" ]] || tail_log "$WAITING_ON"
      return 1
    fi
    sleep 0.2
  done
}

# stop_component NAME [SECONDS]: TERM its process group, wait up to SECONDS (default 15),
# then KILL. Fails when NAME was not running.
stop_component() {
  local name="$1" grace="${2:-15}" pid i
  pid="$(pid_of "$name")"
  rm -f "$RUN/$name.pid"
  [[ -n "$pid" ]] || return 1
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
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

# restart_component NAME: stops daemon NAME (as stop_component does) and starts the same
# program again with the same arguments, environment and working directory, as a service
# manager restarts a crashed or upgraded daemon: its state on disk (etcd's data, containerd's
# and the kubelet's directories) is kept. The new process does not hold the node lock (only a
# start takes it); the supervisor and the other daemons still do.
restart_component() {
  local name="$1" pid cwd i
  local -a args envs
  pid="$(pid_of "$name")"
  [[ -n "$pid" ]] || die "$name is not running: nothing to restart"
  mapfile -d '' args <"/proc/$pid/cmdline"
  mapfile -d '' envs <"/proc/$pid/environ"
  cwd="$(readlink "/proc/$pid/cwd")"
  stop_component "$name"
  (cd "$cwd" && exec setsid env -i "${envs[@]}" "$BIN/$name" "${args[@]:1}" </dev/null >>"$LOGS/$name.log" 2>&1 7>&- 8>&- 9>&-) &
  pid=$!
  echo "$pid" >"$RUN/$name.pid"
  for ((i = 0; i < 600; i++)); do
    runs_binary "$pid" "$BIN/$name" && { log "restarted $name (pid $pid)"; return 0; }
    [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null || echo gone)" != @(Z|gone) ]] || break
    sleep 0.05
  done
  tail_log "$name"
  die "$name did not start again"
}

# lock_state FILE: holds an exclusive lock on FILE (on descriptor 8) until the script exits,
# waiting for whoever holds it.
lock_state() {
  mkdir -p "$(dirname -- "$1")"
  exec 8>"$1"
  if ! flock -n 8; then
    log "waiting for another ${0##*/} start/stop to finish..."
    flock 8
  fi
}

# print_processes WIDTH NAME...: one line per component, running (with its pid) or not;
# returns 1 when any is not running.
print_processes() {
  local width="$1" name pid all=0
  shift
  for name in "$@"; do
    pid="$(pid_of "$name")"
    if [[ -n "$pid" ]]; then
      printf "%-${width}s running (pid %s)\n" "$name" "$pid"
    else
      printf "%-${width}s not running\n" "$name"
      all=1
    fi
  done
  return "$all"
}

# report_stopped NAME...: logs which components a stop stopped, or that nothing ran.
report_stopped() {
  if (($#)); then
    log "stopped $*"
  else
    log "not running"
  fi
}
