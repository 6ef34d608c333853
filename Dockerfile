# The operator image: built with a pinned Rust on Alpine (a static musl binary, so it runs on
# any base) and shipped on Red Hat's UBI 9 micro, as OpenShift certification expects.
# It is built for the building machine's platform; the platforms the bundle claims are
# PLATFORMS in packager/src/release.rs (docs/packaging.md, Platforms).

FROM docker.io/library/rust:1.95.0-alpine AS builder
# make: tikv-jemalloc-sys builds jemalloc, the operator's allocator, from its C sources (the
# image already has gcc and musl-dev). Its version is the one of the Alpine release the pinned
# base image is built on; Alpine keeps only the latest build of a package, so a pinned
# package version would stop building when Alpine publishes a fix.
# hadolint ignore=DL3018
RUN apk add --no-cache make
WORKDIR /src
# Dependencies first, so that editing the sources reuses their layer. The workspace's other
# members (the packaging tool, the test kit) are never built here, but cargo reads their
# manifests to load the workspace: they get empty sources, and the image holds the operator.
COPY Cargo.toml Cargo.lock ./
COPY packager/Cargo.toml ./packager/
COPY testkit/Cargo.toml ./testkit/
RUN mkdir -p src packager/src testkit/src && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs packager/src/lib.rs testkit/src/lib.rs \
    && cargo build --release --locked -p memcached-operator \
    && rm -rf src
COPY src ./src
COPY assets ./assets
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked -p memcached-operator \
    && install -D -m 0755 target/release/memcached-operator /out/memcached-operator

FROM registry.access.redhat.com/ubi9/ubi-micro:9.6
ARG VERSION=0.1.0
ARG RELEASE=1
LABEL name="memcached-operator" \
      vendor="f2367556" \
      version="${VERSION}" \
      release="${RELEASE}" \
      summary="Runs memcached clusters on Kubernetes" \
      description="A Kubernetes operator that runs memcached clusters, with admission and conversion webhooks, packaged for OLM." \
      maintainer="Memcached Operator Maintainers <memcached-operator@f2367556.dev>" \
      io.k8s.display-name="Memcached Operator" \
      io.k8s.description="A Kubernetes operator that runs memcached clusters, with admission and conversion webhooks." \
      io.openshift.tags="memcached,cache,operator" \
      org.opencontainers.image.title="memcached-operator" \
      org.opencontainers.image.description="Runs memcached clusters on Kubernetes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="f2367556" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/f2367556/memcached-operator"
COPY LICENSE /licenses/LICENSE
COPY --from=builder /out/memcached-operator /usr/local/bin/memcached-operator
# Any non-root user works; OpenShift's restricted-v2 SCC replaces it with one of its range.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/memcached-operator"]
CMD ["run"]
