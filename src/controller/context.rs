//! What reconciles share: the process's [`Context`] (the client, defaults, platform, Events,
//! metrics, and the backoff of each Memcached), and one run of the controller's [`Run`] (the
//! caches it fills and what it knows of its children).
//!
//! The per-object records (a Memcached's consecutive failures here, its last warning in
//! `events`) are keyed by the Memcached's uid: one re-created under the same name starts
//! afresh. They are dropped when the Memcached reconciles cleanly, when it is deleted, and when
//! a listing of the Memcacheds no longer holds it (a deletion missed while the watch was down).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::api::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;

use super::cache::children::Children;
use super::cache::compact::uid_key;
use super::cache::known::KnownChildren;
use super::desired::children::Platform;
use super::events::Events;
use super::metrics::Metrics;
use crate::admission::Defaults;
use crate::api::v1beta1::Memcached;
use crate::operator;

/// How often every Memcached is looked at again (`cache::sweep`). Such a look reads only the
/// caches, so it costs no request unless something differs; it repairs what a lost watch event
/// would otherwise leave (a child deleted while a watch was re-listing).
pub const RESYNC: Duration = Duration::from_secs(300);
/// The first retry delay after a failure; it doubles per consecutive failure.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest retry delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// How long a reconcile that wrote a status waits for the cache to hold that write.
pub const ECHO_PATIENCE: Duration = Duration::from_secs(5);

/// The delay before retrying after `failures` consecutive failures: doubling from
/// [`BACKOFF_BASE`], capped at [`BACKOFF_CAP`].
pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    BACKOFF_BASE
        .saturating_mul(1u32 << exponent)
        .min(BACKOFF_CAP)
}

/// What every reconciliation shares.
pub struct Context {
    /// The controller's API client (bounded by the manager).
    pub client: Client,
    /// Defaults applied in memory (defense in depth).
    pub defaults: Defaults,
    /// How pods must run on this cluster.
    pub platform: Platform,
    /// Publishes Events.
    pub events: Events,
    /// Reconciliation metrics.
    pub metrics: Metrics,
    /// Consecutive failures per Memcached (by uid), for the backoff.
    failures: Failures,
    /// Reconciles at once; 0 for no bound.
    pub concurrency: u16,
}

impl Context {
    /// Creates the shared context.
    pub fn new(client: Client, defaults: Defaults, platform: Platform, metrics: Metrics) -> Self {
        Self {
            events: Events::new(
                client.clone(),
                operator::NAME,
                std::env::var("HOSTNAME").ok(),
                metrics.record("last_warning"),
                metrics.record("reported_restarts"),
            ),
            failures: Failures::new(metrics.record("backoff")),
            client,
            defaults,
            platform,
            metrics,
            concurrency: 0,
        }
    }

    /// Counts a failure of `object`; how many in a row.
    pub fn record_failure(&self, object: &ObjectMeta) -> u32 {
        self.failures.record(object)
    }

    /// Forgets the failures of `object`: it reconciled cleanly.
    pub fn clear_failures(&self, object: &ObjectMeta) {
        self.failures.clear(object);
    }

    /// Forgets every record of a deleted Memcached.
    pub fn forget(&self, object: &ObjectMeta) {
        self.failures.clear(object);
        self.events.forget(object);
    }

    /// Keeps the records of the Memcacheds of `listed` (by uid key) only.
    pub fn retain(&self, listed: &HashSet<u64>) {
        self.failures.retain(listed);
        self.events.retain(listed);
    }
}

/// Consecutive failures per Memcached, by uid; how many are held is published on a gauge.
#[derive(Debug, Default)]
pub struct Failures {
    counts: Mutex<HashMap<u64, u32>>,
    held: Gauge,
}

