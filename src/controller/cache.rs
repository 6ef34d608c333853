//! Decides what the controller keeps in memory of each kind it watches, and builds the watch
//! streams that fill those caches and wake the controller.
//!
//! Per kind, and why:
//!
//! - **Memcached** (a full watch, cached): the object as stored, less `metadata.managedFields`
//!   and the `kubectl.kubernetes.io/last-applied-configuration` annotation. Reconciling reads
//!   the spec (the desired children, defaulting, validation), the status (to skip a status
//!   write that would change nothing), and the name, namespace, uid, generation and deletion
//!   timestamp; the write history of who set which field, and a copy of the last
//!   client-side apply, are read by nothing here and are usually the largest part of the
//!   object.
//! - **PodDisruptionBudget** (a metadata-only watch of the ones labelled as ours, cached):
//!   name, namespace, uid, resourceVersion and ownerReferences, nothing else. That is all
//!   that deciding whether a budget must be *removed* reads (does one exist, is it this
//!   Memcached's), so a Memcached with fewer than two replicas costs no request for its
//!   budget at all; when a budget should exist it is fetched, as below.
//! - **StatefulSet, Service** (metadata-only watches of the ones labelled as ours, not
//!   cached): each event is mapped to its owner through its ownerReferences and dropped.
//!   Reconciling fetches them instead: drift detection compares every field the operator
//!   sets, pod template included, and status reads the StatefulSet's status, so a cache
//!   that could serve those reads would have to hold nearly the whole object.
//! - **Pod**: not watched. Status lists a Memcached's pods by label when it reconciles, to
//!   name the Ready ones.
//!
//! This module holds no reconciling logic; it only shapes what is kept.

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{Store, reflector, store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};

use crate::api::v1beta1::Memcached;
use crate::operator;

/// The annotation `kubectl apply` (client-side) writes: a copy of the whole applied object.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What the cache keeps of a PodDisruptionBudget: its metadata, reduced by [`identity_and_owners`].
pub type CachedBudget = PartialObjectMeta<PodDisruptionBudget>;

/// A watch stream of objects of kind `K`, as the controller consumes it.
pub type Objects<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// Removes what records how an object was written rather than what it is: the managed fields
/// and the last-applied annotation (the annotations disappear if that was the only one).
pub fn forget_write_history(metadata: &mut ObjectMeta) {
    metadata.managed_fields = None;
    if let Some(annotations) = &mut metadata.annotations {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            metadata.annotations = None;
        }
    }
}

/// Reduces metadata to what identifies an object and says who owns it: name, namespace, uid,
/// resourceVersion and ownerReferences.
pub fn identity_and_owners(metadata: &mut ObjectMeta) {
    *metadata = ObjectMeta {
        name: metadata.name.take(),
        namespace: metadata.namespace.take(),
        uid: metadata.uid.take(),
        resource_version: metadata.resource_version.take(),
        owner_references: metadata.owner_references.take(),
        ..ObjectMeta::default()
    };
}

/// The label selector of the children the operator made.
pub fn ours() -> watcher::Config {
    watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={}", operator::NAME))
}

/// The cache of every Memcached, and the stream of changed Memcacheds that fills it.
pub fn memcacheds(client: Client) -> (Store<Memcached>, Objects<Memcached>) {
    let (cached, writer) = store();
    let events = watcher(Api::<Memcached>::all(client), watcher::Config::default())
        .modify(|memcached: &mut Memcached| forget_write_history(memcached.meta_mut()));
    let changed = reflector(writer, events).applied_objects().boxed();
    (cached, changed)
}

/// The cache of the operator's PodDisruptionBudgets, and the stream of created, changed and
/// deleted ones that fills it. The watch asks for metadata only (an `Api` of
/// `PartialObjectMeta`).
pub fn budgets(client: Client) -> (Store<CachedBudget>, Objects<CachedBudget>) {
    let (cached, writer) = store();
    let events = watcher(Api::<CachedBudget>::all(client), ours())
        .modify(|budget: &mut CachedBudget| identity_and_owners(&mut budget.metadata));
    let touched = reflector(writer, events).touched_objects().boxed();
    (cached, touched)
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;
    use serde_json::{Value, json};

    use super::*;

    fn testdata(name: &str) -> Value {
        let path = format!(
            "{}/src/controller/testdata/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn a_cached_memcached_keeps_everything_but_its_write_history() {
        let stored = testdata("stored-memcached.json");
        let mut memcached: Memcached = serde_json::from_value(stored.clone()).expect("decodes");
        forget_write_history(memcached.meta_mut());

        let mut expected = stored;
        let metadata = expected["metadata"].as_object_mut().expect("metadata");
        metadata.remove("managedFields");
        metadata["annotations"]
            .as_object_mut()
            .expect("annotations")
            .remove(LAST_APPLIED);
        assert_eq!(
            serde_json::to_value(&memcached).expect("encodes"),
            expected,
            "exactly managedFields and the last-applied annotation are gone"
        );
        assert_eq!(
            memcached.annotations().keys().collect::<Vec<_>>(),
            ["example.com/team"],
            "other annotations stay"
        );
    }

    #[test]
    fn forgetting_the_write_history_drops_annotations_left_empty() {
        let mut metadata = ObjectMeta {
            annotations: Some([(LAST_APPLIED.to_string(), "{}".to_string())].into()),
            ..ObjectMeta::default()
        };
        forget_write_history(&mut metadata);
        assert_eq!(metadata, ObjectMeta::default());
    }

    #[test]
    fn a_cached_budget_is_its_identity_and_owners_only() {
        let watched = testdata("watched-budget-metadata.json");
        let mut budget: CachedBudget = serde_json::from_value(watched).expect("decodes");
        identity_and_owners(&mut budget.metadata);
        assert_eq!(
            serde_json::to_value(&budget.metadata).expect("encodes"),
            json!({
                "name": "cache",
                "namespace": "shop",
                "uid": "5d0c1f0e-7a39-4c55-9b1e-2f7de1a4c3b2",
                "resourceVersion": "48213",
                "ownerReferences": [{
                    "apiVersion": "cache.f2367556.dev/v1beta1",
                    "kind": "Memcached",
                    "name": "cache",
                    "uid": "0f8a3c2e-1111-4222-8333-944455556666",
                    "controller": true,
                    "blockOwnerDeletion": true
                }]
            })
        );
    }
}
