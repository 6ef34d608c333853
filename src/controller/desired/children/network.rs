//! The NetworkPolicy `<name>` a Memcached asks for with `spec.networkPolicy`: its pods take
//! connections to memcached's ports from the allowed sources only, and to the ports Prometheus
//! scrapes (with monitoring on: the exporter's, and the refresher's and the relay's) from the
//! metrics sources only. The sidecars talk to their server over the pod's loopback, which no
//! NetworkPolicy governs.

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{metadata, named_ports, scraped_ports, selector_labels};
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
    let scraped = scraped_ports(memcached);
    if !scraped.is_empty() {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(policy.metrics_sources.clone().unwrap_or_default()),
            ports: Some(scraped.into_iter().map(|(_, port)| tcp(port)).collect()),
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
