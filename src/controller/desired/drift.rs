//! Decides whether a child needs a write: first from the cache, without a request, and when
//! the cache cannot tell, by comparing the live child field by field with its desired state.
//!
//! From the cache ([`judge`]): every child the controller applies carries
//! [`APPLIED_HASH_ANNOTATION`], a hash of the desired state it was applied with. A child whose
//! hash differs from today's desired state, or that is missing, is written. One that matches,
//! at the uid, spec version and labels and owners the controller last applied or verified it
//! with ([`Known`]), is current. Anything else (someone else changed its spec, labels or
//! owners, or the controller restarted and knows nothing yet) is verified: fetched and
//! compared. A child the cache lacks that the controller wrote moments ago, as today's desired
//! state says, and whose write the watch has yet to bring back, is taken as written.
//!
//! The comparison ([`first_difference`]) is a subset check on JSON: fields the API server adds
//! (defaults, status, managed fields) are ignored; fields we set must be present and equal.
//! Quantities under `resources` compare by value, because the API server rewrites them in
//! canonical form (`1024Mi` is stored as `1Gi`).
//!
//! Pure: no request, no clock.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api::sizes::parse_quantity_millis;
use crate::controller::cache::compact::{APPLIED_HASH_ANNOTATION, Marks, hash64, stamped};
use crate::controller::cache::known::Known;

/// What a child needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing: it says what the desired state says.
    Current,
    /// A write; the reason names what differs.
    Write(&'static str),
    /// The cache cannot tell: fetch the child and compare it.
    Verify,
    /// Nothing: the controller just wrote it as the desired state says, and the cache has yet
    /// to see that write.
    Unseen,
}

/// Puts the hash of `desired` (as it is before the stamp) into its [`APPLIED_HASH_ANNOTATION`]
/// and returns it. The hash is SHA-256 over the object's JSON, so it is the same in every
/// build of the operator that wants the same object.
pub fn stamp<K: Resource + Serialize>(desired: &mut K) -> u64 {
    let json = serde_json::to_vec(desired).unwrap_or_default();
    let digest = Sha256::digest(&json);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let hash = u64::from_be_bytes(first);
    desired
        .meta_mut()
        .annotations
        .get_or_insert_default()
        .insert(APPLIED_HASH_ANNOTATION.into(), format!("{hash:016x}"));
    hash
}

/// What is known of a child now, to remember after applying or verifying it: `cached` is what
/// the cache keeps of it (its metadata and marks), `version` its spec version.
pub fn known(cached: &ObjectMeta, marks: &Marks, version: Option<u64>, desired: u64) -> Known {
    Known {
        uid: hash64(&cached.uid),
        version: version.unwrap_or_default(),
        desired,
        labels_and_owners: marks.labels_and_owners,
    }
}

/// Judges a child from the cache: `desired` is the stamped desired metadata, `cached` what the
/// cache keeps of the child (metadata, marks, spec version), and `known` what the controller
/// last knew of it (forgotten when the child is deleted, or its kind listed again).
pub fn judge(
    desired: &ObjectMeta,
    cached: Option<(&ObjectMeta, &Marks, Option<u64>)>,
    known: Option<Known>,
) -> Verdict {
    let hash = stamped(desired).unwrap_or_default();
    let Some((cached, marks, version)) = cached else {
        return match known {
            // Written moments ago at today's desired state; the watch has yet to bring it. Were
            // it deleted since, that event would follow and wake a reconcile of its own.
            Some(known) if known.desired == hash => Verdict::Unseen,
            _ => Verdict::Write("missing"),
        };
    };
    if marks.applied != Some(hash) {
        return Verdict::Write("desired state changed");
    }
    if known == Some(self::known(cached, marks, version, hash)) {
        Verdict::Current
    } else {
        Verdict::Verify
    }
}

/// Whether `live` lacks or contradicts anything in `desired`.
pub fn differs(desired: &Value, live: &Value) -> bool {
    first_difference(desired, live).is_some()
}

/// The path of the first field `live` lacks or contradicts, e.g. `.spec.ports[0].port`.
pub fn first_difference(desired: &Value, live: &Value) -> Option<String> {
    difference(desired, live, false)
}

