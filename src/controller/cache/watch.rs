//! Assembles one watch of the controller from kube-runtime's parts: the `watcher` (with its
//! default backoff), a `reflector` store, `touched_objects` and `predicate_filter`.
//!
//! Each watch fills its cache and hands on the objects whose change matters to the Memcached
//! they belong to, as judged by its predicate. Two things are added around kube's parts:
//!
//! - the object of a deletion is marked ([`Gone`]) before the predicate sees it: kube's
//!   `touched_objects` hands it on as it was before, so a predicate on what is kept would take
//!   a deletion for no change and a deleted child would not be put back;
//! - a failure is said (logged, and shown to `on_listing`) and not handed on: the watch's own
//!   backoff retries it, while kube's `Controller` would pause every one of its triggers on it
//!   (its trigger backoff is one for all the streams it merges), so that a kind that cannot be
//!   listed would hold up the others.
//!
//! Each event is shown to `records` once the cache holds it, for the controller's records to
//! forget what was deleted, or what a new listing no longer holds.

use std::fmt::Debug;
use std::time::Duration;

use futures::future::ready;
use futures::stream::{BoxStream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Predicate, PredicateConfig, WatchStreamExt, watcher};
use tracing::warn;

use super::compact::Gone;

/// How long kube's predicate filter remembers an object it has not seen since: the record of
/// a deleted object goes after at most twice this long; an object seen again after it wakes
/// its Memcached once.
pub const PREDICATE_TTL: Duration = Duration::from_secs(600);

/// Whether a watch has listed its kind, or why it could not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listing {
    /// The list (and any re-list since) succeeded.
    Listed,
    /// The last list or watch failed with this error.
    Failed(String),
}

/// A watch's events as the API server sends them, with kube's default backoff.
pub type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// Fills a cache of kind `K` from `events` and returns it with the objects that changed, as
/// `predicate` judges them (deletions always do). `kind` names the watch in logs.
pub fn follow<K, P>(
    kind: &'static str,
    events: Events<K>,
    records: impl Fn(&watcher::Event<K>) + Send + 'static,
    on_listing: impl Fn(Listing) + Send + 'static,
    predicate: P,
) -> (Store<K>, BoxStream<'static, K>)
where
    K: Resource<DynamicType = ()> + Gone + Clone + Debug + Send + Sync + 'static,
    P: Predicate<K> + Send + 'static,
{
    let (store, writer) = reflector::store();
    let changed = events
        .reflect(writer)
        .filter_map(move |event| {
            ready(match event {
                Ok(event) => {
                    records(&event);
                    if matches!(event, watcher::Event::InitDone) {
                        on_listing(Listing::Listed);
                    }
                    Some(Ok(mark_deletion(event)))
                }
                Err(error) => {
                    warn!(%error, kind, "watching failed; retrying with backoff");
                    on_listing(Listing::Failed(reason(&error)));
                    None
                }
            })
        })
        .touched_objects()
        .predicate_filter(predicate, PredicateConfig::default().ttl(PREDICATE_TTL))
        .filter_map(|object| ready(object.ok()))
        .boxed();
    (store, changed)
}

/// What a failed watch says, for a person: the API server's message when it answered with
/// one (`... is forbidden: User ... cannot list ...`), else the error.
pub fn reason(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.message.clone(),
        watcher::Error::WatchError(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Marks the object of a deletion as gone.
fn mark_deletion<K: Gone>(event: watcher::Event<K>) -> watcher::Event<K> {
    match event {
        watcher::Event::Delete(mut object) => {
            object.mark_gone();
            watcher::Event::Delete(object)
        }
        other => other,
    }
}

/// Events of one kind turned into events of another (a metadata-only watch's
/// `PartialObjectMeta` into what the cache keeps).
pub fn map_events<A, B>(event: watcher::Event<A>, into: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(into(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(into(object)),
        watcher::Event::InitApply(object) => watcher::Event::InitApply(into(object)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use kube::api::ObjectMeta;
    use kube::runtime::reflector::ObjectRef;

    use super::*;
    use crate::controller::cache::child::kept;
    use crate::controller::cache::compact::CachedBudget;

    fn budget(version: &str, generation: i64) -> CachedBudget {
        CachedBudget::from(ObjectMeta {
            name: Some("cache".into()),
            namespace: Some("shop".into()),
            uid: Some("u-1".into()),
            resource_version: Some(version.into()),
            generation: Some(generation),
            ..ObjectMeta::default()
        })
    }

    #[tokio::test]
    async fn only_changes_of_what_is_kept_and_deletions_come_through_once_cached() {
        let events = futures::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(budget("1", 1))),
            Ok(watcher::Event::InitDone),
            // A status update: a new resourceVersion, nothing kept changed.
            Ok(watcher::Event::Apply(budget("2", 1))),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::Apply(budget("3", 2))),
            Ok(watcher::Event::Delete(budget("4", 2))),
        ]);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let listings = Arc::new(Mutex::new(Vec::new()));
        let (store, changed) = {
            let seen = seen.clone();
            let listings = listings.clone();
            follow(
                "PodDisruptionBudgets",
                events.boxed(),
                move |event| {
                    if let watcher::Event::Delete(object) = event {
                        seen.lock()
                            .expect("lock")
                            .push(object.metadata.resource_version.clone());
                    }
                },
                move |listing| listings.lock().expect("lock").push(listing),
                kept::<CachedBudget>,
            )
        };
        let changed: Vec<_> = changed
            .map(|b| (b.metadata.resource_version.clone(), b.marks.gone))
            .collect()
            .await;
        assert_eq!(
            changed,
            [
                (Some("1".to_string()), false),
                (Some("3".to_string()), false),
                (Some("4".to_string()), true)
            ]
        );
        assert_eq!(*seen.lock().expect("lock"), [Some("4".to_string())]);
        assert_eq!(store.get(&ObjectRef::new("cache").within("shop")), None);
        let listings = listings.lock().expect("lock").clone();
        assert_eq!(listings.len(), 2, "{listings:?}");
        assert_eq!(listings[0], Listing::Listed);
        assert!(matches!(&listings[1], Listing::Failed(e) if e.contains("resourceVersion")));
    }

    #[test]
    fn a_failure_says_what_the_api_server_said() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "certificates.cert-manager.io is forbidden: User \"x\" cannot list"
        }))
        .expect("a Status");
        let failed = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        assert_eq!(
            reason(&failed),
            "certificates.cert-manager.io is forbidden: User \"x\" cannot list"
        );
        assert!(reason(&watcher::Error::NoResourceVersion).contains("resourceVersion"));
    }
}
