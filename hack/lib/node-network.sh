# The addresses of the local cluster's node (hack/node.sh), its image registry
# (hack/registry.sh) and the API server that serves it (hack/control-plane.sh, NODE=kubelet).
# Sourced, never run. docs/local-cluster.md, "Network safety", says what each one is for.

# The node's bridge: pods' veths are its ports, and the node itself is NODE_IP on it, the
# pods' gateway. The API server listens there too, so that pods reach it.
NODE_BRIDGE=mcnode0
NODE_NAME=local
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
# Services: routed onto the bridge, so that the node's own connections to a ClusterIP that
# kube-proxy did not translate go nowhere else.
NODE_SERVICE_CIDR=10.96.0.0/24
NODE_SERVICE_IP=10.96.0.1 # the `kubernetes` Service
NODE_DNS_IP=10.96.0.10    # CoreDNS's Service
CLUSTER_DOMAIN=cluster.local
# The image registry, on loopback, and the registries it stands in for: containerd (and
# buildah, when a FROM names one) pull these hosts' references from it, with no fallback.
REGISTRY=127.0.0.1:5000
MIRRORED_REGISTRIES=(quay.io docker.io registry.k8s.io registry.access.redhat.com)
# The chains the node adds to the machine's firewall (iptables, legacy or nft backend).
FORWARD_CHAIN=MEMCACHED-NODE-FORWARD
NO_MASQ_CHAIN=MEMCACHED-NODE-NO-MASQ
# Sockets (short paths: a unix socket path has at most 107 bytes).
NODE_SOCKETS=/run/memcached-operator-node
