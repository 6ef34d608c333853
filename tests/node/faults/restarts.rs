//! The cluster's daemons restarted under work: the API server and etcd while hundreds of
//! Memcacheds are being created (every one ends Available with its children, and the
//! operator never exits), containerd and the kubelet while a client works against memcached
//! (no operation fails, no item is lost, no container restarts).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, LogParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use memcached_operator::api::{GROUP, STORAGE_VERSION};
use testkit::containers::main_pid;

use super::{ClientLoop, ITEMS, count_items, ready_server, restart, server, set_items, small_spec};
use crate::cluster::{Env, WAIT, eventually, memcached_status};

/// Memcacheds created through an API server or etcd restart.
const MEMCACHEDS: usize = 300;

/// Creators at once.
const CREATORS: usize = 4;

/// A generous bound on the wait for every Memcached to be Available, hundreds of pods
/// starting on one node.
const ALL_AVAILABLE: Duration = Duration::from_secs(1200);

pub async fn kube_apiserver_restarted_while_memcacheds_are_created_every_one_ends_available(
    env: Arc<Env>,
) {
    created_through_a_restart(&env, "kube-apiserver").await;
}

pub async fn etcd_restarted_while_memcacheds_are_created_every_one_ends_available(env: Arc<Env>) {
    created_through_a_restart(&env, "etcd").await;
}

pub async fn containerd_restarted_memcached_serves_through_it(env: Arc<Env>) {
    serves_through_a_restart(&env, "containerd").await;
}

pub async fn kubelet_restarted_memcached_serves_through_it(env: Arc<Env>) {
    serves_through_a_restart(&env, "kubelet").await;
}

/// The operator's pods: each one's name, its container's restart count and its process.
pub(super) async fn operator_replicas(env: &Env) -> BTreeMap<String, (i32, Option<u32>)> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    let listed = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=memcached-operator"))
        .await
        .unwrap_or_else(|e| panic!("the operator's pods: {e}"));
    listed
        .items
        .iter()
        .map(|pod| {
            let restarts = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|statuses| statuses.iter().map(|c| c.restart_count).sum())
                .unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            (name, (restarts, testkit::containers::operator_process(pod)))
        })
        .collect()
}

/// The last lines each of `pods` (the operator's) logged before its container last ended.
async fn previous_logs<'a>(env: &Env, pods: impl Iterator<Item = &'a str>) -> String {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    let mut said = String::new();
    for pod in pods {
        let params = LogParams {
            previous: true,
            tail_lines: Some(30),
            ..LogParams::default()
        };
        let log = api
            .logs(pod, &params)
            .await
            .unwrap_or_else(|error| format!("(no previous log: {error})"));
        said.push_str(&format!("--- {pod}\n{log}\n"));
    }
    said
}

/// The operator's Lease holder and its transitions.
async fn lease(env: &Env) -> (String, i32) {
    let holder = testkit::lease::holder(&env.client, &env.deployed.namespace)
        .await
        .unwrap_or_else(|e| panic!("the operator's lease: {e}"));
    (holder.identity, holder.transitions)
}

