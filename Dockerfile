# The operator image: the operator's static musl release binary (jemalloc as its allocator),
# built first by `make operator-binary` (cargo build --release --target
# x86_64-unknown-linux-musl), on Red Hat's UBI 9 micro, as OpenShift certification expects.
# The binary runs on any base; BASE_IMAGE replaces UBI micro where it cannot be pulled (the
# local cluster's images, hack/images.sh, name their stand-in for what it is).
# It is built for the building machine's platform; the platforms the bundle claims are
# PLATFORMS in packager/src/release.rs (docs/packaging.md, Platforms).
ARG BASE_IMAGE=registry.access.redhat.com/ubi9/ubi-micro:9.6

FROM ${BASE_IMAGE}
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
COPY target/x86_64-unknown-linux-musl/release/memcached-operator /usr/local/bin/memcached-operator
# Any non-root user works; OpenShift's restricted-v2 SCC replaces it with one of its range.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/memcached-operator"]
CMD ["run"]
