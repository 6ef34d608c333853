//! The compact types and reductions, on objects as the API server sends them.

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::child::Child;
use super::compact::{CachedBudget, CachedPod, CachedStatefulSet, hash64};
use super::memcacheds::{LAST_APPLIED, STATUS, forget_write_history};
use super::pods::{kept, owner_of_pod, reduce_pod};
use crate::api::v1beta1::Memcached;
use crate::operator;

fn testdata(name: &str) -> Value {
    let path = format!(
        "{}/src/controller/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn a_cached_memcached_keeps_everything_but_its_write_history() {
    let stored = testdata("stored-memcached.json");
    let mut memcached: Memcached = serde_json::from_value(stored.clone()).expect("decodes");
    forget_write_history(memcached.meta_mut());

    let mut expected = stored;
    let metadata = expected["metadata"].as_object_mut().expect("metadata");
    // Of the managed fields, the operator's own merge-patched status only (until taken over).
    let kept: Vec<Value> = metadata["managedFields"]
        .as_array()
        .expect("managed fields")
        .iter()
        .filter(|entry| entry["manager"] == operator::NAME && entry["subresource"] == STATUS)
        .cloned()
        .collect();
    assert_eq!(kept.len(), 1);
    metadata["managedFields"] = Value::Array(kept);
    metadata["annotations"]
        .as_object_mut()
        .expect("annotations")
        .remove(LAST_APPLIED);
    assert_eq!(
        serde_json::to_value(&memcached).expect("encodes"),
        expected,
        "exactly the others' managed fields and the last-applied annotation are gone"
    );
    assert_eq!(
        memcached.annotations().keys().collect::<Vec<_>>(),
        ["example.com/team"],
        "other annotations stay"
    );
}

#[test]
fn the_operators_own_status_update_entry_is_kept_until_taken_over() {
    let entry = |manager: &str, operation: &str, subresource: Option<&str>| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            subresource: subresource.map(Into::into),
            ..Default::default()
        }
    };
    let mut metadata = ObjectMeta {
        managed_fields: Some(vec![
            entry("kubectl", "Update", None),
            entry(operator::NAME, "Apply", Some(STATUS)),
            entry(operator::NAME, "Update", Some(STATUS)),
            entry(operator::NAME, "Update", None),
        ]),
        ..ObjectMeta::default()
    };
    forget_write_history(&mut metadata);
    assert_eq!(
        metadata.managed_fields,
        Some(vec![entry(operator::NAME, "Update", Some(STATUS))])
    );
    let mut applied_only = ObjectMeta {
        managed_fields: Some(vec![entry(operator::NAME, "Apply", Some(STATUS))]),
        ..ObjectMeta::default()
    };
    forget_write_history(&mut applied_only);
    assert_eq!(applied_only.managed_fields, None);
}

#[test]
fn forgetting_the_write_history_drops_annotations_left_empty() {
    let mut metadata = ObjectMeta {
        annotations: Some([(LAST_APPLIED.to_string(), "{}".to_string())].into()),
        ..ObjectMeta::default()
    };
    forget_write_history(&mut metadata);
    assert_eq!(metadata, ObjectMeta::default());
}

