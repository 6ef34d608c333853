use kube::ResourceExt;
use serde_json::{Value, json};

use super::*;

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
    metadata.remove("managedFields");
    metadata["annotations"]
        .as_object_mut()
        .expect("annotations")
        .remove(LAST_APPLIED);
    assert_eq!(
        serde_json::to_value(&memcached).expect("encodes"),
        expected,
        "exactly managedFields and the last-applied annotation are gone"
    );
    assert_eq!(
        memcached.annotations().keys().collect::<Vec<_>>(),
        ["example.com/team"],
        "other annotations stay"
    );
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
    let mut watched: kube::api::PartialObjectMeta<PodDisruptionBudget> =
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
fn only_a_change_beyond_the_resource_version_counts() {
    let mut pod = CachedPod::default();
    pod.metadata.name = Some("cache-0".into());
    pod.metadata.resource_version = Some("1".into());
    let mut later = pod.clone();
    later.metadata.resource_version = Some("2".into());
    assert!(unchanged(Some(&pod), &later));
    assert!(!unchanged(None, &later));
    later.metadata.deletion_timestamp = pod.metadata.creation_timestamp.clone().or(Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
    ));
    assert!(!unchanged(Some(&pod), &later));
}

#[tokio::test]
async fn a_change_is_judged_once_the_cache_holds_it() {
    let stored = testdata("stored-memcached.json");
    let mut before: Memcached = serde_json::from_value(stored).expect("decodes");
    before.metadata.resource_version = Some("1".into());
    let mut after = before.clone();
    after.metadata.resource_version = Some("2".into());
    let writer = Writer::<Memcached>::default();
    let reader = writer.as_reader();
    let events = futures::stream::iter([
        Ok(watcher::Event::Apply(before)),
        Ok(watcher::Event::Apply(after)),
    ]);
    let judged = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = judged.clone();
    let woken: Vec<_> = reflect(
        events,
        writer,
        |_| {},
        move |old: Option<&Memcached>, new: &Memcached| {
            let cached = reader.get(&ObjectRef::from(new)).expect("cached");
            seen.lock().expect("lock").push((
                old.and_then(|o| o.metadata.resource_version.clone()),
                cached.metadata.resource_version.clone(),
            ));
            true
        },
    )
    .collect()
    .await;
    assert_eq!(woken.len(), 2);
    assert_eq!(
        *judged.lock().expect("lock"),
        [
            (None, Some("1".to_string())),
            (Some("1".to_string()), Some("2".to_string()))
        ],
        "each event is judged against the version before it, with the cache already holding it"
    );
}
