//! The types the caches keep of the controller's children and their pods: only the fields
//! reconciling reads.
//!
//! k8s-openapi's `StatefulSet` and `Pod` hold their spec and status inline, so even with every
//! unread field emptied each cached one occupies about 2.5 KiB (StatefulSet) or 2.2 KiB (Pod)
//! before any of its strings. These types are the same resources (same group, version, kind
//! and path, so they are watched and listed as such) with only metadata and the status fields
//! read; whatever else the API server sends is skipped while decoding, never allocated.
//!
//! A child's labels, annotations and owner references are read for three answers only: the
//! desired-state hash it was applied with, whether its labels and owners are still the ones
//! the controller last applied or verified, and which Memcached controls it. [`Marks`] keeps
//! those answers (a few machine words) instead of the maps and strings they come from, which
//! would cost about 1.7 KiB per child: two ordered maps and fourteen strings.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use kube::api::PartialObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::v1beta1::Memcached;
use crate::operator;

/// The annotation on each child that holds the hash of the desired state it was applied with.
pub const APPLIED_HASH_ANNOTATION: &str = "cache.f2367556.dev/applied-hash";

/// The hash a child was applied with, from its annotation.
pub fn stamped(metadata: &ObjectMeta) -> Option<u64> {
    let text = metadata
        .annotations
        .as_ref()?
        .get(APPLIED_HASH_ANNOTATION)?;
    u64::from_str_radix(text, 16).ok()
}

/// A 64-bit hash of `value`: what the caches and the controller's records keep instead of
/// strings and maps.
pub fn hash64(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// The key the controller's records file a child under: a hash of its namespace and name.
pub fn name_key(metadata: &ObjectMeta) -> u64 {
    hash64((&metadata.namespace, &metadata.name))
}

/// The key the controller's records file a Memcached under: a hash of its uid, so that one
/// re-created under the same name starts with no record.
pub fn uid_key(metadata: &ObjectMeta) -> u64 {
    hash64(&metadata.uid)
}

/// Whether `manager` owns fields of the object through an `Update` entry (`subresource`
/// empty: of the object itself, not of a subresource).
pub fn recorded_as_update(
    entries: Option<&[ManagedFieldsEntry]>,
    manager: &str,
    subresource: &str,
) -> bool {
    entries.unwrap_or_default().iter().any(|entry| {
        entry.manager.as_deref() == Some(manager)
            && entry.operation.as_deref() == Some("Update")
            && entry.subresource.as_deref().unwrap_or_default() == subresource
    })
}

/// What the controller reads of a child's labels, annotations and owner references.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Marks {
    /// The desired-state hash in the applied-hash annotation ([`stamped`]).
    pub applied: Option<u64>,
    /// A hash of the labels and owner references exactly as they are: equal to the one seen
    /// when the controller last applied or verified the child, they are still the same.
    pub labels_and_owners: u64,
    /// The Memcached that controls the child, if one does.
    pub owner: Option<Owner>,
    /// Whether the operator's field manager also owns fields of the child through an
    /// `Update` entry, the record of the create that made it: folded into its `Apply` entry
    /// before the next apply (`controller::field_owners`).
    pub created: bool,
    /// Whether the child was deleted: set on the object of a deletion only, so that the
    /// predicate of its watch, which hashes the marks, tells the deletion from the version
    /// before it ([`Gone`]).
    pub gone: bool,
}

/// The Memcached named by a child's controller owner reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    /// A hash of its uid ([`hash64`] of the `Option<String>`, as `Known` hashes uids).
    pub uid: u64,
    /// Its name, unless it is the child's own name (as for every child the controller makes).
    pub name: Option<Box<str>>,
}

impl Marks {
    /// Reads the marks of a child from its full metadata.
    pub fn of(metadata: &ObjectMeta) -> Self {
        let applied = stamped(metadata);
        let mut hasher = DefaultHasher::new();
        metadata.labels.hash(&mut hasher);
        for owner in metadata.owner_references.iter().flatten() {
            (&owner.api_version, &owner.kind, &owner.name, &owner.uid).hash(&mut hasher);
            (owner.controller, owner.block_owner_deletion).hash(&mut hasher);
        }
        let group = <Memcached as kube::Resource>::group(&());
        let owner = metadata
            .owner_references
            .iter()
            .flatten()
            .find(|owner| {
                owner.controller == Some(true)
                    && owner.kind == <Memcached as kube::Resource>::kind(&())
                    && owner
                        .api_version
                        .split_once('/')
                        .is_some_and(|(owners_group, _)| owners_group == group)
            })
            .map(|owner| Owner {
                uid: hash64(Some(&owner.uid)),
                name: (metadata.name.as_deref() != Some(owner.name.as_str()))
                    .then(|| owner.name.as_str().into()),
            });
        Self {
            applied,
            labels_and_owners: hasher.finish(),
            owner,
            created: recorded_as_update(metadata.managed_fields.as_deref(), operator::NAME, ""),
            gone: false,
        }
    }
}

