# The configuration files of the local cluster's node: containerd's (with its registry hosts),
# the CNI network's, the kubelet's and kube-proxy's, written under the node's directory by
# hack/node.sh start. Sourced by hack/node.sh (after hack/lib/node-network.sh), never run.

# write_registry_hosts MODE: containerd's registry configuration, a hosts.toml for each
# mirrored registry host. Each is the local registry, under a path named for the host (its
# images are stored as HOST/NAME there, so quay.io/x and docker.io/x stay two images), with
# no fallback to the host itself. Any other host (the `_default` directory stands for a host
# that has none of its own) resolves to a path of the local registry that holds nothing: an
# image that is not in the local registry cannot be pulled at all. MODE by-tag: the mirror
# pulls and resolves tags; by-digest: it only pulls, as a disconnected cluster's digest
# mirror (an ImageDigestMirrorSet) does, so an image named by tag cannot be pulled and one
# named by digest can. containerd reads these files at every pull; each is replaced whole
# (written beside it, then renamed), so no pull ever finds one missing.
write_registry_hosts() {
  local mode="$1" capabilities host dir
  case "$mode" in
    by-tag) capabilities='"pull", "resolve"' ;;
    by-digest) capabilities='"pull"' ;;
    *) die "registry hosts: unknown mode '$mode' (by-tag or by-digest)" ;;
  esac
  for host in "${MIRRORED_REGISTRIES[@]}" _default; do
    dir="$NODE_DIR/containerd/certs.d/$host"
    mkdir -p "$dir"
    cat >"$dir/hosts.toml.new" <<EOF
# $host is pulled from the local registry alone ($REGISTRY, this checkout's), from the
# images it stores under $(registry_path "$host")/: no fallback to $host itself, no other
# server. Mode $mode.
server = "http://$REGISTRY/v2/$(registry_path "$host")"
override_path = true
capabilities = [$capabilities]
EOF
    mv -f "$dir/hosts.toml.new" "$dir/hosts.toml"
  done
}

write_containerd_config() {
  local dir pause
  pause="$("$ROOT/hack/images.sh" reference pause)"
  mkdir -p "$NODE_DIR/containerd" "$NODE_DIR/cni" "$NODE_SOCKETS"
  rm -rf "$NODE_DIR/containerd/certs.d"
  write_registry_hosts by-tag
  cat >"$NODE_DIR/containerd/config.toml" <<EOF
version = 3
root = "$NODE_DIR/containerd/root"
state = "$NODE_SOCKETS/containerd"
# NRI would listen on /var/run/nri; nothing here uses it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$NODE_SOCKETS/containerd.sock"

[ttrpc]
  address = "$NODE_SOCKETS/containerd.sock.ttrpc"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "$NODE_DIR/containerd/opt"

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$pause"
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "$NODE_DIR/containerd/certs.d"

  [plugins.'io.containerd.cri.v1.runtime']
    # This VM withholds CAP_SYS_RESOURCE: a sandbox asking for oom_score_adj -998 fails
    # unless containerd clamps it to what it may set.
    restrict_oom_score_adj = true
    # Network namespaces under containerd's state directory, not /var/run/netns.
    netns_mounts_under_state_dir = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$NODE_DIR/cni"
      max_conf_num = 1
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$NODE_SOCKETS/runc"
          SystemdCgroup = false
EOF
  cat >"$NODE_DIR/cni/10-memcached-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "memcached-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$NODE_IP" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$NODE_DIR/cni-ipam"
      }
    }
  ]
}
EOF
}

write_kubelet_config() {
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs"
  cat >"$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this machine: kubelet 1.35 refuses it unless told (KEP-5573); no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
# Every pod's cgroup under a root of the node's own, so that a stop removes its pods' cgroups
# and no other's.
cgroupRoot: /$NODE_CGROUP
# No KUBE-FIREWALL, KUBE-IPTABLES-HINT or canary chains from the kubelet: the firewall's only
# KUBE-* chains are kube-proxy's.
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$NODE_SOCKETS/containerd.sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
clusterDomain: $CLUSTER_DOMAIN
clusterDNS:
- $NODE_DNS_IP
# Pods inherit no resolver of this machine: cluster names only.
resolvConf: ""
podCIDR: $POD_CIDR
# The fault drills run hundreds of small memcached pods on this one node (the default is 110).
maxPods: 400
podLogsDir: $NODE_DIR/pod-logs
volumePluginDir: $NODE_DIR/kubelet/volume-plugins
# No image or disk eviction on a shared development machine's disk.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
serializeImagePulls: false
EOF
  cat >"$NODE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $STATE/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: $NODE_IP:10256
metricsBindAddress: $NODE_IP:10249
# NodePorts on the node's bridge address only, never on this machine's other interfaces or
# loopback.
nodePortAddresses:
- $NODE_IP/32
iptables:
  masqueradeAll: false
  localhostNodePorts: false
# 0: leave the machine's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}
