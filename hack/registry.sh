#!/usr/bin/env bash
# Runs this checkout's image registry: Debian's docker-registry (the CNCF distribution
# registry), which the local cluster's node pulls every image from through containerd's
# registry configuration (hack/node.sh), and hack/images.sh pushes to. Each checkout has its
# own, on a loopback address of its own (REGISTRY, hack/lib/node-network.sh: 127.77.X.Y:5000,
# derived from the checkout's path), with its own storage: two checkouts pushing the same tag
# never serve each other's image. It runs while something needs it: a node of this checkout
# (whose stop stops it), or a build or `make validate`'s pulls (which end with `release`).
#
# Usage: hack/registry.sh start     start it unless it runs; fail, naming it, if something
#                                   else answers on its address
#        hack/registry.sh stop      stop it
#        hack/registry.sh release   stop it unless this checkout's cluster holds the node
#        hack/registry.sh status    exit 0 when it answers
#        hack/registry.sh address   print its address
#
# Files: .tools/registry/checkout-KEY-by-host/ (the stored images, each mirrored host's under
# a path of its own, hack/lib/node-network.sh; kept across stops, so a warm start pushes
# nothing new; KEY from the checkout's path), .tools/registry-state/checkout-KEY/ (config,
# pid, log). The storage of the layout before, .tools/registry/checkout-KEY/, where every
# host's images were stored under one name, is removed at start.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"
# shellcheck source=hack/lib/node-lock.sh
source "$ROOT/hack/lib/node-lock.sh"
KEY="checkout-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
STORAGE="$ROOT/.tools/registry/$KEY-by-host"
OLD_STORAGE="$ROOT/.tools/registry/$KEY"
RUN="$ROOT/.tools/registry-state/$KEY"
LOGS="$RUN"
BIN=/usr/bin
COMPONENTS=(docker-registry)
DAEMON_MARK="registry=$ROOT"

log() { printf 'registry: %s\n' "$*" >&2; }
die() { printf 'registry: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"

answers() { curl -fsS -o /dev/null --max-time 2 "http://$REGISTRY/v2/" 2>/dev/null; }

start() {
  local pid
  if [[ -n "$(pid_of docker-registry)" ]]; then
    SECONDS=0
    DEADLINE=30
    TIMEOUT=30
    WAITING_ON=docker-registry wait_for "the registry on $REGISTRY" answers
    return 0
  fi
  local taken
  taken="$(ss -Hltnp "sport = :${REGISTRY##*:}" 2>/dev/null |
    tr -s " " | awk -v a="${REGISTRY%:*}" '$4 == a ":'"${REGISTRY##*:}"'" || $4 ~ /^(0\.0\.0\.0|\*|\[::\]):/')"
  [[ -z "$taken" ]] ||
    die "something that is not this checkout's registry listens on $REGISTRY ($taken): another checkout whose path hashes to the same address? Set REGISTRY_ADDRESS=127.77.X.Y:5000 to another address"
  "$ROOT/hack/tools.sh" images
  if [[ -d "$OLD_STORAGE" ]]; then
    log "removing $OLD_STORAGE (the layout before, with every host's images under one name)"
    rm -rf "$OLD_STORAGE"
  fi
  mkdir -p "$STORAGE" "$RUN"
  cat >"$RUN/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $STORAGE
  delete:
    enabled: true
http:
  addr: $REGISTRY
EOF
  launch docker-registry serve "$RUN/config.yml"
  SECONDS=0
  DEADLINE=30
  TIMEOUT=30
  WAITING_ON=docker-registry wait_for "the registry on $REGISTRY" answers
  log "serving $REGISTRY from $STORAGE"
}

stop() {
  if stop_component docker-registry; then report_stopped docker-registry; else report_stopped; fi
}

# release: stop, unless the node of a cluster of this checkout still pulls from it.
release() {
  if ! node_lock_free && [[ "$(holder_value checkout)" == "$ROOT" ]]; then
    log "kept: this checkout's cluster in $(holder_value state) has the node"
    return 0
  fi
  stop
}

case "${1:-}" in
  start) lock_state "$RUN/.lock" && start ;;
  stop) lock_state "$RUN/.lock" && stop ;;
  release) lock_state "$RUN/.lock" && release ;;
  status) answers ;;
  address) echo "$REGISTRY" ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|stop|release|status|address (try --help)" ;;
esac
exit
