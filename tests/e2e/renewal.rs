//! A renewal that changes the CA, the way cert-manager renews a self-signed certificate and
//! cainjector follows: the new pair lands in the operator's files first, and the CA bundles the
//! API server reads are rewritten a few seconds later. The operator keeps serving the old pair
//! until a bundle accepts the new one (`--wait-for-ca-trust`, on by default); the same renewal
//! with it turned off shows the window it closes. Writers run through both: v1beta1 patches
//! (mutating and validating webhooks) alternating with v1alpha1 reads (the conversion webhook).
//!
//! The window only hurts new connections: the API server's kept-alive ones finished their
//! handshake with the old pair. So the writers are more than the API server keeps idle
//! connections for, which makes it open new ones throughout, as any burst does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use serde_json::json;
use testkit::cert_layout::{self, Layout};
use testkit::client::TlsClient;
use testkit::pki::{Ca, KeyForm};

use crate::cluster::{Env, eventually};

/// Writers at once: more calls than the API server keeps idle connections for, so that it
/// opens new ones (new handshakes) during the renewal, as it does under any burst.
const WRITERS: usize = 30;
/// How long the bundles lag behind the files, as cainjector's would.
const BUNDLE_LAG: Duration = Duration::from_secs(3);

/// The serial the webhook port presents to a client that trusts `ca`.
async fn served_serial(env: &Env, ca: &Ca) -> Option<String> {
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], env.webhook_port));
    TlsClient::new(address, &ca.pem)
        .post("/convert", "{}")
        .await
        .ok()
        .map(|answer| answer.serial)
}

/// What one renewal under writes came to.
struct Renewal {
    writes: usize,
    failures: Vec<String>,
    /// From the bundles' rewrite to the new serial being served.
    served_after_bundles: Duration,
}

/// Writes the `to` CA's pair into the operator's files, rewrites the bundles to `to` after
/// [`BUNDLE_LAG`], and writes through it all.
async fn renew(env: &Env, namespace: &str, to: &Ca) -> Renewal {
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), namespace);
    let gvk = GroupVersionKind::gvk(memcached_operator::api::GROUP, "v1alpha1", "Memcached");
    let resource = ApiResource::from_gvk_with_plural(&gvk, memcached_operator::api::PLURAL);
    let old_api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), namespace, &resource);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let stop = stop.clone();
            let api = api.clone();
            let old_api = old_api.clone();
            tokio::spawn(async move {
                let mut writes = 0;
                let mut failures = Vec::new();
                let mut round = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    round += 1;
                    let result = if round.is_multiple_of(2) {
                        let label = format!("writer-{writer}");
                        let patch = json!({"metadata": {"labels": {label: round.to_string()}}});
                        api.patch("renewed", &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map(|_| ())
                    } else {
                        old_api.get("renewed").await.map(|_| ())
                    };
                    writes += 1;
                    if let Err(error) = result {
                        failures.push(error.to_string());
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (writes, failures)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let leaf = to.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        env.cert_root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    tokio::time::sleep(BUNDLE_LAG).await;
    let rewritten = Instant::now();
    env.install_wiring_with(&to.pem)
        .await
        .expect("the bundles rewritten");
    eventually(
        "the renewed certificate is served",
        Duration::from_secs(15),
        || async { (served_serial(env, to).await? == leaf.serial).then_some(()) },
    )
    .await;
    let served_after_bundles = rewritten.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut writes = 0;
    let mut failures = Vec::new();
    for writer in writers {
        let (done, failed) = writer.await.expect("a writer finishes");
        writes += done;
        failures.extend(failed);
    }
    Renewal {
        writes,
        failures,
        served_after_bundles,
    }
}

pub async fn a_renewal_under_a_new_ca_is_served_once_the_api_server_trusts_it(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-renewal").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(
        &PostParams::default(),
        &Memcached::new("renewed", MemcachedSpec::default()),
    )
    .await
    .expect("created");

    // Waiting for the bundles (the default).
    let pid = env.operator_pid().await;
    let next = Ca::root();
    let waiting = renew(&env, &namespace, &next).await;
    let pid_after = env.operator_pid().await;
    let holding_logged = env
        .operator_logs_containing(
            "holding the renewed certificate until the API server trusts its CA",
        )
        .await;
    let held_ms: Vec<f64> = env
        .operator_logs_containing("the API server now trusts the held certificate")
        .await
        .iter()
        .filter_map(|line| line["held_ms"].as_f64())
        .collect();

    // Back to the suite's CA, the same way.
    let back = renew(&env, &namespace, &env.ca).await;

    // Without waiting: the same renewal fails calls until the bundles catch up.
    env.restart_operator(&["--wait-for-ca-trust=false"]).await;
    let careless = renew(&env, &namespace, &Ca::root()).await;
    env.install_wiring_with(&env.ca.pem)
        .await
        .expect("the suite's CA back in the bundles");
    let leaf = env.ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        env.cert_root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    env.restart_operator(&[]).await;

    println!(
        "figures: a renewal under a new CA, the bundles rewritten {:.0} s after the files, \
         {WRITERS} writers: waiting for the bundles, {} of {} calls failed, the renewal was held \
         {:.2} s and served {:.2} s after the rewrite began (and {} of {} on the way back); \
         without waiting, {} of {} failed",
        BUNDLE_LAG.as_secs_f64(),
        waiting.failures.len(),
        waiting.writes,
        held_ms.first().copied().unwrap_or_default() / 1000.0,
        waiting.served_after_bundles.as_secs_f64(),
        back.failures.len(),
        back.writes,
        careless.failures.len(),
        careless.writes,
    );
    assert_eq!(pid, pid_after, "the same process served both pairs");
    assert!(
        !holding_logged.is_empty(),
        "the operator said it held the renewal"
    );
    assert!(
        !held_ms.is_empty(),
        "the operator said when it served the held renewal"
    );
    assert!(
        waiting.failures.is_empty() && back.failures.is_empty(),
        "calls failed while the operator waited for the bundles: {:?} {:?}",
        waiting.failures,
        back.failures
    );
    assert!(
        careless
            .failures
            .iter()
            .any(|f| f.contains("x509") || f.contains("certificate")),
        "without waiting, the renewal should fail calls until the bundles catch up: {:?}",
        careless.failures
    );
}