/// Creates [`MEMCACHEDS`] Memcacheds, restarting `daemon` once a third are created, and
/// follows them until every one is Available with its children.
async fn created_through_a_restart(env: &Env, daemon: &str) {
    // Room on the node: an earlier drill's servers are gone first, however it ended.
    for earlier in ["fault-kube-apiserver", "fault-etcd"] {
        delete_and_wait(env, earlier).await;
    }
    let namespace = env.create_namespace(&format!("fault-{daemon}")).await;
    let operator_before = operator_replicas(env).await;
    let lease_before = lease(env).await;
    let gvk = GroupVersionKind::gvk(GROUP, STORAGE_VERSION, "Memcached");
    let memcacheds: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &namespace, &ApiResource::from_gvk(&gvk));

    let next = Arc::new(AtomicUsize::new(0));
    let created = Arc::new(AtomicUsize::new(0));
    let creators: Vec<_> = (0..CREATORS)
        .map(|_| {
            let (next, created, memcacheds) = (next.clone(), created.clone(), memcacheds.clone());
            tokio::spawn(async move {
                let mut retried = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= MEMCACHEDS {
                        return retried;
                    }
                    let object: DynamicObject = serde_json::from_value(serde_json::json!({
                        "apiVersion": format!("{GROUP}/{STORAGE_VERSION}"),
                        "kind": "Memcached",
                        "metadata": { "name": format!("c-{i}") },
                        "spec": small_spec(),
                    }))
                    .expect("a Memcached");
                    // A client goes on creating through the restart, as a CI job's apply loop
                    // would: each refusal is counted, and a create that landed before its
                    // answer was lost is found by the conflict of its retry.
                    let started = Instant::now();
                    loop {
                        match memcacheds.create(&PostParams::default(), &object).await {
                            Ok(_) => break,
                            Err(kube::Error::Api(status)) if status.code == 409 => break,
                            Err(error) => {
                                retried.push((Instant::now(), error.to_string()));
                                assert!(
                                    started.elapsed() < WAIT,
                                    "c-{i} not created within {WAIT:?}: {error}"
                                );
                                tokio::time::sleep(Duration::from_millis(200)).await;
                            }
                        }
                    }
                    created.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    eventually(
        &format!("{} Memcacheds created", MEMCACHEDS / 3),
        WAIT,
        || async {
            let done = created.load(Ordering::Relaxed);
            (done >= MEMCACHEDS / 3).then_some(()).ok_or(done)
        },
    )
    .await;
    let restart_began = Instant::now();
    let took = restart(env, daemon);
    let restarted = Instant::now();
    let mut retried = Vec::new();
    for creator in creators {
        retried.extend(creator.await.expect("a creator ends"));
    }
    let all_created = restart_began.elapsed();
    // What refused the creates: the API server itself while it was down, or, once it was back,
    // the webhooks it calls.
    let by_webhook: Vec<&(Instant, String)> = retried
        .iter()
        .filter(|(_, error)| error.contains("failed calling webhook"))
        .collect();
    let webhook_after_restart = by_webhook
        .iter()
        .filter(|(at, _)| *at > restarted)
        .map(|(at, _)| at.duration_since(restarted))
        .max();

    let available = eventually(
        &format!("every one of the {MEMCACHEDS} Memcacheds Available"),
        ALL_AVAILABLE,
        || async {
            let listed = memcacheds
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let available = listed.items.iter().filter(|m| is_available(m)).count();
            if listed.items.len() == MEMCACHEDS && available == MEMCACHEDS {
                Ok(restart_began.elapsed())
            } else {
                Err(format!("{available} of {} Available", listed.items.len()))
            }
        },
    )
    .await;
    let wrong = children_missing_or_wrong(env, &namespace).await;
    let operator_after = operator_replicas(env).await;
    let lease_after = lease(env).await;
    let operator_restarts: Vec<_> = operator_before
        .iter()
        .filter(|(name, before)| operator_after.get(*name) != Some(*before))
        .map(|(name, before)| (name.clone(), *before, operator_after.get(name).copied()))
        .collect();
    eprintln!(
        "figures: {daemon} restarted ({:.1} s) once {} of {MEMCACHEDS} Memcacheds were created: \
         every one created at {:.1} s ({} creates refused and retried by the client, {} of them \
         by the webhooks, the last {} after the restart ended), every one Available at {:.1} s \
         after the restart began; children missing or wrong: {}; operator replicas restarted or \
         replaced: {}; lease {} (transitions {} -> {})",
        took.as_secs_f64(),
        MEMCACHEDS / 3,
        all_created.as_secs_f64(),
        retried.len(),
        by_webhook.len(),
        webhook_after_restart.map_or("none".to_string(), |after| format!(
            "{:.1} s",
            after.as_secs_f64()
        )),
        available.as_secs_f64(),
        wrong.len(),
        operator_restarts.len(),
        if lease_after.0 == lease_before.0 {
            "kept by its holder"
        } else {
            "taken by the other replica"
        },
        lease_before.1,
        lease_after.1,
    );
    assert!(
        operator_restarts.is_empty(),
        "operator replicas exited or were replaced (name, (restarts, process) before, after): \
         {operator_restarts:?}; what the replicas logged before they ended:\n{}",
        previous_logs(
            env,
            operator_restarts.iter().map(|(name, _, _)| name.as_str())
        )
        .await
    );
    assert!(wrong.is_empty(), "children missing or wrong: {wrong:?}");
    assert!(
        operator_after
            .keys()
            .any(|pod| lease_after.0.starts_with(pod.as_str())),
        "the lease is held by {}, not by an operator replica {:?}",
        lease_after.0,
        operator_after.keys()
    );
    delete_and_wait(env, &namespace).await;
}

/// Whether Memcached `object`'s Available condition is True.
fn is_available(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        })
}

/// Each Memcached of `namespace` whose StatefulSet or Service is missing, not owned by it, or
/// not what its spec asks (one server, 16 MiB of items), or that has a PodDisruptionBudget
/// (none for one server).
async fn children_missing_or_wrong(env: &Env, namespace: &str) -> Vec<String> {
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(env.client.clone(), namespace);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), namespace);
    let all = ListParams::default();
    let owner = |meta: &kube::api::ObjectMeta| {
        meta.owner_references
            .as_ref()
            .and_then(|refs| refs.iter().find(|r| r.kind == "Memcached"))
            .map(|r| r.name.clone())
    };
    let sts: BTreeMap<_, _> = statefulsets
        .list(&all)
        .await
        .expect("statefulsets")
        .items
        .into_iter()
        .filter_map(|s| Some((owner(&s.metadata)?, s)))
        .collect();
    let svc: Vec<_> = services
        .list(&all)
        .await
        .expect("services")
        .items
        .iter()
        .filter_map(|s| owner(&s.metadata))
        .collect();
    let budgeted: Vec<_> = budgets
        .list(&all)
        .await
        .expect("budgets")
        .items
        .iter()
        .filter_map(|b| owner(&b.metadata))
        .collect();
    let mut wrong = Vec::new();
    for i in 0..MEMCACHEDS {
        let name = format!("c-{i}");
        match sts.get(&name) {
            None => wrong.push(format!("{name}: no StatefulSet")),
            Some(set) => {
                let spec = set.spec.as_ref();
                let args = spec
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|p| p.containers.iter().find(|c| c.name == "memcached"))
                    .and_then(|c| c.args.clone())
                    .unwrap_or_default();
                let memory = args.windows(2).any(|w| w[0] == "-m" && w[1] == "16");
                if spec.and_then(|s| s.replicas) != Some(1) || !memory {
                    wrong.push(format!(
                        "{name}: StatefulSet replicas or -m wrong: {args:?}"
                    ));
                }
            }
        }
        if !svc.contains(&name) {
            wrong.push(format!("{name}: no Service"));
        }
        // One server: a budget could only forbid every eviction, so none is asked for.
        if budgeted.contains(&name) {
            wrong.push(format!("{name}: a PodDisruptionBudget for one server"));
        }
    }
    wrong
}

