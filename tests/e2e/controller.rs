//! Shows the controller at work with the real StatefulSet controller and garbage collector:
//! owned children, the scale subresource, rolling configuration changes, honest status from
//! Ready pods, repair of deleted children, cascading deletion, defense in depth, and caches
//! that hold no more than the controller reads.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use memcached_operator::admission::{AllowedIssuers, Defaults, default_spec, validate_create};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use memcached_operator::controller::cache::children::Children;
use memcached_operator::controller::cache::compact::{Marked, Marks, Owner, hash64};
use memcached_operator::controller::cache::health::Health;
use memcached_operator::controller::cache::known::KnownChildren;
use memcached_operator::controller::cache::memcacheds::{LAST_APPLIED, memcacheds};
use memcached_operator::controller::cache::pods::INSTANCE_LABEL;
use memcached_operator::controller::desired::children::{
    CONFIG_HASH_ANNOTATION, Platform, desired_statefulset,
};
use memcached_operator::controller::desired::drift;
use serde_json::json;
use testkit::process::RELATED_IMAGE;

use crate::cluster::{Env, eventually, kubectl};
use crate::unwired;

const WAIT: Duration = Duration::from_secs(60);

async fn create(
    env: &Env,
    namespace: &str,
    name: &str,
    replicas: i32,
) -> (Api<Memcached>, Memcached) {
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), namespace);
    let spec = MemcachedSpec {
        replicas: Some(replicas),
        ..MemcachedSpec::default()
    };
    let created = api
        .create(&PostParams::default(), &Memcached::new(name, spec))
        .await
        .expect("the Memcached is created");
    (api, created)
}

async fn child<K>(env: &Env, namespace: &str, name: &str) -> K
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(env.client.clone(), namespace);
    eventually(
        &format!("{} {namespace}/{name} exists", K::kind(&())),
        WAIT,
        || async { api.get_opt(name).await.ok().flatten() },
    )
    .await
}

fn owned_by(child: &impl Resource, owner: &Memcached) {
    let owners = child.meta().owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0].uid, owner.uid().unwrap_or_default());
    assert_eq!(owners[0].kind, "Memcached");
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(owners[0].block_owner_deletion, Some(true));
}

pub async fn children_appear_owned_by_the_memcached(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-children").await;
    let (_, memcached) = create(&env, &namespace, "cache", 3).await;
    let sts: StatefulSet = child(&env, &namespace, "cache").await;
    let svc: Service = child(&env, &namespace, "cache").await;
    let pdb: PodDisruptionBudget = child(&env, &namespace, "cache").await;
    for meta in [sts.meta(), svc.meta(), pdb.meta()] {
        assert_eq!(
            meta.labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/managed-by"))
                .map(String::as_str),
            Some("memcached-operator")
        );
    }
    owned_by(&sts, &memcached);
    owned_by(&svc, &memcached);
    owned_by(&pdb, &memcached);
    let spec = sts.spec.expect("a StatefulSet spec");
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.service_name.as_deref(), Some("cache"));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    let container = &spec.template.spec.expect("a pod spec").containers[0];
    assert_eq!(container.image.as_deref(), Some(RELATED_IMAGE));
    assert_eq!(svc.spec.and_then(|s| s.cluster_ip).as_deref(), Some("None"));
    // The StatefulSet controller makes the pods.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    eventually("three pods exist", WAIT, || async {
        let list = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=cache"))
            .await
            .ok()?;
        (list.items.len() == 3).then_some(())
    })
    .await;
}

