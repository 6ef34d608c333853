//! Decides what the controller keeps in memory of each kind it watches, and builds the watch
//! streams that fill those caches and wake the controller.
//!
//! Reconciling reads only these caches: an unchanged Memcached costs no request at all. Per
//! kind, what is kept and why:
//!
//! - **Memcached** (a full watch): the object as stored, less `metadata.managedFields` and the
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation. Reconciling reads the spec
//!   (the desired children, defaulting, validation), the status (to skip a status write that
//!   would change nothing), and the name, namespace, uid, generation and deletion timestamp;
//!   the write history of who set which field, and a copy of the last client-side apply, are
//!   read by nothing here and are usually the largest part of the object.
//! - **StatefulSet** (a full watch of the ones labelled as ours): name, namespace, uid,
//!   resourceVersion and generation; of the labels, ownerReferences and applied-hash annotation
//!   ([`drift::APPLIED_HASH_ANNOTATION`]) only their [`Marks`]; and of the status the three
//!   fields status reads (`replicas`, `updatedReplicas`, `observedGeneration`). No spec: the
//!   hash says what was applied, the generation says whether anyone changed the spec since.
//! - **Service, PodDisruptionBudget** (metadata-only watches of the ones labelled as ours: the
//!   API server sends `PartialObjectMetadata`): the same metadata and marks. A Service has no
//!   generation, so its resourceVersion stands for its spec version (nothing else writes a
//!   headless Service); a budget's generation does.
//! - **Pod** (a full watch of the ones labelled as ours): name, namespace, the
//!   `app.kubernetes.io/instance` label (whose Memcached it is), the deletion timestamp and the
//!   Ready condition's status. That is all `status.servers` needs.
//!
//! Each watch wakes the controller only for a change that matters: a write of the
//! controller's own coming back ([`OwnWrites::is_echo`]) wakes nothing, nor does a change of
//! what the cache does not keep (a budget's or a pod's other status fields, a StatefulSet's
//! other status counters). Deletions always wake, and make [`OwnWrites`] forget the object.
//!
//! This module holds no reconciling logic; it only shapes what is kept and what wakes.

use std::fmt::Debug;
use std::sync::Arc;

use futures::future;
use futures::stream::{BoxStream, Stream};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[cfg(doc)]
use super::compact::Marks;
pub use super::compact::{CachedBudget, CachedService};
use super::compact::{CachedPod, CachedStatefulSet, Conditions, Marked};
use super::own_writes::{MEMCACHED, OwnWrites, hash64};
use crate::api::v1beta1::Memcached;
use crate::operator;

/// The annotation `kubectl apply` (client-side) writes: a copy of the whole applied object.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The label naming the Memcached a pod serves.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

/// A watch stream of objects of kind `K`, as the controller consumes it.
pub type Objects<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// A kind the controller applies: what its cache keeps, and which version moves when its
/// spec changes.
pub trait Child:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// The kind, for logs, metrics, errors and [`OwnWrites`].
    const KIND: &'static str;
    /// What the cache keeps of one.
    type Cached: Resource<DynamicType = ()> + Marked + Clone + Send + Sync + 'static;
    /// Reduces a whole object (an apply's answer) to what the cache keeps.
    fn cached(full: Self) -> Self::Cached;
    /// The version that moves when the spec changes, from cached metadata.
    fn spec_version(metadata: &ObjectMeta) -> Option<u64>;
}

impl Child for StatefulSet {
    const KIND: &'static str = "StatefulSet";
    type Cached = CachedStatefulSet;
    fn cached(full: Self) -> CachedStatefulSet {
        CachedStatefulSet::from(full)
    }
    fn spec_version(metadata: &ObjectMeta) -> Option<u64> {
        metadata.generation.map(|g| g as u64)
    }
}

impl Child for Service {
    const KIND: &'static str = "Service";
    type Cached = CachedService;
    fn cached(full: Self) -> CachedService {
        CachedService::from(full.metadata)
    }
    fn spec_version(metadata: &ObjectMeta) -> Option<u64> {
        metadata.resource_version.as_ref().map(hash64)
    }
}

impl Child for PodDisruptionBudget {
    const KIND: &'static str = "PodDisruptionBudget";
    type Cached = CachedBudget;
    fn cached(full: Self) -> CachedBudget {
        CachedBudget::from(full.metadata)
    }
    fn spec_version(metadata: &ObjectMeta) -> Option<u64> {
        metadata.generation.map(|g| g as u64)
    }
}

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

