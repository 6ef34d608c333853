//! Remembers what the controller's own writes returned, so that the caches can tell its writes
//! from everyone else's.
//!
//! Records kept in memory only and both small (a few machine words per object):
//!
//! - **echoes**: the resourceVersion each write (a child's apply, a status patch) returned.
//!   The watch event that carries exactly that version is the write coming back; it updates the
//!   cache but wakes nothing, because the reconcile that wrote it already acted on it. A write
//!   whose echo arrives before its answer is recorded wakes one reconcile that finds nothing to
//!   do, which is harmless. Until a status write's echo arrives, the status written stands in
//!   for the cached one, so a reconcile woken in between does not act on an older status.
//! - **known children**: per child, the uid, spec version (the generation, or for a Service,
//!   which has none, the resourceVersion) and labels and owners at which the controller last
//!   applied it or compared it field by field, and the hash of the desired state it had then.
//!   A cached child at another spec version was changed by someone else and is compared again.
//!
//! - **reports awaited**: per StatefulSet the controller just wrote, until when the
//!   Memcached's status waits for the StatefulSet controller's report on that write rather
//!   than be written without it. Dropped when the report comes or the time is up.
//!
//! Nothing here talks to the API server or decides anything; `drift` decides, and the watch
//! streams in `cache` forget what belongs to deleted objects. Keys and values are hashed to
//! 64 bits: a collision can at worst make a child look known when it is not (one in 2^64).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use kube::api::ObjectMeta;

use crate::api::v1beta1::MemcachedStatus;

/// How many writes of one object may await their echo at once; older ones are dropped.
const ECHOES_PER_OBJECT: usize = 4;

/// What the controller last knew of a child, as hashes: its uid, its spec version and the
/// desired state it was applied or verified against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    /// The child's uid.
    pub uid: u64,
    /// Its spec version (generation, or resourceVersion for kinds without one).
    pub version: u64,
    /// The hash of the desired state (the applied-hash annotation).
    pub desired: u64,
    /// The hash of its labels and owner references (`Marks::labels_and_owners`).
    pub labels_and_owners: u64,
}

/// The records of one kind, keyed by a hash of namespace and name.
#[derive(Debug, Default)]
struct Records {
    echoes: HashMap<u64, Vec<u64>>,
    statuses: HashMap<u64, MemcachedStatus>,
    known: HashMap<u64, Known>,
    reports: HashMap<u64, Instant>,
}

/// The controller's memory of its own writes.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<&'static str, Records>>);