/// Deletes `namespace` and waits until it is gone with its pods, so that the node has room
/// for the next drill.
async fn delete_and_wait(env: &Env, namespace: &str) {
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    match namespaces.delete(namespace, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return,
        Err(error) => panic!("delete namespace {namespace}: {error}"),
    }
    eventually(
        &format!("namespace {namespace} gone"),
        ALL_AVAILABLE,
        || async {
            match namespaces.get_opt(namespace).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err("still there".to_string()),
                Err(error) => Err(error.to_string()),
            }
        },
    )
    .await;
}

/// Restarts `daemon` while a client sets and reads items on a memcached server: it keeps
/// serving, no operation fails, every item set before is read back, and the kubelet restarts
/// no container (restart count and process unchanged).
async fn serves_through_a_restart(env: &Env, daemon: &str) {
    let namespace = env.create_namespace(&format!("fault-{daemon}")).await;
    env.create_memcached(&namespace, "cache", small_spec())
        .await;
    let pod = ready_server(env, &namespace, "cache", 0).await;
    let process = main_pid(&pod, "memcached").expect("memcached's process");
    let started_ticks = testkit::procfs::start_ticks(process).expect("its start time");
    let address = server(&pod);
    set_items(address, "before").await;
    let client = ClientLoop::start(address);
    client.wait_for_operations(100).await;

    let took = restart(env, daemon);
    // The node goes on: the kubelet (again) reports the pod, and the client goes on working.
    let after = ready_server(env, &namespace, "cache", 0).await;
    client.wait_for_operations(200).await;
    let (operations, failures) = client.stop().await;
    let kept = count_items(server(&after), "before").await;
    let process_after = main_pid(&after, "memcached").expect("memcached's process");
    let same_process = process_after == process
        && testkit::procfs::start_ticks(process_after).ok() == Some(started_ticks);
    let restarts = memcached_status(&after).map(|s| s.restart_count);
    eprintln!(
        "figures: {daemon} restarted in {:.1} s under a client: {} of {operations} operations \
         failed, {kept} of {ITEMS} items read back, memcached's container restarts {:?}, the \
         same process: {same_process}",
        took.as_secs_f64(),
        failures.len(),
        restarts,
    );
    assert!(failures.is_empty(), "failed operations: {failures:?}");
    assert_eq!(kept, ITEMS, "items lost through the {daemon} restart");
    assert_eq!(after.metadata.uid, pod.metadata.uid, "the same pod");
    assert_eq!(
        restarts,
        Some(0),
        "the kubelet restarted memcached's container"
    );
    assert!(
        same_process,
        "memcached's process changed ({process} -> {process_after})"
    );
}
