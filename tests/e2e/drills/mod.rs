//! Failure drills: each provokes one failure users meet with admission webhooks on a real
//! control plane, asserts the symptom exactly as a user sees it (the API server's error, the
//! operator's log, `/readyz`, metrics), applies the fix `docs/troubleshooting.md` documents,
//! and asserts recovery. The guide names each drill; the texts it quotes are asserted here.
//!
//! Every drill leaves the operator running on the suite's certificate root, as it found it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use memcached_operator::manager::DEFAULT_LEASE_NAME;
use serde_json::json;
use testkit::cert_layout::{self, Layout};
use testkit::client;
use testkit::control_plane::service_account_token;
use testkit::pki::{Ca, KeyForm, Leaf};
use testkit::process::READY_WITHIN;

use crate::cluster::{Env, OPERATOR, OPERATOR_NAMESPACE, eventually, kubectl};

mod certificates;

pub use certificates::{
    drill_a_certificate_from_another_ca_is_an_unknown_authority,
    drill_a_certificate_without_the_dialed_address_fails_verification,
    drill_an_expired_certificate_fails_the_tls_handshake,
    drill_missing_certificates_keep_the_operator_unready,
};

const WAIT: Duration = Duration::from_secs(60);
const MUTATING: &str = "mmemcached-v1beta1.cache.f2367556.dev";
const VALIDATING: &str = "vmemcached-v1beta1.cache.f2367556.dev";
const MUTATE_PATH: &str = "/mutate-cache-f2367556-dev-v1beta1-memcached";
const VALIDATE_PATH: &str = "/validate-cache-f2367556-dev-v1beta1-memcached";

fn memcached(name: &str) -> Memcached {
    Memcached::new(name, MemcachedSpec::default())
}

/// The message of the API server's refusal, or a panic naming what happened instead.
fn refusal<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("{what}: expected the API server to refuse, got {other:?}"),
    }
}

/// The API server's error when it cannot reach `webhook` at `path`, minus its final reason.
fn failed_calling(env: &Env, webhook: &str, path: &str) -> String {
    format!(
        "Internal error occurred: failed calling webhook \"{webhook}\": failed to call webhook: \
         Post \"https://{}{path}?timeout=10s\": ",
        env.webhook_address()
    )
}

/// The API server's error when nothing listens where it calls `webhook` at `path`.
fn connection_refused(env: &Env, webhook: &str, path: &str) -> String {
    format!(
        "{}dial tcp {}: connect: connection refused",
        failed_calling(env, webhook, path),
        env.webhook_address()
    )
}

fn assert_starts_with(message: &str, prefix: &str) {
    assert!(
        message.starts_with(prefix),
        "the error\n  {message}\ndoes not start with\n  {prefix}"
    );
}

/// v1alpha1 Memcacheds in `namespace`, read through the conversion webhook.
fn v1alpha1(env: &Env, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cache.f2367556.dev", "v1alpha1", "Memcached");
    Api::namespaced_with(
        env.client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "memcacheds"),
    )
}

/// Waits until the running operator logs a line containing `message` that `matches`.
async fn wait_for_log(env: &Env, message: &str, matches: impl Fn(&serde_json::Value) -> bool) {
    eventually(&format!("the operator logs {message:?}"), WAIT, || async {
        let guard = env.operator.lock().await;
        let operator = guard.as_ref().expect("the operator runs");
        operator
            .logs_containing(message)
            .iter()
            .any(&matches)
            .then_some(())
    })
    .await;
}

/// Creates `name` until the API server accepts it (its webhook client may still hold a
/// connection or a cached failure for a moment after the fix).
async fn create_eventually(api: &Api<Memcached>, name: &str) {
    eventually(&format!("{name} is created"), WAIT, || async {
        api.create(&PostParams::default(), &memcached(name))
            .await
            .map(|_| ())
    })
    .await;
}

