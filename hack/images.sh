#!/usr/bin/env bash
# Builds the images the local cluster's node runs, with buildah, from the shipped Dockerfiles
# and from hack/images/NAME/Dockerfile, and pushes them to this checkout's registry
# (hack/registry.sh), which containerd pulls every registry's images from (quay.io,
# docker.io, registry.k8s.io, registry.access.redhat.com, and registry.invalid, the host of
# everything built here that is not the project's own: the stand-ins and the rebuilds), each
# host's under a path of its own. docs/local-cluster.md, "Images", lists them.
#
# Usage: hack/images.sh build [NAME...]   build and push NAMEs (default: all), skipping an
#                                        image whose inputs did not change since it was pushed
#        hack/images.sh list             print "NAME REFERENCE" for every image
#        hack/images.sh reference NAME   print NAME's reference (what a pod spec names)
#        hack/images.sh digest NAME      print the digest the registry gives NAME's reference
#                                        (its manifest's, an index's; the registry must run)
#        hack/images.sh pinned NAME      print NAME by digest: REPOSITORY@sha256:...
#        hack/images.sh catalogue        print every repository the local registry stores, a
#                                        line each (its /v2/_catalog; the registry must run)
#        hack/images.sh operator-binary  build only the operator's release binary
#        hack/images.sh env              print `export` lines under which podman pulls these
#                                        images as the node does (the mirror), into a storage
#                                        of its own; `make validate` inspects them so
#
# What is built here and what it stands in for:
#   operator   Dockerfile, unchanged, with BASE_IMAGE = ubi-micro (below) and the release
#              binary for x86_64-unknown-linux-musl (jemalloc), built first
#   bundle     bundle.Dockerfile, unchanged, in RELEASE_DIR
#   catalog    catalog.Dockerfile, unchanged, in RELEASE_DIR, with its build argument OPM_IMAGE
#              (default: the release's quay.io/operator-framework/opm) the opm rebuild below, as
#              a user builds on a mirrored base
#   opm        REBUILD of the release's quay.io/operator-framework/opm: opm (.tools/bin/opm,
#              built from the pin) and grpc_health_probe, under rebuilt/
#   olm        REBUILD of the release's quay.io/operator-framework/olm: OLM's olm, catalog, cpb
#              and copy-content (.tools/bin, built from the pin) with busybox's cp at /bin/cp,
#              as the release's image (on distroless static:debug) lays them out, under
#              rebuilt/; hack/olm.sh installs OLM with it as every image of OLM's chart
#   ubi-micro  STAND-IN for Red Hat's UBI 9 micro (not pullable here): an empty root with
#              /etc/passwd, /etc/group and /tmp, under stand-in/
#   memcached  STAND-IN for the CSV's default operand (memcached:1.6.39-alpine): Debian's
#              memcached package as installed on this machine, with the libraries it links,
#              and busybox's shell, kill and sleep (as Alpine's busybox gives the original),
#              under stand-in/; never pushed under the default's name
#   memcached-exporter  REBUILD of quay.io/prometheus/memcached-exporter, the operator's default
#              exporter: memcached_exporter (.tools/bin, built from the pin), the metrics sidecar
#              of memcached pods, on an empty root rather than Prometheus's busybox, under
#              rebuilt/; every install here names it through RELATED_IMAGE_MEMCACHED_EXPORTER
#   pause      STAND-IN for the pod sandbox image: Debian's static catatonit in pause mode
#   coredns    CoreDNS built from the pin (hack/coredns), the cluster DNS
#   busybox    STAND-IN for a small image with a shell: Debian's busybox-static, for the node's
#              tests (clients of memcached, the runtime's controls) and as scorecard's storage
#              and untar images (operator-sdk scorecard --storage-image, --untar-image)
#   scorecard-test  REBUILD of quay.io/operator-framework/scorecard-test: operator-sdk's
#              scorecard-test (.tools/bin, built from the pin) where the release's image has it,
#              under rebuilt/; hack/scorecard.sh runs the shipped configuration with it on the
#              local cluster
#   prometheus REBUILD of quay.io/prometheus/prometheus: Prometheus (.tools/bin, built from the
#              promtool pin, with Kubernetes' discovery only) on an empty root with the
#              release's /prometheus, under rebuilt/, tagged with Prometheus's own version;
#              the node's monitoring scenario runs it through the Prometheus Operator
#   prometheus-operator  REBUILD of quay.io/prometheus-operator/prometheus-operator: the
#              Prometheus Operator (.tools/bin, built from the pin) as /bin/operator on an
#              empty root, under rebuilt/, for the same scenario
#   prometheus-config-reloader  REBUILD of quay.io/prometheus-operator/prometheus-config-reloader:
#              the reloader the Prometheus Operator gives a Prometheus (.tools/bin, built from
#              the same pin) on an empty root, under rebuilt/
#
# Environment:
#   VERSION      the operator's version, which the operator's, bundle's and catalog's tags name
#                (default: Cargo.toml's)
#   RELEASE_DIR  where bundle/, catalog/, bundle.Dockerfile and catalog.Dockerfile are, as
#                `memcached-packager generate` writes them (default: the repository's own):
#                another release's, or a test's catalog
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=hack/lib/node-network.sh
source "$ROOT/hack/lib/node-network.sh"
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"
# This checkout's own: its build contexts, its stamps (what its registry holds), its buildah
# and podman storage, so that two checkouts never build into, prune or tag each other's.
WORK="$TOOLS/images/checkout-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
STAMPS="$WORK/stamps"
VERSION="${VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)}"
RELEASE_DIR="$(cd -- "${RELEASE_DIR:-$ROOT}" && pwd -P)"
MUSL_TARGET=x86_64-unknown-linux-musl
# How build_image pushes an image; in its stamps, so that a change rebuilds.
PUSHED_AS="oci index, linux/amd64"
OPERATOR_BINARY="$ROOT/target/$MUSL_TARGET/release/memcached-operator"
ALL_IMAGES=(ubi-micro operator bundle opm catalog olm memcached memcached-exporter pause coredns busybox scorecard-test
  prometheus prometheus-operator prometheus-config-reloader)

