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
//! - **Service, PodDisruptionBudget, NetworkPolicy, Certificate, ServiceMonitor**
//!   (metadata-only watches of the ones labelled as ours: the API server sends
//!   `PartialObjectMetadata`): the same metadata and marks. A Service has no generation, so its
//!   resourceVersion stands for its spec version (nothing else writes a headless Service); the
//!   others' generation does. Certificates and ServiceMonitors are watched only where the
//!   cluster serves their API (`cert-manager.io/v1`, `monitoring.coreos.com/v1`) when the
//!   controller starts.
//! - **Pod** (a full watch of the ones labelled as ours): name, namespace, the
//!   `app.kubernetes.io/instance` label (whose Memcached it is), the deletion timestamp and the
//!   Ready condition's status. That is all `status.servers` needs.
//!
//! Each watch wakes the controller only for a change that matters: not for a change of what
//! the cache does not keep (a budget's or a pod's other status fields, a StatefulSet's other
//! status counters), nor for a Memcached status write of the controller's own coming back
//! ([`StatusStandIn::is_echo`]). Deletions always wake, and make the controller's records
//! ([`KnownChildren`], [`StatusStandIn`]) forget the object; a watch that lists again makes
//! them forget its kind.
//!
//! The modules below keep the rest of what the controller holds in memory: `compact` the
//! types kept of children and pods, `known` what the controller last knew of each child,
//! `status_stand_in` the statuses just written, `watches` the watches of children on a task of
//! their own, `sweep` the periodic look at every Memcached.
//!
//! This module holds no reconciling logic; it only shapes what is kept and what wakes.

pub mod compact;
pub mod known;
pub mod status_stand_in;
pub mod sweep;
pub mod watches;

use std::fmt::Debug;
use std::sync::Arc;

use futures::future;
use futures::stream::{BoxStream, Stream};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
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
use self::compact::Marks;
pub use self::compact::{
    CachedBudget, CachedCertificate, CachedNetworkPolicy, CachedService, CachedServiceMonitor,
};
use self::compact::{CachedPod, CachedStatefulSet, Conditions, Marked, hash64};
use self::known::KnownChildren;
use self::status_stand_in::StatusStandIn;
use crate::api::v1beta1::Memcached;
use crate::controller::desired::children::certificate::Certificate;
use crate::controller::desired::children::service_monitor::ServiceMonitor;
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
    /// The kind, for logs, metrics, errors and the controller's records ([`KnownChildren`]).
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

/// A child kept as metadata only, whose generation moves when its spec changes.
macro_rules! generation_child {
    ($kind:ident, $cached:ident) => {
        impl Child for $kind {
            const KIND: &'static str = stringify!($kind);
            type Cached = $cached;
            fn cached(full: Self) -> $cached {
                $cached::from(full.metadata)
            }
            fn spec_version(metadata: &ObjectMeta) -> Option<u64> {
                metadata.generation.map(|g| g as u64)
            }
        }
    };
}

generation_child!(PodDisruptionBudget, CachedBudget);
generation_child!(NetworkPolicy, CachedNetworkPolicy);
generation_child!(Certificate, CachedCertificate);
generation_child!(ServiceMonitor, CachedServiceMonitor);

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

/// Fills `writer` from `events` and yields the objects whose change wakes the controller.
///
/// An added or modified object wakes if `wakes(cached, new)` finds a change that matters
/// against the one cached before it (during a re-list, the cache still holds the previous
/// list), judged once the cache holds the new one. A deleted object always wakes. Each event
/// is shown to `records` first, for the controller's records of that kind to forget what was
/// deleted or is listed again.
fn reflect<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    mut writer: Writer<K>,
    records: impl Fn(&watcher::Event<K>) + Send + 'static,
    wakes: impl Fn(Option<&K>, &K) -> bool + Send + 'static,
) -> Objects<K>
where
    K: Lookup + Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    <K as Lookup>::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let reader = writer.as_reader();
    events
        .try_filter_map(move |event| {
            records(&event);
            let before = match &event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    reader.get(&ObjectRef::from(object))
                }
                _ => None,
            };
            // The cache takes the event before `wakes` judges it: a reconcile running on
            // another thread meanwhile must not find a record `wakes` ends (the stand-in of a
            // status written) gone while the cache still holds the version before it.
            writer.apply_watcher_event(&event);
            let woken = match &event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    wakes(before.as_deref(), object).then(|| object.clone())
                }
                watcher::Event::Delete(object) => Some(object.clone()),
                watcher::Event::Init | watcher::Event::InitDone => None,
            };
            future::ready(Ok(woken))
        })
        .boxed()
}