pub async fn drill_operator_down_refuses_writes_and_v1alpha1_reads(env: Arc<Env>) {
    let namespace = env.create_namespace("drill-down").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(&PostParams::default(), &memcached("before"))
        .await
        .expect("created while the operator runs");
    env.stop_operator().await;

    let message = refusal(
        "a create with the operator down",
        api.create(&PostParams::default(), &memcached("while-down"))
            .await,
    );
    let refused = connection_refused(&env, MUTATING, MUTATE_PATH);
    assert_eq!(message, refused);
    assert!(api.get_opt("while-down").await.expect("get").is_none());
    // kubectl shows the same text.
    let (ok, _, stderr) = kubectl(
        &env,
        &["-n", &namespace, "annotate", "memcached", "before", "a=b"],
        None,
    );
    assert!(!ok);
    assert!(
        stderr.contains(&refused),
        "kubectl printed {stderr:?}, not {refused:?}"
    );

    // Reads of the stored version need no webhook.
    let stored = api.get("before").await.expect("v1beta1 reads still work");
    assert_eq!(stored.metadata.name.as_deref(), Some("before"));
    api.list(&ListParams::default())
        .await
        .expect("v1beta1 lists still work");
    // Reads of v1alpha1 need the conversion webhook.
    let conversion_refused = format!(
        "conversion webhook for cache.f2367556.dev/v1beta1, Kind=Memcached failed: Post \
         \"https://{address}/convert?timeout=30s\": dial tcp {address}: connect: \
         connection refused",
        address = env.webhook_address()
    );
    let message = refusal(
        "a v1alpha1 get with the operator down",
        v1alpha1(&env, &namespace).get("before").await,
    );
    assert_eq!(message, conversion_refused);
    // The scale subresource passes no admission webhook: scaling works while the operator is
    // down, and from then on the API server's cache of v1alpha1 objects cannot follow, so
    // lists fail too (until then they may be answered from that cache).
    let (ok, _, stderr) = kubectl(
        &env,
        &[
            "-n",
            &namespace,
            "scale",
            "memcached",
            "before",
            "--replicas=2",
        ],
        None,
    );
    assert!(ok, "kubectl scale with the operator down: {stderr}");
    let message = eventually("v1alpha1 lists fail", WAIT, || async {
        match v1alpha1(&env, &namespace)
            .list(&ListParams::default())
            .await
        {
            Err(kube::Error::Api(status)) => Some(status.message),
            _ => None,
        }
    })
    .await;
    assert_eq!(message, conversion_refused);

    // Fix: run the operator again.
    env.start_operator(env.cert_root.path()).await;
    api.create(&PostParams::default(), &memcached("after-restart"))
        .await
        .expect("writes succeed again");
    let listed = eventually("v1alpha1 lists succeed again", WAIT, || async {
        v1alpha1(&env, &namespace)
            .list(&ListParams::default())
            .await
            .ok()
    })
    .await;
    assert_eq!(listed.items.len(), 2);
    let scaled = v1alpha1(&env, &namespace).get("before").await.expect("get");
    assert_eq!(
        scaled.data["spec"]["size"], 2,
        "the scale made while down is kept"
    );
}

