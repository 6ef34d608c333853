//! The node keeps pod traffic on this machine, read from the rules themselves (no packet is
//! sent anywhere to find out): forwarding is confined to the pods' bridge before any other
//! rule can accept a packet, nothing from the pods is translated on its way off the bridge,
//! the CNI network masquerades nothing, Services and NodePorts live on the bridge alone, and
//! pods inherit no resolver of this machine.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::cluster::{Env, host};

/// The node's addresses, as hack/lib/node-network.sh sets them.
const BRIDGE: &str = "mcnode0";
const POD_CIDR: &str = "10.244.0.0/24";
const NODE_IP: &str = "10.244.0.1";
const SERVICE_CIDR: &str = "10.96.0.0/24";

/// The rules of `chain` in `table`, as `iptables -S` prints them, without the chain's own line.
fn rules(table: &str, chain: &str) -> Vec<String> {
    host("iptables", &["-w", "5", "-t", table, "-S", chain])
        .lines()
        .filter(|line| line.starts_with("-A "))
        .map(str::to_string)
        .collect()
}

pub async fn the_node_keeps_pod_traffic_on_this_machine(env: Arc<Env>) {
    // The guard is the first rule of mangle FORWARD, which runs before filter FORWARD, where
    // kube-proxy and the kubelet accept packets.
    let forward = rules("mangle", "FORWARD");
    assert_eq!(
        forward.first().map(String::as_str),
        Some("-A FORWARD -j MEMCACHED-NODE-FORWARD"),
        "the guard is mangle FORWARD's first rule: {forward:#?}"
    );
    let guard = rules("mangle", "MEMCACHED-NODE-FORWARD");
    eprintln!("mangle MEMCACHED-NODE-FORWARD: {guard:#?}");
    assert_eq!(
        guard.first().map(String::as_str),
        Some(
            format!(
                "-A MEMCACHED-NODE-FORWARD -s {POD_CIDR} -d {POD_CIDR} -i {BRIDGE} -o {BRIDGE} -j RETURN"
            )
            .as_str()
        ),
        "only pod-to-pod packets on the bridge go on"
    );
    for rule in [
        format!("-A MEMCACHED-NODE-FORWARD -i {BRIDGE} -j DROP"),
        format!("-A MEMCACHED-NODE-FORWARD -o {BRIDGE} -j DROP"),
    ] {
        assert!(guard.contains(&rule), "{rule} is in the guard: {guard:#?}");
    }
    assert!(
        guard
            .iter()
            .all(|r| r.ends_with("-j RETURN") || r.ends_with("-j DROP")),
        "the guard accepts nothing itself: {guard:#?}"
    );

    let postrouting = rules("nat", "POSTROUTING");
    assert_eq!(
        postrouting.first().map(String::as_str),
        Some("-A POSTROUTING -j MEMCACHED-NODE-NO-MASQ"),
        "no translation off the bridge comes first in nat POSTROUTING: {postrouting:#?}"
    );
    assert_eq!(
        rules("nat", "MEMCACHED-NODE-NO-MASQ"),
        vec![format!(
            "-A MEMCACHED-NODE-NO-MASQ -s {POD_CIDR} ! -o {BRIDGE} -j ACCEPT"
        )],
    );
    // kube-proxy's NodePorts answer on the node's bridge address only.
    let services = rules("nat", "KUBE-SERVICES");
    let nodeports: Vec<_> = services
        .iter()
        .filter(|r| r.contains("KUBE-NODEPORTS"))
        .collect();
    assert!(
        !nodeports.is_empty()
            && nodeports
                .iter()
                .all(|r| r.contains(&format!("-d {NODE_IP}/32"))),
        "NodePorts on {NODE_IP} only: {nodeports:#?}"
    );

    // The CNI network: a bridge gateway, no masquerade.
    let conflist = std::fs::read_dir(env.plane.state_dir().join("kubelet-node/cni"))
        .expect("the node's CNI configuration directory")
        .filter_map(Result::ok)
        .map(|entry| std::fs::read_to_string(entry.path()).expect("a CNI configuration"))
        .collect::<Vec<_>>();
    assert_eq!(conflist.len(), 1, "one CNI network: {conflist:#?}");
    let conf: serde_json::Value = serde_json::from_str(&conflist[0]).expect("CNI JSON");
    let bridge = &conf["plugins"][0];
    assert_eq!(bridge["type"], "bridge");
    assert_eq!(bridge["bridge"], BRIDGE);
    assert_eq!(
        bridge["ipMasq"], false,
        "the CNI network masquerades nothing"
    );
    assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], POD_CIDR);

    // Services are routed onto the bridge, never out of the machine's own interfaces.
    let route = host("ip", &["-4", "route", "show", SERVICE_CIDR]);
    assert!(
        route.contains(&format!("dev {BRIDGE}")),
        "{SERVICE_CIDR} is routed onto {BRIDGE}: {route}"
    );

    // Pods resolve cluster names only: the kubelet gives them no resolver of this machine.
    let kubelet = std::fs::read_to_string(env.plane.state_dir().join("kubelet-node/kubelet.yaml"))
        .expect("the kubelet's configuration");
    assert!(kubelet.contains("resolvConf: \"\""), "{kubelet}");
    // And CoreDNS, as it runs, forwards nothing.
    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "kube-system");
    let corefile = maps
        .get("coredns")
        .await
        .expect("CoreDNS's ConfigMap")
        .data
        .and_then(|data| data.get("Corefile").cloned())
        .expect("a Corefile");
    assert!(
        corefile.contains("kubernetes cluster.local"),
        "CoreDNS serves the cluster domain: {corefile}"
    );
    assert!(
        !corefile
            .lines()
            .any(|line| matches!(line.split_whitespace().next(), Some("forward" | "proxy"))),
        "CoreDNS forwards no query off the node: {corefile}"
    );
}
