//! Shows the operator surviving what clusters do to it: a certificate rotated while the API
//! server keeps writing, OLM's fallback certificate layout, and losing its leader.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use memcached_operator::manager::DEFAULT_LEASE_NAME;
use serde_json::json;
use testkit::cert_layout::{self, Layout};
use testkit::client::TlsClient;
use testkit::pki::KeyForm;
use testkit::process::{READY_WITHIN, Server};

use crate::cluster::{Env, OPERATOR_NAMESPACE, eventually};

const WAIT: Duration = Duration::from_secs(60);

fn memcached(name: &str) -> Memcached {
    Memcached::new(name, MemcachedSpec::default())
}

/// The serial of the certificate the webhook port presents now.
async fn served_serial(env: &Env) -> String {
    let address = env.webhook_address();
    let answer = TlsClient::new(address, &env.ca.pem)
        .post("/convert", "{}")
        .await
        .expect("a TLS exchange with the webhook port");
    answer.serial
}

pub async fn certificate_rotation_under_continuous_writes_loses_none(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-rotation").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(&PostParams::default(), &memcached("rotating"))
        .await
        .expect("created");
    let old_serial = served_serial(&env).await;
    let writes = Arc::new(AtomicUsize::new(0));
    let writer = {
        let api = api.clone();
        let writes = writes.clone();
        tokio::spawn(async move {
            let mut failures = Vec::new();
            let start = Instant::now();
            // Bounded: at most 400 writes or 40 s.
            for round in 0..400 {
                if start.elapsed() > Duration::from_secs(40) {
                    break;
                }
                let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
                if let Err(error) = api
                    .patch("rotating", &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    failures.push(error.to_string());
                }
                writes.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            failures
        })
    };
    eventually("writes are flowing", WAIT, || async {
        (writes.load(Ordering::Relaxed) >= 20).then_some(())
    })
    .await;
    let leaf = env.ca.serving(KeyForm::EcPkcs8);
    let rotated_at = Instant::now();
    cert_layout::write(
        env.cert_root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    eventually(
        "the new certificate is served",
        Duration::from_secs(15),
        || async { (served_serial(&env).await == leaf.serial).then_some(()) },
    )
    .await;
    println!(
        "new certificate served {:?} after the files changed",
        rotated_at.elapsed()
    );
    assert_ne!(old_serial, leaf.serial);
    let failures = writer.await.expect("the writer finishes");
    println!("{} writes during rotation", writes.load(Ordering::Relaxed));
    assert!(
        failures.is_empty(),
        "writes failed during rotation: {failures:?}"
    );
}

pub async fn the_fallback_certificate_layout_works_end_to_end(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-fallback").await;
    let fallback = tempfile::tempdir().expect("a certificate root");
    let leaf = env.ca.serving(KeyForm::EcSec1);
    cert_layout::write(
        fallback.path(),
        Layout::ApiServer,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    env.stop_operator().await;
    env.start_operator(fallback.path()).await;
    assert_eq!(served_serial(&env).await, leaf.serial);
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let created = api
        .create(&PostParams::default(), &memcached("fallback"))
        .await;
    env.stop_operator().await;
    env.start_operator(env.cert_root.path()).await;
    let created = created.expect("the API server reaches the webhooks on the fallback certificate");
    assert!(created.spec.image.is_some(), "the mutating webhook ran");
}

fn leads(metrics: &str) -> bool {
    metrics
        .lines()
        .any(|line| line.trim() == "memcached_operator_controller_leader 1")
}

async fn lease_holder(env: &Env) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    leases
        .get_opt(DEFAULT_LEASE_NAME)
        .await
        .ok()??
        .spec?
        .holder_identity
}

pub async fn leadership_passes_to_the_other_replica_on_sigterm(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-leader").await;
    let second: Server = env
        .spawn_operator(env.cert_root.path(), &["--webhooks=false"])
        .await;
    second.wait_ready(READY_WITHIN).await;
    {
        let guard = env.operator.lock().await;
        let first = guard.as_ref().expect("the operator runs");
        eventually("the first replica leads", WAIT, || async {
            leads(&first.metrics().await).then_some(())
        })
        .await;
    }
    let first_holder = lease_holder(&env).await.expect("a lease holder");
    // Only one replica reconciles.
    assert!(!leads(&second.metrics().await), "two replicas lead at once");

    // SIGTERM without waiting for the exit: the first replica releases the lease at once,
    // while its webhooks still drain for their shutdown delay.
    let mut first = env.operator.lock().await.take().expect("the operator runs");
    let stopped_at = Instant::now();
    first.terminate();
    eventually("the second replica takes over", WAIT, || async {
        leads(&second.metrics().await).then_some(())
    })
    .await;
    println!(
        "the second replica led {:?} after SIGTERM to the first",
        stopped_at.elapsed()
    );
    first.exit_status(Duration::from_secs(30)).await;
    let second_holder = lease_holder(&env).await.expect("a lease holder");
    assert_ne!(first_holder, second_holder);

    // The new leader reconciles (the webhooks are down meanwhile, so restart them first).
    env.start_operator(env.cert_root.path()).await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(&PostParams::default(), &memcached("after-handover"))
        .await
        .expect("created");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the new leader creates the children", WAIT, || async {
        statefulsets
            .get_opt("after-handover")
            .await
            .ok()?
            .map(|_| ())
    })
    .await;
    {
        let guard = env.operator.lock().await;
        let restarted = guard.as_ref().expect("the operator runs");
        assert!(
            !leads(&restarted.metrics().await),
            "the restarted replica waits its turn"
        );
    }
    second.terminate();
}

pub async fn a_lost_lease_stops_reconciling_within_the_lease_duration(env: Arc<Env>) {
    let leader_metrics = || async {
        let guard = env.operator.lock().await;
        guard.as_ref().expect("the operator runs").metrics().await
    };
    eventually("the operator leads", WAIT, || async {
        leads(&leader_metrics().await).then_some(())
    })
    .await;
    // Another holder takes the lease, as a replica that won a race (or a clock jump) would.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
    let takeover = json!({"spec": {"holderIdentity": "another-replica", "renewTime": now, "leaseDurationSeconds": 6}});
    let taken_at = Instant::now();
    leases
        .patch(
            DEFAULT_LEASE_NAME,
            &PatchParams::default(),
            &Patch::Merge(&takeover),
        )
        .await
        .expect("the lease is taken");
    // The operator was started with a 6 s lease: it must stop before the other holder's
    // lease could have expired unrenewed, by its own clock (this machine's, as the lease's).
    let stopped = eventually(
        "the operator logs that it stopped reconciling",
        WAIT,
        || async {
            let guard = env.operator.lock().await;
            let operator = guard.as_ref().expect("the operator runs");
            operator
                .logs_containing("stopped reconciling: no longer the leader")
                .iter()
                .filter_map(|entry| entry["timestamp"].as_str()?.parse::<jiff::Timestamp>().ok())
                .find(|at| *at >= now.0)
        },
    )
    .await;
    let after = stopped.duration_since(now.0);
    println!(
        "stopped reconciling {after:?} after losing the lease (seen by the test {:?} after)",
        taken_at.elapsed()
    );
    assert!(
        after < jiff::SignedDuration::from_secs(6),
        "the operator reconciled {after:?} after another replica took the 6 s lease"
    );
    assert!(
        !leads(&leader_metrics().await),
        "the operator still says it leads"
    );
    // The other holder never renews: once its lease expires, the operator takes over again.
    eventually(
        "the operator leads again after the lease expires",
        WAIT,
        || async { leads(&leader_metrics().await).then_some(()) },
    )
    .await;
}