/// Reduces a Pod to its name, namespace, instance label, deletion timestamp and Ready status.
pub fn reduce_pod(pod: &mut CachedPod) {
    let ready = pod
        .status
        .take()
        .and_then(|s| s.conditions?.into_iter().find(|c| c.type_ == "Ready"));
    let instance = pod.metadata.labels.take().and_then(|mut labels| {
        let name = labels.remove(INSTANCE_LABEL)?;
        Some([(INSTANCE_LABEL.to_string(), name)].into())
    });
    pod.metadata = ObjectMeta {
        name: pod.metadata.name.take(),
        namespace: pod.metadata.namespace.take(),
        labels: instance,
        deletion_timestamp: pod.metadata.deletion_timestamp.take(),
        ..ObjectMeta::default()
    };
    pod.status = ready.map(|ready| Conditions {
        conditions: Some(vec![ready]),
    });
}

/// The label selector of the children the operator made (and of their pods).
pub fn ours() -> watcher::Config {
    watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={}", operator::NAME))
}

/// Whether `new` equals `old` but for its resourceVersion.
fn unchanged<K: Resource + Clone + PartialEq>(old: Option<&K>, new: &K) -> bool {
    old.is_some_and(|old| {
        let mut old = old.clone();
        old.meta_mut().resource_version = new.meta().resource_version.clone();
        old == *new
    })
}

/// The controller's own writes of one kind, as a watch of that kind consults them.
type Writes = (Arc<OwnWrites>, &'static str);

/// Fills `writer` from `events` and yields the objects whose change wakes the controller.
///
/// An added or modified object wakes unless it is the echo of one of the controller's own
/// `writes`, or `wakes(cached, new)` finds no change that matters against the one cached
/// before it (during a re-list, the cache still holds the previous list). A deleted object
/// always wakes, and its records are forgotten.
fn reflect<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    mut writer: Writer<K>,
    writes: Option<Writes>,
    wakes: impl Fn(Option<&K>, &K) -> bool + Send + 'static,
) -> Objects<K>
where
    K: Lookup + Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    <K as Lookup>::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let reader = writer.as_reader();
    events
        .try_filter_map(move |event| {
            let woken = match &event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    let echo = writes
                        .as_ref()
                        .is_some_and(|(own, kind)| own.is_echo(kind, object.meta()));
                    let cached = reader.get(&ObjectRef::from(object));
                    (!echo && wakes(cached.as_deref(), object)).then(|| object.clone())
                }
                watcher::Event::Delete(object) => {
                    if let Some((own, kind)) = &writes {
                        own.forget(kind, object.meta());
                    }
                    Some(object.clone())
                }
                watcher::Event::Init => {
                    if let Some((own, kind)) = &writes {
                        own.relisting(kind);
                    }
                    None
                }
                watcher::Event::InitDone => None,
            };
            writer.apply_watcher_event(&event);
            future::ready(Ok(woken))
        })
        .boxed()
}

