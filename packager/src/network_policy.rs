//! Builds the NetworkPolicies that admit traffic to the operator's pods: metrics scrapes from
//! namespaces labelled `metrics: enabled`, and webhook calls from anywhere.
//!
//! The same two objects go into the bundle (OLM v0 creates NetworkPolicies shipped in a
//! bundle's `manifests/`, in the operator's namespace) and into `config/network-policy`. Pods
//! are selected with `deployment::pod_labels` and ports are `operator`'s: nothing is spelled
//! again here. Once a policy selects the operator's pods, ingress they do not allow is dropped
//! (the pods' own node, and so the kubelet's probes, stay allowed); egress is left alone.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::deployment;
use memcached_operator::operator;

/// The policy that admits metrics scrapes.
pub const METRICS_POLICY_NAME: &str = "memcached-operator-allow-metrics-traffic";
/// The policy that admits webhook calls.
pub const WEBHOOK_POLICY_NAME: &str = "memcached-operator-allow-webhook-traffic";
/// The namespace label (kubebuilder's) that lets a namespace's pods scrape the metrics.
pub const METRICS_NAMESPACE_LABEL: (&str, &str) = ("metrics", "enabled");

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some("TCP".to_string()),
        end_port: None,
    }
}

fn policy(name: &str, namespace: Option<&str>, rule: NetworkPolicyIngressRule) -> NetworkPolicy {
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: namespace.map(str::to_string),
            labels: Some(deployment::pod_labels()),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(deployment::pod_labels()),
                match_expressions: None,
            }),
            policy_types: Some(vec!["Ingress".to_string()]),
            ingress: Some(vec![rule]),
            egress: None,
        }),
    }
}

/// Admits TCP to the metrics port from pods in namespaces labelled `metrics: enabled`.
pub fn metrics_policy(namespace: Option<&str>) -> NetworkPolicy {
    let (key, value) = METRICS_NAMESPACE_LABEL;
    policy(
        METRICS_POLICY_NAME,
        namespace,
        NetworkPolicyIngressRule {
            from: Some(vec![NetworkPolicyPeer {
                namespace_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(key.to_string(), value.to_string())])),
                    match_expressions: None,
                }),
                ..NetworkPolicyPeer::default()
            }]),
            ports: Some(vec![tcp(operator::METRICS_PORT)]),
        },
    )
}

/// Admits TCP to the webhook port from any source: the API server calls from an address that
/// depends on the cluster (a host-network pod, a control plane outside the cluster), so no
/// peer can be named. The port is the container's: policies apply after the Service's 443
/// has been translated to it.
pub fn webhook_policy(namespace: Option<&str>) -> NetworkPolicy {
    policy(
        WEBHOOK_POLICY_NAME,
        namespace,
        NetworkPolicyIngressRule {
            from: None,
            ports: Some(vec![tcp(operator::WEBHOOK_PORT)]),
        },
    )
}

/// Both policies, in `namespace` (none in a bundle: OLM puts them in the operator's).
pub fn all(namespace: Option<&str>) -> [NetworkPolicy; 2] {
    [metrics_policy(namespace), webhook_policy(namespace)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(policy: &NetworkPolicy) -> Vec<i32> {
        policy
            .spec
            .iter()
            .flat_map(|s| s.ingress.iter().flatten())
            .flat_map(|rule| rule.ports.iter().flatten())
            .filter_map(|p| match p.port {
                Some(IntOrString::Int(port)) => Some(port),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_metrics_policy_admits_only_labelled_namespaces() {
        let policy = metrics_policy(None);
        let rule = &policy
            .spec
            .as_ref()
            .and_then(|s| s.ingress.clone())
            .expect("rules")[0];
        let peers = rule.from.clone().expect("peers");
        assert_eq!(peers.len(), 1);
        assert_eq!(
            peers[0]
                .namespace_selector
                .as_ref()
                .and_then(|s| s.match_labels.clone()),
            Some(BTreeMap::from([(
                "metrics".to_string(),
                "enabled".to_string()
            )]))
        );
        assert_eq!(peers[0].pod_selector, None);
        assert_eq!(ports(&policy), vec![i32::from(operator::METRICS_PORT)]);
    }

    #[test]
    fn the_webhook_policy_admits_any_source_on_the_container_port_only() {
        let policy = webhook_policy(Some("ns"));
        let rules = policy.spec.as_ref().and_then(|s| s.ingress.clone());
        assert_eq!(rules.as_ref().map(Vec::len), Some(1));
        assert_eq!(rules.and_then(|r| r[0].from.clone()), None);
        assert_eq!(ports(&policy), vec![i32::from(operator::WEBHOOK_PORT)]);
        assert_eq!(policy.metadata.namespace.as_deref(), Some("ns"));
    }
}
