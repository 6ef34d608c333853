#!/usr/bin/env bash
# Runs a build in the background at idle priority while the end-to-end suites run, and waits
# for it where its output is needed: those suites mostly wait (on the kubelet, OLM, the
# control plane), and on two cores a build the later steps need can use what they leave idle
# instead of running after them.
#
# Usage: hack/background.sh start [--nice N] NAME COMMAND...
#                                     start COMMAND as job NAME, at nice N (default 19)
#        hack/background.sh wait [--log] NAME  wait for job NAME; fail as it failed, and print
#                                     the end of its log then (no job NAME: return at once);
#                                     with --log, print its whole log whatever the result (a
#                                     test suite run as a job: its report belongs in the output)
#        hack/background.sh stop NAME...  stop the jobs NAME that still run (their process
#                                     groups), as a failed run does before it ends
#        hack/background.sh raise PID     the job PID belongs to, if any, runs at the caller's
#                                     nice from now on (hack/tools.sh, waiting for a tool a
#                                     job is building)
#
# The job runs in a session of its own whose scheduling group has nice N (with autogroup
# scheduling a process's nice only ranks it within its session; sched(7), "The autogroup
# feature"), under nice N, and at nice 19 in the idle I/O class, so the tests' own processes,
# whatever session they run in, come first; a lower N ranks a job the next step waits for
# above one a later step waits for. Once a step waits for a job, or for a tool it is building,
# the job runs at the step's nice from then on (raise, below). Its log is
# target/background/NAME.log.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
DIR="$ROOT/target/background"

