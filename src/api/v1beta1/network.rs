//! Declares which clients may reach the memcached servers: the NetworkPolicy the operator
//! writes for a Memcached's pods.

use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::cel;

/// The most sources a NetworkPolicy may list.
pub const MAX_ALLOWED_SOURCES: usize = 32;

/// A NetworkPolicy for the memcached pods: only the sources listed reach their ports.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = cel::allowed_sources_are_listed())]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Who may connect to memcached's ports (the client port, and the plaintext one beside
    /// TLS): pods, namespaces or address blocks, as in a NetworkPolicy's `from` (1 to 32).
    /// Every other source is refused, where the cluster's network plugin enforces
    /// NetworkPolicies. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub allowed_sources: Option<Vec<NetworkPolicyPeer>>,

    /// Who may reach the exporter's metrics port when `spec.monitoring` is on, such as the
    /// monitoring namespace's Prometheus (1 to 32); required then. memcached's own ports stay
    /// closed to them unless they are in `allowedSources` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub metrics_sources: Option<Vec<NetworkPolicyPeer>>,
}