/// The value of the operator's metric line `series` (its name and labels), 0 when absent.
fn metric_value(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The running operator's metrics once no request is in flight in its `webhook` webhook, so
/// that what it counted for that webhook cannot move but for what a scenario sends next. Only
/// the webhook a scenario counts is awaited: the conversion webhook serves whoever reads
/// v1alpha1 (the API server converts each watch event for such a reader), whatever the
/// scenario does.
async fn settled_metrics(env: &Env, webhook: &str) -> String {
    eventually(
        &format!("the operator has no {webhook} webhook request in flight"),
        WAIT,
        || async {
            let guard = env.operator.lock().await;
            let metrics = guard.as_ref().expect("the operator runs").metrics().await;
            let in_flight = |webhook: &str| {
                metric_value(
                    &metrics,
                    &format!(
                        "memcached_operator_webhook_requests_in_flight{{webhook=\"{webhook}\"}}"
                    ),
                )
            };
            if in_flight(webhook) == 0.0 {
                Ok(metrics)
            } else {
                Err(format!(
                    "requests in flight: mutating {}, validating {}, conversion {}",
                    in_flight("mutating"),
                    in_flight("validating"),
                    in_flight("conversion")
                ))
            }
        },
    )
    .await
}

pub async fn drill_a_webhook_slower_than_its_timeout_fails_writes(env: Arc<Env>) {
    const ABANDONED: &str =
        "memcached_operator_webhook_requests_total{webhook=\"mutating\",code=\"408\"}";
    const LATENCY: &str = "memcached_operator_webhook_latency_seconds_sum{webhook=\"mutating\"}";
    let namespace = env.create_namespace("drill-slow").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    env.stop_operator().await;
    let slow = env
        .spawn_operator(
            env.cert_root.path(),
            &["--debug-delay-webhooks", "14s", "--request-timeout", "30s"],
        )
        .await;
    slow.wait_ready(READY_WITHIN).await;
    *env.operator.lock().await = Some(slow);
    // The wiring's own probes met the delay too: count from when they are done.
    let before = settled_metrics(&env, "mutating").await;
    let started = Instant::now();
    let created = api.create(&PostParams::default(), &memcached("slow")).await;
    let waited = started.elapsed();
    // The operator counts the request the API server gave up on as a 408, and its time.
    let after = settled_metrics(&env, "mutating").await;
    let left = api.get_opt("slow").await.expect("get");

    // Fix: remove what makes it slow (here, restart without the fault). Done before the
    // figures are judged, so that the scenarios after this one meet a working webhook
    // whatever this one finds.
    env.stop_operator().await;
    env.start_operator(env.cert_root.path()).await;

    let message = refusal(
        "a create through a webhook slower than timeoutSeconds",
        created,
    );
    assert_eq!(
        message,
        format!(
            "{}context deadline exceeded",
            failed_calling(&env, MUTATING, MUTATE_PATH)
        )
    );
    assert!(
        waited >= Duration::from_secs(10),
        "the API server waits timeoutSeconds (10 s) before failing; it failed after {waited:?}"
    );
    assert_eq!(
        metric_value(&after, ABANDONED) - metric_value(&before, ABANDONED),
        1.0,
        "one abandoned request counted as a 408 for the one create:\n{after}"
    );
    let seconds = metric_value(&after, LATENCY) - metric_value(&before, LATENCY);
    assert!(
        seconds >= 9.0,
        "the abandoned request took the API server's 10 s timeout, not {seconds} s"
    );
    assert!(left.is_none(), "the refused create left {left:?}");
    api.create(&PostParams::default(), &memcached("fast"))
        .await
        .expect("writes succeed once the webhook answers in time");
}

pub async fn drill_a_finalizer_held_object_deleted_while_the_webhook_is_down(env: Arc<Env>) {
    let namespace = env.create_namespace("drill-finalizer").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let mut held = memcached("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".to_string()]);
    api.create(&PostParams::default(), &held)
        .await
        .expect("created");
    env.stop_operator().await;

    let message = refusal(
        "a delete with the operator down",
        api.delete("held", &DeleteParams::default()).await,
    );
    assert_eq!(message, connection_refused(&env, VALIDATING, VALIDATE_PATH));
    env.start_operator(env.cert_root.path()).await;
    api.delete("held", &DeleteParams::default())
        .await
        .expect("the delete is admitted");
    let terminating = api.get("held").await.expect("still there");
    assert!(terminating.metadata.deletion_timestamp.is_some());

    // The finalizer's owner is gone too: nothing can remove it while the webhook is down.
    env.stop_operator().await;
    let release = json!({"metadata": {"finalizers": null}});
    let message = refusal(
        "removing the finalizer with the operator down",
        api.patch("held", &PatchParams::default(), &Patch::Merge(&release))
            .await,
    );
    assert_eq!(message, connection_refused(&env, MUTATING, MUTATE_PATH));

    // Fix when the operator cannot come back: remove the webhook configurations (OLM puts
    // them back from the CSV), then the finalizer.
    let (ok, stdout, stderr) = kubectl(
        &env,
        &[
            "delete",
            "mutatingwebhookconfiguration,validatingwebhookconfiguration",
            "-l",
            "olm.owner=memcached-operator.v0.1.0",
        ],
        None,
    );
    assert!(ok, "kubectl delete webhook configurations: {stderr}");
    assert_eq!(
        stdout.lines().count(),
        2,
        "two configurations deleted: {stdout}"
    );
    eventually("the finalizer can be removed", WAIT, || async {
        api.patch("held", &PatchParams::default(), &Patch::Merge(&release))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    eventually("the object is gone", WAIT, || async {
        api.get_opt("held")
            .await
            .ok()
            .and_then(|found| found.is_none().then_some(()))
    })
    .await;
    env.install_wiring().await.expect("the wiring is back");
    env.start_operator(env.cert_root.path()).await;
    create_eventually(&api, "after-release").await;
    let created = api.get("after-release").await.expect("get");
    assert!(
        created.spec.image.is_some(),
        "the mutating webhook is wired again"
    );
}

pub async fn drill_a_lease_held_by_a_dead_replica_is_taken_over_after_expiry(env: Arc<Env>) {
    const DEAD: &str = "memcached-operator-5f7c9d8b6-dead0";
    let namespace = env.create_namespace("drill-dead-leader").await;
    env.stop_operator().await;
    // A replica that crashed holding the lease: renewed just now, never again.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let now = MicroTime(jiff::Timestamp::now());
    let dead = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": DEFAULT_LEASE_NAME},
        "spec": {"holderIdentity": DEAD, "leaseDurationSeconds": 6, "acquireTime": now,
                 "renewTime": now, "leaseTransitions": 3},
    });
    leases
        .patch(
            DEFAULT_LEASE_NAME,
            &PatchParams::apply("drill").force(),
            &Patch::Apply(&dead),
        )
        .await
        .expect("the dead replica's lease");
    let written = Instant::now();
    env.start_operator(env.cert_root.path()).await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(&PostParams::default(), &memcached("waits"))
        .await
        .expect("the webhooks serve without the lease");
    wait_for_log(&env, "another replica holds the lease", |entry| {
        entry["holder"] == DEAD
    })
    .await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the children appear after the takeover", WAIT, || async {
        statefulsets.get_opt("waits").await.ok()?.map(|_| ())
    })
    .await;
    let took = written.elapsed();
    println!("took over the dead replica's lease {took:?} after its last renewal");
    assert!(
        took >= Duration::from_secs(6),
        "the lease was taken before it expired ({took:?})"
    );
    wait_for_log(&env, "took over the lease", |entry| {
        entry["previous"] == DEAD
    })
    .await;
    let lease = leases.get(DEFAULT_LEASE_NAME).await.expect("the lease");
    let spec = lease.spec.expect("a lease spec");
    assert_ne!(spec.holder_identity.as_deref(), Some(DEAD));
    assert_eq!(spec.lease_transitions, Some(4));
}

