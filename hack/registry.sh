#!/usr/bin/env bash
# Runs the local image registry on 127.0.0.1:5000: Debian's docker-registry (the CNCF
# distribution registry), which the local cluster's node pulls every image from through
# containerd's registry mirrors (hack/node.sh), and hack/images.sh pushes to. One per machine:
# its port is fixed, since the mirror configuration and the images' references name it.
#
# Usage: hack/registry.sh start    start it unless a registry already answers on the port
#        hack/registry.sh stop     stop the registry this checkout started
#        hack/registry.sh status   exit 0 when a registry answers on the port
#
# Files: .tools/registry/ (the stored images, kept across stops, so a warm start pulls and
# pushes nothing new), .tools/registry-state/ (config, pid, log).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"
STORAGE="$ROOT/.tools/registry"
RUN="$ROOT/.tools/registry-state"
LOGS="$RUN"
BIN=/usr/bin
COMPONENTS=(docker-registry)

log() { printf 'registry: %s\n' "$*" >&2; }
die() { printf 'registry: error: %s\n' "$*" >&2; exit 1; }

# shellcheck source=hack/lib/daemons.sh
source "$ROOT/hack/lib/daemons.sh"

answers() { curl -fsS -o /dev/null --max-time 2 "http://$REGISTRY/v2/" 2>/dev/null; }

start() {
  if answers; then
    log "a registry answers on $REGISTRY"
    return 0
  fi
  "$ROOT/hack/tools.sh" images
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

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) answers ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 start|stop|status (try --help)" ;;
esac
exit
