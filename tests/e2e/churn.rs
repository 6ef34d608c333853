//! A thousand Memcacheds created and deleted leave nothing behind in the operator: its
//! per-object records (the backoff, last warning and reported restarts of each Memcached, what
//! it knows of each child) are forgotten with their objects, back to what the other scenarios'
//! objects hold (zero when this scenario runs alone), and its resident memory comes back within
//! 10 % of what it was before.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use memcached_operator::controller::metrics::RECORDS;

use crate::cluster::{Env, eventually};

const OBJECTS: usize = 1000;
const WAIT: Duration = Duration::from_secs(600);

/// The operator's per-object records, by record, as its metrics say.
async fn records(env: &Env) -> Vec<(String, f64)> {
    let guard = env.operator.lock().await;
    let text = guard.as_ref().expect("the operator runs").metrics().await;
    let prefix = "memcached_operator_controller_records{record=\"";
    let mut records: Vec<(String, f64)> = text
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(prefix)?;
            let (record, value) = rest.split_once("\"} ")?;
            Some((record.to_string(), value.parse().ok()?))
        })
        .collect();
    records.sort_by(|a, b| a.0.cmp(&b.0));
    records
}

/// The operator's resident memory, KiB.
async fn rss(env: &Env) -> u64 {
    let pid = env.operator_pid().await.expect("the operator runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

async fn count<K>(api: &Api<K>) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list_metadata(&ListParams::default())
        .await
        .map(|list| list.items.len())
        .unwrap_or(usize::MAX)
}

/// Starts the operator afresh, as the suite runs it but logging each reconcile, and waits
/// until it has reconciled every Memcached the other scenarios left: the records it then holds
/// are theirs, and stay. (A started operator works through the Memcacheds there are at its own
/// pace, and the drills before this scenario restart it.)
async fn settle(env: &Env) {
    env.restart_operator_with_env(
        &[],
        &[("RUST_LOG", "info,memcached_operator::controller=debug")],
    )
    .await;
    let all: Api<Memcached> = Api::all(env.client.clone());
    let existing: Vec<String> = all
        .list_metadata(&ListParams::default())
        .await
        .expect("the Memcacheds listed")
        .items
        .into_iter()
        .map(|m| {
            let (name, namespace) = (m.metadata.name, m.metadata.namespace);
            format!(
                "/{}.{}",
                name.unwrap_or_default(),
                namespace.unwrap_or_default()
            )
        })
        .collect();
    eventually(
        "the restarted operator has reconciled every Memcached there is",
        WAIT,
        || async {
            // "reconciled" (`memcached = KIND/NAME.NAMESPACE`) or "reconcile loop" (`reconciler
            // for object KIND/NAME.NAMESPACE failed`).
            let lines: Vec<String> = env
                .operator_logs_containing("reconcile")
                .await
                .iter()
                .map(|line| line.to_string())
                .collect();
            let waiting: Vec<&String> = existing
                .iter()
                .filter(|object| {
                    let (named, failed) = (format!("{object}\""), format!("{object} failed"));
                    !lines
                        .iter()
                        .any(|line| line.contains(&named) || line.contains(&failed))
                })
                .collect();
            if waiting.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} of {} not yet: {waiting:?}",
                    waiting.len(),
                    existing.len()
                ))
            }
        },
    )
    .await;
}

pub async fn a_thousand_memcacheds_created_and_deleted_leave_no_record_behind(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-churn").await;
    let memcacheds: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(env.client.clone(), &namespace);
    settle(&env).await;
    let before = records(&env).await;
    let rss_before = rss(&env).await;
    eprintln!("churn: before, records {before:?}, RSS {rss_before} KiB");
    let kinds: Vec<&str> = before.iter().map(|(record, _)| record.as_str()).collect();
    let mut expected = RECORDS.to_vec();
    expected.sort();
    assert_eq!(
        kinds, expected,
        "every record the controller keeps: {before:?}"
    );

    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let memcacheds = memcacheds.clone();
            async move {
                let spec = MemcachedSpec {
                    replicas: Some(0),
                    ..MemcachedSpec::default()
                };
                memcacheds
                    .create(
                        &PostParams::default(),
                        &Memcached::new(&format!("cache-{i:04}"), spec),
                    )
                    .await
                    .expect("a Memcached is created");
            }
        })
        .buffer_unordered(8)
        .collect::<()>()
        .await;
    eventually("every Memcached is reconciled", WAIT, || async {
        let list = memcacheds.list(&ListParams::default()).await.ok()?;
        let reported = list
            .items
            .iter()
            .filter(|m| {
                m.status
                    .as_ref()
                    .and_then(|s| s.observed_generation)
                    .is_some()
            })
            .count();
        (reported == OBJECTS && count(&statefulsets).await == OBJECTS).then_some(())
    })
    .await;
    let busy = records(&env).await;
    let rss_busy = rss(&env).await;
    eprintln!("churn: {OBJECTS} reconciled, records {busy:?}, RSS {rss_busy} KiB");
    let known = |records: &[(String, f64)]| {
        records
            .iter()
            .find(|(record, _)| record == "known_children")
            .map(|(_, value)| *value)
            .unwrap_or_default()
    };
    assert!(
        known(&busy) >= known(&before) + 2.0 * OBJECTS as f64,
        "a StatefulSet and a Service known per Memcached: {busy:?}"
    );

    // One request deletes them all (each through the validating webhook); on a busy machine it
    // can outlast the API server's request timeout, so what it left is deleted again below.
    let all = (DeleteParams::default(), ListParams::default());
    let _ = memcacheds.delete_collection(&all.0, &all.1).await;
    // The garbage collector would delete the children too, at its own pace (20 requests a
    // second): the records are the subject here, not the collector. A reconcile that was under
    // way when its Memcached went may still write a child; such a child is deleted again.
    let after = eventually(
        "the Memcacheds and their children are gone, and the operator's records are back where \
         they were",
        WAIT,
        || async {
            let left = count(&memcacheds).await;
            if left != 0 {
                let _ = memcacheds.delete_collection(&all.0, &all.1).await;
                return Err(format!("{left} Memcacheds left (usize::MAX: not listed)"));
            }
            let (sets, services_left) = (count(&statefulsets).await, count(&services).await);
            if sets != 0 || services_left != 0 {
                let _ = statefulsets.delete_collection(&all.0, &all.1).await;
                let _ = services.delete_collection(&all.0, &all.1).await;
                return Err(format!(
                    "{sets} StatefulSets and {services_left} Services left"
                ));
            }
            let after = records(&env).await;
            if after == before {
                Ok(after)
            } else {
                Err(format!("the records are {after:?}, before {before:?}"))
            }
        },
    )
    .await;
    // Freed pages go back to the system a second after they are freed (the allocator's
    // settings), as the allocator next runs: the resident memory is read until it is back.
    let rss_after = eventually(
        "the resident memory is back within 10 % of where it was",
        Duration::from_secs(60),
        || async {
            let rss_after = rss(&env).await;
            (rss_after * 10 <= rss_before * 11).then_some(rss_after)
        },
    )
    .await;
    eprintln!("churn: all deleted, records {after:?}, RSS {rss_after} KiB");
}
