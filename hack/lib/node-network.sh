# The addresses of the local cluster's node (hack/node.sh), its image registry
# (hack/registry.sh) and the API server that serves it (hack/control-plane.sh, NODE=kubelet).
# Sourced, never run, after the sourcing script set ROOT. docs/local-cluster.md, "Network
# safety", says what each one is for.

# The node's bridge: pods' veths are its ports, and the node itself is NODE_IP on it, the
# pods' gateway. The API server listens there too, so that pods reach it.
NODE_BRIDGE=mcnode0
NODE_NAME=local
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/22
# Services: routed onto the bridge, so that the node's own connections to a ClusterIP that
# kube-proxy did not translate go nowhere else.
NODE_SERVICE_CIDR=10.96.0.0/24
NODE_SERVICE_IP=10.96.0.1 # the `kubernetes` Service
NODE_DNS_IP=10.96.0.10    # CoreDNS's Service
CLUSTER_DOMAIN=cluster.local
# The image registry of this checkout (hack/registry.sh), on a loopback address of its own,
# 127.77.X.Y, derived from the checkout's path (REGISTRY_ADDRESS overrides it): another
# checkout's registry, on another address, never serves this one's images, nor this one
# another's. Images built here that stand in for no other registry's are named under
# REGISTRY_NAME, a host name that never resolves (.invalid, RFC 2606): only the mirror serves
# it. containerd (every registry host), buildah (a FROM) and podman (make validate) pull the
# MIRRORED_REGISTRIES' references from the local registry, with no fallback, each host's
# under a path of its own (registry_path): HOST/NAME:TAG is stored as HOST/NAME:TAG there.
# shellcheck disable=SC2034 # used by the scripts that source this file
REGISTRY_NAME=registry.invalid
registry_address() {
  local digest
  digest="$(printf '%s' "$ROOT" | sha256sum)"
  printf '127.77.%d.%d:5000\n' "$((16#${digest:0:2}))" "$((16#${digest:2:2} % 254 + 1))"
}
REGISTRY="${REGISTRY_ADDRESS:-$(registry_address)}"
MIRRORED_REGISTRIES=(quay.io docker.io registry.k8s.io registry.access.redhat.com "$REGISTRY_NAME")
# registry_path HOST: where the local registry stores HOST's images (the host name itself),
# and for `_default`, any other host, a path that holds none.
registry_path() { if [[ "$1" == _default ]]; then echo unmirrored; else echo "$1"; fi; }
# The chains the node adds to the machine's firewall (iptables, legacy or nft backend), in
# IPv4 and IPv6 alike.
FORWARD_CHAIN=MEMCACHED-NODE-FORWARD
INPUT_CHAIN=MEMCACHED-NODE-INPUT
NO_MASQ_CHAIN=MEMCACHED-NODE-NO-MASQ
# The kubelet's cgroup root (its pods' cgroups and nothing else's), in every hierarchy.
NODE_CGROUP=memcached-operator-node
# Sockets (short paths: a unix socket path has at most 107 bytes).
NODE_SOCKETS=/run/memcached-operator-node
