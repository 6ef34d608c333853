//! Publishes Events about Memcacheds: one for each reconcile that changed children (naming
//! every change it made), and one for each new failure, none for a failure that repeats.
//!
//! kube's `Recorder` keeps a copy of every Event it published for six minutes, to count
//! repeats into a series, and scans all of them on every publish; with thousands of objects
//! that copy is the largest thing in memory after the caches. Here a change is published once
//! (it happens once), and a warning is published when it differs from the object's previous
//! warning; what is remembered is a 64-bit hash per object that is failing now, forgotten when
//! it reconciles cleanly or is deleted.
//!
//! A change's Event is queued, stamped with the time of the change, and sent by
//! [`Events::deliver`] when no write of a workload or a status is waiting for the API server
//! ([`RequestBudget::spend_when_idle`]), as client-go's recorder sends Events apart from the
//! reconcile that made them: a first pass over many new objects writes every workload and
//! status first. A warning is sent at once, by the reconcile that failed.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use tokio::sync::Notify;
use tracing::warn;

use super::budget::RequestBudget;
use super::own_writes::hash64;
use crate::api::v1beta1::Memcached;

/// Queued Events whose room an empty queue keeps.
const KEPT_CAPACITY: usize = 16;

/// Normal (a change) or Warning (a failure).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A change the controller made.
    Normal,
    /// Something that keeps the controller from reaching the spec.
    Warning,
}

/// The last warning published per object, as hashes.
#[derive(Debug, Default)]
pub struct LastWarnings(Mutex<HashMap<u64, u64>>);

impl LastWarnings {
    /// Records `reason` and `note` as `object`'s last warning; whether it differs from the one
    /// before.
    pub fn is_new(&self, object: &ObjectMeta, reason: &str, note: &str) -> bool {
        let key = hash64((&object.namespace, &object.name));
        let warning = hash64((reason, note));
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        last.insert(key, warning) != Some(warning)
    }

    /// Forgets `object`'s last warning.
    pub fn clear(&self, object: &ObjectMeta) {
        let key = hash64((&object.namespace, &object.name));
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        last.remove(&key);
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

/// When an Event is sent: at once (a warning), or when no other request waits (a change).
#[derive(Clone, Copy, Debug)]
enum Urgency {
    Now,
    WhenIdle,
}

/// What an Event says and about which objects.
#[derive(Clone, Debug, PartialEq)]
struct Parts {
    regarding: ObjectReference,
    related: Option<ObjectReference>,
    note: String,
}

/// A change's Event waiting to be sent, its strings in one allocation. The Event it becomes
/// holds some seventeen strings; thousands of those queued during a first pass and freed
/// among the caches' own allocations left holes the allocator could not give back.
#[derive(Debug)]
struct Queued {
    at: jiff::Timestamp,
    reason: &'static str,
    /// The Memcached's namespace, name and uid, the child's apiVersion, kind, name and uid,
    /// and the note, each followed by a newline (none of the first seven can hold one).
    text: Box<str>,
}

impl Queued {
    fn new(
        at: jiff::Timestamp,
        reason: &'static str,
        regarding: &ObjectReference,
        related: &ObjectReference,
        note: &str,
    ) -> Self {
        let fields = [
            &regarding.namespace,
            &regarding.name,
            &regarding.uid,
            &related.api_version,
            &related.kind,
            &related.name,
            &related.uid,
        ];
        let mut text = String::new();
        for field in fields {
            text.push_str(field.as_deref().unwrap_or_default());
            text.push('\n');
        }
        text.push_str(note);
        Self {
            at,
            reason,
            text: text.into_boxed_str(),
        }
    }

    fn parts(&self) -> Parts {
        let mut fields = self.text.splitn(8, '\n');
        let mut next = || fields.next().filter(|f| !f.is_empty()).map(String::from);
        let (namespace, name, uid) = (next(), next(), next());
        let regarding = ObjectReference {
            api_version: Some(Memcached::api_version(&()).into_owned()),
            kind: Some(Memcached::kind(&()).into_owned()),
            namespace: namespace.clone(),
            name,
            uid,
            ..ObjectReference::default()
        };
        let related = ObjectReference {
            api_version: next(),
            kind: next(),
            name: next(),
            uid: next(),
            namespace,
            ..ObjectReference::default()
        };
        Parts {
            regarding,
            related: Some(related),
            note: next().unwrap_or_default(),
        }
    }
}

/// Publishes Events as one reporting controller and instance.
pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    warnings: LastWarnings,
    requests: Arc<RequestBudget>,
    /// Change Events not sent yet, oldest first.
    queued: Mutex<VecDeque<Queued>>,
    /// Woken when a change Event is queued.
    queued_one: Notify,
}

impl Events {
    /// A publisher reporting as `controller`, from `instance` (the pod's name), whose
    /// requests count against `requests`.
    pub fn new(
        client: Client,
        controller: &str,
        instance: Option<String>,
        requests: Arc<RequestBudget>,
    ) -> Self {
        Self {
            client,
            controller: controller.into(),
            instance: instance.unwrap_or_else(|| controller.into()),
            warnings: LastWarnings::default(),
            requests,
            queued: Mutex::new(VecDeque::new()),
            queued_one: Notify::new(),
        }
    }