log() { printf 'images: %s\n' "$*" >&2; }
die() { printf 'images: error: %s\n' "$*" >&2; exit 1; }

# versions of what the images hold.
tool_version() { "$ROOT/hack/tools.sh" --print-versions | awk -v t="$1" '$1 == t { print $2 }'; }
debian_version() { dpkg-query -W -f '${Version}' "$1" | sed -e 's/^[0-9]*://' -e 's/[-+~].*//'; }

# reference NAME: the image's name as pods and the installs here spell it. The project's own
# images have their release names; whatever else is built here is under REGISTRY_NAME, which
# only the local registry serves: stand-in/ for a stand-in for another image, rebuilt/ for an
# upstream program rebuilt here from its pinned source (never under upstream's name, since
# its base, Go version, build stamps and digest differ), node/ for the node's own.
reference() {
  case "$1" in
    operator) echo "quay.io/f2367556/memcached-operator:v$VERSION" ;;
    bundle) echo "quay.io/f2367556/memcached-operator-bundle:v$VERSION" ;;
    catalog) echo "quay.io/f2367556/memcached-operator-catalog:v$VERSION" ;;
    opm) echo "$REGISTRY_NAME/rebuilt/opm:$(tool_version opm)" ;;
    olm) echo "$REGISTRY_NAME/rebuilt/olm:$(tool_version olm)" ;;
    ubi-micro) echo "$REGISTRY_NAME/stand-in/ubi-micro:9.6" ;;
    memcached) echo "$REGISTRY_NAME/stand-in/memcached-debian:$(debian_version memcached)" ;;
    memcached-exporter) echo "$REGISTRY_NAME/rebuilt/memcached-exporter:$(tool_version memcached-exporter)" ;;
    pause) echo "$REGISTRY_NAME/stand-in/pause-catatonit:$(debian_version catatonit)" ;;
    coredns) echo "$REGISTRY_NAME/node/coredns:$(tool_version coredns)" ;;
    busybox) echo "$REGISTRY_NAME/stand-in/busybox-static:$(debian_version busybox-static)" ;;
    scorecard-test) echo "$REGISTRY_NAME/rebuilt/scorecard-test:$(tool_version operator-sdk)" ;;
    # The module's v0.3MM.P is Prometheus 3.MM.P.
    prometheus) echo "$REGISTRY_NAME/rebuilt/prometheus:v3.$(tool_version promtool | sed 's/^v0\.3//')" ;;
    prometheus-operator) echo "$REGISTRY_NAME/rebuilt/prometheus-operator:$(tool_version prometheus-operator)" ;;
    prometheus-config-reloader)
      echo "$REGISTRY_NAME/rebuilt/prometheus-config-reloader:$(tool_version prometheus-operator)"
      ;;
    *) die "unknown image '$1' (known: ${ALL_IMAGES[*]})" ;;
  esac
}

