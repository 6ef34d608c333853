//! Watches the pods of the operator's StatefulSets, keeping of each its name, namespace, the
//! `app.kubernetes.io/instance` label (whose Memcached it is), its deletion timestamp and its
//! Ready condition's status (all that `status.servers` needs), how often its memcached
//! container was restarted and how it last ended (what a restart's Event says), and which of
//! the operator's sidecars stopped on an error and why (what `Degraded` says); and, for the
//! restart in place that drops a withdrawn client CA, when it was created and its two
//! annotations that ask for it (`desired::client_cas`).

use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::child::ours;
use super::compact::{CachedPod, Conditions, ContainerRestarts, hash64};
use super::watch::{self, Listing};
use crate::api::v1beta1::Memcached;
use crate::sidecar::ca_restart::{REQUEST_ANNOTATION, RESTARTS_ANNOTATION};
use crate::sidecar::{refresher, relay};

/// The label naming the Memcached a pod serves.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

/// The container of a memcached pod whose restarts are reported.
pub const MEMCACHED_CONTAINER: &str = "memcached";

/// The operator's sidecars whose stop on an error is reported: they say why in their
/// termination message (`sidecar::termination`).
pub const REPORTED_SIDECARS: [&str; 2] = [refresher::CONTAINER_NAME, relay::CONTAINER_NAME];

/// Whether `container` is one of [`REPORTED_SIDECARS`] that last ended on an error and is not
/// running again.
fn stopped_sidecar(container: &ContainerRestarts) -> bool {
    REPORTED_SIDECARS.contains(&container.name.as_str())
        && !container.ready
        && container
            .last_state
            .as_ref()
            .and_then(|state| state.terminated.as_ref())
            .is_some_and(|ended| ended.exit_code != 0)
}

/// Reduces a Pod to its name, namespace, instance label, deletion timestamp, Ready status,
/// memcached container's restarts and stopped sidecars.
pub fn reduce_pod(pod: &mut CachedPod) {
    let status = pod.status.take().unwrap_or_default();
    let ready = status
        .conditions
        .and_then(|conditions| conditions.into_iter().find(|c| c.type_ == "Ready"));
    let restarts = status.container_statuses.and_then(|statuses| {
        statuses
            .into_iter()
            .find(|c| c.name == MEMCACHED_CONTAINER && c.restart_count > 0)
            .map(|c| ContainerRestarts { ready: false, ..c })
    });
    let stopped: Vec<ContainerRestarts> = status
        .init_container_statuses
        .map(Vec::from)
        .unwrap_or_default()
        .into_iter()
        .filter(stopped_sidecar)
        .collect();
    let instance = pod.metadata.labels.take().and_then(|mut labels| {
        let name = labels.remove(INSTANCE_LABEL)?;
        Some([(INSTANCE_LABEL.to_string(), name)].into())
    });
    let asked = pod.metadata.annotations.take().and_then(|mut annotations| {
        let kept: std::collections::BTreeMap<String, String> =
            [REQUEST_ANNOTATION, RESTARTS_ANNOTATION]
                .into_iter()
                .filter_map(|key| Some((key.to_string(), annotations.remove(key)?)))
                .collect();
        (!kept.is_empty()).then_some(kept)
    });
    pod.metadata = ObjectMeta {
        name: pod.metadata.name.take(),
        namespace: pod.metadata.namespace.take(),
        labels: instance,
        annotations: asked,
        creation_timestamp: pod.metadata.creation_timestamp.take(),
        deletion_timestamp: pod.metadata.deletion_timestamp.take(),
        ..ObjectMeta::default()
    };
    pod.status =
        (ready.is_some() || restarts.is_some() || !stopped.is_empty()).then(|| Conditions {
            conditions: ready.map(|ready| vec![ready]),
            container_statuses: restarts.map(|restarts| vec![restarts]),
            init_container_statuses: (!stopped.is_empty()).then(|| stopped.into_boxed_slice()),
        });
}

/// The predicate of the pods' watch: a pod that appears, goes, or changes readiness, deletion
/// or memcached's restarts wakes its Memcached.
pub fn kept(pod: &CachedPod) -> Option<u64> {
    let metadata = &pod.metadata;
    Some(hash64((
        &metadata.name,
        &metadata.namespace,
        &metadata.labels,
        &metadata.annotations,
        metadata.deletion_timestamp.is_some(),
        &pod.status,
        pod.gone,
    )))
}

/// The pods of the operator's StatefulSets, reduced by [`reduce_pod`], and those that changed.
pub fn pods(
    client: Client,
    on_listing: impl Fn(Listing) + Send + 'static,
) -> (Store<CachedPod>, BoxStream<'static, CachedPod>) {
    let events = watcher(Api::<CachedPod>::all(client), ours())
        .default_backoff()
        .modify(reduce_pod)
        .boxed();
    watch::follow("Pods", events, |_| {}, on_listing, kept)
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