/// A cached child's [`Marks`].
pub trait Marked {
    /// Its marks.
    fn marks(&self) -> &Marks;
    /// A hash of the status fields the cache keeps of it (none but a StatefulSet's).
    fn kept_status(&self) -> u64 {
        0
    }
}

/// A cached object that can say it was deleted, for a watch's predicate to see (kube's
/// `touched_objects` hands on the object of a deletion as it was before, so a predicate on
/// what is kept would take it for no change).
pub trait Gone {
    /// Marks the object as deleted.
    fn mark_gone(&mut self);
}

impl<T: MarkedMut> Gone for T {
    fn mark_gone(&mut self) {
        self.marks_mut().gone = true;
    }
}

/// A cached child whose [`Marks`] can be changed.
pub trait MarkedMut {
    /// Its marks, to change.
    fn marks_mut(&mut self) -> &mut Marks;
}

/// Reduces a child's metadata to what stays as text: name, namespace, uid and resourceVersion,
/// and its generation. The rest is in its [`Marks`].
pub fn kept_metadata(metadata: ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        generation: metadata.generation,
        ..ObjectMeta::default()
    }
}

/// Implements k8s-openapi's resource traits for `$compact` as those of `$kind`.
macro_rules! same_resource_as {
    ($compact:ty, $kind:ty) => {
        same_resource_as!(
            $compact,
            <$kind as Resource>::GROUP,
            <$kind as Resource>::VERSION,
            <$kind as Resource>::API_VERSION,
            <$kind as Resource>::KIND,
            <$kind as Resource>::URL_PATH_SEGMENT
        );
    };
    // A kind some other project defines (kube's derive gives it kube's `Resource` only).
    ($compact:ty, $group:expr, $version:expr, $api_version:expr, $kind:expr, $plural:expr) => {
        impl Resource for $compact {
            const API_VERSION: &'static str = $api_version;
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
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

/// A StatefulSet as the cache keeps it: [`kept_metadata`], [`Marks`] and the rollout counters
/// status reads. Decoded from a whole StatefulSet, whose other fields are skipped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "WatchedStatefulSet")]
pub struct CachedStatefulSet {
    /// Its metadata.
    pub metadata: ObjectMeta,
    /// What its labels, annotations and owners say.
    #[serde(skip)]
    pub marks: Marks,
    /// The status fields status reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Rollout>,
}

/// A StatefulSet as it is decoded before the cache keeps it.
#[derive(Deserialize)]
struct WatchedStatefulSet {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<Rollout>,
}

impl From<WatchedStatefulSet> for CachedStatefulSet {
    fn from(watched: WatchedStatefulSet) -> Self {
        Self {
            marks: Marks::of(&watched.metadata),
            metadata: kept_metadata(watched.metadata),
            status: watched.status,
        }
    }
}

impl Marked for CachedStatefulSet {
    fn marks(&self) -> &Marks {
        &self.marks
    }
    fn kept_status(&self) -> u64 {
        hash64(self.status)
    }
}

impl MarkedMut for CachedStatefulSet {
    fn marks_mut(&mut self) -> &mut Marks {
        &mut self.marks
    }
}

/// The three fields of a StatefulSet's status that status reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
            marks: Marks::of(&full.metadata),
            metadata: kept_metadata(full.metadata),
            status: full.status.map(|status| Rollout {
                replicas: status.replicas,
                updated_replicas: status.updated_replicas,
                observed_generation: status.observed_generation,
            }),
        }
    }
}

/// A ConfigMap as the cache keeps it: its name, namespace and resource version, all that says
/// when a Memcached's client CAs must be read again.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CachedConfigMap {
    /// Its name, namespace and resource version.
    pub metadata: ObjectMeta,
    /// Whether it was deleted ([`Gone`]).
    #[serde(skip)]
    pub gone: bool,
}

same_resource_as!(CachedConfigMap, ConfigMap);

impl Gone for CachedConfigMap {
    fn mark_gone(&mut self) {
        self.gone = true;
    }
}