# in_registry REFERENCE: where REFERENCE is stored in REGISTRY: under its host's path
# (registry_path), where the node's mirror looks for it.
in_registry() {
  local ref="$1" host
  host="${ref%%/*}"
  [[ " ${MIRRORED_REGISTRIES[*]} " == *" $host "* ]] ||
    die "$ref: its host $host is none the local registry mirrors (${MIRRORED_REGISTRIES[*]})"
  echo "$REGISTRY/$(registry_path "$host")/${ref#*/}"
}

# present REFERENCE: whether the registry holds REFERENCE's manifest.
present() {
  local at="${1#"$REGISTRY"/}" name tag
  name="${at%:*}"
  tag="${at##*:}"
  curl -fsS -o /dev/null --max-time 5 -I \
    -H 'Accept: application/vnd.oci.image.index.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.list.v2+json' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$REGISTRY/v2/$name/manifests/$tag"
}

buildah_() {
  buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs "$@"
}

# registries.conf for buildah: every mirrored host resolves to the local registry, with no
# fallback, as containerd's hosts.toml does on the node.
write_registries_conf() {
  local host
  mkdir -p "$WORK"
  {
    echo 'unqualified-search-registries = []'
    for host in "${MIRRORED_REGISTRIES[@]}"; do
      printf '[[registry]]\nprefix = "%s"\nlocation = "%s/%s"\ninsecure = true\n' "$host" "$REGISTRY" "$(registry_path "$host")"
    done
    printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REGISTRY"
  } >"$WORK/registries.conf"
  printf '[storage]\ndriver = "vfs"\ngraphroot = "%s"\nrunroot = "%s"\n' \
    "$WORK/podman/storage" "$WORK/podman/run" >"$WORK/podman-storage.conf"
}

# print_env: the variables under which podman (and skopeo) pull as the node does, through the
# mirror, into a storage of their own under .tools/images.
print_env() {
  write_registries_conf
  printf 'export CONTAINERS_REGISTRIES_CONF=%q\nexport CONTAINERS_STORAGE_CONF=%q\n' \
    "$WORK/registries.conf" "$WORK/podman-storage.conf"
}

# digest_of FILE...: one digest of the files' contents and names, below the release's
# directory.
digest_of() { (cd "$RELEASE_DIR" && find "$@" -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32); }

# stamp_at LOCATION: where the inputs that built the image stored at LOCATION (in_registry)
# are recorded; one a reference, so two releases' images do not rebuild each other.
stamp_at() { echo "$STAMPS/${1//[\/:]/_}"; }

# build_image NAME DOCKERFILE CONTEXT INPUT-DIGEST [BUILD-ARG...]: buildah bud, then push,
# unless the registry holds the image and its stamp says the same inputs built it. The image
# goes out as an index (a manifest list) of its one platform, linux/amd64, as a multi-arch
# release's images do: what reads an image's platforms (operator-sdk's multiarch validator,
# `podman manifest inspect`) reads them there.
build_image() {
  local name="$1" dockerfile="$2" context="$3" inputs="$4" ref at stamp stamp_file args=() start=$SECONDS
  shift 4
  ref="$(reference "$name")"
  at="$(in_registry "$ref")"
  stamp_file="$(stamp_at "$at")"
  stamp="$(printf '%s\n' "$inputs" "$(sha256sum <"$dockerfile")" "$@" "$at" "$PUSHED_AS" | sha256sum | cut -c1-32)"
  if [[ -f "$stamp_file" && "$(<"$stamp_file")" == "$stamp" ]] && present "$at"; then
    log "$name: up to date ($ref)"
    return 0
  fi
  local arg
  for arg in "$@"; do args+=(--build-arg "$arg"); done
  log "$name: building $ref from ${dockerfile#"$ROOT"/}${*:+ ($*)}"
  rm -f "$stamp_file"
  local index="localhost/index/$name"
  buildah_ manifest rm "$index" >/dev/null 2>&1 || true
  CONTAINERS_REGISTRIES_CONF="$WORK/registries.conf" buildah_ bud --quiet --isolation chroot \
    --pull-always --layers=false --format oci -f "$dockerfile" "${args[@]}" --manifest "$index" \
    "$context" >/dev/null
  buildah_ manifest push --quiet --all --format oci --tls-verify=false "$index" "docker://$at"
  buildah_ manifest rm "$index" >/dev/null 2>&1 || true
  # The image just built, and what the build left without a name (the stages before the last).
  buildah_ rmi --prune --force >/dev/null 2>&1 || true
  echo "$stamp" >"$stamp_file"
  log "$name: pushed $at in $((SECONDS - start))s"
}