die() { printf 'background: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/cpu.sh
source "$ROOT/hack/lib/cpu.sh"

# cpu_of NAME: the CPU-seconds (user and system) job NAME's processes used, or nothing.
cpu_of() { times_seconds "$DIR/$1.cpu"; }

# raise NAME LEADER: job NAME, whose session LEADER leads, runs from now on at the caller's
# nice if that is lower (its scheduling group, its threads, and the best-effort I/O class):
# the caller waits for it, for its end or for a tool it is building, and a job left at nice 19
# would get almost nothing beside another program keeping the cores busy, so the run would
# wait on its lowest-ranked work (a priority inversion; the waiter lends its priority, as a
# lock's holder inherits its waiter's). The threads one by one, since a nice is a thread's on
# Linux (setpriority(2), "BUGS"); twice, for a process forked while the first pass ran.
# Lowering a nice needs CAP_SYS_NICE: without it the job keeps its rank, as said.
raise() {
  local name="$1" leader="$2" want group tids lwp ni
  want="$(nice)"
  group="$(cat "/proc/$leader/autogroup" 2>/dev/null)" || return 0
  [[ "${group##* }" =~ ^-?[0-9]+$ ]] && ((${group##* } > want)) || return 0
  echo "$want" >"/proc/$leader/autogroup" 2>/dev/null || true
  for _ in 1 2; do
    tids=()
    while read -r lwp ni; do
      [[ "$ni" =~ ^-?[0-9]+$ ]] && ((ni > want)) && tids+=("$lwp")
    done < <(ps -L -o lwp=,ni= --sid "$leader" 2>/dev/null)
    ((${#tids[@]})) || break
    if ! renice --priority "$want" --pid "${tids[@]}" >/dev/null 2>&1 && ((EUID != 0)); then
      echo "background: $name keeps its nice: lowering it needs CAP_SYS_NICE" >&2
      return 0
    fi
    ionice -c 2 -n 4 -p "${tids[@]}" 2>/dev/null || true
  done
  echo "background: $name now runs at nice $want, the nice of what waits for it" >&2
}

# wait_for NAME: wait until job NAME has written its status; return it, with its log if not 0.
wait_for() {
  local name="$1" pid status waited=0
  [[ -f "$DIR/$name.pid" ]] || return 0
  pid="$(cat "$DIR/$name.pid")"
  [[ -f "$DIR/$name.status" ]] || raise "$name" "$pid"
  until [[ -f "$DIR/$name.status" ]]; do
    if ! kill -0 "$pid" 2>/dev/null && [[ ! -f "$DIR/$name.status" ]]; then
      rm -f "$DIR/$name.pid"
      die "job $name (pid $pid) ended without a status: killed? Its log, $DIR/$name.log, ends with:
$(tail -n 40 "$DIR/$name.log" 2>/dev/null)"
    fi
    if ((waited % 60 == 0)); then
      echo "background: waiting for $name (log: $DIR/$name.log)" >&2
    fi
    sleep 1
    waited=$((waited + 1))
  done
  status="$(cat "$DIR/$name.status")"
  rm -f "$DIR/$name.pid" "$DIR/$name.status"
  if [[ "$status" != 0 ]]; then
    if ((${WHOLE_LOG:-0})); then
      echo "background: $name failed (exit $status), $(cpu_of "$name") CPU-seconds" >&2
    else
      echo "background: $name failed (exit $status), $(cpu_of "$name") CPU-seconds; its log, $DIR/$name.log, ends with:" >&2
      tail -n 60 "$DIR/$name.log" >&2
    fi
    return 1
  fi
  echo "background: $name done, $(cpu_of "$name") CPU-seconds (log: $DIR/$name.log)" >&2
}

case "${1:-}" in
  start)
    shift
    niceness=19
    if [[ "${1:-}" == --nice ]]; then
      [[ "${2:-}" =~ ^[0-9]+$ ]] && (($2 <= 19)) || die "--nice wants 0 to 19, not '${2:-}'"
      niceness="$2"
      shift 2
    fi
    (($# >= 2)) || die "usage: $0 start [--nice N] NAME COMMAND..."
    name="$1"
    shift
    mkdir -p "$DIR"
    # A job of that name left running by an interrupted run is waited for, not doubled.
    wait_for "$name" || true
    rm -f "$DIR/$name.status"
    # setsid: a session, and so a scheduling group, of its own; its nice is the job's.
    # shellcheck disable=SC2016 # expanded by the job's shell, from its arguments
    io_class=(-c 2 -n 7)
    ((niceness < 19)) || io_class=(-c 3)
    setsid --wait bash -c '
      echo "$2" >/proc/self/autogroup 2>/dev/null || true
      status=0
      nice -n "$2" ionice $3 "${@:4}" || status=$?
      # bash'"'"'s times: its own CPU time, then that of the processes it waited for.
      times >"$1.cpu"
      echo "$status" >"$1.status.tmp" && mv "$1.status.tmp" "$1.status"
    ' background "$DIR/$name" "$niceness" "${io_class[*]}" "$@" </dev/null >"$DIR/$name.log" 2>&1 &
    echo $! >"$DIR/$name.pid"
    echo "background: started $name at nice $niceness: $* (log: $DIR/$name.log)" >&2
    ;;
  wait)
    shift
    WHOLE_LOG=0
    if [[ "${1:-}" == --log ]]; then
      WHOLE_LOG=1
      shift
    fi
    (($# == 1)) || die "usage: $0 wait [--log] NAME"
    status=0
    started=0
    [[ ! -f "$DIR/$1.pid" ]] || started=1
    wait_for "$1" || status=$?
    # The log of a job this run started; an earlier run's is not this one's report.
    if ((WHOLE_LOG && started)); then
      echo "background: the log of $1 ($DIR/$1.log):" >&2
      cat "$DIR/$1.log"
    fi
    exit "$status"
    ;;
  stop)
    shift
    for name in "$@"; do
      [[ -f "$DIR/$name.pid" ]] || continue
      pid="$(cat "$DIR/$name.pid")"
      if kill -TERM -- "-$pid" 2>/dev/null; then
        echo "background: stopped $name (log: $DIR/$name.log)" >&2
      fi
      rm -f "$DIR/$name.pid" "$DIR/$name.status"
    done
    ;;
  raise)
    shift
    (($# == 1)) && [[ "$1" =~ ^[0-9]+$ ]] || die "usage: $0 raise PID"
    session="$(ps -o sid= -p "$1" 2>/dev/null | tr -d ' ')"
    [[ -n "$session" ]] || exit 0
    for pid_file in "$DIR"/*.pid; do
      [[ -f "$pid_file" && "$(cat "$pid_file")" == "$session" ]] || continue
      name="${pid_file##*/}"
      raise "${name%.pid}" "$session"
    done
    ;;
  *) die "usage: $0 start [--nice N] NAME COMMAND... | wait [--log] NAME | stop NAME... | raise PID" ;;
esac
