//! Says what the controller applies: the kinds of children, what the cache keeps of each, which
//! version moves when a child's spec changes, and which Memcached a child belongs to.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::compact::{
    CachedBudget, CachedCertificate, CachedNetworkPolicy, CachedPrometheusRule, CachedService,
    CachedServiceMonitor, CachedStatefulSet, Marked, MarkedMut, hash64,
};
use crate::api::v1beta1::Memcached;
use crate::operator;

/// What the cache keeps of a kind of child: the same resource, decoded into fewer fields; the
/// kind's name, and which version moves when a child's spec changes.
pub trait Kept:
    Resource<DynamicType = ()>
    + Marked
    + MarkedMut
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind, for logs, metrics, errors and the controller's records
    /// ([`KnownChildren`](super::known::KnownChildren)).
    const KIND: &'static str;
    /// The version that moves when the spec changes, from cached metadata.
    fn spec_version(metadata: &ObjectMeta) -> Option<u64>;
}

/// A kind the controller applies, and what its cache keeps of one.
pub trait Child:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// What the cache keeps of one.
    type Cached: Kept;
    /// The kind.
    const KIND: &'static str = <Self::Cached as Kept>::KIND;
    /// Reduces a whole object (an apply's answer) to what the cache keeps.
    fn cached(full: Self) -> Self::Cached;
    /// The version that moves when the spec changes, from cached metadata.
    fn spec_version(metadata: &ObjectMeta) -> Option<u64> {
        <Self::Cached as Kept>::spec_version(metadata)
    }
}

/// Says which kind `$cached` keeps, and that its generation moves with its spec.
macro_rules! kept_by_generation {
    ($cached:ty, $kind:literal) => {
        impl Kept for $cached {
            const KIND: &'static str = $kind;
            fn spec_version(metadata: &ObjectMeta) -> Option<u64> {
                generation(metadata)
            }
        }
    };
}

kept_by_generation!(CachedStatefulSet, "StatefulSet");
kept_by_generation!(CachedBudget, "PodDisruptionBudget");
kept_by_generation!(CachedNetworkPolicy, "NetworkPolicy");
kept_by_generation!(CachedCertificate, "Certificate");
kept_by_generation!(CachedServiceMonitor, "ServiceMonitor");
kept_by_generation!(CachedPrometheusRule, "PrometheusRule");

impl Kept for CachedService {
    const KIND: &'static str = "Service";
    /// A Service has no generation: its resourceVersion stands for its spec version (nothing
    /// but the controller writes a headless Service, and it has no status).
    fn spec_version(metadata: &ObjectMeta) -> Option<u64> {
        metadata.resource_version.as_ref().map(hash64)
    }
}

impl Child for StatefulSet {
    type Cached = CachedStatefulSet;
    fn cached(full: Self) -> CachedStatefulSet {
        CachedStatefulSet::from(full)
    }
}

impl Child for Service {
    type Cached = CachedService;
    fn cached(full: Self) -> CachedService {
        CachedService::from(full.metadata)
    }
}

impl Child for PodDisruptionBudget {
    type Cached = CachedBudget;
    fn cached(full: Self) -> CachedBudget {
        CachedBudget::from(full.metadata)
    }
}

impl Child for NetworkPolicy {
    type Cached = CachedNetworkPolicy;
    fn cached(full: Self) -> CachedNetworkPolicy {
        CachedNetworkPolicy::from(full.metadata)
    }
}

/// A child's generation, for the kinds whose generation moves when their spec changes.
pub fn generation(metadata: &ObjectMeta) -> Option<u64> {
    metadata.generation.map(|g| g as u64)
}

/// The predicate of a child's watch (kube's `predicate_filter`): a hash of what the cache keeps
/// of it but its resourceVersion (its uid, spec version, marks and kept status), so that a
/// change the cache does not keep (a budget's or a Certificate's status, a StatefulSet's other
/// counters) wakes nothing, and a deletion ([`Marks::gone`](super::compact::Marks::gone))
/// always does.
pub fn kept<C: Kept>(child: &C) -> Option<u64> {
    let metadata = child.meta();
    Some(hash64((
        &metadata.uid,
        C::spec_version(metadata),
        child.marks(),
        child.kept_status(),
    )))
}