/// A 64-bit hash of `value`.
pub fn hash64(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

fn key(metadata: &ObjectMeta) -> u64 {
    hash64((&metadata.namespace, &metadata.name))
}

impl OwnWrites {
    fn records(&self) -> MutexGuard<'_, HashMap<&'static str, Records>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the resourceVersion a write of `kind` returned.
    pub fn wrote(&self, kind: &'static str, metadata: &ObjectMeta) {
        let Some(version) = &metadata.resource_version else {
            return;
        };
        let mut records = self.records();
        let echoes = records.entry(kind).or_default().echoes.entry(key(metadata));
        let pending = echoes.or_default();
        if pending.len() == ECHOES_PER_OBJECT {
            pending.remove(0);
        }
        pending.push(hash64(version));
    }

    /// Records a status write of a Memcached: its resourceVersion and the status written,
    /// which [`written_status`](Self::written_status) returns until the write's echo is seen.
    pub fn wrote_status(&self, metadata: &ObjectMeta, status: MemcachedStatus) {
        self.wrote(MEMCACHED, metadata);
        let mut records = self.records();
        let statuses = &mut records.entry(MEMCACHED).or_default().statuses;
        statuses.insert(key(metadata), status);
    }

    /// The status the controller wrote for a Memcached whose echo has not been seen yet: newer
    /// than the cached object's.
    pub fn written_status(&self, metadata: &ObjectMeta) -> Option<MemcachedStatus> {
        let records = self.records();
        records
            .get(MEMCACHED)?
            .statuses
            .get(&key(metadata))
            .cloned()
    }

    /// Whether `metadata` is the echo of one of the controller's writes of that object; the
    /// record is used up when it is.
    pub fn is_echo(&self, kind: &'static str, metadata: &ObjectMeta) -> bool {
        let Some(version) = &metadata.resource_version else {
            return false;
        };
        let mut records = self.records();
        let Some(records) = records.get_mut(kind) else {
            return false;
        };
        let key = key(metadata);
        let Some(pending) = records.echoes.get_mut(&key) else {
            return false;
        };
        let Some(at) = pending.iter().position(|v| *v == hash64(version)) else {
            return false;
        };
        pending.remove(at);
        if pending.is_empty() {
            records.echoes.remove(&key);
            records.statuses.remove(&key);
        }
        true
    }

    /// Whether an echo of a write of the `kind` named by `metadata` (namespace and name) is
    /// awaited.
    pub fn awaits_echo(&self, kind: &'static str, metadata: &ObjectMeta) -> bool {
        let records = self.records();
        records
            .get(kind)
            .is_some_and(|r| r.echoes.contains_key(&key(metadata)))
    }

    /// Drops every awaited echo of `kind`: its watch is listing again, and a list shows only
    /// the latest version of each object, so some echoes will never come.
    pub fn relisting(&self, kind: &'static str) {
        if let Some(records) = self.records().get_mut(kind) {
            records.echoes.clear();
            records.statuses.clear();
        }
    }

    /// What is known of the child `kind` named by `metadata` (namespace and name).
    pub fn known(&self, kind: &'static str, metadata: &ObjectMeta) -> Option<Known> {
        let records = self.records();
        records.get(kind)?.known.get(&key(metadata)).copied()
    }

    /// Records what is now known of a child.
    pub fn learn(&self, kind: &'static str, metadata: &ObjectMeta, what: Known) {
        let mut records = self.records();
        let known = &mut records.entry(kind).or_default().known;
        known.insert(key(metadata), what);
    }

    /// Forgets everything about an object that was deleted.
    pub fn forget(&self, kind: &'static str, metadata: &ObjectMeta) {
        if let Some(records) = self.records().get_mut(kind) {
            let key = key(metadata);
            records.echoes.remove(&key);
            records.statuses.remove(&key);
            records.known.remove(&key);
            records.reports.remove(&key);
        }
    }

    /// Records that the controller wrote the `kind` named by `metadata` and awaits its
    /// controller's report on that write until `until`.
    pub fn await_report(&self, kind: &'static str, metadata: &ObjectMeta, until: Instant) {
        let mut records = self.records();
        let reports = &mut records.entry(kind).or_default().reports;
        reports.insert(key(metadata), until);
    }

    /// Until when a report on the `kind` named by `metadata` is still awaited at `now`: `None`
    /// when none is, or its time is up (the record is dropped then).
    pub fn report_awaited(
        &self,
        kind: &'static str,
        metadata: &ObjectMeta,
        now: Instant,
    ) -> Option<Instant> {
        let mut records = self.records();
        let reports = &mut records.get_mut(kind)?.reports;
        let key = key(metadata);
        let until = *reports.get(&key)?;
        if until <= now {
            reports.remove(&key);
            return None;
        }
        Some(until)
    }

    /// The report awaited on the `kind` named by `metadata` came.
    pub fn reported(&self, kind: &'static str, metadata: &ObjectMeta) {
        if let Some(records) = self.records().get_mut(kind) {
            records.reports.remove(&key(metadata));
        }
    }

    /// How many objects of `kind` await an echo, how many are known children, and how many
    /// await a report.
    pub fn counts(&self, kind: &'static str) -> (usize, usize, usize) {
        let records = self.records();
        records.get(kind).map_or((0, 0, 0), |r| {
            (r.echoes.len(), r.known.len(), r.reports.len())
        })
    }
}

/// The kind name of the Memcacheds, as [`OwnWrites`] files them.
pub const MEMCACHED: &str = "Memcached";

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, version: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("shop".into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_the_version_a_write_returned_is_its_echo_and_only_once() {
        let own = OwnWrites::default();
        own.wrote("StatefulSet", &meta("cache", "41"));
        assert!(own.awaits_echo("StatefulSet", &meta("cache", "")));
        assert!(!own.awaits_echo("Service", &meta("cache", "")));
        assert!(!own.is_echo("StatefulSet", &meta("cache", "40")));
        assert!(!own.is_echo("Service", &meta("cache", "41")), "kinds apart");
        assert!(!own.is_echo("StatefulSet", &meta("other", "41")));
        assert!(own.is_echo("StatefulSet", &meta("cache", "41")));
        assert!(!own.is_echo("StatefulSet", &meta("cache", "41")), "used up");
        assert!(!own.awaits_echo("StatefulSet", &meta("cache", "")));
        assert_eq!(own.counts("StatefulSet"), (0, 0, 0));
    }

    #[test]
    fn a_written_status_stands_until_the_echo_of_the_last_write() {
        let own = OwnWrites::default();
        let first = MemcachedStatus {
            observed_generation: Some(1),
            ..MemcachedStatus::default()
        };
        let second = MemcachedStatus {
            observed_generation: Some(2),
            ..MemcachedStatus::default()
        };
        own.wrote_status(&meta("cache", "7"), first);
        own.wrote_status(&meta("cache", "9"), second.clone());
        assert!(
            !own.is_echo(MEMCACHED, &meta("cache", "8")),
            "someone else's"
        );
        assert!(own.is_echo(MEMCACHED, &meta("cache", "7")));
        assert_eq!(own.written_status(&meta("cache", "7")), Some(second));
        assert!(own.is_echo(MEMCACHED, &meta("cache", "9")));
        assert_eq!(own.written_status(&meta("cache", "9")), None);
    }

    #[test]
    fn a_relist_drops_the_awaited_echoes_of_its_kind_only() {
        let own = OwnWrites::default();
        own.wrote_status(&meta("cache", "7"), MemcachedStatus::default());
        own.wrote("Service", &meta("cache", "3"));
        own.relisting(MEMCACHED);
        assert_eq!(own.written_status(&meta("cache", "7")), None);
        assert!(!own.is_echo(MEMCACHED, &meta("cache", "7")));
        assert!(own.is_echo("Service", &meta("cache", "3")));
    }

    #[test]
    fn only_the_last_few_writes_await_an_echo() {
        let own = OwnWrites::default();
        for version in 1..=5 {
            own.wrote("Service", &meta("cache", &version.to_string()));
        }
        assert!(!own.is_echo("Service", &meta("cache", "1")));
        assert!(own.is_echo("Service", &meta("cache", "2")));
        assert!(own.is_echo("Service", &meta("cache", "5")));
    }

    #[test]
    fn forgetting_a_deleted_object_drops_both_records() {
        let own = OwnWrites::default();
        let known = Known {
            uid: 1,
            version: 2,
            desired: 3,
            labels_and_owners: 4,
        };
        own.wrote("Service", &meta("cache", "5"));
        own.learn("Service", &meta("cache", "5"), known);
        assert_eq!(own.known("Service", &meta("cache", "6")), Some(known));
        assert_eq!(own.known("Service", &meta("other", "5")), None);
        own.await_report("Service", &meta("cache", "5"), Instant::now() + WAIT);
        own.forget("Service", &meta("cache", "8"));
        assert_eq!(own.counts("Service"), (0, 0, 0));
    }

    const WAIT: std::time::Duration = std::time::Duration::from_secs(2);

    #[test]
    fn a_report_is_awaited_until_it_comes_or_its_time_is_up() {
        let own = OwnWrites::default();
        let now = Instant::now();
        let until = now + WAIT;
        own.await_report("StatefulSet", &meta("cache", "5"), until);
        own.await_report("StatefulSet", &meta("other", "5"), until);
        assert_eq!(
            own.report_awaited("StatefulSet", &meta("cache", "6"), now),
            Some(until)
        );
        assert_eq!(
            own.report_awaited("Service", &meta("cache", "6"), now),
            None
        );
        own.reported("StatefulSet", &meta("cache", "7"));
        assert_eq!(
            own.report_awaited("StatefulSet", &meta("cache", "7"), now),
            None
        );
        assert_eq!(
            own.report_awaited("StatefulSet", &meta("other", "5"), until),
            None
        );
        assert_eq!(own.counts("StatefulSet"), (0, 0, 0), "both dropped");
    }
}