/// The cache of every Memcached, and the stream of changed Memcacheds that fills it. A status
/// write of the controller's own coming back wakes nothing. `arrived` is called for each
/// Memcached seen for the first time after the first list (a new one, not a listed one).
pub fn memcacheds(
    client: Client,
    own: Arc<OwnWrites>,
    arrived: impl Fn() + Send + Sync + 'static,
) -> (Store<Memcached>, Objects<Memcached>) {
    let writer = Writer::default();
    let cached = writer.as_reader();
    let seen = writer.as_reader();
    let events = watcher(Api::<Memcached>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(|memcached: &mut Memcached| forget_write_history(memcached.meta_mut()))
        .inspect_ok(move |event| {
            if let watcher::Event::Apply(memcached) = event
                && seen.get(&ObjectRef::from(memcached)).is_none()
            {
                arrived();
            }
        });
    let changed = reflect(events, writer, Some((own, MEMCACHED)), |old, new| {
        !unchanged(old, new)
    });
    (cached, changed)
}

/// The cache of the operator's children of kind `K`, filled from `events`, and the stream of
/// the ones whose change wakes their owner.
fn children<K>(
    events: impl Stream<Item = Result<watcher::Event<K::Cached>, watcher::Error>> + Send + 'static,
    own: Arc<OwnWrites>,
    wakes: impl Fn(Option<&K::Cached>, &K::Cached) -> bool + Send + 'static,
) -> (Store<K::Cached>, Objects<K::Cached>)
where
    K: Child,
    K::Cached: Lookup<DynamicType = ()>,
{
    let writer = Writer::default();
    let cached = writer.as_reader();
    let touched = reflect(
        events.default_backoff(),
        writer,
        Some((own, K::KIND)),
        wakes,
    );
    (cached, touched)
}

/// The operator's StatefulSets as [`CachedStatefulSet`]s; a change of what is kept wakes the
/// owner.
pub fn statefulsets(
    client: Client,
    own: Arc<OwnWrites>,
) -> (Store<CachedStatefulSet>, Objects<CachedStatefulSet>) {
    let events = watcher(Api::<CachedStatefulSet>::all(client), ours());
    children::<StatefulSet>(events, own, |old, new| !unchanged(old, new))
}

/// A metadata-only watch of the operator's children of kind `K`, kept as `C`.
fn metadata_only<K, C>(
    client: Client,
) -> impl Stream<Item = Result<watcher::Event<C>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    C: From<kube::api::PartialObjectMeta<K>> + Send + 'static,
{
    let api = Api::<kube::api::PartialObjectMeta<K>>::all(client);
    watcher(api, ours()).map_ok(|event| match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(C::from(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(C::from(object)),
        watcher::Event::InitApply(object) => watcher::Event::InitApply(C::from(object)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    })
}

/// The operator's Services, metadata only. Any new resourceVersion wakes the owner: it is the
/// only sign of a changed spec.
pub fn services(
    client: Client,
    own: Arc<OwnWrites>,
) -> (Store<CachedService>, Objects<CachedService>) {
    let events = metadata_only::<Service, CachedService>(client);
    children::<Service>(events, own, |old, new| old != Some(new))
}

/// The operator's PodDisruptionBudgets, metadata only; a change of what is kept (not the
/// disruption controller's status updates) wakes the owner.
pub fn budgets(
    client: Client,
    own: Arc<OwnWrites>,
) -> (Store<CachedBudget>, Objects<CachedBudget>) {
    let events = metadata_only::<PodDisruptionBudget, CachedBudget>(client);
    children::<PodDisruptionBudget>(events, own, |old, new| !unchanged(old, new))
}

/// The pods of the operator's StatefulSets, reduced by [`reduce_pod`]; a pod that appears,
/// goes, or changes readiness or deletion wakes its Memcached.
pub fn pods(client: Client) -> (Store<CachedPod>, Objects<CachedPod>) {
    let writer = Writer::default();
    let cached = writer.as_reader();
    let events = watcher(Api::<CachedPod>::all(client), ours())
        .default_backoff()
        .modify(reduce_pod);
    let changed = reflect(events, writer, None, |old, new| !unchanged(old, new));
    (cached, changed)
}

/// The Memcached a cached pod serves, from its instance label.
pub fn owner_of_pod(pod: &CachedPod) -> Option<ObjectRef<Memcached>> {
    let name = pod.metadata.labels.as_ref()?.get(INSTANCE_LABEL)?;
    Some(ObjectRef::new(name).within(pod.metadata.namespace.as_deref()?))
}

/// The cached pod `name` in `namespace`, if it serves the Memcached `instance`.
pub fn pod_of(
    pods: &Store<CachedPod>,
    namespace: &str,
    name: &str,
    instance: &str,
) -> Option<Arc<CachedPod>> {
    pods.get(&ObjectRef::new(name).within(namespace))
        .filter(|pod| owner_of_pod(pod).is_some_and(|owner| owner.name == instance))
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
    fn a_cached_budget_is_its_names_versions_and_marks() {
        use super::super::compact::{Marks, Owner};
        use super::super::drift::APPLIED_HASH_ANNOTATION;
        let watched = testdata("watched-budget-metadata.json");
        let mut watched: kube::api::PartialObjectMeta<PodDisruptionBudget> =
            serde_json::from_value(watched).expect("decodes");
        watched
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(APPLIED_HASH_ANNOTATION.into(), "00112233aabbccdd".into());
        let full = watched.metadata.clone();
        let budget = CachedBudget::from(watched);
        assert_eq!(
            serde_json::to_value(&budget.metadata).expect("encodes"),
            json!({
                "name": "cache",
                "namespace": "shop",
                "uid": "5d0c1f0e-7a39-4c55-9b1e-2f7de1a4c3b2",
                "resourceVersion": "48213",
                "generation": 1
            }),
            "no labels, annotations, owners, managed fields or times stay as text"
        );
        assert_eq!(budget.marks.applied, Some(0x0011_2233_aabb_ccdd));
        assert_eq!(
            budget.marks.owner,
            Some(Owner {
                uid: hash64(Some("0f8a3c2e-1111-4222-8333-944455556666".to_string())),
                name: None,
            }),
            "controlled by the Memcached of its own name"
        );
        // Any change of a label or an owner reference changes the marks.
        let mut relabelled = full.clone();
        relabelled
            .labels
            .get_or_insert_default()
            .insert("app.kubernetes.io/instance".into(), "other".into());
        assert_ne!(
            Marks::of(&relabelled).labels_and_owners,
            budget.marks.labels_and_owners
        );
        let mut not_blocking = full.clone();
        not_blocking.owner_references.get_or_insert_default()[0].block_owner_deletion = None;
        assert_ne!(
            Marks::of(&not_blocking).labels_and_owners,
            budget.marks.labels_and_owners
        );
        // An annotation other than the applied hash changes nothing that is kept.
        let mut annotated = full;
        annotated
            .annotations
            .get_or_insert_default()
            .insert("example.com/other".into(), "x".into());
        assert_eq!(CachedBudget::from(annotated), budget);
    }

    #[test]
    fn a_cached_statefulset_has_no_spec_and_three_status_fields() {
        let stored = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "cache", "namespace": "shop", "uid": "u", "generation": 4,
                         "resourceVersion": "9", "annotations": {"a": "b"},
                         "labels": {"app.kubernetes.io/instance": "cache"},
                         "ownerReferences": [{"apiVersion": "cache.f2367556.dev/v1alpha1",
                                              "kind": "Memcached", "name": "other",
                                              "uid": "m", "controller": true}],
                         "managedFields": [{"manager": "memcached-operator"}]},
            "spec": {"replicas": 3, "selector": {}, "serviceName": "cache",
                     "template": {"spec": {"containers": [{"name": "memcached"}]}}},
            "status": {"replicas": 3, "updatedReplicas": 2, "observedGeneration": 4,
                       "readyReplicas": 1, "currentRevision": "cache-1",
                       "conditions": [{"type": "X", "status": "True"}]}
        });
        let expected = json!({
            "metadata": {"name": "cache", "namespace": "shop", "uid": "u",
                         "generation": 4, "resourceVersion": "9"},
            "status": {"replicas": 3, "updatedReplicas": 2, "observedGeneration": 4}
        });
        // As a watch fills the cache: decoded as the compact type.
        let watched: CachedStatefulSet = serde_json::from_value(stored.clone()).expect("decodes");
        assert_eq!(serde_json::to_value(&watched).expect("encodes"), expected);
        assert_eq!(watched.marks.applied, None, "no applied hash");
        assert_eq!(
            watched.marks.owner.as_ref().and_then(|o| o.name.as_deref()),
            Some("other"),
            "an owner of another name keeps its name"
        );
        // As an apply's answer enters it: the whole object, reduced alike.
        let applied: StatefulSet = serde_json::from_value(stored).expect("decodes");
        assert_eq!(StatefulSet::cached(applied), watched);
    }

    #[test]
    fn a_cached_pod_is_its_name_instance_deletion_and_readiness() {
        let mut pod: CachedPod = serde_json::from_value(json!({
            "metadata": {"name": "cache-1", "namespace": "shop", "uid": "u",
                         "resourceVersion": "12",
                         "deletionTimestamp": "2026-05-02T09:14:08Z",
                         "labels": {"app.kubernetes.io/instance": "cache",
                                    "app.kubernetes.io/name": "memcached"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                              "name": "cache", "uid": "s"}]},
            "spec": {"containers": [{"name": "memcached"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [
                           {"type": "PodScheduled", "status": "True"},
                           {"type": "Ready", "status": "True",
                            "lastTransitionTime": "2026-05-02T09:14:08Z"}]}
        }))
        .expect("decodes");
        reduce_pod(&mut pod);
        assert_eq!(
            serde_json::to_value(&pod).expect("encodes"),
            json!({
                "metadata": {"name": "cache-1", "namespace": "shop",
                             "deletionTimestamp": "2026-05-02T09:14:08Z",
                             "labels": {"app.kubernetes.io/instance": "cache"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            })
        );
        assert_eq!(
            owner_of_pod(&pod),
            Some(ObjectRef::new("cache").within("shop"))
        );
    }

    #[test]
    fn only_a_change_beyond_the_resource_version_counts() {
        let mut pod = CachedPod::default();
        pod.metadata.name = Some("cache-0".into());
        pod.metadata.resource_version = Some("1".into());
        let mut later = pod.clone();
        later.metadata.resource_version = Some("2".into());
        assert!(unchanged(Some(&pod), &later));
        assert!(!unchanged(None, &later));
        later.metadata.deletion_timestamp = pod.metadata.creation_timestamp.clone().or(Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        ));
        assert!(!unchanged(Some(&pod), &later));
    }
}