pub async fn kubectl_scale_works_through_the_scale_subresource(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-scale").await;
    let (api, _) = create(&env, &namespace, "cache", 1).await;
    let _: StatefulSet = child(&env, &namespace, "cache").await;
    let (ok, _, stderr) = kubectl(
        &env,
        &["scale", "-n", &namespace, "memcached/cache", "--replicas=4"],
        None,
    );
    assert!(ok, "kubectl scale failed: {stderr}");
    assert_eq!(api.get("cache").await.expect("get").spec.replicas, Some(4));
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the StatefulSet has 4 replicas", WAIT, || async {
        let sts = statefulsets.get("cache").await.ok()?;
        (sts.spec?.replicas == Some(4)).then_some(())
    })
    .await;
    let _: PodDisruptionBudget = child(&env, &namespace, "cache").await;
    let status = eventually("the scale subresource reports a selector", WAIT, || async {
        let memcached = api.get("cache").await.ok()?;
        memcached.status?.selector
    })
    .await;
    assert_eq!(
        status,
        "app.kubernetes.io/instance=cache,app.kubernetes.io/name=memcached"
    );
    let (ok, stdout, _) = kubectl(
        &env,
        &[
            "get",
            "--raw",
            &format!(
                "/apis/cache.f2367556.dev/v1beta1/namespaces/{namespace}/memcacheds/cache/scale"
            ),
        ],
        None,
    );
    assert!(ok);
    let scale: serde_json::Value = serde_json::from_str(&stdout).expect("a Scale");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"]["selector"], status);

    // Below two replicas no budget is wanted: the one the cache holds is deleted.
    let (ok, _, stderr) = kubectl(
        &env,
        &["scale", "-n", &namespace, "memcached/cache", "--replicas=1"],
        None,
    );
    assert!(ok, "kubectl scale failed: {stderr}");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the budget is removed at one replica", WAIT, || async {
        budgets.get_opt("cache").await.ok()?.is_none().then_some(())
    })
    .await;
}