# operator_binary: the release binary the operator image ships, static (musl), with jemalloc
# built from its C sources by musl-gcc.
operator_binary() {
  "$ROOT/hack/tools.sh" images
  if ! rustup target list --installed 2>/dev/null | grep -qx "$MUSL_TARGET"; then
    log "adding the Rust target $MUSL_TARGET"
    rustup target add "$MUSL_TARGET"
  fi
  log "building the operator's release binary for $MUSL_TARGET"
  # Without the variables cargo sets for a test or a build script it runs (a test that builds
  # images runs this): ring's build script reruns when CARGO_MANIFEST_DIR changes, and with it
  # the whole fat-LTO link, minutes for a binary that did not change.
  (
    for var in $(compgen -e | grep -E '^(CARGO_(MANIFEST_|PKG_|CRATE_|BIN_|PRIMARY_PACKAGE|TARGET_TMPDIR|RUSTC_CURRENT_DIR)|OUT_DIR$)'); do
      unset "$var"
    done
    # In the repository's target/ whatever CARGO_TARGET_DIR says: the Dockerfile copies it
    # from there, inside the build context.
    cd "$ROOT" && CC_x86_64_unknown_linux_musl=musl-gcc cargo build --locked --release \
      --target "$MUSL_TARGET" --target-dir "$ROOT/target" -p memcached-operator
  )
}

# context NAME: a fresh build context for an image of hack/images/NAME, under .tools/images.
context() {
  local dir="$WORK/context/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$dir"
}

# root_files DIR: what every root filesystem of these images needs: /tmp, and the users.
root_files() {
  mkdir -p "$1/etc" "$1/tmp"
  chmod 1777 "$1/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$1/etc/group"
}

