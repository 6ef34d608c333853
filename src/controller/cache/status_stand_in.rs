//! Stands in for the cached status of a Memcached whose status the controller has just
//! written, until the watch brings that write back.
//!
//! A reconcile woken in between (a child's change, a pod's) would otherwise read the status
//! from before the write and write it again. The status written is kept, with the
//! resourceVersion the write returned, until the Memcacheds' watch delivers that version (the
//! cache has caught up) or lists again (a list shows only each object's latest version, so the
//! one written may never be delivered on its own), or the Memcached is deleted.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use kube::api::ObjectMeta;

use super::compact::{hash64, name_key as key};
use crate::api::v1beta1::MemcachedStatus;

/// The statuses written whose write the cache has yet to see, by a hash of namespace and name.
#[derive(Debug, Default)]
pub struct StatusStandIn(Mutex<HashMap<u64, (u64, MemcachedStatus)>>);

impl StatusStandIn {
    fn written(&self) -> MutexGuard<'_, HashMap<u64, (u64, MemcachedStatus)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the status written to the Memcached `metadata` now describes (as the write
    /// returned it, with its resourceVersion).
    pub fn wrote(&self, metadata: &ObjectMeta, status: MemcachedStatus) {
        let Some(version) = &metadata.resource_version else {
            return;
        };
        self.written()
            .insert(key(metadata), (hash64(version), status));
    }

    /// The status to reconcile with, for a Memcached the cache holds as `metadata`: the one
    /// written, while the cache has not seen that write.
    pub fn status(&self, metadata: &ObjectMeta) -> Option<MemcachedStatus> {
        self.written()
            .get(&key(metadata))
            .map(|(_, status)| status.clone())
    }

    /// Whether `metadata` (a version of a Memcached the watch delivers) is the written one
    /// coming back with exactly the status written; the record is dropped then, the cache now
    /// holding that status.
    pub fn is_echo(&self, metadata: &ObjectMeta, status: Option<&MemcachedStatus>) -> bool {
        let Some(version) = &metadata.resource_version else {
            return false;
        };
        let mut written = self.written();
        let key = key(metadata);
        match written.get(&key) {
            Some((at, wrote)) if *at == hash64(version) => {
                let same = status == Some(wrote);
                written.remove(&key);
                same
            }
            _ => false,
        }
    }

    /// Forgets a deleted Memcached.
    pub fn forget(&self, metadata: &ObjectMeta) {
        self.written().remove(&key(metadata));
    }

    /// Forgets every status written: the watch is listing again.
    pub fn relisting(&self) {
        self.written().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("a".into()),
            name: Some("cache".into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        }
    }

    fn status(replicas: i32) -> MemcachedStatus {
        MemcachedStatus {
            replicas: Some(replicas),
            ..MemcachedStatus::default()
        }
    }

    #[test]
    fn the_status_written_stands_in_until_its_version_comes_back() {
        let stand_in = StatusStandIn::default();
        stand_in.wrote(&at("7"), status(3));
        assert_eq!(stand_in.status(&at("6")), Some(status(3)));
        assert!(
            !stand_in.is_echo(&at("6"), Some(&status(1))),
            "an older version"
        );
        assert_eq!(stand_in.status(&at("6")), Some(status(3)));
        assert!(stand_in.is_echo(&at("7"), Some(&status(3))));
        assert_eq!(stand_in.status(&at("7")), None, "the cache has caught up");
    }

    #[test]
    fn a_written_version_with_another_status_is_no_echo_and_ends_the_stand_in() {
        let stand_in = StatusStandIn::default();
        stand_in.wrote(&at("7"), status(3));
        assert!(!stand_in.is_echo(&at("7"), Some(&status(2))));
        assert_eq!(stand_in.status(&at("7")), None);
    }

    #[test]
    fn a_relist_or_a_deletion_ends_every_stand_in() {
        let stand_in = StatusStandIn::default();
        stand_in.wrote(&at("7"), status(3));
        stand_in.relisting();
        assert_eq!(stand_in.status(&at("6")), None);
        stand_in.wrote(&at("8"), status(3));
        stand_in.forget(&at("8"));
        assert_eq!(stand_in.status(&at("6")), None);
    }
}