pub async fn the_controllers_caches_hold_no_write_history(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-cache").await;
    let manifest = json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": "cache", "namespace": namespace,
                     "annotations": {"example.com/team": "storefront"}},
        "spec": {"replicas": 2}
    });
    // A client-side apply leaves the last-applied annotation; status adds managed fields.
    let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&manifest.to_string()));
    assert!(ok, "kubectl apply failed: {stderr}");
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let stored = eventually("status is reported", WAIT, || async {
        let memcached = api.get("cache").await.ok()?;
        memcached.status.as_ref()?.observed_generation?;
        Some(memcached)
    })
    .await;
    assert!(stored.metadata.managed_fields.is_some());
    assert!(stored.annotations().contains_key(LAST_APPLIED));
    let _: PodDisruptionBudget = child(&env, &namespace, "cache").await;

    // The caches, filled as the controller fills them.
    let known = Arc::new(KnownChildren::default());
    let (memcacheds, changed) = memcacheds(env.client.clone(), |_| {}, |_| {});
    let (children, triggers) = Children::follow(env.client.clone(), known, &Health::default());
    let drive = tokio::spawn(
        futures::stream::select_all([
            changed.map(|_| ()).boxed(),
            triggers.statefulsets.map(|_| ()).boxed(),
            triggers.services.map(|_| ()).boxed(),
            triggers.budgets.map(|_| ()).boxed(),
            triggers.network_policies.map(|_| ()).boxed(),
            triggers.pods.map(|_| ()).boxed(),
        ])
        .collect::<()>(),
    );
    let (statefulsets, services, budgets, pods) = (
        children.statefulsets.clone(),
        children.services.clone(),
        children.budgets.clone(),
        children.pods.clone(),
    );
    let pods_api: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the StatefulSet controller made two pods", WAIT, || async {
        let list = pods_api
            .list(&ListParams::default().labels("app.kubernetes.io/instance=cache"))
            .await
            .ok()?;
        (list.items.len() == 2).then_some(())
    })
    .await;
    memcacheds
        .wait_until_ready()
        .await
        .expect("Memcacheds listed");
    statefulsets.wait_until_ready().await.expect("listed");
    services.wait_until_ready().await.expect("listed");
    budgets.wait_until_ready().await.expect("budgets listed");
    pods.wait_until_ready().await.expect("pods listed");
    eventually("both pods are cached", WAIT, || async {
        let cached = pods
            .state()
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(&namespace))
            .count();
        (cached == 2).then_some(())
    })
    .await;
    drive.abort();
    drop(children);

    let cached = memcacheds
        .get(&ObjectRef::new("cache").within(&namespace))
        .expect("the Memcached is cached");
    assert_eq!(cached.metadata.managed_fields, None);
    assert_eq!(
        cached.annotations().keys().collect::<Vec<_>>(),
        ["example.com/team"]
    );
    assert_eq!(cached.spec, stored.spec);
    for memcached in memcacheds.state() {
        assert_eq!(memcached.metadata.managed_fields, None, "{memcached:?}");
        assert!(!memcached.annotations().contains_key(LAST_APPLIED));
    }

    // Children: identity, versions and generation as text; labels, annotations and owners
    // only as marks (the applied hash, a hash of labels and owners, the controlling Memcached).
    let only_what_judging_reads = |metadata: &ObjectMeta| {
        let kept = serde_json::to_value(metadata).expect("encodes");
        let mut keys: Vec<_> = kept.as_object().expect("an object").keys().collect();
        keys.sort();
        assert!(
            keys.iter().all(
                |key| ["generation", "name", "namespace", "resourceVersion", "uid"]
                    .contains(&key.as_str())
            ),
            "only name, namespace, uid, resourceVersion and generation: {kept}"
        );
    };
    let marked_as_owned_by = |marks: &Marks, owner: &Memcached| {
        assert_eq!(
            marks.owner,
            Some(Owner {
                uid: hash64(owner.uid()),
                name: None
            }),
            "controlled by the Memcached of its own name"
        );
        assert!(
            marks.applied.is_some(),
            "the applied hash is kept: {marks:?}"
        );
    };
    let statefulset = statefulsets
        .get(&ObjectRef::new("cache").within(&namespace))
        .expect("cached");
    marked_as_owned_by(statefulset.marks(), &stored);
    // What is kept is what the cached value holds when written out: no spec, three status
    // fields.
    let kept = serde_json::to_value(&*statefulset).expect("encodes");
    let mut keys: Vec<_> = kept.as_object().expect("an object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["metadata", "status"], "{kept}");
    let mut status: Vec<_> = kept["status"]
        .as_object()
        .expect("a status")
        .keys()
        .collect();
    status.sort();
    assert_eq!(
        status,
        ["observedGeneration", "replicas", "updatedReplicas"],
        "only replicas, updatedReplicas and observedGeneration of the status"
    );
    let service = services
        .get(&ObjectRef::new("cache").within(&namespace))
        .expect("cached");
    marked_as_owned_by(service.marks(), &stored);
    let budget = budgets
        .get(&ObjectRef::new("cache").within(&namespace))
        .expect("the budget is cached");
    marked_as_owned_by(budget.marks(), &stored);
    for statefulset in statefulsets.state() {
        only_what_judging_reads(&statefulset.metadata);
    }
    for service in services.state() {
        only_what_judging_reads(&service.metadata);
    }
    for budget in budgets.state() {
        only_what_judging_reads(&budget.metadata);
    }
    // Pods: name, namespace, instance label, deletion timestamp and the Ready condition.
    for pod in pods.state() {
        let kept = serde_json::to_value(&*pod).expect("encodes");
        assert_eq!(kept.get("spec"), None, "{kept}");
        let metadata = &pod.metadata;
        assert_eq!(
            (
                &metadata.uid,
                &metadata.owner_references,
                &metadata.annotations,
                &metadata.managed_fields
            ),
            (&None, &None, &None, &None),
            "{metadata:?}"
        );
        let labels: Vec<_> = metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(labels, [INSTANCE_LABEL]);
        for condition in pod
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
        {
            assert_eq!(condition.type_, "Ready", "{pod:?}");
        }
        let status = kept["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for condition in status {
            let mut keys: Vec<_> = condition
                .as_object()
                .expect("a condition")
                .keys()
                .cloned()
                .collect();
            keys.sort();
            assert_eq!(keys, ["status", "type"], "{kept}");
        }
    }
}

