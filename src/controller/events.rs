//! Publishes Events about Memcacheds: one for each reconcile that changed children (naming
//! every change it made), sent by that reconcile right after its status write, and one for
//! each new failure, none for a failure that repeats.
//!
//! kube's `Recorder` keeps a copy of every Event it published for six minutes, to count
//! repeats into a series, and scans all of them on every publish; with thousands of objects
//! that copy is the largest thing in memory after the caches. Here a change is published once
//! (it happens once), and a warning is published when it differs from the object's previous
//! warning; what is remembered is a 64-bit hash per object that is failing now, keyed by its
//! uid, forgotten when it reconciles cleanly or is deleted (`Context::forget`).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use prometheus_client::metrics::gauge::Gauge;
use tracing::warn;

use super::cache::compact::{hash64, uid_key};
use crate::api::v1beta1::Memcached;

/// Normal (a change) or Warning (a failure).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A change the controller made.
    Normal,
    /// Something that keeps the controller from reaching the spec.
    Warning,
}

/// The last warning published per object (by uid), as hashes; how many are held is
/// published on a gauge.
#[derive(Debug, Default)]
pub struct LastWarnings {
    last: Mutex<HashMap<u64, u64>>,
    held: Gauge,
}

impl LastWarnings {
    /// No warnings, counted on `held`.
    pub fn new(held: Gauge) -> Self {
        Self {
            last: Mutex::default(),
            held,
        }
    }

    fn last(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counted(&self, last: &HashMap<u64, u64>) {
        self.held.set(i64::try_from(last.len()).unwrap_or(i64::MAX));
    }

    /// Records `reason` and `note` as `object`'s last warning; whether it differs from the one
    /// before.
    pub fn is_new(&self, object: &ObjectMeta, reason: &str, note: &str) -> bool {
        let warning = hash64((reason, note));
        let mut last = self.last();
        let new = last.insert(uid_key(object), warning) != Some(warning);
        self.counted(&last);
        new
    }

    /// Forgets `object`'s last warning.
    pub fn clear(&self, object: &ObjectMeta) {
        let mut last = self.last();
        if last.remove(&uid_key(object)).is_some() {
            self.counted(&last);
        }
    }

    /// Keeps the warnings of the objects of `listed` (by uid key) only.
    pub fn retain(&self, listed: &HashSet<u64>) {
        let mut last = self.last();
        last.retain(|uid, _| listed.contains(uid));
        self.counted(&last);
    }
}

/// One server's memcached container as the kubelet last reported it restarted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRestart {
    /// The server's pod.
    pub pod: String,
    /// Its container's restarts so far.
    pub restarts: i32,
    /// How its last run ended: `OOMKilled`, `Error`.
    pub reason: String,
    /// Its exit code.
    pub exit_code: i32,
    /// When its last run ended.
    pub finished_at: Option<jiff::Timestamp>,
}

impl ServerRestart {
    /// What an Event says of it.
    pub fn note(&self) -> String {
        format!(
            "server {}: memcached ended ({}, exit code {}) and the kubelet restarted it \
             (restart {})",
            self.pod, self.reason, self.exit_code, self.restarts
        )
    }
}

/// The restarts already reported per object (by uid): each server's restart count, for the
/// objects with a restarted server only.
#[derive(Debug, Default)]
struct ReportedRestarts {
    reported: Mutex<HashMap<u64, Vec<(String, i32)>>>,
    held: Gauge,
}

impl ReportedRestarts {
    fn new(held: Gauge) -> Self {
        Self {
            reported: Mutex::default(),
            held,
        }
    }

    fn counted(&self, reported: &HashMap<u64, Vec<(String, i32)>>) {
        self.held
            .set(i64::try_from(reported.len()).unwrap_or(i64::MAX));
    }

