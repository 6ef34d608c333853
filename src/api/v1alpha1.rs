//! Declares `v1alpha1`, the first, deprecated version of Memcached: the shape of the
//! operator-sdk tutorial (`spec.size`, `spec.containerPort`, status conditions).
//!
//! It is still served so that existing clients keep working; `convert` maps it to and from
//! the storage version without losing anything.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The desired state of a memcached cluster (deprecated shape).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cache.f2367556.dev",
    version = "v1alpha1",
    kind = "Memcached",
    plural = "memcacheds",
    shortname = "mc",
    category = "all",
    namespaced,
    doc = "A memcached cluster (deprecated version; use v1beta1).",
    status = "MemcachedStatus",
    derive = "Default",
    derive = "PartialEq",
    deprecated = "cache.f2367556.dev/v1alpha1 Memcached is deprecated; use cache.f2367556.dev/v1beta1 Memcached",
    printcolumn(
        name = "Size",
        type_ = "integer",
        json_path = ".spec.size",
        description = "Desired memcached servers"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of memcached servers (0 to 64); `spec.replicas` in v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 64))]
    pub size: Option<i32>,

    /// The port memcached listens on; `spec.service.port` in v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: Option<i32>,
}

/// The observed state of a memcached cluster (deprecated shape).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// Available, Progressing and Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Option<Vec<Condition>>,
}