pub async fn a_configuration_change_rolls_the_statefulset(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-roll").await;
    let (api, _) = create(&env, &namespace, "cache", 1).await;
    let sts: StatefulSet = child(&env, &namespace, "cache").await;
    let hash = |sts: &StatefulSet| {
        sts.spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
    };
    let before = hash(&sts).expect("a config hash");
    // More item memory; dropping resources lets defaulting derive them anew.
    let change = json!({"spec": {"memcached": {"memoryLimitMB": 128}, "resources": null}});
    api.patch("cache", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect("patched");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    let rolled = eventually("the pod template changes", WAIT, || async {
        let sts = statefulsets.get("cache").await.ok()?;
        (hash(&sts)? != before).then_some(sts)
    })
    .await;
    let container = rolled
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod spec")
        .containers[0]
        .clone();
    let args = container.args.unwrap_or_default();
    assert_eq!(args[..2], ["-m".to_string(), "128".to_string()]);
    let limit = container
        .resources
        .and_then(|r| r.limits)
        .and_then(|l| l.get("memory").cloned());
    assert_eq!(limit, Some(Quantity("160Mi".into())));
    eventually(
        "the StatefulSet controller rolls to a new revision",
        WAIT,
        || async {
            let status = statefulsets.get("cache").await.ok()?.status?;
            (status.update_revision.is_some() && status.update_revision != status.current_revision)
                .then_some(())
        },
    )
    .await;
}

/// The operator's entries in a child's managed fields, as (operation, subresource) pairs.
fn operators_entries(meta: &ObjectMeta) -> Vec<(String, String)> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| e.manager.as_deref() == Some("memcached-operator"))
        .map(|e| {
            let operation = e.operation.clone().unwrap_or_default();
            (operation, e.subresource.clone().unwrap_or_default())
        })
        .collect()
}

/// An upgrade from 0.1.0, which created a missing child with a plain create (POST): the fields
/// of that create are recorded as the operator's `Update`, which a server-side apply alone
/// would never give up. The controller, which writes by apply only, takes them over once, and
/// a field no longer asked for is then removed.
pub async fn a_child_created_by_release_0_1_0_is_taken_over_and_loses_a_field_no_longer_asked_for(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("e2e-fields").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let memcached: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": "cache"},
        "spec": {"replicas": 1, "nodeSelector": {"disktype": "ssd"}}
    }))
    .expect("a Memcached");
    let created = api
        .create(&PostParams::default(), &memcached)
        .await
        .expect("the Memcached is created");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    let applied: StatefulSet = child(&env, &namespace, "cache").await;
    // 0.1.0 at work: with the operator stopped, the StatefulSet is made again as 0.1.0 made
    // it, by a create (the webhooks, which are the operator's, are needed only afterwards).
    env.stop_operator().await;
    statefulsets
        .delete("cache", &DeleteParams::default())
        .await
        .expect("the applied StatefulSet is deleted");
    eventually("the applied StatefulSet is gone", WAIT, || async {
        statefulsets
            .get_opt("cache")
            .await
            .ok()
            .filter(Option::is_none)
            .map(|_| ())
    })
    .await;
    let mut effective = created.clone();
    effective.spec = default_spec(
        &created.spec,
        &Defaults::with_related_image(Some(RELATED_IMAGE.into())),
    );
    let mut desired = desired_statefulset(&effective, Platform::Kubernetes);
    drift::stamp(&mut desired);
    let post = PostParams {
        dry_run: false,
        field_manager: Some("memcached-operator".into()),
    };
    let posted = statefulsets
        .create(&post, &desired)
        .await
        .expect("the StatefulSet is created as 0.1.0 did");
    assert_ne!(posted.metadata.uid, applied.metadata.uid);
    assert_eq!(
        operators_entries(posted.meta()),
        [("Update".to_string(), String::new())]
    );
    env.restart_operator(&[]).await;
    let node_selector = |sts: &StatefulSet| {
        sts.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.node_selector.clone())
    };
    let change = json!({"spec": {"nodeSelector": null}});
    api.patch("cache", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect("patched");
    let updated = eventually(
        "the StatefulSet's pod template loses its node selector",
        WAIT,
        || async {
            let sts = statefulsets.get("cache").await.ok()?;
            node_selector(&sts).is_none().then_some(sts)
        },
    )
    .await;
    // The create's fields became the apply's, and the apply gave up the one it no longer sets.
    assert_eq!(
        operators_entries(updated.meta()),
        [("Apply".to_string(), String::new())]
    );
    let fields = serde_json::to_string(&updated.meta().managed_fields).expect("JSON");
    assert!(!fields.contains("nodeSelector"), "{fields}");
    assert_eq!(
        updated.metadata.uid, posted.metadata.uid,
        "the same StatefulSet"
    );
}

