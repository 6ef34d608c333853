//! Watches every Memcached, keeping it as stored less its write history.
//!
//! Reconciling reads the spec (the desired children, defaulting, validation), the status (to
//! skip a status write that would change nothing), and the name, namespace, uid, generation and
//! deletion timestamp. The write history (`metadata.managedFields`) and the copy of the last
//! client-side apply (the `kubectl.kubernetes.io/last-applied-configuration` annotation) are
//! read by nothing here and are usually the largest part of the object; they are dropped as
//! each object arrives. Of the managed fields, only an `Update` entry of the operator's own for
//! the status is kept: the record of a status written by a release that wrote it with a merge
//! patch, whose fields the controller takes over once so that its applies can remove them.
//!
//! Every changed version wakes the Memcached (kube's `resource_version` predicate: a listing
//! that brings nothing new wakes nothing), the echo of the controller's own status write
//! included: that reconcile reads only caches and finds nothing to write.

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, Resource};

use super::compact::Gone;
use super::watch::{self, Listing};
use crate::api::v1beta1::Memcached;
use crate::operator;

/// The annotation `kubectl apply` (client-side) writes: a copy of the whole applied object.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The status subresource, as managed-field entries name it.
pub const STATUS: &str = "status";

impl Gone for Memcached {
    /// Nothing to mark: the API server gives a deleted object a new resourceVersion, which
    /// kube's `resource_version` predicate sees.
    fn mark_gone(&mut self) {}
}

/// Removes what records how an object was written rather than what it is: the managed fields
/// (but the operator's own `Update` entry of the status, if any) and the last-applied
/// annotation (the annotations disappear if that was the only one).
pub fn forget_write_history(metadata: &mut ObjectMeta) {
    metadata.managed_fields = metadata
        .managed_fields
        .take()
        .map(|entries| {
            entries
                .into_iter()
                .filter(|entry| {
                    entry.manager.as_deref() == Some(operator::NAME)
                        && entry.operation.as_deref() == Some("Update")
                        && entry.subresource.as_deref() == Some(STATUS)
                })
                .collect::<Vec<_>>()
        })
        .filter(|kept| !kept.is_empty());
    if let Some(annotations) = &mut metadata.annotations {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            metadata.annotations = None;
        }
    }
}

/// The cache of every Memcached, and the stream of changed Memcacheds that fills it. Every event
/// is shown to `on_event` once the cache holds it.
pub fn memcacheds(
    client: Client,
    on_event: impl Fn(&watcher::Event<Memcached>) + Send + 'static,
    on_listing: impl Fn(Listing) + Send + 'static,
) -> (
    Store<Memcached>,
    BoxStream<'static, Result<Memcached, watcher::Error>>,
) {
    let events = watcher(Api::<Memcached>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(|memcached: &mut Memcached| forget_write_history(memcached.meta_mut()))
        .boxed();
    let (store, changed) = watch::follow(
        "Memcacheds",
        events,
        on_event,
        on_listing,
        predicates::resource_version,
    );
    (store, changed.map(Ok).boxed())
}
