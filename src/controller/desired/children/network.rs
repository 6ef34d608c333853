//! The NetworkPolicy `<name>` a Memcached asks for with `spec.networkPolicy`: its pods take
//! connections to memcached's ports from the allowed sources only, and to the exporter's
//! metrics port (with monitoring on) from the metrics sources only. The sidecars talk to their
//! server over the pod's loopback, which no NetworkPolicy governs.

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::monitoring::metrics_port;
use super::{metadata, named_ports, selector_labels};
use crate::api::v1beta1::Memcached;

/// The NetworkPolicy, when `spec.networkPolicy` asks for one.
pub fn desired_network_policy(memcached: &Memcached) -> Option<NetworkPolicy> {
    let policy = memcached.spec.network_policy.as_ref()?;
    let tcp = |port| NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        end_port: None,
    };
    let mut ingress = vec![NetworkPolicyIngressRule {
        from: Some(policy.allowed_sources.clone().unwrap_or_default()),
        ports: Some(named_ports(memcached).map(|(_, port)| tcp(port)).collect()),
    }];
    if let Some(port) = metrics_port(memcached) {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(policy.metrics_sources.clone().unwrap_or_default()),
            ports: Some(vec![tcp(port)]),
        });
    }
    Some(NetworkPolicy {
        metadata: metadata(memcached),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector_labels(memcached)),
                match_expressions: None,
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress),
            egress: None,
        }),
    })
}