/// The cache of every Memcached, and the stream of changed Memcacheds that fills it. A status
/// write of the controller's own coming back wakes nothing ([`StatusStandIn::is_echo`]).
pub fn memcacheds(
    client: Client,
    stand_in: Arc<StatusStandIn>,
) -> (Store<Memcached>, Objects<Memcached>) {
    let writer = Writer::default();
    let cached = writer.as_reader();
    let events = watcher(Api::<Memcached>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(|memcached: &mut Memcached| forget_write_history(memcached.meta_mut()));
    let records = {
        let stand_in = stand_in.clone();
        move |event: &watcher::Event<Memcached>| match event {
            watcher::Event::Delete(memcached) => stand_in.forget(memcached.meta()),
            watcher::Event::Init => stand_in.relisting(),
            _ => {}
        }
    };
    let changed = reflect(events, writer, records, move |old, new| {
        !stand_in.is_echo(new.meta(), new.status.as_ref()) && !unchanged(old, new)
    });
    (cached, changed)
}

/// The cache of the operator's children of kind `K`, filled from `events`, and the stream of
/// the ones whose change wakes their owner.
fn children<K>(
    events: impl Stream<Item = Result<watcher::Event<K::Cached>, watcher::Error>> + Send + 'static,
    known: Arc<KnownChildren>,
    wakes: impl Fn(Option<&K::Cached>, &K::Cached) -> bool + Send + 'static,
) -> (Store<K::Cached>, Objects<K::Cached>)
where
    K: Child,
    K::Cached: Lookup<DynamicType = ()>,
{
    let writer = Writer::default();
    let cached = writer.as_reader();
    let records = move |event: &watcher::Event<K::Cached>| match event {
        watcher::Event::Delete(child) => known.forget(K::KIND, child.meta()),
        watcher::Event::Init => known.relisting(K::KIND),
        _ => {}
    };
    let touched = reflect(events.default_backoff(), writer, records, wakes);
    (cached, touched)
}

/// The operator's StatefulSets as [`CachedStatefulSet`]s; a change of what is kept wakes the
/// owner.
pub fn statefulsets(
    client: Client,
    known: Arc<KnownChildren>,
) -> (Store<CachedStatefulSet>, Objects<CachedStatefulSet>) {
    let events = watcher(Api::<CachedStatefulSet>::all(client), ours());
    children::<StatefulSet>(events, known, |old, new| !unchanged(old, new))
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
    known: Arc<KnownChildren>,
) -> (Store<CachedService>, Objects<CachedService>) {
    let events = metadata_only::<Service, CachedService>(client);
    children::<Service>(events, known, |old, new| old != Some(new))
}

/// The operator's PodDisruptionBudgets, metadata only; a change of what is kept (not the
/// disruption controller's status updates) wakes the owner.
pub fn budgets(
    client: Client,
    known: Arc<KnownChildren>,
) -> (Store<CachedBudget>, Objects<CachedBudget>) {
    let events = metadata_only::<PodDisruptionBudget, CachedBudget>(client);
    children::<PodDisruptionBudget>(events, known, |old, new| !unchanged(old, new))
}

/// The operator's NetworkPolicies, metadata only; a change of what is kept wakes the owner.
pub fn network_policies(
    client: Client,
    known: Arc<KnownChildren>,
) -> (Store<CachedNetworkPolicy>, Objects<CachedNetworkPolicy>) {
    let events = metadata_only::<NetworkPolicy, CachedNetworkPolicy>(client);
    children::<NetworkPolicy>(events, known, |old, new| !unchanged(old, new))
}

/// The operator's cert-manager Certificates, metadata only; a change of what is kept (not
/// cert-manager's status updates) wakes the owner.
pub fn certificates(
    client: Client,
    known: Arc<KnownChildren>,
) -> (Store<CachedCertificate>, Objects<CachedCertificate>) {
    let events = metadata_only::<Certificate, CachedCertificate>(client);
    children::<Certificate>(events, known, |old, new| !unchanged(old, new))
}

/// The operator's ServiceMonitors, metadata only; a change of what is kept wakes the owner.
pub fn service_monitors(
    client: Client,
    known: Arc<KnownChildren>,
) -> (Store<CachedServiceMonitor>, Objects<CachedServiceMonitor>) {
    let events = metadata_only::<ServiceMonitor, CachedServiceMonitor>(client);
    children::<ServiceMonitor>(events, known, |old, new| !unchanged(old, new))
}

/// The pods of the operator's StatefulSets, reduced by [`reduce_pod`]; a pod that appears,
/// goes, or changes readiness or deletion wakes its Memcached.
pub fn pods(client: Client) -> (Store<CachedPod>, Objects<CachedPod>) {
    let writer = Writer::default();
    let cached = writer.as_reader();
    let events = watcher(Api::<CachedPod>::all(client), ours())
        .default_backoff()
        .modify(reduce_pod);
    let changed = reflect(events, writer, |_| {}, |old, new| !unchanged(old, new));
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
mod tests;