    fn reported(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<(String, i32)>>> {
        self.reported.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Of `restarts`, those not reported for `object` yet that ended after `since`; records
    /// them all as reported.
    fn new_since(
        &self,
        object: &ObjectMeta,
        restarts: &[ServerRestart],
        since: jiff::Timestamp,
    ) -> Vec<ServerRestart> {
        let key = uid_key(object);
        let mut reported = self.reported();
        let before = reported.get(&key).cloned().unwrap_or_default();
        let new = restarts
            .iter()
            .filter(|r| !before.contains(&(r.pod.clone(), r.restarts)))
            .filter(|r| r.finished_at.is_some_and(|at| at >= since))
            .cloned()
            .collect();
        if restarts.is_empty() {
            reported.remove(&key);
        } else {
            reported.insert(
                key,
                restarts
                    .iter()
                    .map(|r| (r.pod.clone(), r.restarts))
                    .collect(),
            );
        }
        self.counted(&reported);
        new
    }

    fn forget(&self, object: &ObjectMeta) {
        let mut reported = self.reported();
        reported.remove(&uid_key(object));
        self.counted(&reported);
    }

    fn retain(&self, listed: &HashSet<u64>) {
        let mut reported = self.reported();
        reported.retain(|uid, _| listed.contains(uid));
        self.counted(&reported);
    }
}

/// One change a reconcile made to a child: the Event reason (`Created`, `Updated`,
/// `Deleted`), what happened, and the child.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// `Created`, `Updated` or `Deleted`.
    pub reason: &'static str,
    /// What happened, e.g. `StatefulSet cache created`.
    pub note: String,
    /// The child.
    pub related: ObjectReference,
}

/// The one Event for a reconcile's changes, if it made any: the reason they share (`Changed`
/// when they differ), their notes joined with `; `, and the first child changed (an Event
/// names one related object).
pub fn summarize(changes: Vec<Change>) -> Option<(&'static str, String, ObjectReference)> {
    let first = changes.first()?;
    let reason = if changes.iter().all(|c| c.reason == first.reason) {
        first.reason
    } else {
        "Changed"
    };
    let note = changes
        .iter()
        .map(|c| c.note.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let related = changes.into_iter().next()?.related;
    Some((reason, note, related))
}

/// What one Event says of its object.
#[derive(Clone, Debug, PartialEq)]
struct Parts {
    regarding: ObjectReference,
    related: Option<ObjectReference>,
    note: String,
}

/// Publishes the controller's Events.
pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    warnings: LastWarnings,
    restarts: ReportedRestarts,
    /// When this replica started: a restart that ended before was another's to report.
    started: jiff::Timestamp,
}

impl Events {
    /// Events reported by `controller` (the reporting controller), from `instance` (this
    /// replica, its pod name; the controller's name when unknown); the last warnings held are
    /// counted on `warnings_held`, the objects whose reported restarts are held on
    /// `restarts_held`.
    pub fn new(
        client: Client,
        controller: &str,
        instance: Option<String>,
        warnings_held: Gauge,
        restarts_held: Gauge,
    ) -> Self {
        Self {
            client,
            controller: controller.into(),
            instance: instance.unwrap_or_else(|| controller.into()),
            warnings: LastWarnings::new(warnings_held),
            restarts: ReportedRestarts::new(restarts_held),
            started: jiff::Timestamp::now(),
        }
    }

    /// Publishes a warning for each server of `object` whose memcached the kubelet restarted
    /// since it was last reported (and since this replica started); `restarts` are the
    /// object's servers with a restart, as the kubelet reports them now.
    pub async fn restarted(&self, object: &Memcached, restarts: &[ServerRestart]) {
        let new = self
            .restarts
            .new_since(&object.metadata, restarts, self.started);
        for restart in new {
            self.publish(
                object,
                Kind::Warning,
                "ServerRestarted",
                restart.note(),
                None,
            )
            .await;
        }
    }

    /// Publishes what one reconcile changed (a Normal Event).
    pub async fn changed(
        &self,
        object: &Memcached,
        reason: &'static str,
        note: String,
        related: ObjectReference,
    ) {
        self.publish(object, Kind::Normal, reason, note, Some(related))
            .await;
    }

    /// Publishes a warning, unless it is the object's last one again.
    pub async fn warn(&self, object: &Memcached, reason: &str, note: String) {
        if !self.warnings.is_new(&object.metadata, reason, &note) {
            return;
        }
        self.publish(object, Kind::Warning, reason, note, None)
            .await;
    }

    /// Forgets the object's last warning: it reconciled cleanly.
    pub fn clear(&self, object: &ObjectMeta) {
        self.warnings.clear(object);
    }

    /// Forgets the last warning and the reported restarts of a deleted object.
    pub fn forget(&self, object: &ObjectMeta) {
        self.warnings.clear(object);
        self.restarts.forget(object);
    }

    /// Keeps the last warnings and reported restarts of the objects of `listed` (by uid key)
    /// only.
    pub fn retain(&self, listed: &HashSet<u64>) {
        self.warnings.retain(listed);
        self.restarts.retain(listed);
    }

    async fn publish(
        &self,
        object: &Memcached,
        kind: Kind,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let parts = Parts {
            regarding: object.object_ref(&()),
            related,
            note,
        };
        let event = self.event(jiff::Timestamp::now(), kind, reason, parts);
        let namespace = event.metadata.namespace.as_deref().unwrap_or_default();
        let api = Api::<Event>::namespaced(self.client.clone(), namespace);
        // A failure is logged: an Event is not worth a retry.
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            warn!(%error, "could not publish an event");
        }
    }