/// A child the controller creates is written by server-side apply: its fields are the
/// operator's `Apply` entry, and none is recorded as an `Update`.
pub async fn children_are_written_by_server_side_apply_only(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-apply").await;
    let (_, _) = create(&env, &namespace, "cache", 2).await;
    let sts: StatefulSet = child(&env, &namespace, "cache").await;
    let svc: Service = child(&env, &namespace, "cache").await;
    let pdb: PodDisruptionBudget = child(&env, &namespace, "cache").await;
    for (kind, meta) in [
        ("StatefulSet", sts.meta()),
        ("Service", svc.meta()),
        ("PodDisruptionBudget", pdb.meta()),
    ] {
        assert_eq!(
            operators_entries(meta),
            [("Apply".to_string(), String::new())],
            "{kind}"
        );
    }
}

pub async fn hand_made_changes_to_children_are_put_back(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-repair").await;
    create(&env, &namespace, "cache", 1).await;
    let original: Service = child(&env, &namespace, "cache").await;
    let services: Api<Service> = Api::namespaced(env.client.clone(), &namespace);
    services
        .delete("cache", &DeleteParams::default())
        .await
        .expect("deleted by hand");
    eventually("the Service comes back", WAIT, || async {
        let service = services.get_opt("cache").await.ok()??;
        (service.uid() != original.uid()).then_some(())
    })
    .await;
    // A Service has no generation: its edit is seen as a resourceVersion the controller did
    // not write.
    let retarget = json!({"spec": {"selector": {"app.kubernetes.io/name": "something-else"}}});
    services
        .patch("cache", &PatchParams::default(), &Patch::Merge(&retarget))
        .await
        .expect("changed by hand");
    eventually("the Service's selector is put back", WAIT, || async {
        let selector = services.get("cache").await.ok()?.spec?.selector?;
        (selector.get("app.kubernetes.io/name").map(String::as_str) == Some("memcached"))
            .then_some(())
    })
    .await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    let tamper = json!({"spec": {"replicas": 5}});
    statefulsets
        .patch("cache", &PatchParams::default(), &Patch::Merge(&tamper))
        .await
        .expect("changed by hand");
    eventually("the StatefulSet's replicas are put back", WAIT, || async {
        let sts = statefulsets.get("cache").await.ok()?;
        (sts.spec?.replicas == Some(1)).then_some(())
    })
    .await;
}

pub async fn deleting_the_memcached_removes_its_children(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-delete").await;
    let (api, _) = create(&env, &namespace, "cache", 2).await;
    let _: StatefulSet = child(&env, &namespace, "cache").await;
    let _: PodDisruptionBudget = child(&env, &namespace, "cache").await;
    api.delete("cache", &DeleteParams::default())
        .await
        .expect("deleted");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(env.client.clone(), &namespace);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), &namespace);
    eventually(
        "the garbage collector removes every child",
        WAIT,
        || async {
            let gone = statefulsets.get_opt("cache").await.ok()?.is_none()
                && services.get_opt("cache").await.ok()?.is_none()
                && budgets.get_opt("cache").await.ok()?.is_none();
            gone.then_some(())
        },
    )
    .await;
}

pub async fn without_webhooks_an_invalid_spec_is_reported_and_changes_nothing(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-defense").await;
    let spec = MemcachedSpec {
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity("2".into()))].into()),
            limits: Some(
                [
                    ("cpu".to_string(), Quantity("500m".into())),
                    ("memory".to_string(), Quantity("1Gi".into())),
                ]
                .into(),
            ),
            ..ResourceRequirements::default()
        }),
        ..MemcachedSpec::default()
    };
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    // Take the admission webhooks away, as on a cluster where they are not installed.
    let invalid = Memcached::new("invalid", spec.clone());
    unwired::remove_admission_webhooks(&env, &api, &invalid).await;
    let created = api.create(&PostParams::default(), &invalid).await;
    let restored = env.install_wiring().await;
    let created = created.expect("without webhooks the API server admits it");
    restored.expect("the wiring is restored");
    unwired::until_the_validator_refuses(&api, &Memcached::new("invalid-again", spec.clone()))
        .await;

    let mut defaulted = created.clone();
    defaulted.spec = default_spec(
        &spec,
        &Defaults::with_related_image(Some(RELATED_IMAGE.into())),
    );
    let expected = validate_create(&defaulted, &AllowedIssuers::default())
        .expect_err("invalid")
        .message;
    let degraded = eventually("Degraded=True, reason InvalidSpec", WAIT, || async {
        let status = api.get("invalid").await.ok()?.status?;
        let degraded = status
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Degraded")?;
        (degraded.status == "True").then_some(degraded)
    })
    .await;
    assert_eq!(degraded.reason, "InvalidSpec");
    assert_eq!(degraded.message, expected);
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    assert!(
        statefulsets
            .get_opt("invalid")
            .await
            .expect("get")
            .is_none(),
        "no child is created"
    );
}