/// The label selector of the children the operator made (and of their pods).
pub fn ours() -> watcher::Config {
    watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={}", operator::NAME))
}

/// The Memcached that controls a child: its controller owner reference, when that names a
/// Memcached of this API group (read into the child's [`Marks`](super::compact::Marks)).
pub fn owner_of<C: Resource + Marked>(child: &C) -> Option<ObjectRef<Memcached>> {
    let metadata = child.meta();
    let namespace = metadata.namespace.as_deref()?;
    let owner = child.marks().owner.as_ref()?;
    let name = owner.name.as_deref().or(metadata.name.as_deref())?;
    Some(ObjectRef::new(name).within(namespace))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::controller::cache::compact::Gone;

    fn owned_by(kind: &str, api_version: &str, controller: Option<bool>) -> CachedService {
        CachedService::from(metadata_owned_by(kind, api_version, controller))
    }

    fn metadata_owned_by(kind: &str, api_version: &str, controller: Option<bool>) -> ObjectMeta {
        ObjectMeta {
            name: Some("cache".into()),
            namespace: Some("shop".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "cache-owner".into(),
                uid: "u".into(),
                controller,
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_child_belongs_to_the_memcached_that_controls_it() {
        assert_eq!(
            owner_of(&owned_by(
                "Memcached",
                "cache.f2367556.dev/v1beta1",
                Some(true)
            )),
            Some(ObjectRef::new("cache-owner").within("shop"))
        );
        assert_eq!(
            owner_of(&owned_by(
                "Memcached",
                "cache.f2367556.dev/v1alpha1",
                Some(true)
            )),
            Some(ObjectRef::new("cache-owner").within("shop")),
            "any version of the group"
        );
    }

    #[test]
    fn other_owners_wake_nothing() {
        for (kind, api_version, controller) in [
            ("Memcached", "cache.f2367556.dev/v1beta1", None),
            ("Memcached", "cache.f2367556.dev/v1beta1", Some(false)),
            ("Memcached", "other.example.com/v1", Some(true)),
            ("StatefulSet", "apps/v1", Some(true)),
        ] {
            assert_eq!(
                owner_of(&owned_by(kind, api_version, controller)),
                None,
                "{kind} {api_version} {controller:?}"
            );
        }
        let mut cluster_scoped = owned_by("Memcached", "cache.f2367556.dev/v1beta1", Some(true));
        cluster_scoped.metadata.namespace = None;
        assert_eq!(owner_of(&cluster_scoped), None);
    }

    #[test]
    fn an_owner_of_the_childs_own_name_is_kept_without_its_name() {
        let mut same = metadata_owned_by("Memcached", "cache.f2367556.dev/v1beta1", Some(true));
        same.owner_references.get_or_insert_default()[0].name = "cache".into();
        let child = CachedService::from(same);
        assert_eq!(
            child.marks.owner.as_ref().map(|o| o.name.clone()),
            Some(None)
        );
        assert_eq!(
            owner_of(&child),
            Some(ObjectRef::new("cache").within("shop"))
        );
    }

    #[test]
    fn the_predicate_sees_what_is_kept_and_deletions_but_not_the_resource_version() {
        let mut budget = CachedBudget::from(ObjectMeta {
            name: Some("cache".into()),
            uid: Some("u-1".into()),
            generation: Some(1),
            resource_version: Some("10".into()),
            ..ObjectMeta::default()
        });
        let before = kept(&budget);
        budget.metadata.resource_version = Some("11".into());
        assert_eq!(kept(&budget), before, "a status update");
        budget.metadata.generation = Some(2);
        let edited = kept(&budget);
        assert_ne!(edited, before, "a spec change");
        budget.mark_gone();
        assert_ne!(kept(&budget), edited, "a deletion");
        // A Service's resourceVersion is its spec version.
        let mut service = CachedService::from(ObjectMeta {
            resource_version: Some("10".into()),
            ..ObjectMeta::default()
        });
        let before = kept(&service);
        service.metadata.resource_version = Some("11".into());
        assert_ne!(kept(&service), before);
    }
}
