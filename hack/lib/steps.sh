# Waits, step by step, for what a start script of hack/ brings about, and says when each step
# was done. Sourced after hack/lib/daemons.sh (wait_for) by a script that defines kubectl and
# log, never run.

T0=$EPOCHREALTIME
# since: seconds since the sourcing script started, one decimal.
since() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# step WHAT COMMAND...: waits (wait_for) until COMMAND succeeds; says when it is done, or
# what the last check said when it gives up.
step() {
  local what="$1" last
  shift
  log "waiting for $what"
  if ! wait_for "$what" "$@"; then
    last="$("$@" 2>&1 || true)"
    log "last check said: ${last:-<nothing>}"
    return 1
  fi
  log "$what: done at $(since)s"
}

# jsonpath_is EXPECTED KUBECTL-GET-ARGS...: whether `kubectl get ARGS` prints EXPECTED.
jsonpath_is() {
  local want="$1" got
  shift
  got="$(kubectl get "$@" 2>&1)" || true
  echo "got: ${got:-<nothing>}"
  [[ "$got" == "$want" ]]
}