impl From<PartialObjectMeta<CachedConfigMap>> for CachedConfigMap {
    fn from(partial: PartialObjectMeta<CachedConfigMap>) -> Self {
        let metadata = partial.metadata;
        Self {
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                resource_version: metadata.resource_version,
                ..ObjectMeta::default()
            },
            gone: false,
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
    /// Whether it was deleted ([`Gone`]).
    #[serde(skip)]
    pub gone: bool,
}

impl Gone for CachedPod {
    fn mark_gone(&mut self) {
        self.gone = true;
    }
}

/// A pod's conditions, without their times, reasons and messages, and what the kubelet says of
/// its containers' restarts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Conditions {
    /// The conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The containers' restarts (reduced to memcached's by `cache::reduce_pod`).
    #[serde(
        default,
        rename = "containerStatuses",
        skip_serializing_if = "Option::is_none"
    )]
    pub container_statuses: Option<Vec<ContainerRestarts>>,
    /// The init containers' (reduced to the operator's sidecars that stopped on an error and
    /// are not running again by `cache::reduce_pod`); a boxed slice, since it is rare, to keep
    /// every cached pod small.
    #[serde(
        default,
        rename = "initContainerStatuses",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_container_statuses: Option<Box<[ContainerRestarts]>>,
}

/// How often a container was restarted, and how its last run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRestarts {
    /// The container.
    pub name: String,
    /// Restarts so far.
    #[serde(default)]
    pub restart_count: i32,
    /// Whether it is ready: read to choose what is kept, then not kept (always false).
    #[serde(default, skip_serializing)]
    pub ready: bool,
    /// How the last run ended, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_state: Option<LastState>,
}

/// A container's last state: only its end is kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LastState {
    /// Its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<Terminated>,
}

/// How a container's run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Terminated {
    /// `OOMKilled`, `Error`, `Completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its exit code (128 + the signal for a signal).
    #[serde(default)]
    pub exit_code: i32,
    /// When it ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// What it said of its end (its termination message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One pod condition: its type and status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Condition {
    /// `Ready`, `PodScheduled`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
}

same_resource_as!(CachedPod, Pod);

/// Defines `$cached`, what the cache keeps of a `$kind`: [`kept_metadata`] and [`Marks`], from
/// the object's metadata (a metadata-only watch's objects, or an apply's answer). A watch of
/// `PartialObjectMeta<$cached>` is a metadata-only watch of the kind.
macro_rules! metadata_kept_of {
    ($cached:ident, $kind:ty) => {
        metadata_kept_of!(@kept $cached, stringify!($kind));
        same_resource_as!($cached, $kind);
    };
    ($cached:ident, $group:literal, $version:literal, $kind_name:literal, $plural:literal) => {
        metadata_kept_of!(@kept $cached, $kind_name);
        same_resource_as!(
            $cached,
            $group,
            $version,
            concat!($group, "/", $version),
            $kind_name,
            $plural
        );
    };
    (@kept $cached:ident, $kind:expr) => {
        #[doc = concat!("A ", $kind, " as the cache keeps it: metadata and marks.")]
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(from = "WatchedMetadata")]
        pub struct $cached {
            /// Its metadata.
            pub metadata: ObjectMeta,
            /// What its labels, annotations and owners say.
            #[serde(skip)]
            pub marks: Marks,
        }

        impl From<ObjectMeta> for $cached {
            fn from(metadata: ObjectMeta) -> Self {
                Self {
                    marks: Marks::of(&metadata),
                    metadata: kept_metadata(metadata),
                }
            }
        }

        impl From<WatchedMetadata> for $cached {
            fn from(watched: WatchedMetadata) -> Self {
                Self::from(watched.metadata)
            }
        }

        impl From<PartialObjectMeta<$cached>> for $cached {
            fn from(watched: PartialObjectMeta<$cached>) -> Self {
                Self::from(watched.metadata)
            }
        }

        impl Marked for $cached {
            fn marks(&self) -> &Marks {
                &self.marks
            }
        }

        impl MarkedMut for $cached {
            fn marks_mut(&mut self) -> &mut Marks {
                &mut self.marks
            }
        }
    };
}

/// An object as decoded before the cache keeps its metadata.
#[derive(Deserialize)]
pub struct WatchedMetadata {
    #[serde(default)]
    metadata: ObjectMeta,
}

metadata_kept_of!(CachedService, Service);
metadata_kept_of!(CachedBudget, PodDisruptionBudget);
metadata_kept_of!(CachedNetworkPolicy, NetworkPolicy);
metadata_kept_of!(
    CachedCertificate,
    "cert-manager.io",
    "v1",
    "Certificate",
    "certificates"
);
metadata_kept_of!(
    CachedServiceMonitor,
    "monitoring.coreos.com",
    "v1",
    "ServiceMonitor",
    "servicemonitors"
);
metadata_kept_of!(
    CachedPrometheusRule,
    "monitoring.coreos.com",
    "v1",
    "PrometheusRule",
    "prometheusrules"
);

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
