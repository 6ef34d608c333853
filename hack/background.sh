#!/usr/bin/env bash
# Runs a build in the background at idle priority while the end-to-end suites run, and waits
# for it where its output is needed: those suites mostly wait (on the kubelet, OLM, the
# control plane), and on two cores a build the later steps need can use what they leave idle
# instead of running after them.
#
# Usage: hack/background.sh start NAME COMMAND...   start COMMAND as job NAME
#        hack/background.sh wait NAME               wait for job NAME; fail as it failed, and
#                                                   print its log then (no job NAME: return)
#
# The job runs in a session of its own whose scheduling group has nice 19 (with autogroup
# scheduling a process's nice only ranks it within its session; sched(7), "The autogroup
# feature"), under nice 19 and the idle I/O class, so the tests' own processes, whatever
# session they run in, come first. Its log is target/background/NAME.log.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
DIR="$ROOT/target/background"

die() { printf 'background: error: %s\n' "$*" >&2; exit 1; }

# wait_for NAME: wait until job NAME has written its status; return it, with its log if not 0.
wait_for() {
  local name="$1" pid status waited=0
  [[ -f "$DIR/$name.pid" ]] || return 0
  pid="$(cat "$DIR/$name.pid")"
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
    echo "background: $name failed (exit $status); its log, $DIR/$name.log, ends with:" >&2
    tail -n 60 "$DIR/$name.log" >&2
    return 1
  fi
  echo "background: $name done (log: $DIR/$name.log)" >&2
}

case "${1:-}" in
  start)
    (($# >= 3)) || die "usage: $0 start NAME COMMAND..."
    name="$2"
    shift 2
    mkdir -p "$DIR"
    # A job of that name left running by an interrupted run is waited for, not doubled.
    wait_for "$name" || true
    rm -f "$DIR/$name.status"
    # setsid: a session, and so a scheduling group, of its own; its nice is the job's.
    # shellcheck disable=SC2016 # expanded by the job's shell, from its arguments
    setsid --wait bash -c '
      echo 19 >/proc/self/autogroup 2>/dev/null || true
      status=0
      nice -n 19 ionice -c 3 "${@:2}" || status=$?
      echo "$status" >"$1.status.tmp" && mv "$1.status.tmp" "$1.status"
    ' background "$DIR/$name" "$@" </dev/null >"$DIR/$name.log" 2>&1 &
    echo $! >"$DIR/$name.pid"
    echo "background: started $name: $* (log: $DIR/$name.log)" >&2
    ;;
  wait)
    (($# == 2)) || die "usage: $0 wait NAME"
    wait_for "$2"
    ;;
  *) die "usage: $0 start NAME COMMAND... | wait NAME" ;;
esac
