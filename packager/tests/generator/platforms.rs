//! The platforms the image is built for, declared once: the CSV's labels, the Deployment's
//! required node affinity, and the network policies around the operator's pods.

use super::*;

/// The one object in the rendered file at `path`.
fn rendered<T: serde::de::DeserializeOwned>(files: &Files, path: &str) -> T {
    let text = files
        .get(path)
        .unwrap_or_else(|| panic!("{path} is not generated"));
    let docs = yaml::documents(text).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_value(docs[0].clone()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The platforms of `release::PLATFORMS`, as (os, arch).
fn listed_platforms() -> BTreeSet<(String, String)> {
    release::PLATFORMS
        .iter()
        .map(|p| (p.os.to_string(), p.arch.to_string()))
        .collect()
}

/// The (os, arch) pairs a pod's required node affinity admits, read the way operator-sdk's
/// multiarch validator reads them: per term, every `In` OS with every `In` architecture.
fn required_platforms(pod: &PodSpec) -> BTreeSet<(String, String)> {
    let terms = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.clone())
        .unwrap_or_default();
    let mut platforms = BTreeSet::new();
    for term in terms {
        let values = |key: &str| -> Vec<String> {
            term.match_expressions
                .iter()
                .flatten()
                .filter(|e| e.key == key && e.operator == "In")
                .flat_map(|e| e.values.clone().unwrap_or_default())
                .collect()
        };
        for os in values("kubernetes.io/os") {
            for arch in values("kubernetes.io/arch") {
                platforms.insert((os.clone(), arch));
            }
        }
    }
    platforms
}

const CSV_PATH: &str = "bundle/manifests/memcached-operator.clusterserviceversion.yaml";

#[test]
fn the_csv_labels_declare_exactly_the_listed_platforms() {
    let files = plan().render().expect("renders");
    let csv: ClusterServiceVersion = rendered(&files, CSV_PATH);
    let labels = csv.metadata.labels.clone().unwrap_or_default();
    let mut expected = BTreeMap::new();
    for (os, arch) in listed_platforms() {
        expected.insert(
            format!("operatorframework.io/os.{os}"),
            "supported".to_string(),
        );
        expected.insert(
            format!("operatorframework.io/arch.{arch}"),
            "supported".to_string(),
        );
    }
    assert_eq!(labels, expected);
    // The catalog carries the same labels, as `opm render` copies them from the CSV.
    let bundle: serde_json::Value =
        rendered(&files, "catalog/memcached-operator/bundle-v0.1.0.yaml");
    let metadata = bundle["properties"]
        .as_array()
        .expect("properties")
        .iter()
        .find(|p| p["type"] == "olm.csv.metadata")
        .expect("olm.csv.metadata");
    assert_eq!(
        metadata["value"]["labels"],
        serde_json::to_value(&expected).expect("json")
    );
}

#[test]
fn the_deployment_requires_nodes_of_the_listed_platforms_with_and_without_olm() {
    let files = plan().render().expect("renders");
    let csv: ClusterServiceVersion = rendered(&files, CSV_PATH);
    let in_csv = csv.spec.install.spec.deployments[0]
        .spec
        .template
        .spec
        .clone()
        .expect("pod spec");
    let manager: Deployment = rendered(&files, "config/manager/manager.yaml");
    let in_config = manager
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod spec");
    for pod in [&in_csv, &in_config] {
        assert_eq!(required_platforms(pod), listed_platforms());
        // The platforms are added to the affinity already there, not put in its place.
        assert!(
            pod.affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .is_some(),
            "{pod:?}"
        );
    }
}

#[test]
fn the_network_policies_select_the_operator_pods_and_admit_only_the_metrics_and_webhook_ports() {
    let files = plan().render().expect("renders");
    let manager: Deployment = rendered(&files, "config/manager/manager.yaml");
    let pod_labels = manager
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.labels)
        .expect("pod labels");
    let metrics = i32::from(operator::METRICS_PORT);
    let webhook = i32::from(operator::WEBHOOK_PORT);
    for (dir, suffix) in [
        (
            "bundle/manifests/memcached-operator-",
            "_networking.k8s.io_v1_networkpolicy.yaml",
        ),
        ("config/network-policy/", ".yaml"),
    ] {
        let mut admitted = BTreeMap::new();
        for name in ["allow-metrics-traffic", "allow-webhook-traffic"] {
            let policy: NetworkPolicy = rendered(&files, &format!("{dir}{name}{suffix}"));
            let spec = policy.spec.expect("spec");
            assert_eq!(
                spec.pod_selector.and_then(|s| s.match_labels).as_ref(),
                Some(&pod_labels),
                "{name}"
            );
            assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
            let rules = spec.ingress.expect("ingress");
            assert_eq!(rules.len(), 1, "{name}");
            let ports: Vec<(Option<IntOrString>, Option<String>, Option<i32>)> = rules[0]
                .ports
                .iter()
                .flatten()
                .map(|p| (p.port.clone(), p.protocol.clone(), p.end_port))
                .collect();
            admitted.insert(name, (ports, rules[0].from.clone()));
        }
        let tcp = |port| vec![(Some(IntOrString::Int(port)), Some("TCP".to_string()), None)];
        let (metrics_ports, metrics_from) = &admitted["allow-metrics-traffic"];
        assert_eq!(metrics_ports, &tcp(metrics));
        let peers = metrics_from
            .clone()
            .expect("metrics come from labelled namespaces");
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].pod_selector, None);
        assert_eq!(peers[0].ip_block, None);
        assert_eq!(
            peers[0]
                .namespace_selector
                .clone()
                .and_then(|s| s.match_labels),
            Some(BTreeMap::from([(
                "metrics".to_string(),
                "enabled".to_string()
            )]))
        );
        let (webhook_ports, webhook_from) = &admitted["allow-webhook-traffic"];
        assert_eq!(webhook_ports, &tcp(webhook));
        assert_eq!(webhook_from, &None, "webhook calls may come from anywhere");
    }

    let default: serde_json::Value = rendered(&files, "config/default/kustomization.yaml");
    assert!(
        default["resources"]
            .as_array()
            .expect("resources")
            .contains(&serde_json::json!("../network-policy")),
        "{default}"
    );
}
