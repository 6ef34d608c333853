#!/usr/bin/env bash
# Runs `operator-sdk scorecard` on the shipped bundle (bundle/, with every test of its
# bundle/tests/scorecard/config.yaml) against a cluster: `make scorecard`.
#
# On the local cluster with a real node: the images built here, pushed to the local
# registry (hack/images.sh): scorecard-test rebuilt from the pinned operator-sdk, named in a
# copy of the configuration that differs from the shipped one in that image alone, and the
# busybox stand-in as the storage and untar images. That cluster is the one KUBECONFIG names
# when its API server is the one of the cluster of this checkout that holds the machine's
# node (whatever the kubeconfig file is called: .local/kubeconfig, a test's own), or, without
# KUBECONFIG, the local cluster (NODE=kubelet hack/control-plane.sh, started unless it runs).
# Any other cluster KUBECONFIG names: in SCORECARD_NAMESPACE, with the shipped configuration
# and scorecard's own helper images (pinned by digest in operator-sdk) unless STORAGE_IMAGE or
# UNTAR_IMAGE name others, as a disconnected cluster needs.
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
CONFIG="$ROOT/bundle/tests/scorecard/config.yaml"
# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"
# shellcheck source=hack/lib/node-lock.sh
source "$ROOT/hack/lib/node-lock.sh"

log() { printf 'scorecard: %s\n' "$*" >&2; }
die() { printf 'scorecard: error: %s\n' "$*" >&2; exit 1; }

# server_of KUBECONFIG-FILE: the API server its current context names.
server_of() {
  "$BIN/kubectl" --kubeconfig "$1" config view --minify -o 'jsonpath={.clusters[0].cluster.server}' 2>/dev/null
}

# local_cluster FILE: whether FILE names the API server of this checkout's cluster that holds
# the real node (whose node pulls from this checkout's registry).
local_cluster() {
  local state server
  ! node_lock_free && [[ "$(holder_value checkout)" == "$ROOT" ]] || return 1
  state="$(holder_value state)"
  server="$(server_of "$1")"
  [[ -f "$state/kubeconfig" && -n "$server" && "$server" == "$(server_of "$state/kubeconfig")" ]]
}

"$ROOT/hack/tools.sh" operator-sdk kube
if [[ -z "${KUBECONFIG:-}" ]]; then
  eval "$(NODE=kubelet "$ROOT/hack/control-plane.sh" start)"
fi
[[ -f "$KUBECONFIG" ]] || die "KUBECONFIG=$KUBECONFIG is no file"
if local_cluster "$KUBECONFIG"; then
  log "KUBECONFIG names this checkout's local cluster ($(server_of "$KUBECONFIG")): the images built here"
  "$ROOT/hack/images.sh" build scorecard-test busybox
  STORAGE_IMAGE="${STORAGE_IMAGE:-$("$ROOT/hack/images.sh" reference busybox)}"
  UNTAR_IMAGE="${UNTAR_IMAGE:-$("$ROOT/hack/images.sh" reference busybox)}"
  local_config="$(mktemp --suffix .scorecard-config.yaml)"
  trap 'rm -f "$local_config"' EXIT
  shipped="$(awk '$1 == "image:" && /scorecard-test/ { print $2; exit }' "$CONFIG")"
  [[ -n "$shipped" ]] || die "$CONFIG names no scorecard-test image"
  rebuilt="$("$ROOT/hack/images.sh" reference scorecard-test)"
  sed "s|image: $shipped\$|image: $rebuilt|" "$CONFIG" >"$local_config"
  [[ "$(grep -c "image: $rebuilt\$" "$local_config")" == "$(grep -c "image: $shipped\$" "$CONFIG")" ]] ||
    die "the copy of $CONFIG does not name $rebuilt wherever it named $shipped"
  CONFIG="$local_config"
fi

"$BIN/kubectl" --kubeconfig "$KUBECONFIG" create namespace "$NAMESPACE" --dry-run=client -o yaml |
  "$BIN/kubectl" --kubeconfig "$KUBECONFIG" apply -f - >/dev/null
args=(--kubeconfig "$KUBECONFIG" --namespace "$NAMESPACE" --wait-time "${SCORECARD_WAIT:-300s}"
  --output "${OUTPUT:-text}" --config "$CONFIG")
[[ -z "${STORAGE_IMAGE:-}" ]] || args+=(--storage-image "$STORAGE_IMAGE")
[[ -z "${UNTAR_IMAGE:-}" ]] || args+=(--untar-image "$UNTAR_IMAGE")
log "operator-sdk scorecard bundle ${args[*]}"
cd "$ROOT"
"$BIN/operator-sdk" scorecard bundle "${args[@]}"
