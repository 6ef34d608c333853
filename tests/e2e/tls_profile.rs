//! Proves that the webhook and metrics listeners follow the cluster's TLS security profile,
//! set on `apiservers.config.openshift.io/cluster` through OpenShift's real CRD: Modern refuses
//! a TLS 1.2 client and serves TLS 1.3; a Custom list is all that can be negotiated; a Custom
//! list that leaves no suite changes nothing; Old is served from TLS 1.2 and says so once; and
//! across every switch no request fails, whether it opens a new connection, rides one kept
//! open, or comes from the API server calling the webhooks.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use rustls::version::{TLS12, TLS13};
use rustls::{CipherSuite, ProtocolVersion};
use serde_json::{Value, json};
use testkit::captured::CONVERSION_REVIEW;
use testkit::client::TlsClient;
use testkit::handshake::{Negotiated, all_suites, handshake, suites_of};
use testkit::process::Server;

use crate::cluster::{Env, eventually};

/// A generous bound on the wait for a profile to reach new connections.
const APPLIED_WITHIN: Duration = Duration::from_secs(120);

/// The Custom profile of the test: one TLS 1.2 and one TLS 1.3 cipher (the serving
/// certificates are ECDSA), and the suites they are in rustls.
const CUSTOM_CIPHERS: [&str; 2] = [
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];
const CUSTOM_SUITES: [CipherSuite; 2] = [
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
];

fn apiservers(env: &Env) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "APIServer");
    Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "apiservers"),
    )
}

/// Server-side applies `apiservers/cluster` with `spec.tlsSecurityProfile: profile`.
async fn set_profile(env: &Env, profile: Value) {
    let object = json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "APIServer",
        "metadata": {"name": "cluster"},
        "spec": {"tlsSecurityProfile": profile},
    });
    apiservers(env)
        .patch(
            "cluster",
            &PatchParams::apply("e2e-tls-profile").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|error| panic!("cannot set the TLS profile {profile}: {error}"));
}

/// Both TLS listeners of the operator.
fn listeners(operator: &Server) -> [(&'static str, std::net::SocketAddr); 2] {
    [
        ("webhooks", operator.webhook),
        ("metrics", operator.metrics),
    ]
}

/// Requests sent while the profile changes, and those that failed.
#[derive(Default)]
struct Traffic {
    new_connections: AtomicUsize,
    kept_alive: AtomicUsize,
    through_api_server: AtomicUsize,
    failures: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Traffic {
    fn fail(&self, what: String) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.push(what);
        }
    }

    fn sent(&self) -> (usize, usize, usize) {
        (
            self.new_connections.load(Ordering::Relaxed),
            self.kept_alive.load(Ordering::Relaxed),
            self.through_api_server.load(Ordering::Relaxed),
        )
    }
}