pub async fn drill_an_operator_forbidden_to_list_memcacheds_says_so_and_still_stops(env: Arc<Env>) {
    // An identity without the operator's RBAC, as when the ClusterRole binding is missing.
    let namespace = env.create_namespace("drill-forbidden").await;
    let token = service_account_token(&env.client, &namespace, "no-rights")
        .await
        .expect("a token for a service account");
    let dir = tempfile::tempdir().expect("a directory");
    let path = env
        .plane
        .token_kubeconfig(&token, dir.path())
        .expect("a kubeconfig with the token");

    let mut operator = OPERATOR.controller_only(&path).await;
    // Each watch (Memcacheds and the three kinds of children) says what it may not list.
    let expected = format!(
        "memcacheds.cache.f2367556.dev is forbidden: User \"system:serviceaccount:{namespace}:no-rights\" \
         cannot list resource \"memcacheds\" in API group \"cache.f2367556.dev\" at the cluster scope"
    );
    eventually(
        "the operator logs that it may not list memcacheds",
        WAIT,
        || async {
            operator
                .logs_containing("watching failed; retrying with backoff")
                .iter()
                .any(|entry| {
                    entry["error"]
                        .as_str()
                        .is_some_and(|error| error.contains(&expected))
                })
                .then_some(())
        },
    )
    .await;
    // Nor may it watch the cluster's TLS profile: it says so once, serves Intermediate, and
    // its listeners were not held back waiting for the profile.
    let tls_profile = operator.logs_containing("cannot watch apiservers/cluster");
    assert_eq!(tls_profile.len(), 1, "{tls_profile:?}");
    assert!(
        tls_profile[0]["error"]
            .as_str()
            .is_some_and(|error| error.contains("forbidden")),
        "{tls_profile:?}"
    );
    // Nothing was ever listed, so nothing is in flight: SIGTERM still ends the process.
    operator.terminate();
    let status = operator.exit_status(READY_WITHIN).await;
    assert!(status.success(), "exit status {status:?}");
    assert_eq!(
        operator
            .logs_containing("the controller did not stop within the shutdown timeout")
            .len(),
        1
    );
}
