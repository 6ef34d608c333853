#!/usr/bin/env bash
# Runs `operator-sdk scorecard` on the shipped bundle (bundle/, with every test of its
# bundle/tests/scorecard/config.yaml) against a cluster: `make scorecard`.
#
# With KUBECONFIG set: that cluster, in SCORECARD_NAMESPACE. scorecard's own helper images
# (pinned by digest in operator-sdk) are used unless STORAGE_IMAGE or UNTAR_IMAGE name others,
# as a disconnected cluster needs.
# Without KUBECONFIG: the local cluster with a real node (NODE=kubelet hack/control-plane.sh,
# started unless it runs), with the images built here: scorecard-test from the pinned
# operator-sdk, and the busybox stand-in as the storage and untar images.
#
# Environment:
#   KUBECONFIG            the cluster (default: the local one)
#   SCORECARD_NAMESPACE   where the test pods run (default: scorecard, created if missing)
#   SCORECARD_WAIT        how long scorecard waits for the tests (default: 300s)
#   STORAGE_IMAGE, UNTAR_IMAGE   scorecard's helper images
#   OUTPUT                text or json (default: text)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="$ROOT/.tools/bin"
NAMESPACE="${SCORECARD_NAMESPACE:-scorecard}"

log() { printf 'scorecard: %s\n' "$*" >&2; }
die() { printf 'scorecard: error: %s\n' "$*" >&2; exit 1; }

"$ROOT/hack/tools.sh" operator-sdk kube
if [[ -z "${KUBECONFIG:-}" ]]; then
  eval "$(NODE=kubelet "$ROOT/hack/control-plane.sh" start)"
  "$ROOT/hack/images.sh" build scorecard-test busybox
  STORAGE_IMAGE="${STORAGE_IMAGE:-$("$ROOT/hack/images.sh" reference busybox)}"
  UNTAR_IMAGE="${UNTAR_IMAGE:-$("$ROOT/hack/images.sh" reference busybox)}"
fi
[[ -f "$KUBECONFIG" ]] || die "KUBECONFIG=$KUBECONFIG is no file"

"$BIN/kubectl" --kubeconfig "$KUBECONFIG" create namespace "$NAMESPACE" --dry-run=client -o yaml |
  "$BIN/kubectl" --kubeconfig "$KUBECONFIG" apply -f - >/dev/null
args=(--kubeconfig "$KUBECONFIG" --namespace "$NAMESPACE" --wait-time "${SCORECARD_WAIT:-300s}"
  --output "${OUTPUT:-text}")
[[ -z "${STORAGE_IMAGE:-}" ]] || args+=(--storage-image "$STORAGE_IMAGE")
[[ -z "${UNTAR_IMAGE:-}" ]] || args+=(--untar-image "$UNTAR_IMAGE")
log "operator-sdk scorecard bundle ${args[*]}"
cd "$ROOT"
exec "$BIN/operator-sdk" scorecard bundle "${args[@]}"