#[test]
fn a_cached_budget_is_its_names_versions_and_marks() {
    use super::compact::{APPLIED_HASH_ANNOTATION, Marks, Owner};
    let watched = testdata("watched-budget-metadata.json");
    let mut watched: kube::api::PartialObjectMeta<CachedBudget> =
        serde_json::from_value(watched).expect("decodes");
    watched
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(APPLIED_HASH_ANNOTATION.into(), "00112233aabbccdd".into());
    let full = watched.metadata.clone();
    let budget = CachedBudget::from(watched);
    assert_eq!(
        serde_json::to_value(&budget.metadata).expect("encodes"),
        json!({
            "name": "cache",
            "namespace": "shop",
            "uid": "5d0c1f0e-7a39-4c55-9b1e-2f7de1a4c3b2",
            "resourceVersion": "48213",
            "generation": 1
        }),
        "no labels, annotations, owners, managed fields or times stay as text"
    );
    assert_eq!(budget.marks.applied, Some(0x0011_2233_aabb_ccdd));
    assert_eq!(
        budget.marks.owner,
        Some(Owner {
            uid: hash64(Some("0f8a3c2e-1111-4222-8333-944455556666".to_string())),
            name: None,
        }),
        "controlled by the Memcached of its own name"
    );
    // Any change of a label or an owner reference changes the marks.
    let mut relabelled = full.clone();
    relabelled
        .labels
        .get_or_insert_default()
        .insert("app.kubernetes.io/instance".into(), "other".into());
    assert_ne!(
        Marks::of(&relabelled).labels_and_owners,
        budget.marks.labels_and_owners
    );
    let mut not_blocking = full.clone();
    not_blocking.owner_references.get_or_insert_default()[0].block_owner_deletion = None;
    assert_ne!(
        Marks::of(&not_blocking).labels_and_owners,
        budget.marks.labels_and_owners
    );
    // An annotation other than the applied hash changes nothing that is kept.
    let mut annotated = full;
    annotated
        .annotations
        .get_or_insert_default()
        .insert("example.com/other".into(), "x".into());
    assert_eq!(CachedBudget::from(annotated), budget);
}

#[test]
fn a_cached_statefulset_has_no_spec_and_three_status_fields() {
    let stored = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "cache", "namespace": "shop", "uid": "u", "generation": 4,
                     "resourceVersion": "9", "annotations": {"a": "b"},
                     "labels": {"app.kubernetes.io/instance": "cache"},
                     "ownerReferences": [{"apiVersion": "cache.f2367556.dev/v1alpha1",
                                          "kind": "Memcached", "name": "other",
                                          "uid": "m", "controller": true}],
                     "managedFields": [{"manager": "memcached-operator"}]},
        "spec": {"replicas": 3, "selector": {}, "serviceName": "cache",
                 "template": {"spec": {"containers": [{"name": "memcached"}]}}},
        "status": {"replicas": 3, "updatedReplicas": 2, "observedGeneration": 4,
                   "readyReplicas": 1, "currentRevision": "cache-1",
                   "conditions": [{"type": "X", "status": "True"}]}
    });
    let expected = json!({
        "metadata": {"name": "cache", "namespace": "shop", "uid": "u",
                     "generation": 4, "resourceVersion": "9"},
        "status": {"replicas": 3, "updatedReplicas": 2, "observedGeneration": 4}
    });
    // As a watch fills the cache: decoded as the compact type.
    let watched: CachedStatefulSet = serde_json::from_value(stored.clone()).expect("decodes");
    assert_eq!(serde_json::to_value(&watched).expect("encodes"), expected);
    assert_eq!(watched.marks.applied, None, "no applied hash");
    assert_eq!(
        watched.marks.owner.as_ref().and_then(|o| o.name.as_deref()),
        Some("other"),
        "an owner of another name keeps its name"
    );
    // As an apply's answer enters it: the whole object, reduced alike.
    let applied: StatefulSet = serde_json::from_value(stored).expect("decodes");
    assert_eq!(StatefulSet::cached(applied), watched);
}

