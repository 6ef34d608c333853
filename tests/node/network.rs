//! The node keeps pod traffic on this machine, read from the rules themselves (no packet is
//! sent anywhere to find out): forwarding is confined to the pods' bridge before any other
//! rule can accept a packet, nothing from the pods is translated on its way off the bridge,
//! pods reach only the API server and the kubelet among this machine's listeners, the bridge
//! carries no IPv6 and ip6tables drops it anyway, the CNI network masquerades nothing, Services
//! and NodePorts live on the bridge alone, pods inherit no resolver of this machine, containerd
//! knows no registry but the local one, and the API server enforces Pod Security `baseline` by
//! default. `pod_reach` proves the same by what pods can and cannot do.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::cluster::{Env, host};

/// The node's addresses, as hack/lib/node-network.sh sets them.
const BRIDGE: &str = "mcnode0";
const POD_CIDR: &str = "10.244.0.0/22";
const NODE_IP: &str = "10.244.0.1";
const SERVICE_CIDR: &str = "10.96.0.0/24";

/// The rules of `chain` in `table`, as `iptables -S` prints them, without the chain's own line.
fn rules(table: &str, chain: &str) -> Vec<String> {
    rules_of("iptables", table, chain)
}

/// [`rules`] of `command` (`iptables` or `ip6tables`).
fn rules_of(command: &str, table: &str, chain: &str) -> Vec<String> {
    host(command, &["-w", "5", "-t", table, "-S", chain])
        .lines()
        .filter(|line| line.starts_with("-A "))
        .map(str::to_string)
        .collect()
}

/// The API server's port, from the URL the control plane wrote.
fn api_server_port(env: &Env) -> String {
    let url = std::fs::read_to_string(env.plane.state_dir().join("apiserver-url"))
        .expect("the control plane's apiserver-url");
    url.trim()
        .rsplit(':')
        .next()
        .expect("a port in the API server's URL")
        .to_string()
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

    // From the bridge, this machine takes replies to its own connections, the API server's port
    // and the kubelet's, and drops everything else; first in mangle INPUT, before filter INPUT,
    // where kube-proxy accepts its own.
    let input = rules("mangle", "INPUT");
    assert_eq!(
        input.first().map(String::as_str),
        Some("-A INPUT -j MEMCACHED-NODE-INPUT"),
        "the input guard is mangle INPUT's first rule: {input:#?}"
    );
    let api = api_server_port(&env);
    let input_guard = rules("mangle", "MEMCACHED-NODE-INPUT");
    eprintln!("mangle MEMCACHED-NODE-INPUT: {input_guard:#?}");
    assert_eq!(
        input_guard,
        vec![
            format!(
                "-A MEMCACHED-NODE-INPUT -i {BRIDGE} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
            ),
            format!(
                "-A MEMCACHED-NODE-INPUT -d {NODE_IP}/32 -i {BRIDGE} -p tcp -m tcp --dport {api} -j RETURN"
            ),
            format!(
                "-A MEMCACHED-NODE-INPUT -d {NODE_IP}/32 -i {BRIDGE} -p tcp -m tcp --dport 10250 -j RETURN"
            ),
            format!("-A MEMCACHED-NODE-INPUT -i {BRIDGE} -j DROP"),
        ],
        "pods reach the API server and the kubelet on this machine, nothing else"
    );

    // IPv6: the bridge has none, and ip6tables drops whatever would cross it or reach this
    // machine from it.
    let disabled =
        std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{BRIDGE}/disable_ipv6"))
            .expect("the bridge's disable_ipv6");
    assert_eq!(disabled.trim(), "1", "IPv6 is off on {BRIDGE}");
    for (hook, chain, expected) in [
        (
            "FORWARD",
            "MEMCACHED-NODE-FORWARD",
            vec![
                format!("-A MEMCACHED-NODE-FORWARD -i {BRIDGE} -j DROP"),
                format!("-A MEMCACHED-NODE-FORWARD -o {BRIDGE} -j DROP"),
            ],
        ),
        (
            "INPUT",
            "MEMCACHED-NODE-INPUT",
            vec![format!("-A MEMCACHED-NODE-INPUT -i {BRIDGE} -j DROP")],
        ),
    ] {
        let hook_rules = rules_of("ip6tables", "mangle", hook);
        assert_eq!(
            hook_rules.first().map(String::as_str),
            Some(format!("-A {hook} -j {chain}").as_str()),
            "ip6tables mangle {hook} jumps to {chain} first: {hook_rules:#?}"
        );
        assert_eq!(rules_of("ip6tables", "mangle", chain), expected);
    }

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

    // containerd's only registry is the local one: each mirrored host's directory, and
    // `_default`, which stands for every host without a directory of its own, name it alone,
    // under a path of its own, with no fallback to the host.
    let certs = env
        .plane
        .state_dir()
        .join("kubelet-node/containerd/certs.d");
    let mut hosts: Vec<_> = std::fs::read_dir(&certs)
        .expect("containerd's registry configuration")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    hosts.sort();
    assert_eq!(
        hosts,
        [
            "_default",
            "docker.io",
            "quay.io",
            "registry.access.redhat.com",
            "registry.invalid",
            "registry.k8s.io"
        ],
        "{}",
        certs.display()
    );
    let registry = host(
        &testkit::repository::hack("registry.sh").to_string_lossy(),
        &["address"],
    );
    let registry = registry.trim();
    assert!(registry.starts_with("127."), "{registry}");
    for name in &hosts {
        let file =
            std::fs::read_to_string(certs.join(name).join("hosts.toml")).expect("hosts.toml");
        let path = if name == "_default" {
            "unmirrored"
        } else {
            name.as_str()
        };
        assert!(
            file.contains(&format!("server = \"http://{registry}/v2/{path}\""))
                && file.contains("override_path = true"),
            "{name} is served by the local registry {registry} under /v2/{path}: {file}"
        );
        let servers: Vec<_> = file
            .lines()
            .filter(|line| !line.starts_with('#') && line.contains("http"))
            .collect();
        assert!(
            servers.len() == 1 && servers.iter().all(|line| line.contains(registry)),
            "{name}: no other server, no host of its own: {servers:#?}"
        );
    }

    // Pod Security: `baseline` enforced wherever a namespace does not say otherwise.
    let admission = std::fs::read_to_string(env.plane.state_dir().join("admission.yaml"))
        .expect("the API server's admission configuration");
    assert!(
        admission.contains("enforce: baseline"),
        "baseline is enforced by default: {admission}"
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