/// Whether the API server stores `value` as no field at all: null, an empty list, an empty map.
fn absent_when_stored(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(members) => members.is_empty(),
        _ => false,
    }
}

fn difference(desired: &Value, live: &Value, in_resources: bool) -> Option<String> {
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(key, value)| {
            let in_resources = in_resources || key == "resources";
            let inner = match have.get(key) {
                Some(found) => difference(value, found, in_resources),
                // The API server stores no null, and drops an empty list or map (`omitempty`).
                None => (!absent_when_stored(value)).then(String::new),
            };
            inner.map(|path| format!(".{key}{path}"))
        }),
        (Value::Array(want), Value::Array(have)) if want.len() != have.len() => {
            Some(format!("[{} items, not {}]", want.len(), have.len()))
        }
        (Value::Array(want), Value::Array(have)) => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| difference(w, h, in_resources).map(|p| format!("[{i}]{p}"))),
        (Value::String(want), Value::String(have)) if in_resources && want != have => {
            match (parse_quantity_millis(want), parse_quantity_millis(have)) {
                (Some(a), Some(b)) if a == b => None,
                _ => Some(String::new()),
            }
        }
        (want, have) => (want != have).then(String::new),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_the_server_adds_are_not_drift() {
        let desired = json!({"spec": {"replicas": 3, "template": {"containers": [{"name": "a"}]}}});
        let live = json!({"spec": {"replicas": 3, "revisionHistoryLimit": 10,
            "template": {"containers": [{"name": "a", "terminationMessagePath": "/dev/termination-log"}]}},
            "status": {"replicas": 3}});
        assert!(!differs(&desired, &live));
    }

    #[test]
    fn a_changed_or_missing_field_is_drift() {
        let desired = json!({"spec": {"replicas": 3, "args": ["-m", "64"]}});
        assert!(differs(
            &desired,
            &json!({"spec": {"replicas": 2, "args": ["-m", "64"]}})
        ));
        assert!(differs(&desired, &json!({"spec": {"replicas": 3}})));
        assert!(differs(
            &desired,
            &json!({"spec": {"replicas": 3, "args": ["-m", "64", "-v"]}})
        ));
        assert!(differs(
            &desired,
            &json!({"spec": {"replicas": 3, "args": ["-m", "65"]}})
        ));
    }

    #[test]
    fn an_empty_list_or_map_the_server_dropped_is_no_drift() {
        let desired = json!({"spec": {"tolerations": [], "nodeSelector": {}, "replicas": 1,
                                      "template": {"args": []}}});
        let live = json!({"spec": {"replicas": 1, "template": {}}});
        assert!(!differs(&desired, &live));
        assert!(
            differs(&json!({"spec": {"tolerations": [{"key": "a"}]}}), &live),
            "a list that is not empty is still missing"
        );
        assert!(
            differs(
                &json!({"spec": {"args": []}}),
                &json!({"spec": {"args": ["-v"]}})
            ),
            "an empty list against a stored one still differs"
        );
    }

    #[test]
    fn quantities_under_resources_compare_by_value() {
        let desired = json!({"resources": {"limits": {"memory": "1024Mi", "cpu": "1000m"}}});
        let live = json!({"resources": {"limits": {"memory": "1Gi", "cpu": "1"}}});
        assert!(!differs(&desired, &live));
        let live = json!({"resources": {"limits": {"memory": "1G", "cpu": "1"}}});
        assert!(differs(&desired, &live));
    }

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let desired = json!({"spec": {"ports": [{"port": 11211, "name": "memcache"}]}});
        let live = json!({"spec": {"ports": [{"port": 11212, "name": "memcache"}]}});
        assert_eq!(
            first_difference(&desired, &live).as_deref(),
            Some(".spec.ports[0].port")
        );
        assert_eq!(
            first_difference(&desired, &json!({})).as_deref(),
            Some(".spec")
        );
        assert_eq!(first_difference(&desired, &desired), None);
    }

    fn stamped_meta(labels: &[(&str, &str)]) -> ObjectMeta {
        let mut service = k8s_openapi::api::core::v1::Service {
            metadata: ObjectMeta {
                name: Some("cache".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Default::default()
        };
        stamp(&mut service);
        service.metadata
    }

    fn cached(desired: &ObjectMeta) -> (ObjectMeta, Marks) {
        let mut cached = desired.clone();
        cached.uid = Some("u-1".into());
        cached
            .labels
            .get_or_insert_default()
            .insert("added-by-someone".into(), "x".into());
        let marks = Marks::of(&cached);
        (cached, marks)
    }

    #[test]
    fn the_stamp_is_a_stable_hash_of_the_object_before_it() {
        let a = stamped_meta(&[("app", "a")]);
        let again = stamped_meta(&[("app", "a")]);
        let b = stamped_meta(&[("app", "b")]);
        assert_eq!(stamped(&a), stamped(&again));
        assert_ne!(stamped(&a), stamped(&b));
        assert_eq!(
            a.annotations.as_ref().expect("annotated")[APPLIED_HASH_ANNOTATION].len(),
            16
        );
    }

    #[test]
    fn a_child_the_cache_lacks_is_written_unless_the_controller_just_wrote_it() {
        let desired = stamped_meta(&[("app", "a")]);
        assert_eq!(judge(&desired, None, None), Verdict::Write("missing"));
        let (child, marks) = cached(&desired);
        let ours = known(&child, &marks, Some(1), stamped(&desired).expect("stamped"));
        assert_eq!(judge(&desired, None, Some(ours)), Verdict::Unseen);
        let older = Known {
            desired: ours.desired ^ 1,
            ..ours
        };
        assert_eq!(
            judge(&desired, None, Some(older)),
            Verdict::Write("missing")
        );
    }

    #[test]
    fn a_cached_child_as_last_known_with_todays_hash_is_current() {
        let desired = stamped_meta(&[("app", "a")]);
        let (child, marks) = cached(&desired);
        let hash = stamped(&desired).expect("stamped");
        let ours = known(&child, &marks, Some(3), hash);
        assert_eq!(
            judge(&desired, Some((&child, &marks, Some(3))), Some(ours)),
            Verdict::Current
        );
        // Someone else changed its spec: a new generation.
        assert_eq!(
            judge(&desired, Some((&child, &marks, Some(4))), Some(ours)),
            Verdict::Verify
        );
        // Re-created by someone else: a new uid.
        let mut recreated = child.clone();
        recreated.uid = Some("u-2".into());
        assert_eq!(
            judge(&desired, Some((&recreated, &marks, Some(3))), Some(ours)),
            Verdict::Verify
        );
        // Someone else removed a label or an owner reference since: compared field by field.
        let mut unlabelled = child.clone();
        unlabelled.labels = None;
        let unlabelled_marks = Marks::of(&unlabelled);
        assert_eq!(
            judge(
                &desired,
                Some((&unlabelled, &unlabelled_marks, Some(3))),
                Some(ours)
            ),
            Verdict::Verify
        );
        // The controller restarted.
        assert_eq!(
            judge(&desired, Some((&child, &marks, Some(3))), None),
            Verdict::Verify
        );
    }

    #[test]
    fn a_new_desired_state_or_a_missing_stamp_is_written_from_the_cache() {
        let desired = stamped_meta(&[("app", "a")]);
        let (child, marks) = cached(&desired);
        let ours = known(&child, &marks, Some(3), stamped(&desired).expect("stamped"));
        let changed = stamped_meta(&[("app", "b")]);
        assert_eq!(
            judge(&changed, Some((&child, &marks, Some(3))), Some(ours)),
            Verdict::Write("desired state changed")
        );
        let mut unstamped = child;
        unstamped.annotations = None;
        assert_eq!(
            judge(
                &desired,
                Some((&unstamped, &Marks::of(&unstamped), Some(3))),
                Some(ours)
            ),
            Verdict::Write("desired state changed")
        );
    }

    #[test]
    fn quantity_lookalikes_elsewhere_compare_as_text() {
        assert!(differs(&json!({"image": "1000m"}), &json!({"image": "1"})));
    }
}