    /// The Event of `parts`, dated `at`.
    fn event(&self, at: jiff::Timestamp, kind: Kind, reason: &str, parts: Parts) -> Event {
        let regarding = parts.regarding;
        Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or_default(),
                    at.as_nanosecond()
                )),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            action: Some("Reconcile".into()),
            reason: Some(reason.into()),
            note: Some(parts.note),
            type_: Some(format!("{kind:?}")),
            event_time: Some(MicroTime(at)),
            regarding: Some(regarding),
            related: parts.related,
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("shop".into()),
            uid: Some(format!("uid-of-{name}")),
            ..ObjectMeta::default()
        }
    }

    fn change(reason: &'static str, kind: &str) -> Change {
        Change {
            reason,
            note: format!("{kind} cache {}", reason.to_lowercase()),
            related: ObjectReference {
                kind: Some(kind.into()),
                name: Some("cache".into()),
                ..ObjectReference::default()
            },
        }
    }

    #[test]
    fn a_reconciles_changes_make_one_event() {
        assert_eq!(summarize(vec![]), None);
        let (reason, note, related) = summarize(vec![
            change("Created", "StatefulSet"),
            change("Created", "Service"),
        ])
        .expect("an event");
        assert_eq!(reason, "Created");
        assert_eq!(note, "StatefulSet cache created; Service cache created");
        assert_eq!(related.kind.as_deref(), Some("StatefulSet"));
        let (reason, note, _) = summarize(vec![
            change("Updated", "StatefulSet"),
            change("Deleted", "PodDisruptionBudget"),
        ])
        .expect("an event");
        assert_eq!(reason, "Changed");
        assert_eq!(
            note,
            "StatefulSet cache updated; PodDisruptionBudget cache deleted"
        );
    }

    #[test]
    fn a_repeated_warning_is_not_new_until_it_changes_or_is_cleared() {
        let last = LastWarnings::default();
        let cache = object("cache");
        assert!(last.is_new(&cache, "ReconcileFailed", "apply StatefulSet: 500"));
        assert!(!last.is_new(&cache, "ReconcileFailed", "apply StatefulSet: 500"));
        assert!(last.is_new(
            &object("other"),
            "ReconcileFailed",
            "apply StatefulSet: 500"
        ));
        assert!(last.is_new(&cache, "ReconcileFailed", "apply Service: 500"));
        assert!(last.is_new(&cache, "InvalidSpec", "apply Service: 500"));
        last.clear(&cache);
        assert!(last.is_new(&cache, "InvalidSpec", "apply Service: 500"));
    }

    fn restart(pod: &str, restarts: i32, finished: &str) -> ServerRestart {
        ServerRestart {
            pod: pod.into(),
            restarts,
            reason: "OOMKilled".into(),
            exit_code: 137,
            finished_at: finished.parse().ok(),
        }
    }

    #[test]
    fn a_restart_is_reported_once_and_only_if_it_ended_since_the_replica_started() {
        let held = Gauge::default();
        let reported = ReportedRestarts::new(held.clone());
        let cache = object("cache");
        let started: jiff::Timestamp = "2026-01-01T10:00:00Z".parse().expect("a time");
        let before = restart("cache-0", 1, "2026-01-01T09:59:00Z");
        assert_eq!(
            reported.new_since(&cache, &[before], started),
            vec![],
            "before the start"
        );
        let first = restart("cache-0", 2, "2026-01-01T10:01:00Z");
        assert_eq!(
            reported.new_since(&cache, std::slice::from_ref(&first), started),
            vec![first.clone()]
        );
        assert_eq!(
            reported.new_since(&cache, std::slice::from_ref(&first), started),
            vec![],
            "once"
        );
        let other = restart("cache-1", 1, "2026-01-01T10:02:00Z");
        assert_eq!(
            reported.new_since(&cache, &[first.clone(), other.clone()], started),
            vec![other]
        );
        assert_eq!(
            first.note(),
            "server cache-0: memcached ended (OOMKilled, exit code 137) and the kubelet restarted it (restart 2)"
        );
        assert_eq!(held.get(), 1);
        reported.forget(&cache);
        assert_eq!(held.get(), 0, "forgotten with its object");
    }

    #[test]
    fn a_memcached_re_created_under_the_same_name_gets_its_warning_again() {
        let held = Gauge::default();
        let last = LastWarnings::new(held.clone());
        let cache = object("cache");
        assert!(last.is_new(&cache, "InvalidSpec", "replicas"));
        let mut again = cache.clone();
        again.uid = Some("another-uid".into());
        assert!(last.is_new(&again, "InvalidSpec", "replicas"));
        assert_eq!(held.get(), 2);
        last.clear(&cache);
        last.retain(&HashSet::new());
        assert_eq!(held.get(), 0);
    }
}