#[test]
fn a_cached_pod_is_its_name_instance_deletion_and_readiness() {
    let mut pod: CachedPod = serde_json::from_value(json!({
        "metadata": {"name": "cache-1", "namespace": "shop", "uid": "u",
                     "resourceVersion": "12",
                     "deletionTimestamp": "2026-05-02T09:14:08Z",
                     "labels": {"app.kubernetes.io/instance": "cache",
                                "app.kubernetes.io/name": "memcached"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                          "name": "cache", "uid": "s"}]},
        "spec": {"containers": [{"name": "memcached"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1",
                   "conditions": [
                       {"type": "PodScheduled", "status": "True"},
                       {"type": "Ready", "status": "True",
                        "lastTransitionTime": "2026-05-02T09:14:08Z"}]}
    }))
    .expect("decodes");
    reduce_pod(&mut pod);
    assert_eq!(
        serde_json::to_value(&pod).expect("encodes"),
        json!({
            "metadata": {"name": "cache-1", "namespace": "shop",
                         "deletionTimestamp": "2026-05-02T09:14:08Z",
                         "labels": {"app.kubernetes.io/instance": "cache"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        })
    );
    assert_eq!(
        owner_of_pod(&pod),
        Some(ObjectRef::new("cache").within("shop"))
    );
}

#[test]
fn a_cached_pod_keeps_how_its_memcached_was_restarted_and_no_other_container() {
    let status = |memcached_restarts: i32| {
        json!({"phase": "Running",
               "conditions": [{"type": "Ready", "status": "False"}],
               "containerStatuses": [
                   {"name": "exporter", "restartCount": 4, "ready": true,
                    "state": {"running": {"startedAt": "2026-05-02T09:00:00Z"}},
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}},
                   {"name": "memcached", "restartCount": memcached_restarts, "ready": false,
                    "state": {"running": {"startedAt": "2026-05-02T09:14:09Z"}},
                    "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                                 "startedAt": "2026-05-02T09:00:00Z",
                                                 "finishedAt": "2026-05-02T09:14:08Z"}}}]})
    };
    let mut pod: CachedPod = serde_json::from_value(json!({
        "metadata": {"name": "cache-0", "namespace": "shop"},
        "status": status(1),
    }))
    .expect("decodes");
    reduce_pod(&mut pod);
    assert_eq!(
        serde_json::to_value(&pod.status).expect("encodes"),
        json!({"conditions": [{"type": "Ready", "status": "False"}],
               "containerStatuses": [{"name": "memcached", "restartCount": 1,
                   "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                                "finishedAt": "2026-05-02T09:14:08Z"}}}]})
    );
    // Never restarted: nothing kept but readiness, and its running state never wakes it.
    let mut fresh: CachedPod = serde_json::from_value(json!({
        "metadata": {"name": "cache-0", "namespace": "shop"},
        "status": status(0),
    }))
    .expect("decodes");
    reduce_pod(&mut fresh);
    assert_eq!(
        serde_json::to_value(&fresh.status).expect("encodes"),
        json!({"conditions": [{"type": "Ready", "status": "False"}]})
    );
    assert_ne!(kept(&pod), kept(&fresh), "a restart wakes the Memcached");
}

#[test]
fn a_cached_pod_keeps_which_of_the_operators_sidecars_stopped_and_why_until_they_run_again() {
    let status = |refresher_ready: bool| {
        json!({"phase": "Running",
               "conditions": [{"type": "Ready", "status": "True"}],
               "initContainerStatuses": [
                   {"name": "install-supervisor", "restartCount": 0, "ready": false,
                    "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
                   {"name": "cert-refresher", "restartCount": 3, "ready": refresher_ready,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 1,
                        "finishedAt": "2026-05-02T09:14:08Z",
                        "message": "the sidecars' client certificate cannot be used"}}},
                   {"name": "exporter", "restartCount": 1, "ready": false,
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 2}}}]})
    };
    let mut pod: CachedPod = serde_json::from_value(json!({
        "metadata": {"name": "cache-0", "namespace": "shop"},
        "status": status(false),
    }))
    .expect("decodes");
    reduce_pod(&mut pod);
    assert_eq!(
        serde_json::to_value(&pod.status).expect("encodes"),
        json!({"conditions": [{"type": "Ready", "status": "True"}],
               "initContainerStatuses": [{"name": "cert-refresher", "restartCount": 3,
                   "lastState": {"terminated": {"reason": "Error", "exitCode": 1,
                       "finishedAt": "2026-05-02T09:14:08Z",
                       "message": "the sidecars' client certificate cannot be used"}}}]})
    );
    // Running (and ready) again: nothing of it is kept, and that wakes the Memcached.
    let mut again: CachedPod = serde_json::from_value(json!({
        "metadata": {"name": "cache-0", "namespace": "shop"},
        "status": status(true),
    }))
    .expect("decodes");
    reduce_pod(&mut again);
    assert_eq!(
        serde_json::to_value(&again.status).expect("encodes"),
        json!({"conditions": [{"type": "Ready", "status": "True"}]})
    );
    assert_ne!(kept(&pod), kept(&again));
}