build_one() {
  local name="$1" dir file lib
  case "$name" in
    ubi-micro)
      dir="$(context ubi-micro)"
      root_files "$dir/rootfs"
      build_image ubi-micro "$ROOT/hack/images/ubi-micro/Dockerfile" "$dir" "$(digest_of hack/images/ubi-micro)"
      ;;
    operator)
      [[ -x "$OPERATOR_BINARY" ]] || die "no $OPERATOR_BINARY: run hack/images.sh operator-binary"
      build_one ubi-micro
      build_image operator "$ROOT/Dockerfile" "$ROOT" \
        "$(sha256sum "$OPERATOR_BINARY" "$ROOT/LICENSE" | cut -c1-64 | sha256sum | cut -c1-32)" \
        "BASE_IMAGE=$(reference ubi-micro)" "VERSION=$VERSION"
      ;;
    bundle)
      build_image bundle "$RELEASE_DIR/bundle.Dockerfile" "$RELEASE_DIR" "$(digest_of bundle)"
      ;;
    opm)
      "$ROOT/hack/tools.sh" opm grpc-health-probe
      dir="$(context opm)"
      root_files "$dir/rootfs"
      # operator-registry's nsswitch.conf, as its release image carries it.
      echo "hosts: files dns" >"$dir/rootfs/etc/nsswitch.conf"
      cp "$BIN/opm" "$BIN/grpc_health_probe" "$dir/"
      build_image opm "$ROOT/hack/images/opm/Dockerfile" "$dir" \
        "$(cd "$dir" && sha256sum opm grpc_health_probe | sha256sum | cut -c1-32)"
      ;;
    olm)
      "$ROOT/hack/tools.sh" olm
      dir="$(context olm)"
      root_files "$dir/rootfs"
      mkdir -p "$dir/rootfs/bin"
      cp "$BIN/olm" "$BIN/catalog" "$BIN/cpb" "$BIN/copy-content" /bin/busybox "$dir/rootfs/bin/"
      ln -s busybox "$dir/rootfs/bin/cp"
      build_image olm "$ROOT/hack/images/olm/Dockerfile" "$dir" \
        "$(cd "$dir/rootfs/bin" && sha256sum olm catalog cpb copy-content busybox | sha256sum | cut -c1-32)"
      ;;
    catalog)
      build_one opm
      build_image catalog "$RELEASE_DIR/catalog.Dockerfile" "$RELEASE_DIR" \
        "$(digest_of catalog) $(<"$(stamp_at "$(in_registry "$(reference opm)")")")" \
        "OPM_IMAGE=$(reference opm)"
      ;;
    memcached)
      "$ROOT/hack/tools.sh" memcached
      dir="$(context memcached)"
      root_files "$dir/rootfs"
      # The package's files, the libraries its binary links (and their packages' licences),
      # and a memcache user with the uid of the official memcached images (11211).
      while read -r file; do
        [[ -f "$file" ]] && install -D -m "$(stat -c %a "$file")" "$file" "$dir/rootfs$file"
      done < <(dpkg -L memcached)
      for lib in $(ldd /usr/bin/memcached | awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }'); do
        install -D "$(readlink -f "$lib")" "$dir/rootfs$lib"
        file="$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | cut -d: -f1 | head -n 1)" || true
        [[ -z "$file" || ! -f "/usr/share/doc/$file/copyright" ]] ||
          install -D -m 0644 "/usr/share/doc/$file/copyright" "$dir/rootfs/usr/share/doc/$file/copyright"
      done
      # The shell the warm restart's preStop hook runs, as the Alpine image has it.
      install -D /bin/busybox "$dir/rootfs/bin/busybox"
      for applet in sh kill sleep; do
        ln -s busybox "$dir/rootfs/bin/$applet"
      done
      echo "memcache:x:11211:11211:Memcached:/nonexistent:/sbin/nologin" >>"$dir/rootfs/etc/passwd"
      echo "memcache:x:11211:" >>"$dir/rootfs/etc/group"
      build_image memcached "$ROOT/hack/images/memcached/Dockerfile" "$dir" \
        "$(cd "$dir" && find rootfs -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32)"
      ;;
    memcached-exporter)
      "$ROOT/hack/tools.sh" memcached-exporter
      dir="$(context memcached-exporter)"
      root_files "$dir/rootfs"
      echo "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin" >>"$dir/rootfs/etc/passwd"
      echo "nobody:x:65534:" >>"$dir/rootfs/etc/group"
      cp "$BIN/memcached_exporter" "$dir/memcached_exporter"
      build_image memcached-exporter "$ROOT/hack/images/memcached-exporter/Dockerfile" "$dir" \
        "$(sha256sum <"$dir/memcached_exporter")"
      ;;
    pause)
      dir="$(context pause)"
      cp /usr/bin/catatonit "$dir/catatonit"
      build_image pause "$ROOT/hack/images/pause/Dockerfile" "$dir" "$(sha256sum <"$dir/catatonit")"
      ;;
    coredns)
      "$ROOT/hack/tools.sh" coredns
      dir="$(context coredns)"
      cp "$BIN/coredns" "$dir/coredns"
      build_image coredns "$ROOT/hack/images/coredns/Dockerfile" "$dir" "$(sha256sum <"$dir/coredns")"
      ;;
    busybox)
      dir="$(context busybox)"
      root_files "$dir/rootfs"
      mkdir -p "$dir/rootfs/bin"
      cp /bin/busybox "$dir/rootfs/bin/busybox"
      for file in sh cat echo head tr dd nc nslookup sleep printf grep sed wc id touch tar gzip; do
        ln -s busybox "$dir/rootfs/bin/$file"
      done
      build_image busybox "$ROOT/hack/images/busybox/Dockerfile" "$dir" "$(sha256sum </bin/busybox)"
      ;;
    scorecard-test)
      "$ROOT/hack/tools.sh" operator-sdk
      dir="$(context scorecard-test)"
      root_files "$dir/rootfs"
      echo "scorecard-test:x:1001:0:scorecard-test user:/opt/scorecard-test:/sbin/nologin" >>"$dir/rootfs/etc/passwd"
      mkdir -p "$dir/rootfs/opt/scorecard-test"
      cp "$BIN/scorecard-test" "$dir/scorecard-test"
      build_image scorecard-test "$ROOT/hack/images/scorecard-test/Dockerfile" "$dir" \
        "$(sha256sum <"$dir/scorecard-test")"
      ;;
    prometheus)
      "$ROOT/hack/tools.sh" promtool
      dir="$(context prometheus)"
      root_files "$dir/rootfs"
      echo "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin" >>"$dir/rootfs/etc/passwd"
      echo "nobody:x:65534:" >>"$dir/rootfs/etc/group"
      # The release's data directory (the Dockerfile gives it to nobody).
      mkdir -p "$dir/data"
      cp "$BIN/prometheus" "$dir/prometheus"
      build_image prometheus "$ROOT/hack/images/prometheus/Dockerfile" "$dir" \
        "$(sha256sum <"$dir/prometheus")"
      ;;
    prometheus-operator | prometheus-config-reloader)
      "$ROOT/hack/tools.sh" prometheus-operator
      dir="$(context "$name")"
      root_files "$dir/rootfs"
      echo "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin" >>"$dir/rootfs/etc/passwd"
      echo "nobody:x:65534:" >>"$dir/rootfs/etc/group"
      file=prometheus-config-reloader
      [[ "$name" == prometheus-config-reloader ]] || file=operator
      cp "$BIN/$name" "$dir/$file"
      build_image "$name" "$ROOT/hack/images/$name/Dockerfile" "$dir" "$(sha256sum <"$dir/$file")"
      ;;
    *) die "unknown image '$name' (known: ${ALL_IMAGES[*]})" ;;
  esac
}

