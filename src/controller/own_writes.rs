//! Remembers what the controller's own writes returned, so that the caches can tell its writes
//! from everyone else's.
//!
//! Two records, both kept in memory only and both small (a few machine words per object):
//!
//! - **echoes**: the resourceVersion each write (a child's apply, a status patch) returned.
//!   The watch event that carries exactly that version is the write coming back; it updates the
//!   cache but wakes nothing, because the reconcile that wrote it already acted on it. A write
//!   whose echo arrives before its answer is recorded wakes one reconcile that finds nothing to
//!   do, which is harmless.
//! - **known children**: per child, the uid and spec version (the generation, or for a Service,
//!   which has none, the resourceVersion) at which the controller last applied it or compared
//!   it field by field, and the hash of the desired state it had then. A cached child at
//!   another spec version was changed by someone else and is compared again.
//!
//! Nothing here talks to the API server or decides anything; `drift` decides, and the watch
//! streams in `cache` forget what belongs to deleted objects. Keys and values are hashed to
//! 64 bits: a collision can at worst make a child look known when it is not (one in 2^64).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use kube::api::ObjectMeta;

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
}

/// The controller's memory of its own writes.
#[derive(Debug, Default)]
pub struct OwnWrites {
    echoes: Mutex<HashMap<u64, u64>>,
    known: Mutex<HashMap<u64, Known>>,
}

/// A 64-bit hash of `value`.
pub fn hash64(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

fn key(kind: &str, metadata: &ObjectMeta) -> u64 {
    hash64((kind, &metadata.namespace, &metadata.name))
}

impl OwnWrites {
    /// Records the resourceVersion a write of `kind` returned.
    pub fn wrote(&self, kind: &str, metadata: &ObjectMeta) {
        if let Some(version) = &metadata.resource_version {
            let mut echoes = self.echoes.lock().unwrap_or_else(|e| e.into_inner());
            echoes.insert(key(kind, metadata), hash64(version));
        }
    }

    /// Whether `metadata` is the echo of the controller's last write of that object; the
    /// record is used up when it is.
    pub fn is_echo(&self, kind: &str, metadata: &ObjectMeta) -> bool {
        let Some(version) = &metadata.resource_version else {
            return false;
        };
        let mut echoes = self.echoes.lock().unwrap_or_else(|e| e.into_inner());
        let key = key(kind, metadata);
        if echoes.get(&key) == Some(&hash64(version)) {
            echoes.remove(&key);
            true
        } else {
            false
        }
    }

    /// What is known of the child `kind` named by `metadata` (namespace and name).
    pub fn known(&self, kind: &str, metadata: &ObjectMeta) -> Option<Known> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.get(&key(kind, metadata)).copied()
    }

    /// Records what is now known of a child.
    pub fn learn(&self, kind: &str, metadata: &ObjectMeta, what: Known) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.insert(key(kind, metadata), what);
    }

    /// Forgets everything about an object that was deleted.
    pub fn forget(&self, kind: &str, metadata: &ObjectMeta) {
        let key = key(kind, metadata);
        self.echoes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// How many objects have a record, echoes and known children (for tests and metrics).
    pub fn records(&self) -> (usize, usize) {
        let echoes = self.echoes.lock().unwrap_or_else(|e| e.into_inner()).len();
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner()).len();
        (echoes, known)
    }
}

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
        assert!(!own.is_echo("StatefulSet", &meta("cache", "40")));
        assert!(!own.is_echo("Service", &meta("cache", "41")), "kinds apart");
        assert!(!own.is_echo("StatefulSet", &meta("other", "41")));
        assert!(own.is_echo("StatefulSet", &meta("cache", "41")));
        assert!(!own.is_echo("StatefulSet", &meta("cache", "41")), "used up");
        assert_eq!(own.records(), (0, 0));
    }

    #[test]
    fn a_later_write_replaces_the_echo_of_an_earlier_one() {
        let own = OwnWrites::default();
        own.wrote("Memcached", &meta("cache", "7"));
        own.wrote("Memcached", &meta("cache", "9"));
        assert!(!own.is_echo("Memcached", &meta("cache", "7")));
        assert!(own.is_echo("Memcached", &meta("cache", "9")));
    }

    #[test]
    fn forgetting_a_deleted_object_drops_both_records() {
        let own = OwnWrites::default();
        let known = Known {
            uid: 1,
            version: 2,
            desired: 3,
        };
        own.wrote("Service", &meta("cache", "5"));
        own.learn("Service", &meta("cache", "5"), known);
        assert_eq!(own.known("Service", &meta("cache", "6")), Some(known));
        assert_eq!(own.known("Service", &meta("other", "5")), None);
        own.forget("Service", &meta("cache", "8"));
        assert_eq!(own.records(), (0, 0));
    }
}