/// Starts three request loops until `traffic.stop`: ConversionReviews to the webhooks, each
/// over a new connection (a full handshake under whatever profile holds), the same over one
/// connection opened before any switch, and server-side dry-run creates through the API
/// server, which calls the mutating and validating webhooks.
async fn start_traffic(
    env: &Env,
    webhook: std::net::SocketAddr,
    namespace: &str,
) -> (Arc<Traffic>, Vec<tokio::task::JoinHandle<()>>) {
    let traffic = Arc::new(Traffic::default());
    let client = TlsClient::new(webhook, &env.ca.pem);
    let mut kept = client.keep_alive().await.expect("a kept-alive connection");
    let body = Bytes::from_static(CONVERSION_REVIEW.as_bytes());
    let new_connections = tokio::spawn({
        let (traffic, body) = (traffic.clone(), body.clone());
        async move {
            while !traffic.stop.load(Ordering::Relaxed) {
                match client.post("/convert", body.clone()).await {
                    Ok(answer) if answer.status == 200 => {}
                    Ok(answer) => traffic.fail(format!("new connection: {}", answer.status)),
                    Err(error) => traffic.fail(format!("new connection: {error}")),
                }
                traffic.new_connections.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let kept_alive = tokio::spawn({
        let traffic = traffic.clone();
        async move {
            while !traffic.stop.load(Ordering::Relaxed) {
                match kept.post("/convert", body.clone()).await {
                    Ok(200) => {}
                    Ok(status) => traffic.fail(format!("kept-alive connection: {status}")),
                    Err(error) => traffic.fail(format!("kept-alive connection: {error}")),
                }
                traffic.kept_alive.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let through_api_server = tokio::spawn({
        let traffic = traffic.clone();
        let api: Api<Memcached> = Api::namespaced(env.client.clone(), namespace);
        async move {
            let dry_run = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            while !traffic.stop.load(Ordering::Relaxed) {
                let object = Memcached::new("dry-run", MemcachedSpec::default());
                if let Err(error) = api.create(&dry_run, &object).await {
                    traffic.fail(format!("through the API server: {error}"));
                }
                traffic.through_api_server.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    (
        traffic,
        vec![new_connections, kept_alive, through_api_server],
    )
}

/// Waits until each request loop has sent a few more requests under the profile now served.
async fn more_traffic(traffic: &Traffic) {
    let (new, kept, api) = traffic.sent();
    eventually(
        "requests flow under this profile",
        APPLIED_WITHIN,
        || async {
            let (new_now, kept_now, api_now) = traffic.sent();
            (new_now >= new + 10 && kept_now >= kept + 10 && api_now >= api + 3).then_some(())
        },
    )
    .await;
}

/// What a client offering only TLS 1.2 (all its suites) gets from `address`.
async fn tls12_only(address: std::net::SocketAddr) -> Result<Negotiated, String> {
    handshake(address, &[&TLS12], &suites_of(&TLS12)).await
}

/// What a client offering only TLS 1.3 (all its suites) gets from `address`.
async fn tls13_only(address: std::net::SocketAddr) -> Result<Negotiated, String> {
    handshake(address, &[&TLS13], &suites_of(&TLS13)).await
}

/// Offers each suite rustls has, alone, to every listener: only `expected` may be agreed, and
/// each of them must be. Returns a description of the first difference, if any.
async fn only_these_suites(operator: &Server, expected: &[CipherSuite]) -> Result<(), String> {
    for (listener, address) in listeners(operator) {
        for suite in all_suites() {
            let version = suite.version();
            let got = handshake(address, &[version], &[*suite]).await;
            let wanted = expected.contains(&suite.suite());
            match got {
                Ok(negotiated) if wanted && negotiated.suite == suite.suite() => {}
                Err(_) if !wanted => {}
                other => {
                    return Err(format!(
                        "{listener}: offering only {:?}: {other:?} (expected {})",
                        suite.suite(),
                        if wanted { "it" } else { "a refusal" }
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Log lines with `text` in their message and `profile` as their profile field.
fn profile_logs(operator: &Server, text: &str, profile: &str) -> usize {
    operator
        .logs_containing(text)
        .iter()
        .filter(|entry| entry["profile"] == profile)
        .count()
}

pub async fn the_cluster_tls_profile_reaches_new_connections_without_a_failed_request(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("e2e-tls-profile").await;
    let guard = env.operator.lock().await;
    let operator = guard.as_ref().expect("the operator runs");
    set_profile(&env, json!({"type": "Intermediate", "intermediate": {}})).await;
    for (listener, address) in listeners(operator) {
        let negotiated = eventually(
            &format!("{listener} serves TLS 1.2 under Intermediate"),
            APPLIED_WITHIN,
            || async { tls12_only(address).await.ok() },
        )
        .await;
        assert_eq!(negotiated.version, ProtocolVersion::TLSv1_2);
    }

    let (traffic, loops) = start_traffic(&env, operator.webhook, &namespace).await;
    eventually("requests are flowing", APPLIED_WITHIN, || async {
        let (new, kept, api) = traffic.sent();
        (new >= 20 && kept >= 20 && api >= 5).then_some(())
    })
    .await;

    // Modern: TLS 1.3 only.
    let switched = Instant::now();
    set_profile(&env, json!({"type": "Modern", "modern": {}})).await;
    for (listener, address) in listeners(operator) {
        let refusal = eventually(
            &format!("{listener} refuses a TLS 1.2 client under Modern"),
            APPLIED_WITHIN,
            || async { tls12_only(address).await.err() },
        )
        .await;
        println!(
            "Modern reached {listener} within {:?}; a TLS 1.2 client: {refusal}",
            switched.elapsed()
        );
        let negotiated = tls13_only(address).await.expect("TLS 1.3 under Modern");
        assert_eq!(negotiated.version, ProtocolVersion::TLSv1_3, "{listener}");
    }
    only_these_suites(
        operator,
        &[
            CipherSuite::TLS13_AES_128_GCM_SHA256,
            CipherSuite::TLS13_AES_256_GCM_SHA384,
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        ],
    )
    .await
    .unwrap_or_else(|difference| panic!("Modern: {difference}"));
    more_traffic(&traffic).await;

    // Custom: exactly its two suites.
    set_profile(
        &env,
        json!({"type": "Custom", "custom": {
            "ciphers": CUSTOM_CIPHERS, "minTLSVersion": "VersionTLS12"}}),
    )
    .await;
    eventually("the Custom list is served", APPLIED_WITHIN, || async {
        only_these_suites(operator, &CUSTOM_SUITES).await.ok()
    })
    .await;
    println!("Custom {CUSTOM_CIPHERS:?}: only {CUSTOM_SUITES:?} are negotiated");
    more_traffic(&traffic).await;

    // A Custom list that leaves no suite rustls has: refused, the previous settings stay.
    set_profile(
        &env,
        json!({"type": "Custom", "custom": {
            "ciphers": ["TLS_AES_128_CCM_SHA256"], "minTLSVersion": "VersionTLS13"}}),
    )
    .await;
    let refused = eventually(
        "a profile without a usable suite is refused in the log",
        APPLIED_WITHIN,
        || async {
            let said = operator.logs_containing("no cipher it names is one rustls offers");
            (!said.is_empty()).then_some(said)
        },
    )
    .await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["level"], "ERROR", "{refused:?}");
    only_these_suites(operator, &CUSTOM_SUITES)
        .await
        .unwrap_or_else(|difference| panic!("the previous Custom list stays: {difference}"));
    more_traffic(&traffic).await;

    // Old: TLS 1.0 cannot be met; TLS 1.2 and above, said once.
    set_profile(&env, json!({"type": "Old", "old": {}})).await;
    eventually("Old is applied", APPLIED_WITHIN, || async {
        (profile_logs(operator, "new connections use these settings", "Old") == 1).then_some(())
    })
    .await;
    // An update that leaves the profile as it is says nothing more.
    apiservers(&env)
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"e2e": "touched"}}})),
        )
        .await
        .expect("annotated");
    for (listener, address) in listeners(operator) {
        let negotiated = tls12_only(address).await.expect("TLS 1.2 under Old");
        assert_eq!(negotiated.version, ProtocolVersion::TLSv1_2, "{listener}");
    }
    more_traffic(&traffic).await;

    // Back to Intermediate.
    let before = profile_logs(
        operator,
        "new connections use these settings",
        "Intermediate",
    );
    set_profile(&env, json!({"type": "Intermediate", "intermediate": {}})).await;
    eventually("Intermediate is applied", APPLIED_WITHIN, || async {
        (profile_logs(
            operator,
            "new connections use these settings",
            "Intermediate",
        ) > before)
            .then_some(())
    })
    .await;
    let intermediate = [
        CipherSuite::TLS13_AES_128_GCM_SHA256,
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    // The RSA suites cannot be agreed with an ECDSA certificate: only the ECDSA and TLS 1.3 ones.
    let ecdsa: Vec<CipherSuite> = intermediate
        .iter()
        .copied()
        .filter(|suite| !format!("{suite:?}").contains("_RSA_"))
        .collect();
    only_these_suites(operator, &ecdsa)
        .await
        .unwrap_or_else(|difference| panic!("back to Intermediate: {difference}"));
    more_traffic(&traffic).await;

    // Old said what it could not meet once, and each cipher it could not offer once.
    let raised = operator.logs_containing("minimum TLS 1.0 cannot be met");
    assert_eq!(raised.len(), 1, "{raised:?}");
    assert_eq!(raised[0]["level"], "WARN");
    println!("Old: {}", raised[0]["message"]);
    let dhe = operator.logs_containing("cipher DHE-RSA-CHACHA20-POLY1305 is not offered");
    assert_eq!(dhe.len(), 1, "{dhe:?}");
    let not_offered = profile_logs(operator, "is not offered", "Old");
    assert_eq!(
        not_offered, 20,
        "Old names 29 ciphers, rustls offers 9 of them"
    );

    traffic.stop.store(true, Ordering::Relaxed);
    for task in loops {
        task.await.expect("a request loop finishes");
    }
    let (new, kept, api) = traffic.sent();
    let failures = traffic
        .failures
        .lock()
        .map(|f| f.clone())
        .unwrap_or_default();
    println!(
        "during the switches: {new} requests over new connections, {kept} over one kept-alive \
         connection, {api} dry-run creates through the API server; {} failed",
        failures.len()
    );
    assert!(
        new >= 50 && kept >= 50 && api >= 15,
        "too few requests: {new}, {kept}, {api}"
    );
    assert!(
        failures.is_empty(),
        "requests failed during the switches: {failures:?}"
    );
}