# digest_of_image NAME: the digest the registry gives NAME's reference (Docker-Content-Digest
# of its manifest, asked for as an index first, as the images are pushed).
digest_of_image() {
  local at path tag digest
  at="$(in_registry "$(reference "$1")")"
  path="${at#"$REGISTRY"/}"
  tag="${path##*:}"
  path="${path%:*}"
  digest="$(curl -fsS -I --max-time 10 \
    -H 'Accept: application/vnd.oci.image.index.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.list.v2+json' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$REGISTRY/v2/$path/manifests/$tag" |
    awk 'tolower($1) == "docker-content-digest:" { print $2 }' | tr -d '\r')" ||
    die "the registry on $REGISTRY has no $(reference "$1") (hack/images.sh build $1)"
  [[ "$digest" == sha256:* ]] || die "the registry gave no digest for $(reference "$1")"
  echo "$digest"
}

# catalogue: every repository the registry stores, from its /v2/_catalog, page by page.
catalogue() {
  local last="" page
  while :; do
    page="$(curl -fsS --max-time 10 "http://$REGISTRY/v2/_catalog?n=1000${last:+&last=$last}")" ||
      die "the registry on $REGISTRY does not answer /v2/_catalog (hack/registry.sh start)"
    page="$(python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["repositories"] or []))' <<<"$page")"
    [[ -n "$page" ]] || return 0
    echo "$page"
    last="$(tail -n 1 <<<"$page")"
  done
}

build() {
  local names=("$@") name
  ((${#names[@]})) || names=("${ALL_IMAGES[@]}")
  for name in "${names[@]}"; do reference "$name" >/dev/null; done
  "$ROOT/hack/tools.sh" images
  "$ROOT/hack/registry.sh" start
  mkdir -p "$STAMPS" "$WORK/storage" "$WORK/run"
  write_registries_conf
  if [[ " ${names[*]} " == *" operator "* ]]; then operator_binary; fi
  for name in "${names[@]}"; do build_one "$name"; done
}

case "${1:-}" in
  build) shift && build "$@" ;;
  list) for name in "${ALL_IMAGES[@]}"; do echo "$name $(reference "$name")"; done ;;
  reference) [[ $# -eq 2 ]] || die "usage: $0 reference NAME" && reference "$2" ;;
  catalogue) catalogue ;;
  digest) [[ $# -eq 2 ]] || die "usage: $0 digest NAME" && reference "$2" >/dev/null && digest_of_image "$2" ;;
  pinned)
    [[ $# -eq 2 ]] || die "usage: $0 pinned NAME"
    ref="$(reference "$2")" && digest="$(digest_of_image "$2")" && echo "${ref%:*}@$digest"
    ;;
  operator-binary) operator_binary ;;
  env) print_env ;;
  -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
  *) die "usage: $0 build [NAME...]|list|reference NAME|digest NAME|pinned NAME|catalogue|operator-binary|env (try --help)" ;;
esac
exit
