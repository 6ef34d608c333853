//! The types the caches keep of StatefulSets and Pods: only the fields reconciling reads.
//!
//! k8s-openapi's `StatefulSet` and `Pod` hold their spec and status inline, so even with every
//! unread field emptied each cached one occupies about 2.5 KiB (StatefulSet) or 2.2 KiB (Pod)
//! before any of its strings. These types are the same resources (same group, version, kind
//! and path, so they are watched and listed as such) with only metadata and the status fields
//! read; whatever else the API server sends is skipped while decoding, never allocated.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};

/// Implements k8s-openapi's resource traits for `$compact` as those of `$kind`.
macro_rules! same_resource_as {
    ($compact:ty, $kind:ty) => {
        impl Resource for $compact {
            const API_VERSION: &'static str = <$kind as Resource>::API_VERSION;
            const GROUP: &'static str = <$kind as Resource>::GROUP;
            const KIND: &'static str = <$kind as Resource>::KIND;
            const VERSION: &'static str = <$kind as Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str = <$kind as Resource>::URL_PATH_SEGMENT;
            type Scope = NamespaceResourceScope;
        }

        impl Metadata for $compact {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A StatefulSet as the cache keeps it: metadata and the rollout counters status reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CachedStatefulSet {
    /// Its metadata (reduced by `cache::child_metadata`).
    pub metadata: ObjectMeta,
    /// The status fields status reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Rollout>,
}

/// The three fields of a StatefulSet's status that status reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Pods created.
    #[serde(default)]
    pub replicas: i32,
    /// Pods at the current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// The generation the StatefulSet controller last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

same_resource_as!(CachedStatefulSet, StatefulSet);

impl From<StatefulSet> for CachedStatefulSet {
    fn from(full: StatefulSet) -> Self {
        Self {
            metadata: full.metadata,
            status: full.status.map(|status| Rollout {
                replicas: status.replicas,
                updated_replicas: status.updated_replicas,
                observed_generation: status.observed_generation,
            }),
        }
    }
}

/// A Pod as the cache keeps it: metadata and its conditions' types and statuses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CachedPod {
    /// Its metadata (reduced by `cache::reduce_pod`).
    pub metadata: ObjectMeta,
    /// Its conditions (reduced to Ready by `cache::reduce_pod`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Conditions>,
}

/// A pod's conditions, without their times, reasons and messages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    /// The conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// One pod condition: its type and status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// `Ready`, `PodScheduled`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
}

same_resource_as!(CachedPod, Pod);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_what_is_read_is_decoded() {
        let statefulset: CachedStatefulSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "cache", "namespace": "shop", "generation": 4},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "m"}]}}},
            "status": {"replicas": 3, "updatedReplicas": 2, "observedGeneration": 4,
                       "readyReplicas": 1, "currentRevision": "cache-1"}
        }))
        .expect("decodes");
        assert_eq!(
            serde_json::to_value(&statefulset).expect("encodes"),
            json!({
                "metadata": {"name": "cache", "namespace": "shop", "generation": 4},
                "status": {"replicas": 3, "updatedReplicas": 2, "observedGeneration": 4}
            })
        );
        let pod: CachedPod = serde_json::from_value(json!({
            "metadata": {"name": "cache-0"},
            "spec": {"containers": [{"name": "m"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-05-02T09:14:08Z"}
            ]}
        }))
        .expect("decodes");
        assert_eq!(
            serde_json::to_value(&pod).expect("encodes"),
            json!({"metadata": {"name": "cache-0"},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        );
    }

    #[test]
    fn the_compact_types_are_the_same_resources_and_a_fraction_of_the_size() {
        use kube::Resource as _;
        assert_eq!(
            CachedStatefulSet::url_path(&(), Some("shop")),
            StatefulSet::url_path(&(), Some("shop"))
        );
        assert_eq!(
            CachedPod::url_path(&(), Some("shop")),
            Pod::url_path(&(), Some("shop"))
        );
        assert_eq!(CachedPod::kind(&()), "Pod");
        assert!(size_of::<CachedStatefulSet>() * 5 < size_of::<StatefulSet>());
        assert!(size_of::<CachedPod>() * 5 < size_of::<Pod>());
    }
}
