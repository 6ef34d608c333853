#!/usr/bin/env bash
# Runs a command while a competing CPU load keeps every core busy, to show that the test
# suites wait on events and not on the machine's speed: `make test-under-load` runs every
# suite this way.
#
# Usage: hack/under-load.sh COMMAND...
#
# The load is Debian's stress-ng (hack/tools.sh load): one CPU worker per core (nproc), at
# normal priority, in the caller's session, so that under autogroup scheduling it competes
# with the tests' processes as any busy program of the same user would (sched(7), "The
# autogroup feature"). It starts before COMMAND and stops after it, whatever COMMAND does
# (its exit, Ctrl-C, a failure). At the end it prints the load's own count of work done
# (stress-ng's bogo operations): a load that did nothing fails the run, as does COMMAND.
#
# Environment:
#   LOAD_WORKERS   CPU workers (default: nproc)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
log() { printf 'under-load: %s\n' "$*" >&2; }
die() { printf 'under-load: error: %s\n' "$*" >&2; exit 1; }

(($#)) || die "usage: $0 COMMAND..."
"$ROOT/hack/tools.sh" load
workers="${LOAD_WORKERS:-$(nproc)}"
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || die "LOAD_WORKERS=$workers: a positive number of workers"

report="$(mktemp -t under-load.XXXXXX.yaml)"
stress_log="$(mktemp -t under-load.XXXXXX.log)"
# --timeout 0: until stopped; the YAML report holds the bogo operations of each stressor.
stress-ng --cpu "$workers" --timeout 0 --metrics-brief --yaml "$report" >"$stress_log" 2>&1 &
stress_pid=$!
stop_load() {
  if kill -0 "$stress_pid" 2>/dev/null; then
    kill -INT "$stress_pid" 2>/dev/null || true
    wait "$stress_pid" 2>/dev/null || true
  fi
}
trap 'stop_load; rm -f "$report" "$stress_log"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sleep 1
kill -0 "$stress_pid" 2>/dev/null || die "stress-ng did not start: $(cat "$stress_log")"
log "stress-ng: $workers CPU workers at normal priority (pid $stress_pid); running: $*"
started=$SECONDS
status=0
"$@" || status=$?
stop_load
ops="$(awk '$1 == "bogo-ops:" { print $2; exit }' "$report")"
log "$* exited $status after $((SECONDS - started))s under the load; the load did ${ops:-no} bogo operations"
[[ -n "$ops" && "$ops" != 0 ]] || die "the load reported no work done: $(tail -n 5 "$stress_log")"
exit "$status"