pub async fn reconciling_an_unchanged_memcached_writes_nothing(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-steady").await;
    let (api, _) = create(&env, &namespace, "cache", 2).await;
    let _: PodDisruptionBudget = child(&env, &namespace, "cache").await;
    // Settled: status written once the StatefulSet controller has made its pods.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    eventually("two pods exist", WAIT, || async {
        let list = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=cache"))
            .await
            .ok()?;
        (list.items.len() == 2).then_some(())
    })
    .await;
    // Settled once the status has taken the StatefulSet controller's report of the pods.
    eventually("the status counts the two pods", WAIT, || async {
        let memcached = api.get("cache").await.map_err(|e| e.to_string())?;
        let status = memcached.status.unwrap_or_default();
        if status.replicas == Some(2) && status.observed_generation == memcached.metadata.generation
        {
            Ok(())
        } else {
            Err(format!("status {status:?}"))
        }
    })
    .await;
    let versions = || async {
        let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
        let svc: Api<Service> = Api::namespaced(env.client.clone(), &namespace);
        let pdb: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), &namespace);
        (
            sts.get("cache").await.expect("sts").metadata.generation,
            svc.get("cache").await.expect("svc").resource_version(),
            pdb.get("cache").await.expect("pdb").resource_version(),
            api.get("cache").await.expect("memcached").status,
        )
    };
    let before = versions().await;
    let writes_before = child_writes(&env).await;
    let status_writes_before = status_writes(&env).await;
    assert!(
        writes_before >= 3.0,
        "the write counter saw the three children created: {writes_before}"
    );
    let reconciliations_before = reconciliations(&env).await;
    // A label change makes the controller reconcile; nothing it owns may be written.
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    api.patch("cache", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .expect("labelled");
    eventually("the controller reconciles the change", WAIT, || async {
        (reconciliations(&env).await > reconciliations_before).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        versions().await,
        before,
        "an unchanged Memcached changed its children or status"
    );
    assert_eq!(
        child_writes(&env).await,
        writes_before,
        "an unchanged Memcached caused write requests"
    );
    assert_eq!(
        status_writes(&env).await,
        status_writes_before,
        "an unchanged Memcached's status was written again"
    );

    // One Event says what was created.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), &namespace);
    let notes = eventually("the controller's Event", WAIT, || async {
        let notes: Vec<String> = events
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("Memcached") && r.name.as_deref() == Some("cache")
                })
            })
            .filter_map(|e| e.note)
            .collect();
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert_eq!(
        notes,
        ["StatefulSet cache created; Service cache created; PodDisruptionBudget cache created"],
        "one Event for the reconcile that created the children"
    );
}

/// The operator's metric `name` summed over its label sets.
async fn metric_sum(env: &Env, name: &str) -> f64 {
    let guard = env.operator.lock().await;
    let text = guard.as_ref().expect("the operator runs").metrics().await;
    text.lines()
        .filter(|line| line.starts_with(name) && line[name.len()..].starts_with(['{', ' ']))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn child_writes(env: &Env) -> f64 {
    metric_sum(env, "memcached_operator_controller_child_writes_total").await
}

async fn status_writes(env: &Env) -> f64 {
    metric_sum(env, "memcached_operator_controller_status_writes_total").await
}

async fn reconciliations(env: &Env) -> f64 {
    metric_sum(env, "memcached_operator_controller_reconciliations_total").await
}