impl Failures {
    /// No failures, counted on `held`.
    pub fn new(held: Gauge) -> Self {
        Self {
            counts: Mutex::default(),
            held,
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u32>> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counted(&self, counts: &HashMap<u64, u32>) {
        self.held
            .set(i64::try_from(counts.len()).unwrap_or(i64::MAX));
    }

    /// Counts a failure of `object`; how many in a row.
    pub fn record(&self, object: &ObjectMeta) -> u32 {
        let mut counts = self.counts();
        let count = counts.entry(uid_key(object)).or_insert(0);
        *count = count.saturating_add(1);
        let count = *count;
        self.counted(&counts);
        count
    }

    /// Forgets the failures of `object`.
    pub fn clear(&self, object: &ObjectMeta) {
        let mut counts = self.counts();
        if counts.remove(&uid_key(object)).is_some() {
            self.counted(&counts);
        }
    }

    /// Keeps the failures of the Memcacheds of `listed` (by uid key) only.
    pub fn retain(&self, listed: &HashSet<u64>) {
        let mut counts = self.counts();
        counts.retain(|uid, _| listed.contains(uid));
        self.counted(&counts);
    }
}

/// What one run of the controller shares: the process's context, the caches this run fills and
/// what it knows of its children.
pub struct Run {
    /// The process's context.
    pub context: Arc<Context>,
    /// Every Memcached.
    pub memcacheds: Store<Memcached>,
    /// Changes each time the cache of Memcacheds takes an event.
    pub memcacheds_moved: watch::Receiver<()>,
    /// The children's caches.
    pub children: Children,
    /// What the controller last applied or verified of each child.
    pub known: Arc<KnownChildren>,
}

impl Run {
    /// Forgets the records of `object` if the cache no longer holds it (at that uid), and what
    /// is known of its children if it holds none of that name: a reconcile that ends after its
    /// Memcached's deletion leaves nothing behind.
    pub fn forget_if_gone(&self, object: &Memcached) {
        let cached = self.memcacheds.get(&ObjectRef::from(object));
        if cached
            .as_ref()
            .is_none_or(|cached| cached.metadata.uid != object.metadata.uid)
        {
            self.context.forget(&object.metadata);
            if cached.is_none() {
                self.known.forget_named(&object.metadata);
            }
        }
    }

    /// Completes once the cache holds a version of `object` other than `before` (or none at
    /// all), or after [`ECHO_PATIENCE`]: a status write is then in the cache before the object
    /// is reconciled again, so that no reconcile judges a status older than the last written.
    pub async fn cache_moved_past(&self, object: &ObjectRef<Memcached>, before: Option<&str>) {
        let mut moved = self.memcacheds_moved.clone();
        moved.mark_unchanged();
        let past = |store: &Store<Memcached>| {
            store
                .get(object)
                .is_none_or(|cached| cached.metadata.resource_version.as_deref() != before)
        };
        let _ = tokio::time::timeout(ECHO_PATIENCE, async {
            while !past(&self.memcacheds) {
                if moved.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_and_stops_at_five_minutes() {
        let delays: Vec<u64> = (1..=12).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(
            delays,
            vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
        );
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
        assert_eq!(backoff(0), BACKOFF_BASE);
    }

    fn memcached(uid: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some("cache".into()),
            namespace: Some("shop".into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn failures_are_kept_by_uid_and_forgotten_with_their_memcached() {
        let held = Gauge::default();
        let failures = Failures::new(held.clone());
        assert_eq!(failures.record(&memcached("u-1")), 1);
        assert_eq!(failures.record(&memcached("u-1")), 2);
        assert_eq!(
            failures.record(&memcached("u-2")),
            1,
            "re-created under the same name: no inherited backoff"
        );
        assert_eq!(held.get(), 2);
        failures.clear(&memcached("u-1"));
        assert_eq!(held.get(), 1);
        failures.retain(&HashSet::from([uid_key(&memcached("u-3"))]));
        assert_eq!(held.get(), 0, "a listing without it");
        assert_eq!(failures.record(&memcached("u-2")), 1);
    }
}
