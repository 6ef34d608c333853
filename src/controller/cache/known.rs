//! What the controller last knew of each of its children, beyond what the caches keep: the
//! uid, spec version and labels and owners at which it last applied the child or compared it
//! field by field, and the hash of the desired state it had then (`desired::drift` judges a
//! cached child by it: at the same uid, version, labels and owners, and desired state, the
//! child is current without a request; otherwise it is compared again).
//!
//! Kept in memory only, a few machine words per child, keyed and valued by 64-bit hashes: a
//! collision can at worst make a child look known when it is not (one in 2^64). A deleted
//! child is forgotten, and so are the children of a deleted Memcached (they are named after
//! it); a kind whose watch lists again is forgotten whole, since a child deleted while the
//! watch was down sends no event. When the record is read for a child the cache lacks, only
//! one learned within [`UNSEEN_PATIENCE`] counts: a write whose deletion raced ahead of it
//! leaves a record that no watch event will end.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::api::ObjectMeta;
use prometheus_client::metrics::gauge::Gauge;

use super::compact::name_key as key;

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

/// How long after a write the cache may lack the child written before the controller writes
/// it again.
pub const UNSEEN_PATIENCE: Duration = Duration::from_secs(30);

/// Records by kind, then by a hash of namespace and name, with when each was learned.
type Records = HashMap<&'static str, HashMap<u64, (Known, Instant)>>;

/// The controller's record of its children, by kind, then by a hash of namespace and name;
/// how many there are is published on a gauge.
#[derive(Debug, Default)]
pub struct KnownChildren {
    records: Mutex<Records>,
    count: Gauge,
}

impl KnownChildren {
    /// An empty record, which keeps `count` at the number of children it holds.
    pub fn new(count: Gauge) -> Self {
        count.set(0);
        Self {
            records: Mutex::default(),
            count,
        }
    }

    fn records(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counted(&self, records: &Records) {
        let total: usize = records.values().map(HashMap::len).sum();
        self.count.set(i64::try_from(total).unwrap_or(i64::MAX));
    }

    /// What is known of the child `kind` named by `metadata` (namespace and name).
    pub fn get(&self, kind: &'static str, metadata: &ObjectMeta) -> Option<Known> {
        self.records()
            .get(kind)?
            .get(&key(metadata))
            .map(|(known, _)| *known)
    }

    /// What is known of the child `kind` named by `metadata`, if it was learned within
    /// `patience`: for a child the cache lacks.
    pub fn learned_within(
        &self,
        kind: &'static str,
        metadata: &ObjectMeta,
        patience: Duration,
    ) -> Option<Known> {
        self.records()
            .get(kind)?
            .get(&key(metadata))
            .filter(|(_, at)| at.elapsed() <= patience)
            .map(|(known, _)| *known)
    }

    /// Records what is now known of a child.
    pub fn learn(&self, kind: &'static str, metadata: &ObjectMeta, what: Known) {
        let mut records = self.records();
        records
            .entry(kind)
            .or_default()
            .insert(key(metadata), (what, Instant::now()));
        self.counted(&records);
    }

    /// Forgets the children of every kind named by `metadata`: those of a deleted Memcached.
    pub fn forget_named(&self, metadata: &ObjectMeta) {
        let mut records = self.records();
        let key = key(metadata);
        records.retain(|_, known| {
            known.remove(&key);
            !known.is_empty()
        });
        self.counted(&records);
    }

    /// Forgets a child that was deleted.
    pub fn forget(&self, kind: &'static str, metadata: &ObjectMeta) {
        let mut records = self.records();
        if let Some(known) = records.get_mut(kind) {
            known.remove(&key(metadata));
            if known.is_empty() {
                records.remove(kind);
            }
        }
        self.counted(&records);
    }

    /// Forgets every child of `kind`: its watch is listing again, or stopped.
    pub fn relisting(&self, kind: &'static str) {
        let mut records = self.records();
        records.remove(kind);
        self.counted(&records);
    }

    /// How many children of `kind` are known.
    pub fn count(&self, kind: &'static str) -> usize {
        self.records().get(kind).map_or(0, HashMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        }
    }

    const KNOWN: Known = Known {
        uid: 1,
        version: 2,
        desired: 3,
        labels_and_owners: 4,
    };

    #[test]
    fn a_child_is_known_by_kind_namespace_and_name_until_forgotten() {
        let known = KnownChildren::default();
        known.learn("StatefulSet", &meta("a", "cache"), KNOWN);
        assert_eq!(known.get("StatefulSet", &meta("a", "cache")), Some(KNOWN));
        assert_eq!(known.get("Service", &meta("a", "cache")), None);
        assert_eq!(known.get("StatefulSet", &meta("b", "cache")), None);
        known.forget("StatefulSet", &meta("a", "cache"));
        assert_eq!(known.get("StatefulSet", &meta("a", "cache")), None);
    }

    #[test]
    fn a_relist_forgets_every_child_of_its_kind_only() {
        let known = KnownChildren::default();
        known.learn("StatefulSet", &meta("a", "one"), KNOWN);
        known.learn("StatefulSet", &meta("a", "two"), KNOWN);
        known.learn("Service", &meta("a", "one"), KNOWN);
        known.relisting("StatefulSet");
        assert_eq!(known.count("StatefulSet"), 0);
        assert_eq!(known.count("Service"), 1);
    }

    #[test]
    fn a_deleted_memcacheds_children_are_forgotten_and_an_old_record_is_no_sign_of_a_write() {
        let known = KnownChildren::default();
        known.learn("StatefulSet", &meta("a", "cache"), KNOWN);
        known.learn("Service", &meta("a", "cache"), KNOWN);
        known.learn("Service", &meta("a", "other"), KNOWN);
        assert_eq!(
            known.learned_within("Service", &meta("a", "cache"), UNSEEN_PATIENCE),
            Some(KNOWN)
        );
        assert_eq!(
            known.learned_within("Service", &meta("a", "cache"), Duration::ZERO),
            None,
            "learned longer ago than the patience"
        );
        known.forget_named(&meta("a", "cache"));
        assert_eq!(known.get("StatefulSet", &meta("a", "cache")), None);
        assert_eq!(known.get("Service", &meta("a", "cache")), None);
        assert_eq!(known.count("Service"), 1, "another Memcached's child stays");
    }

    #[test]
    fn the_gauge_counts_every_child_known() {
        let gauge = Gauge::default();
        let known = KnownChildren::new(gauge.clone());
        known.learn("StatefulSet", &meta("a", "one"), KNOWN);
        known.learn("Service", &meta("a", "one"), KNOWN);
        assert_eq!(gauge.get(), 2);
        known.forget("StatefulSet", &meta("a", "one"));
        known.forget("Service", &meta("a", "one"));
        assert_eq!(gauge.get(), 0);
    }
}