    /// Queues the Event of a change made to `object`'s child `related`, for [`Events::deliver`].
    pub fn changed(
        &self,
        object: &Memcached,
        reason: &'static str,
        note: String,
        related: ObjectReference,
    ) {
        let queued = Queued::new(
            jiff::Timestamp::now(),
            reason,
            &object.object_ref(&()),
            &related,
            &note,
        );
        self.queued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(queued);
        self.queued_one.notify_one();
    }

    /// Sends the queued change Events, oldest first, each when no other request of the
    /// controller's is waiting; once `stop` completes, sends what is still queued and returns.
    pub async fn deliver(&self, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        let mut stopping = false;
        loop {
            let queued_one = self.queued_one.notified();
            let mut queued_one = std::pin::pin!(queued_one);
            queued_one.as_mut().enable();
            let next = {
                let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
                let next = queued.pop_front();
                // A drained queue gives back what a first pass over thousands of objects
                // grew it to (a `VecDeque` keeps its capacity).
                if queued.is_empty() {
                    queued.shrink_to(KEPT_CAPACITY);
                }
                next
            };
            match next {
                Some(queued) => {
                    let event = self.event(queued.at, Kind::Normal, queued.reason, queued.parts());
                    self.send(event, Urgency::WhenIdle).await;
                }
                None if stopping => return,
                None => tokio::select! {
                    () = queued_one => {}
                    () = &mut stop => stopping = true,
                },
            }
        }
    }

    /// Publishes a warning about `object`, unless it is the one published last for it.
    pub async fn warn(&self, object: &Memcached, reason: &str, note: String) {
        if !self.warnings.is_new(&object.metadata, reason, &note) {
            return;
        }
        self.publish(object, Kind::Warning, reason, note, None)
            .await;
    }

    /// Forgets `object`'s last warning: it reconciled cleanly, or is gone.
    pub fn clear(&self, object: &ObjectMeta) {
        self.warnings.clear(object);
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
        self.send(event, Urgency::Now).await;
    }

    /// Creates `event`; a failure is logged (an Event is not worth a retry).
    async fn send(&self, event: Event, urgency: Urgency) {
        let namespace = event.metadata.namespace.as_deref().unwrap_or_default();
        let api = Api::<Event>::namespaced(self.client.clone(), namespace);
        let params = PostParams::default();
        let create = api.create(&params, &event);
        let created = match urgency {
            Urgency::Now => self.requests.spend(create).await,
            Urgency::WhenIdle => self.requests.spend_when_idle(create).await,
        };
        if let Err(error) = created {
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
    fn a_queued_change_keeps_everything_its_event_says() {
        let mut object = crate::fixtures::memcached("cache", Default::default());
        object.metadata.uid = Some("0b9f4c1e-5d1a-4a8e-9a53-0f6e2f1b7c11".into());
        let regarding = object.object_ref(&());
        let related = ObjectReference {
            api_version: Some("apps/v1".into()),
            kind: Some("StatefulSet".into()),
            name: Some("cache".into()),
            namespace: Some("default".into()),
            uid: Some("5e0c7a0d-93b4-4a52-a0c4-2a2f1f0d9e21".into()),
            ..ObjectReference::default()
        };
        let note = "StatefulSet cache created; Service cache created";
        let at = jiff::Timestamp::from_second(1_800_000_000).expect("a time");
        let queued = Queued::new(at, "Created", &regarding, &related, note);
        assert_eq!(
            queued.parts(),
            Parts {
                regarding: regarding.clone(),
                related: Some(related),
                note: note.into(),
            }
        );
        assert_eq!((queued.at, queued.reason), (at, "Created"));
        // A note may hold any text, newlines included; a missing uid stays missing.
        let mut bare = regarding;
        bare.uid = None;
        let queued = Queued::new(at, "Updated", &bare, &ObjectReference::default(), "a\nb");
        let parts = queued.parts();
        assert_eq!((parts.regarding, parts.note.as_str()), (bare, "a\nb"));
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
}
