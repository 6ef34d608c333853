//! The leader's pod deleted while cert-manager renews the serving certificate, as a node
//! drain or a rollout does it in the middle of a renewal: the pod is deleted with its grace
//! period, the Deployment replaces it, the other replica takes the lease, and the webhooks
//! keep answering the API server throughout, the replacement starting on the renewed Secret.
//! A client writing all along (`WRITERS` writers) has no write refused.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use crate::cluster::{Env, eventually};
use crate::install::certificates;
use crate::renewal::{
    RENEWAL_LIMIT, WRITERS, WRITES_AFTER, every_one_serves, settled, start_writers, stop_writers,
};

/// Whether the kubelet reports `pod` Ready.
fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub async fn deleting_the_leaders_pod_during_a_renewal_fails_no_write(env: Arc<Env>) {
    let pods = env.operator_pods().await;
    assert_eq!(pods.len(), 2, "two replicas: {pods:?}");
    let before = settled(&env, &pods).await;
    let namespace = &env.deployed.namespace;
    let held = eventually("a replica holds the lease", RENEWAL_LIMIT, || async {
        testkit::lease::holder(&env.client, namespace)
            .await
            .ok()
            .filter(|h| h.pod().is_some())
    })
    .await;
    let leader = held.pod().unwrap_or_default().to_string();

    let written = env.create_namespace("deploy-leader-renewal").await;
    let writers = start_writers(&env, &written).await;
    futures::future::join_all(writers.iter().map(|writer| writer.wait_for_writes(10))).await;

    let triggered = Instant::now();
    testkit::certificates::renew(&certificates(&env), &env.deployed.certificate)
        .await
        .expect("cert-manager is asked to renew the certificate");
    let operator_pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    operator_pods
        .delete(&leader, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete the leader's pod {leader}: {e}"));

    let taken = eventually(
        &format!("a replica other than {leader} holds the lease"),
        RENEWAL_LIMIT,
        || async {
            let now = testkit::lease::holder(&env.client, namespace).await.ok()?;
            let pod = now.pod()?.to_string();
            (pod != leader).then_some((pod, now.transitions, triggered.elapsed()))
        },
    )
    .await;
    let (replaced, issued) = eventually(
        "two Ready replicas, the deleted one replaced, both serving the renewed certificate",
        RENEWAL_LIMIT,
        || async {
            let pods = env.operator_pods().await;
            let replaced = pods.len() == 2
                && pods.iter().all(ready)
                && pods
                    .iter()
                    .all(|p| p.metadata.name.as_deref() != Some(leader.as_str()));
            if !replaced {
                return Err(format!(
                    "replicas {:?}",
                    pods.iter()
                        .map(|p| (p.metadata.name.clone(), ready(p)))
                        .collect::<Vec<_>>()
                ));
            }
            let issued = env.issued().await.ok_or("no serving Secret")?;
            if issued.serial == before.serial {
                return Err("the Secret holds the old certificate".to_string());
            }
            let serials = env.served_serials(&pods, &issued.ca).await;
            if !every_one_serves(&serials, &issued.serial) {
                return Err(format!("served {serials:?}, renewed {}", issued.serial));
            }
            Ok((pods, issued))
        },
    )
    .await;
    let served = triggered.elapsed();
    futures::future::join_all(
        writers
            .iter()
            .map(|writer| writer.wait_for_writes(WRITES_AFTER)),
    )
    .await;
    let tally = stop_writers(writers).await;
    let (ok, _, stderr) = env.kubectl(&["delete", "namespace", &written, "--wait=false"], None);
    assert!(ok, "delete namespace {written}: {stderr}");

    let (new_leader, transitions, lease_after) = taken;
    eprintln!(
        "figures: the leader {leader} deleted as the renewal began: {new_leader} held the \
         lease {:.1} s after (transitions {} -> {transitions}); both replicas ({:?}) Ready and \
         serving the renewed serial {:.1} s after; {} of {} writes failed ({WRITERS} writers)",
        lease_after.as_secs_f64(),
        held.transitions,
        replaced
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect::<Vec<_>>(),
        served.as_secs_f64(),
        tally.failures.len(),
        tally.attempts,
    );
    for (at, error) in tally.failures.iter().take(3) {
        let short: String = error.chars().take(240).collect();
        eprintln!(
            "  failed {:.2} s after the deletion: {short}...",
            at.saturating_duration_since(triggered).as_secs_f64()
        );
    }
    assert_eq!(issued.ca, before.ca, "the CA did not change");
    assert!(tally.attempts > 0, "the writers wrote");
    assert!(
        tally.failures.is_empty(),
        "writes failed while the leader's pod was replaced during a renewal: {:?}",
        tally.failures
    );
}
